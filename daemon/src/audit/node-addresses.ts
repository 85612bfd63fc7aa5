// The node's own proof that an address is in use, whatever the runtime says: every address on an
// interface of every network namespace on the node. A namespace is seen through a process in it
// (/proc/PID/net/ is the netns of PID: read directly, no process started) or, for one no process is
// in (a runtime's bind mount under /run/netns), by reading the same files inside it through
// `nsenter --net=PATH` (run by the caller through plugins/). A lease, cache entry or portmap rule
// whose address is found here belongs to a live pod and is never released.

import { open, readdir, readlink, stat, statfs } from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import { join } from 'node:path';

export interface NodeAddresses {
  /** Every address found, canonical (canonicalIp). */
  addresses: Set<string>;
  /** Distinct network namespaces read. */
  namespaces: number;
  /** Namespaces that exist and could not be read (the proof is then incomplete). */
  unread: string[];
}

/** An address in one comparable form: IPv4 dotted, IPv6 as 8 full lower-case groups; null if not one. */
export function canonicalIp(raw: string): string | null {
  const ip = raw.trim().split('/')[0] ?? '';
  if (isIPv4(ip)) return ip.split('.').map(Number).join('.');
  if (!isIPv6(ip)) return null;
  let text = ip.toLowerCase();
  // An IPv4 tail (::ffff:10.0.0.1) as two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1] !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.map((g) => g.padStart(4, '0')).join(':');
}

/** The local addresses of one /proc/net/fib_trie: the entries marked `/32 host LOCAL`. */
export function parseFibTrieLocal(text: string): string[] {
  const out = new Set<string>();
  let last: string | undefined;
  for (const line of text.split('\n')) {
    const leaf = /\|-- (\d+\.\d+\.\d+\.\d+)\s*$/.exec(line);
    if (leaf?.[1] !== undefined) last = leaf[1];
    else if (last !== undefined && /^\s*\/32 host LOCAL\s*$/.test(line)) out.add(last);
  }
  return [...out];
}

/** The addresses of one /proc/net/if_inet6: each line starts with the address as 32 hex digits. */
export function parseIfInet6(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{32})\s/i.exec(line);
    if (m?.[1] === undefined) continue;
    out.push((m[1].toLowerCase().match(/.{4}/g) ?? []).join(':'));
  }
  return out;
}

/** Both files' addresses, from their contents read one after the other (as `cat` prints them). */
export function parseNetFiles(text: string): string[] {
  return [...parseFibTrieLocal(text), ...parseIfInet6(text)]
    .map((a) => canonicalIp(a))
    .filter((a): a is string => a !== null);
}

export interface CollectOptions {
  /** procfs root (tests point it elsewhere). */
  proc?: string;
  /** Directories of bind-mounted namespaces (the runtimes' netns dirs, those the journal names). */
  netnsDirs: readonly string[];
  /** fib_trie then if_inet6 as read inside the namespace at `path` (nsenter, through plugins/). */
  readInNetns: (path: string) => Promise<string>;
}

/** How long reading one bind-mounted namespace may take (nsenter + cat), before it counts as unread. */
export const NETNS_READ_TIMEOUT_MS = 2000;

/** statfs(2)'s f_type of a namespace file. */
const NSFS_MAGIC = 0x6e736673;

/** Files read per namespace, from inside it: /proc/self/net is the reader's own netns. */
export const NET_FILES = ['/proc/self/net/fib_trie', '/proc/self/net/if_inet6'] as const;

/** A namespace's fib_trie is read up to this much: past it, the namespace counts as unread. */
export const MAX_NET_FILE_BYTES = 16 * 1024 * 1024;

/** fib_trie then if_inet6 of a process's netns, bounded; undefined when not readable (or too big). */
async function readProcNet(proc: string, pid: string): Promise<string | undefined> {
  const fib = await readBounded(join(proc, pid, 'net/fib_trie'));
  if (fib === undefined) return undefined;
  const v6 = (await readBounded(join(proc, pid, 'net/if_inet6'))) ?? '';
  return `${fib}\n${v6}`;
}

/** A procfs file (its size reads 0) up to MAX_NET_FILE_BYTES; undefined when unreadable or longer. */
async function readBounded(path: string): Promise<string | undefined> {
  let fh;
  try {
    fh = await open(path, 'r');
    const buf = Buffer.alloc(1 << 20);
    const parts: Buffer[] = [];
    let total = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > MAX_NET_FILE_BYTES) return undefined;
      parts.push(Buffer.from(buf.subarray(0, bytesRead)));
    }
    return Buffer.concat(parts).toString('utf8');
  } catch {
    return undefined;
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

async function anyAlive(proc: string, pids: readonly string[]): Promise<boolean> {
  for (const pid of pids) if ((await stat(join(proc, pid)).catch(() => undefined)) !== undefined) return true;
  return false;
}

export async function collectNodeAddresses(opts: CollectOptions): Promise<NodeAddresses> {
  const proc = opts.proc ?? '/proc';
  const addresses = new Set<string>();
  const seen = new Set<number>();
  const unread: string[] = [];
  const pids = (await readdir(proc).catch(() => [] as string[])).filter((n) => /^\d+$/.test(n));
  // One pid per namespace: the first whose files can be read (a process may exit under us).
  const byNs = new Map<number, string[]>();
  for (let i = 0; i < pids.length; i += 64) {
    const links = await Promise.all(
      pids.slice(i, i + 64).map(async (pid) => [pid, await readlink(join(proc, pid, 'ns/net')).catch(() => '')]),
    );
    for (const [pid = '', link = ''] of links) {
      const ino = /^net:\[(\d+)\]$/.exec(link)?.[1];
      if (ino === undefined) continue;
      const list = byNs.get(Number(ino));
      if (list === undefined) byNs.set(Number(ino), [pid]);
      else list.push(pid);
    }
  }
  for (const [ino, list] of byNs) {
    let read = false;
    for (const pid of list) {
      const text = await readProcNet(proc, pid);
      // The pid may have exited and been reused meanwhile: its files then were another namespace's.
      const still = await readlink(join(proc, pid, 'ns/net')).catch(() => '');
      if (text === undefined || still !== `net:[${ino}]`) continue;
      for (const a of parseNetFiles(text)) addresses.add(a);
      seen.add(ino);
      read = true;
      break;
    }
    // A namespace with a process still in it that could not be read is a gap in the proof.
    if (!read && (await anyAlive(proc, list))) unread.push(`net:[${ino}]`);
  }
  for (const dir of new Set(opts.netnsDirs)) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const path = join(dir, name);
      const st = await stat(path).catch(() => undefined);
      if (st === undefined || seen.has(st.ino)) continue;
      // Only a mounted namespace (nsfs) is one: a runtime's placeholder file before its bind mount,
      // or anything else kept in the directory, holds no address.
      if ((await statfs(path).catch(() => undefined))?.type !== NSFS_MAGIC) continue;
      try {
        for (const a of parseNetFiles(await opts.readInNetns(path))) addresses.add(a);
        seen.add(st.ino);
      } catch {
        // Gone meanwhile (a pod's teardown) is not a gap in the proof; one still there unread is.
        if ((await stat(path).catch(() => undefined)) !== undefined) unread.push(path);
      }
    }
  }
  return { addresses, namespaces: seen.size, unread };
}

/** The addresses a CNI result names (`ips[].address` from 0.3.0 on, `ip4`/`ip6` before), canonical. */
export function resultAddresses(result: unknown): string[] {
  if (typeof result !== 'object' || result === null) return [];
  const r = result as { ips?: unknown; ip4?: { ip?: unknown }; ip6?: { ip?: unknown } };
  const raw: unknown[] = [];
  if (Array.isArray(r.ips)) for (const ip of r.ips) raw.push((ip as { address?: unknown } | null)?.address);
  raw.push(r.ip4?.ip, r.ip6?.ip);
  return raw
    .filter((a): a is string => typeof a === 'string')
    .map((a) => canonicalIp(a))
    .filter((a): a is string => a !== null);
}

/** resultAddresses of a result stored as JSON text (an attachment's); none when it is not JSON. */
export function storedResultAddresses(text: string | null): string[] {
  if (text === null) return [];
  try {
    return resultAddresses(JSON.parse(text));
  } catch {
    return [];
  }
}
