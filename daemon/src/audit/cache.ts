// libcni's result cache as findings: /var/lib/cni/results/<network>-<container id>-<ifname>, a JSON
// document (kind "cniCacheV1") naming containerId, ifName and networkName. The JSON is read rather than
// the file name split, since network names and ifnames may contain '-'. Nothing ever deletes these
// under containerd (it never calls CNI GC).

import { existsSync } from 'node:fs';
import { readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Finding } from './decide.js';
import { readPlainFile } from './files.js';
import { resultAddresses } from './addresses.js';

/** libcni's cache documents are a few KiB; a larger file is not one (and is not read whole). */
const CACHE_READ_BYTES = 1 << 20;

export const DEFAULT_CACHE_DIR = '/var/lib/cni/results';

interface CacheDoc {
  containerId?: unknown;
  ifName?: unknown;
  networkName?: unknown;
  /** The sandbox's netns: newer libcni (the one with GC) records it; containerd 1.6's does not. */
  netns?: unknown;
  /** The result the ADD returned: the addresses the sandbox was given. */
  result?: unknown;
}

export async function scanCache(dir: string, journalled: ReadonlySet<string>): Promise<Finding[]> {
  const out: Finding[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const path = join(dir, name);
    try {
      const file = await readPlainFile(path, CACHE_READ_BYTES);
      if (file === null || file.size > CACHE_READ_BYTES) continue; // a FIFO, a symlink, too big
      const doc = JSON.parse(file.text) as CacheDoc;
      if (typeof doc.containerId !== 'string' || doc.containerId === '') continue;
      out.push({
        kind: 'cache',
        containerId: doc.containerId,
        network: typeof doc.networkName === 'string' ? doc.networkName : '',
        ifname: typeof doc.ifName === 'string' ? doc.ifName : '',
        ip: null,
        path,
        mtimeMs: file.mtimeMs,
        journalled: journalled.has(doc.containerId),
        addresses: resultAddresses(doc.result),
        ...(typeof doc.netns === 'string' && doc.netns !== '' ? { netns: doc.netns } : {}),
      });
    } catch {
      continue; // unreadable or not a cache document: not ours to judge
    }
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/** Removes a cache file; false when libcni removed it meanwhile, on its owner's DEL. */
export async function releaseCache(f: Finding): Promise<boolean> {
  if (!existsSync(f.path)) return false;
  await unlink(f.path);
  return true;
}
