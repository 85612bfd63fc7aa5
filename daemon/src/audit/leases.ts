// host-local's lease files as findings. host-local keeps one directory per network under its dataDir
// (default /var/lib/cni/networks), one file per reserved IP named by the IP and holding
// `<container id>\r\n<ifname>` (older releases wrote the id alone), beside its `lock` and
// `last_reserved_ip.<range>` files, which are not leases.

import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { isIP, isIPv4 } from 'node:net';
import { dirname, join } from 'node:path';
import type { PluginRunner } from '../plugins/executor.js';
import { pluginCall } from '../plugins/call.js';
import type { Finding } from './decide.js';
import { readPlainFile } from './files.js';
import { canonicalIp } from './addresses.js';

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

/** host-local dataDirs named in a step's plugin config (as the plugin itself, or as its ipam). */
export function hostLocalDataDirs(config: string): string[] {
  try {
    const c = JSON.parse(config) as { type?: unknown; dataDir?: unknown; ipam?: { type?: unknown; dataDir?: unknown } };
    const out: string[] = [];
    if (c.ipam?.type === 'host-local' && typeof c.ipam.dataDir === 'string') out.push(c.ipam.dataDir);
    if (c.type === 'host-local' && typeof c.dataDir === 'string') out.push(c.dataDir);
    return out;
  } catch {
    return [];
  }
}

/** The host-local config a DEL of an unjournalled lease is given: its network and dataDir. */
export function hostLocalDelConfig(f: Finding): Record<string, unknown> {
  // host-local refuses a config without ranges; a DEL releases by container id and ifname across the
  // network's directory, so any range holding the lease's IP serves: its /24 (IPv4) or /64 (IPv6).
  const subnet =
    f.ip !== null && isIPv4(f.ip) ? `${f.ip.split('.').slice(0, 3).join('.')}.0/24` : `${v6Prefix64(f.ip)}::/64`;
  return {
    cniVersion: '0.4.0',
    name: f.network,
    type: 'host-local',
    ipam: { type: 'host-local', dataDir: dirname(dirname(f.path)), ranges: [[{ subnet }]] },
  };
}

/** The first 64 bits of an IPv6 address, as host-local expects a /64 network written. */
function v6Prefix64(ip: string | null): string {
  const [head = '', tail = ''] = (ip ?? '::').split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === '' ? [] : tail.split(':');
  const groups = ip?.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups
    .slice(0, 4)
    .map((g) => g || '0')
    .join(':');
}

/**
 * Releases an unjournalled lease through host-local's own DEL (its container id and ifname from the
 * lease, `eth0` for one in the older format); host-local takes its own lock. False when the lease
 * was freed meanwhile by its owner's own DEL.
 */
export async function releaseLease(f: Finding, run: PluginRunner, cniPath: string): Promise<boolean> {
  if (!existsSync(f.path)) return false;
  const target = { containerId: f.containerId, ifname: f.ifname === '' ? 'eth0' : f.ifname, cniPath };
  await run(pluginCall('DEL', 'host-local', hostLocalDelConfig(f), target));
  return true;
}
