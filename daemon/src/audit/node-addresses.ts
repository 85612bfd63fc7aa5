// The node's own proof that an address is in use, whatever the runtime says: every address on an
// interface of every network namespace on the node. A namespace is seen through a process in it
// (/proc/PID/net/ is the netns of PID: read directly, no process started) or, for one no process is
// in, through a mount of it: every nsfs mount of a network namespace in the mount table of every mount
// namespace on the node (/proc/PID/mountinfo, one process per mount namespace; a runtime's bind mount
// under /run/netns, rootless podman's under /run/user/UID/netns, docker's, anybody's), reached through
// /proc/PID/root of a process in that mount namespace, and the same files are read inside it through
// `nsenter --net=PATH` (run by the caller through plugins/). A lease, cache entry or portmap rule
// whose address is found here belongs to a live pod and is never released.

import { open, readdir, readlink, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { parseNetFiles } from './addresses.js';
import { parseNsMounts, type NsMount } from './ns-mounts.js';

export interface NodeAddresses {
  /** Every address found, canonical (canonicalIp). */
  addresses: Set<string>;
  /** Distinct network namespaces read. */
  namespaces: number;
  /** Namespaces that exist and could not be read (the proof is then incomplete). */
  unread: string[];
}

export interface CollectOptions {
  /** procfs root (tests point it elsewhere). */
  proc?: string;
  /** Directories of bind-mounted namespaces (the runtimes' netns dirs, those the journal names). */
  netnsDirs: readonly string[];
  /** fib_trie then if_inet6 as read inside the namespace at `path` (nsenter, through plugins/). */
  readInNetns: (path: string) => Promise<string>;
}

/** What `unread` says when stewardd cannot see the node's processes. */
export const NOT_HOST_PID_NS =
  "stewardd's own PID namespace (not the host's: is hostPID set?): the node's processes are not seen";

/** Whether /proc is the host PID namespace's: there PID 2 is always the kernel's kthreadd. */
async function inHostPidNamespace(): Promise<boolean> {
  return (await readBounded('/proc/2/comm'))?.toString().trim() === 'kthreadd';
}

/** How long reading one bind-mounted namespace may take (nsenter + cat), before it counts as unread. */
export const NETNS_READ_TIMEOUT_MS = 2000;

/** statfs(2)'s f_type of a namespace file. */
const NSFS_MAGIC = 0x6e736673;

/** Files read per namespace, from inside it: /proc/self/net is the reader's own netns. */
export const NET_FILES = ['/proc/self/net/fib_trie', '/proc/self/net/if_inet6'] as const;

/**
 * A namespace's fib_trie, and a mount namespace's mount table, are read up to this much: past it, the
 * namespace counts as unread.
 */
export const MAX_NET_FILE_BYTES = 16 * 1024 * 1024;

/** fib_trie then if_inet6 of a process's netns, bounded; undefined when not readable (or too big). */
async function readProcNet(proc: string, pid: string): Promise<string | undefined> {
  const fib = await readBounded(join(proc, pid, 'net/fib_trie'));
  if (fib === undefined) return undefined;
  const v6path = join(proc, pid, 'net/if_inet6');
  const v6 = await readBounded(v6path);
  // No if_inet6 where IPv6 is off; one there and unreadable is a gap, not "no IPv6 address".
  if (
    v6 === undefined &&
    (await stat(v6path).then(
      () => true,
      (e: NodeJS.ErrnoException) => e.code !== 'ENOENT',
    ))
  )
    return undefined;
  return `${fib.toString()}\n${(v6 ?? '').toString()}`;
}

/** A procfs file (its size reads 0) up to MAX_NET_FILE_BYTES; undefined when unreadable or longer. */
async function readBounded(path: string): Promise<Buffer | undefined> {
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
    return Buffer.concat(parts);
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

/** What the proof has so far. */
interface Proof {
  addresses: Set<string>;
  /** Namespaces read. */
  seen: Set<number>;
  /** Namespaces read or found unreadable: none is tried twice (a stuck one would cost its timeout again). */
  tried: Set<number>;
  unread: string[];
}

/** Namespaces of one kind (`net`, `mnt`) -> the pids in each, from their /proc/PID/ns links, 64 at a time. */
async function namespacesOf(
  proc: string,
  pids: readonly string[],
  kind: 'net' | 'mnt',
): Promise<Map<number, string[]>> {
  const byNs = new Map<number, string[]>();
  const form = new RegExp(`^${kind}:\\[(\\d+)\\]$`);
  for (let i = 0; i < pids.length; i += 64) {
    const links = await Promise.all(
      pids.slice(i, i + 64).map(async (pid) => [pid, await readlink(join(proc, pid, 'ns', kind)).catch(() => '')]),
    );
    for (const [pid = '', link = ''] of links) {
      const ino = form.exec(link)?.[1];
      if (ino === undefined) continue;
      const list = byNs.get(Number(ino));
      if (list === undefined) byNs.set(Number(ino), [pid]);
      else list.push(pid);
    }
  }
  return byNs;
}

/** Each network namespace a process is in, read through /proc/PID/net of one of them. */
async function readProcessNamespaces(proc: string, byNs: Map<number, string[]>, proof: Proof): Promise<void> {
  for (const [ino, list] of byNs) {
    let read = false;
    for (const pid of list) {
      const text = await readProcNet(proc, pid);
      // The pid may have exited and been reused meanwhile: its files then were another namespace's.
      const still = await readlink(join(proc, pid, 'ns/net')).catch(() => '');
      if (text === undefined || still !== `net:[${ino}]`) continue;
      for (const a of parseNetFiles(text)) proof.addresses.add(a);
      proof.seen.add(ino);
      proof.tried.add(ino);
      read = true;
      break;
    }
    // A namespace with a process still in it that could not be read is a gap in the proof. One whose
    // processes all left meanwhile may still be mounted: the mounts are looked at next.
    if (!read && (await anyAlive(proc, list))) {
      proof.unread.push(`net:[${ino}]`);
      proof.tried.add(ino);
    }
  }
}

/** Each namespace mounted in one of `dirs` (the runtimes' netns dirs) not read yet, read inside it. */
async function readNetnsDirs(
  dirs: readonly string[],
  proof: Proof,
  readInNetns: CollectOptions['readInNetns'],
): Promise<void> {
  for (const dir of new Set(dirs)) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const path = join(dir, name);
      const st = await stat(path).catch(() => undefined);
      if (st === undefined || proof.tried.has(st.ino)) continue;
      // Only a mounted namespace (nsfs) is one: a runtime's placeholder file before its bind mount,
      // or anything else kept in the directory, holds no address.
      if ((await statfs(path).catch(() => undefined))?.type !== NSFS_MAGIC) continue;
      try {
        for (const a of parseNetFiles(await readInNetns(path))) proof.addresses.add(a);
        proof.seen.add(st.ino);
        proof.tried.add(st.ino);
      } catch {
        // Gone meanwhile (a pod's teardown) is not a gap in the proof; one still there unread is.
        if ((await stat(path).catch(() => undefined)) !== undefined) {
          proof.unread.push(path);
          proof.tried.add(st.ino);
        }
      }
    }
  }
}

/** A network namespace mounted in mount namespace `mnt` at `mountPoint`, reached through the root of `pids`. */
interface Pin {
  mnt: number;
  pids: readonly string[];
  mountPoint: string | undefined;
}

/**
 * The nsfs mounts of mount namespace `mnt`, from the mount table of the first of its `pids` that reads
 * and is still in it afterwards (a pid may exit and be reused meanwhile).
 */
async function mountTable(proc: string, mnt: number, pids: readonly string[]): Promise<NsMount[] | undefined> {
  for (const pid of pids) {
    const table = await readBounded(join(proc, pid, 'mountinfo'));
    if (table !== undefined && (await inMountNamespace(proc, pid, mnt))) return parseNsMounts(table);
  }
  return undefined;
}

/** Whether `pid` is in mount namespace `mnt` now (one that exited, a zombie, is in none). */
async function inMountNamespace(proc: string, pid: string, mnt: number): Promise<boolean> {
  return (await readlink(join(proc, pid, 'ns/mnt')).catch(() => '')) === `mnt:[${mnt}]`;
}

/** Whether a process is still in mount namespace `mnt`: then its mount table is there, and may pin a namespace. */
async function anyInMountNamespace(proc: string, mnt: number, pids: readonly string[]): Promise<boolean> {
  for (const pid of pids) if (await inMountNamespace(proc, pid, mnt)) return true;
  return false;
}

/** Whether `path` is the file of namespace `ino`: an nsfs file of that inode. */
async function holds(path: string, ino: number): Promise<boolean> {
  if ((await stat(path).catch(() => undefined))?.ino !== ino) return false;
  return (await statfs(path).catch(() => undefined))?.type === NSFS_MAGIC;
}

/**
 * Where namespace `ino` is reached now: its mount point under /proc/PID/root of a process of the mount
 * namespace it is mounted in (the path as stewardd's own mount namespace sees it may not exist there).
 */
async function pinnedPath(proc: string, ino: number, where: readonly Pin[]): Promise<string | undefined> {
  for (const pin of where) {
    if (pin.mountPoint === undefined) continue;
    for (const pid of pin.pids) {
      const path = join(proc, pid, 'root', pin.mountPoint);
      // The pid gone (or reused in another mount namespace), the mount moved or covered: not here.
      if (await holds(path, ino)) return path;
    }
  }
  return undefined;
}

/** Whether namespace `ino` is still mounted where it was seen (a table that no longer reads while a process is in it counts). */
async function stillMounted(proc: string, ino: number, where: readonly Pin[]): Promise<boolean> {
  for (const pin of where) {
    const table = await mountTable(proc, pin.mnt, pin.pids);
    if (
      table === undefined
        ? await anyInMountNamespace(proc, pin.mnt, pin.pids)
        : table.some((m) => m.kind === 'net' && m.ino === ino)
    )
      return true;
  }
  return false;
}

/**
 * Every network namespace mounted in the mount table of any mount namespace (one process each: those
 * that share one see one table) and not read yet, read inside it once, however many mounts it has.
 */
async function readMountedNamespaces(
  proc: string,
  byMnt: Map<number, string[]>,
  proof: Proof,
  readInNetns: CollectOptions['readInNetns'],
): Promise<void> {
  const pinned = new Map<number, Pin[]>();
  for (const [mnt, pids] of byMnt) {
    const mounts = await mountTable(proc, mnt, pids);
    if (mounts === undefined) {
      // A process is still in it and its mounts cannot be seen: any of them may pin a namespace.
      if (await anyInMountNamespace(proc, mnt, pids)) proof.unread.push(`mnt:[${mnt}]`);
      continue;
    }
    for (const m of mounts) {
      // A namespace file of no kind we can tell may be a network namespace's.
      if (m.kind === '') proof.unread.push(`an nsfs mount of no known kind in mnt:[${mnt}]`);
      // Other kinds (uts, ipc, mnt, …) hold no address.
      if (m.kind !== 'net' || proof.tried.has(m.ino)) continue;
      const pin = { mnt, pids, mountPoint: m.mountPoint };
      const list = pinned.get(m.ino);
      if (list === undefined) pinned.set(m.ino, [pin]);
      else list.push(pin);
    }
  }
  for (const [ino, where] of pinned) {
    const path = await pinnedPath(proc, ino, where);
    if (path !== undefined) {
      try {
        const text = await readInNetns(path);
        // What was entered was this namespace only if the mount still holds it afterwards.
        if (await holds(path, ino)) {
          for (const a of parseNetFiles(text)) proof.addresses.add(a);
          proof.seen.add(ino);
          continue;
        }
      } catch {
        // Below.
      }
    }
    // Unmounted meanwhile (a pod's teardown) is not a gap in the proof; one still mounted, unread, is.
    if (await stillMounted(proc, ino, where)) proof.unread.push(path ?? `net:[${ino}]`);
  }
}

export async function collectNodeAddresses(opts: CollectOptions): Promise<NodeAddresses> {
  const proc = opts.proc ?? '/proc';
  const proof: Proof = { addresses: new Set(), seen: new Set(), tried: new Set(), unread: [] };
  // In a PID namespace of its own (a pod without hostPID) /proc shows its own processes only: the
  // node's other namespaces go unseen, and a pass that called its view whole freed a live lease.
  if (opts.proc === undefined && !(await inHostPidNamespace())) proof.unread.push(NOT_HOST_PID_NS);
  const pids = (await readdir(proc).catch(() => [] as string[])).filter((n) => /^\d+$/.test(n));
  const byNet = await namespacesOf(proc, pids, 'net');
  const byMnt = await namespacesOf(proc, pids, 'mnt');
  await readProcessNamespaces(proc, byNet, proof);
  await readNetnsDirs(opts.netnsDirs, proof, opts.readInNetns);
  await readMountedNamespaces(proc, byMnt, proof, opts.readInNetns);
  return { addresses: proof.addresses, namespaces: proof.seen.size, unread: proof.unread };
}
