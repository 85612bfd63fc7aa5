// The install lock, <state-dir>/install.lock: an advisory lock held around every read-modify-write
// of the install record and the node files it brackets — `stewardd install`, `stewardd uninstall`
// (also on SIGTERM) and each sync of the daemon's PrimaryWatcher. Without it the watcher can read
// the record as `installed` just before uninstall removes 00-steward.conflist and then write the
// conflist back: the dangling config of seed 001, which stops every new pod on the node.
//
// Node has no flock(2), so: the lock is a file created with O_CREAT|O_EXCL (exactly one creator
// wins), holding who created it. It is removed on release. A holder that died without releasing
// (kill -9, OOM, power loss) is detected and its lock taken over:
//   - another boot (boot_id differs): dead;
//   - same PID namespace: dead if kill(pid, 0) says ESRCH, or if that pid now belongs to a process
//     that started at another time (the pid was reused);
//   - another PID namespace (the install init container vs. the daemon container, or the host vs.
//     a pod): its pid means nothing here, so the lock counts as dead once older than
//     FOREIGN_STALE_MS. Every hold is short (the longest, install copying the shim, takes seconds).
// Only stewardd honours the lock: it keeps stewardd processes from interleaving, nothing else.

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { readRegularFile } from './files.js';
import type { Logger } from 'pino';

export const LOCK_FILE = 'install.lock';
/** How long `stewardd install` / `uninstall` wait for the lock before giving up. */
export const LOCK_WAIT_MS = 10_000;
/** A lock from another PID namespace counts as abandoned after this long. */
export const FOREIGN_STALE_MS = 60_000;
/** An empty or unreadable lock file (its creator died between create and write) counts as abandoned after this long. */
const GARBLED_STALE_MS = 5_000;
const POLL_MS = 25;
/** A lock file holds one Holder: a few hundred bytes. */
const MAX_LOCK_BYTES = 64 * 1024;

/** What the lock file says about the process that holds it. */
export interface Holder {
  pid: number;
  /** What it is doing: "install", "uninstall", "watcher", … (for messages only). */
  purpose: string;
  /** Random, so a lock file is never mistaken for another one with the same holder. */
  nonce: string;
  since: string;
  /** /proc/sys/kernel/random/boot_id, /proc/self/ns/pid, and the start time in /proc/<pid>/stat (Linux only). */
  boot?: string;
  pidns?: string;
  start?: string;
}

export class LockTimeoutError extends Error {
  constructor(
    readonly path: string,
    readonly holder: Holder | undefined,
    waitedMs: number,
  ) {
    super(
      `timed out after ${waitedMs / 1000} s waiting for the install lock ${path}, held by ${describeHolder(holder)}; ` +
        'try again once it is done (if no such process is running, remove the file)',
    );
  }
}

export function describeHolder(h: Holder | undefined): string {
  return h ? `stewardd ${h.purpose} (pid ${h.pid}, since ${h.since})` : 'a process that has not written its name yet';
}

export interface Lock {
  readonly stateDir: string;
  readonly path: string;
  /** Removes the lock file if it is still ours. Idempotent. */
  release(): void;
}

export type TryLock = { held: Lock } | { busy: Holder | undefined };

function readOr(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot. */
function startTime(pid: number): string | undefined {
  const stat = readOr(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  // The command name (field 2) is in parentheses and may contain spaces: count from after it.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

let self: Pick<Holder, 'pid' | 'boot' | 'pidns' | 'start'> | undefined;
function me(): NonNullable<typeof self> {
  if (self?.pid !== process.pid) {
    let pidns: string | undefined;
    try {
      pidns = readlinkSync('/proc/self/ns/pid');
    } catch {
      pidns = undefined;
    }
    const boot = readOr('/proc/sys/kernel/random/boot_id');
    const start = startTime(process.pid);
    self = { pid: process.pid, ...(boot ? { boot } : {}), ...(pidns ? { pidns } : {}), ...(start ? { start } : {}) };
  }
  return self;
}

interface Seen {
  raw: string;
  ino: number;
  mtimeMs: number;
  holder: Holder | undefined;
}

/** The lock file as it is now, or undefined if it is gone. */
function look(path: string): Seen | undefined {
  let raw: string;
  let st;
  try {
    st = lstatSync(path);
    if (st.isDirectory())
      throw new Error(`the install lock ${path} is a directory, which stewardd never makes: remove it and try again`);
    // What stewardd makes is a regular file: anything else (a FIFO, whose read would hold the
    // daemon's loop for good; a link) is read as garbled, so it is broken once GARBLED_STALE_MS old.
    raw = st.isFile() ? readRegularFile(path, MAX_LOCK_BYTES).toString('utf8') : '';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let holder: Holder | undefined;
  try {
    const h = JSON.parse(raw) as Holder;
    holder = Number.isInteger(h.pid) && h.pid > 0 ? h : undefined;
  } catch {
    holder = undefined;
  }
  return { raw, ino: st.ino, mtimeMs: st.mtimeMs, holder };
}

/** Whether the lock's holder may still be running (see the top of this file). */
function alive(s: Seen): boolean {
  const h = s.holder;
  const age = Date.now() - s.mtimeMs;
  if (!h) return age < GARBLED_STALE_MS;
  const m = me();
  if (h.boot && m.boot && h.boot !== m.boot) return false;
  if (h.pidns && m.pidns && h.pidns !== m.pidns) return age < FOREIGN_STALE_MS;
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    // EPERM: it exists, under another user.
  }
  if (h.start !== undefined) {
    const now = startTime(h.pid);
    if (now !== undefined && now !== h.start) return false;
  }
  return true;
}

/**
 * Removes the abandoned lock file `s`, and only that one: it is first renamed aside (atomic, so of
 * two processes breaking it only one gets it), then checked. If what was moved is not `s` (a
 * third process broke `s` and took the lock in between), it is linked back in place.
 */
function breakStale(path: string, s: Seen): void {
  const aside = `${path}.stale.${randomBytes(4).toString('hex')}`;
  try {
    renameSync(path, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  const moved = look(aside);
  if (moved && (moved.ino !== s.ino || moved.raw !== s.raw)) {
    try {
      linkSync(aside, path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
  unlinkSync(aside);
}

/**
 * One attempt, never waiting: the lock, or who holds it. Creates the state dir (0700) if needed.
 * Synchronous and quick (a few syscalls), so the daemon can call it from its event loop.
 */
export function tryLock(stateDir: string, purpose: string): TryLock {
  const path = join(stateDir, LOCK_FILE);
  let last: Holder | undefined;
  for (let attempt = 0; attempt < 5; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        mkdirSync(stateDir, { recursive: true, mode: 0o700 });
        continue;
      }
      if (code !== 'EEXIST') throw e;
      const s = look(path);
      if (!s) continue; // released just now
      last = s.holder;
      if (alive(s)) return { busy: s.holder };
      breakStale(path, s);
      continue;
    }
    let ino: number;
    const holder: Holder = { ...me(), purpose, nonce: randomBytes(8).toString('hex'), since: new Date().toISOString() };
    try {
      const buf = Buffer.from(`${JSON.stringify(holder)}\n`);
      for (let off = 0; off < buf.length;) off += writeSync(fd, buf, off, buf.length - off);
      ino = fstatSync(fd).ino;
    } catch (e) {
      closeSync(fd);
      unlinkSync(path);
      throw e;
    }
    closeSync(fd);
    let released = false;
    return {
      held: {
        stateDir,
        path,
        release() {
          if (released) return;
          released = true;
          // Only our own file: never one someone else created after deciding ours was abandoned.
          const s = look(path);
          if (s && s.ino === ino && s.holder?.nonce === holder.nonce) unlinkSync(path);
        },
      },
    };
  }
  return { busy: last };
}

export interface LockOptions {
  /** How long to wait for a busy lock; LOCK_WAIT_MS by default. */
  waitMs?: number;
  /** Called once, when the lock is busy at the first attempt. */
  onWait?: (holder: Holder | undefined) => void;
}

/** LockOptions that say once on the log whom the caller waits for. */
export function loggedWait(stateDir: string, waitMs: number | undefined, log: Logger): LockOptions {
  return {
    ...(waitMs !== undefined ? { waitMs } : {}),
    onWait: (h) =>
      log.info({ lock: join(stateDir, LOCK_FILE) }, `waiting for the install lock, held by ${describeHolder(h)}`),
  };
}

/** Waits (polling, without blocking the event loop) for the lock; LockTimeoutError after `waitMs`. */
export async function lock(stateDir: string, purpose: string, o: LockOptions = {}): Promise<Lock> {
  const waitMs = o.waitMs ?? LOCK_WAIT_MS;
  const deadline = Date.now() + waitMs;
  for (let first = true; ; first = false) {
    const r = tryLock(stateDir, purpose);
    if ('held' in r) return r.held;
    if (first) o.onWait?.(r.busy);
    if (Date.now() >= deadline) throw new LockTimeoutError(join(stateDir, LOCK_FILE), r.busy, waitMs);
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, Math.max(1, deadline - Date.now()))));
  }
}

/** Runs `f` holding the lock, and releases it however `f` ends. */
export async function withLock<T>(
  stateDir: string,
  purpose: string,
  o: LockOptions,
  f: (held: Lock) => T | Promise<T>,
): Promise<T> {
  const held = await lock(stateDir, purpose, o);
  try {
    return await f(held);
  } finally {
    held.release();
  }
}
