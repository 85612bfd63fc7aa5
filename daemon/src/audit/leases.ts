// host-local's lease files as findings. host-local keeps one directory per network under its dataDir
// (default /var/lib/cni/networks), one file per reserved IP named by the IP and holding
// `<container id>\r\n<ifname>` (older releases wrote the id alone), beside its `lock` and
// `last_reserved_ip.<range>` files, which are not leases.

import { readdir } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { Finding } from './decide.js';
import { readPlainFile } from './files.js';
import { canonicalIp } from './node-addresses.js';

/** A lease holds an id and an ifname: its first 4 KiB are all that is read. */
const LEASE_READ_BYTES = 4096;

export const DEFAULT_HOST_LOCAL_DIR = '/var/lib/cni/networks';

/** Parse one lease file's content; null when it holds no container id. */
export function parseLease(content: string): { containerId: string; ifname: string } | null {
  const [id = '', ifname = ''] = content.split(/\r?\n/);
  const containerId = id.trim();
  if (containerId === '') return null;
  return { containerId, ifname: ifname.trim() };
}

/**
 * Takes host-local's own lock of one network directory (`<dir>/lock`, which host-local flocks around
 * every reservation and release) and resolves with its release; rejects when it cannot be had.
 */
export type NetworkLock = (lockFile: string) => Promise<() => void>;

/** Lease files read under one hold of host-local's lock: an ADD on the network waits at most this many reads. */
export const LEASES_PER_LOCK = 256;

/**
 * Every lease under dataDir, one finding per file; a missing dataDir holds nothing. With `lock`, a
 * network's files are read under host-local's lock, taken for one batch of LEASES_PER_LOCK files at
 * a time (a pool of 50,000 leases never holds a pod's ADD for the whole scan); a network whose lock
 * cannot be had is skipped from there on (`onSkipped`), never read without it.
 */
export async function scanLeases(
  dataDir: string,
  journalled: ReadonlySet<string>,
  lock?: NetworkLock,
  onSkipped?: (dir: string, err: Error) => void,
): Promise<Finding[]> {
  const networks = await readdir(dataDir, { withFileTypes: true }).catch(() => []);
  const out: Finding[] = [];
  for (const net of networks) {
    if (!net.isDirectory()) continue;
    const dir = join(dataDir, net.name);
    // The names are listed under the first hold: a lease made after is the next pass's, one removed
    // before its batch is read is simply not found.
    let names: string[] | undefined;
    for (let i = 0; names === undefined || i < names.length; i += LEASES_PER_LOCK) {
      let unlock: (() => void) | undefined;
      if (lock !== undefined) {
        try {
          unlock = await lock(join(dir, 'lock'));
        } catch (e) {
          onSkipped?.(dir, e as Error);
          break;
        }
      }
      try {
        names ??= (await readdir(dir).catch(() => [] as string[])).filter((n) => isIP(n) !== 0);
        out.push(...(await readLeases(dir, net.name, names.slice(i, i + LEASES_PER_LOCK), journalled)));
      } finally {
        unlock?.();
      }
    }
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

async function readLeases(
  dir: string,
  network: string,
  names: readonly string[],
  journalled: ReadonlySet<string>,
): Promise<Finding[]> {
  const out: Finding[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const file = await readPlainFile(path, LEASE_READ_BYTES);
    if (file === null) continue; // a FIFO, a symlink, a directory named like an IP: not a lease
    const lease = parseLease(file.text);
    if (lease === null) continue;
    out.push({
      kind: 'lease',
      containerId: lease.containerId,
      network,
      ifname: lease.ifname,
      ip: name,
      path,
      mtimeMs: file.mtimeMs,
      journalled: journalled.has(lease.containerId),
      addresses: [canonicalIp(name)].filter((a): a is string => a !== null),
    });
  }
  return out;
}
