// `stewardd uninstall` (also the SIGTERM path, on-term.ts): drain pending teardowns through the
// daemon, then, holding the install lock (lock.ts), take away exactly the files install.ts recorded
// (record.ts), each only if it is still byte-for-byte one we wrote; with --purge, the state dir too.
// One concern: what uninstall takes away, in which order, and what it leaves and reports; draining is
// drain.ts's, the record's mark uninstall-mark.ts's, the files' writes and renames files.ts's.

import { existsSync, lstatSync, readdirSync, rmdirSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { SPOOL_NAME } from '@cni-steward/shared';
import type { Logger } from 'pino';
import { drain, type Leftover } from './drain.js';
import { changeOf, isFileOrLink, moveAside, sha256File, tempsOf } from './files.js';
import { configNaming, fileNamesType } from './conflist.js';
import { lock, LOCK_FILE, loggedWait, type Lock } from './lock.js';
import { markUninstalling, NO_ROOM, unmark, unmarkIfFree, unmarkOnSignal, writeMark } from './uninstall-mark.js';
import { OWNER_INFO_FILE, OWNER_LOCK_FILE } from '../store/owner.js';
import {
  acceptedAt,
  RECORD_FILE,
  readRecord,
  realFileOps,
  recordedFiles,
  removeRecord,
  type FileOps,
} from './record.js';

export interface UninstallOptions {
  stateDir: string;
  dbPath: string;
  /** The daemon socket to drain through; defaults to the one recorded at install. */
  socket?: string;
  drainTimeoutMs: number;
  purge: boolean;
  log: Logger;
  /** How files are written and removed; tests pass failing ones to simulate a crash. */
  ops?: FileOps;
  /** How long to wait for the install lock (lock.ts); LOCK_WAIT_MS by default. */
  lockWaitMs?: number;
  /** The operator's command (not the daemon's SIGTERM): SIGINT/SIGTERM during the drain take the mark back and exit. */
  interruptible?: boolean;
}

export interface UninstallReport {
  installed: boolean;
  removed: string[];
  refused: Array<{ path: string; why: string }>;
  /** Conflists of ours someone edited that still named the shim: moved to `to`, a name no runtime loads. */
  movedAside: Array<{ path: string; to: string }>;
  leftovers: Leftover[];
  /** The error code (ENOSPC, EDQUOT, EROFS) of a lock file the state dir could not take; files removed without it. */
  unlocked?: string;
  /** Why pending teardowns could not even be counted (the journal unusable), when so. */
  drainError?: string;
  /**
   * An install ran while this uninstall drained (a new DaemonSet's init container while the old pod
   * terminates): its record, not the one uninstall decided on, so nothing was removed.
   */
  superseded?: true;
  purged: boolean;
  /**
   * Spooled DELs no daemon has run yet (the spool dirs of the state dir and of the record): their
   * files are their only record, so --purge leaves the state dir while any is there.
   */
  spooled: string[];
}

/** The spooled DELs (regular files named as the shim names them) in `dirs`, by path. */
function spooledDels(dirs: ReadonlyArray<string | undefined>): string[] {
  const found: string[] = [];
  for (const dir of new Set(dirs.filter((d): d is string => d !== undefined).map((d) => resolve(d)))) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const n of names.filter((n) => SPOOL_NAME.test(n)).sort()) {
      try {
        if (lstatSync(join(dir, n)).isFile()) found.push(join(dir, n));
      } catch {
        /* drained meanwhile */
      }
    }
  }
  return found;
}

const nothingDone = (installed: boolean): UninstallReport => ({
  installed,
  removed: [],
  refused: [],
  movedAside: [],
  leftovers: [],
  purged: false,
  spooled: [],
});

export async function uninstall(o: UninstallOptions): Promise<UninstallReport> {
  const ops = o.ops ?? realFileOps;
  // Read without the lock only to find the socket: the drain below may take many seconds, and the
  // daemon's watcher keeps the conflist (and record) current meanwhile. Re-read under the lock.
  const peek = readRecord(o.stateDir);
  const report = nothingDone(peek !== undefined);
  // Marked before the drain: an install that runs meanwhile writes "installed" again, and the
  // removal below then leaves what it installed (it had reported success).
  const marked = peek !== undefined && (await markUninstalling(o, ops));
  const socket = o.socket ?? peek?.socket;
  if (socket !== undefined) await drainMarked(o, ops, socket, report, marked);
  // No state dir: nothing recorded, nothing to lock (locking would create it), nothing to purge.
  if (!existsSync(o.stateDir)) {
    report.installed = false;
    report.purged = o.purge;
    return report;
  }
  let held: Lock;
  try {
    held = await lock(o.stateDir, 'uninstall', loggedWait(o.stateDir, o.lockWaitMs, o.log));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === undefined || !NO_ROOM.has(code)) {
      if (marked) unmarkIfFree(o, ops); // gave up before removing anything: not uninstalling after all
      throw e;
    }
    // The state dir cannot take the lock file (full, out of quota, read-only): then no one can take
    // it, the watcher included, so no one rewrites the record or the conflist meanwhile. Our files
    // go all the same (an unlink needs no room), without the mark, which could not be written
    // either: a full disk must not keep a config that stops every new pod once the daemon is gone.
    report.unlocked = code;
    o.log.error({ code, stateDir: o.stateDir }, 'uninstall: the install lock cannot be written; removing without it');
    removeRecorded(o, ops, report, false);
    return report;
  }
  try {
    const rec = readRecord(o.stateDir);
    if (rec !== undefined && (peek === undefined || (marked && rec.state !== 'uninstalling'))) {
      report.superseded = true;
      o.log.warn({ stateDir: o.stateDir }, 'uninstall: stewardd was installed again while it drained; left in place');
      return report;
    }
    if (!removeRecorded(o, ops, report) && marked) unmark(o, ops);
    // Counted once the conflist is gone (no shim spools any more): a DEL spooled while the daemon was
    // down and never run. --purge deleted them with the state dir, silently, their pods' addresses
    // and interfaces then held for good (hostile run, 1 Dec).
    report.spooled = spooledDels([join(o.stateDir, 'spool'), peek?.spoolDir]);
    if (o.purge && report.refused.length === 0 && report.spooled.length === 0) report.purged = purgeStateDir(held);
  } finally {
    held.release();
  }
  return report;
}

/**
 * drainFirst, with the record marked: a CLI uninstall interrupted here (Ctrl-C, `timeout`) takes its
 * mark back; left, it would keep the running daemon not ready ("uninstall in progress") with every
 * file still in place.
 */
async function drainMarked(
  o: UninstallOptions,
  ops: FileOps,
  socket: string,
  report: UninstallReport,
  marked: boolean,
): Promise<void> {
  const release = marked && o.interruptible ? unmarkOnSignal(o, ops) : () => undefined;
  try {
    await drainFirst(o, socket, report);
  } finally {
    release();
  }
}

/** Uninstall's first step: pending teardowns drained through the daemon, and what is left reported. */
async function drainFirst(o: UninstallOptions, socket: string, report: UninstallReport): Promise<void> {
  try {
    report.leftovers = (await drain({ socket, dbPath: o.dbPath, timeoutMs: o.drainTimeoutMs, log: o.log })).leftovers;
  } catch (e) {
    // A journal that cannot be read (corrupt, the daemon degraded) must not keep the config on
    // the node: a dangling 00-steward.conflist stops every new pod (seed 001). What the journal
    // owed stays in it, for an operator restoring it (docs/teardown.md).
    report.drainError = (e as Error).message;
    o.log.error(
      { err: report.drainError },
      'uninstall: pending teardowns cannot be read (the journal is unusable); removing the config anyway',
    );
  }
  if (report.leftovers.length > 0) {
    o.log.warn(
      {
        count: report.leftovers.length,
        steps: report.leftovers.map((l) => l.step),
        containers: report.leftovers.map((l) => l.containerId),
      },
      'teardowns still pending at uninstall',
    );
  }
}

/**
 * The recorded files, each once: `ours` still as installed (or gone), `present` those there now,
 * `aside` conflists of ours someone edited that still name the shim; any other changed file is
 * reported refused. A file may have either sha256 the record accepts (a crash during an install's
 * write leaves either).
 */
function sortRecorded(all: ReturnType<typeof recordedFiles>, report: UninstallReport) {
  const present = new Set<string>();
  const shimTypes = [...new Set(all.filter((f) => f.kind === 'shim').map((f) => basename(f.path)))];
  const aside: string[] = [];
  const ours = all.filter((f, i) => {
    if (all.findIndex((g) => g.path === f.path) !== i) return false;
    const now = sha256File(f.path);
    if (now === undefined) return true;
    present.add(f.path);
    const known = acceptedAt(all, f.path);
    if (known.includes(now)) return true;
    // An edited conflist of ours that still names the shim is moved aside, not left: with the
    // daemon gone every ADD through it fails (seed 001), and deleting it would lose the edit.
    if (f.kind === 'conflist' && isFileOrLink(f.path) && shimTypes.some((t) => fileNamesType(f.path, t))) {
      aside.push(f.path);
      return false;
    }
    report.refused.push({ path: f.path, why: changeOf(f.path, now, known) });
    return false;
  });
  return { ours, present, aside };
}

/**
 * uninstall's check and removal, holding the lock: the record is read here, not before. Each file
 * on its own: one someone changed is left and reported, and the rest, still ours, go. A config that
 * is ours does not stay behind because another file changed (with the daemon gone it would stop
 * every new pod), and a shim stays while any config left in a conf dir names it. false when it
 * found nothing to remove (or no record): the record, if any, was not marked by it.
 */
function removeRecorded(o: UninstallOptions, ops: FileOps, report: UninstallReport, mark = true): boolean {
  const rec = readRecord(o.stateDir);
  report.installed = rec !== undefined;
  if (!rec) return false;
  const all = recordedFiles(rec);
  const { ours, present, aside } = sortRecorded(all, report);
  // A shim stays while a config left names it: one not ours, or an edited one of ours that no
  // longer names it. A shim already gone has nothing to keep.
  const going = new Set([...ours.filter((f) => f.kind === 'conflist').map((f) => f.path), ...aside]);
  const confDirs = [
    ...new Set([rec.cniConfDir, ...all.filter((f) => f.kind === 'conflist').map((f) => dirname(f.path))]),
  ];
  const removable = ours.filter((f) => {
    if (f.kind !== 'shim' || !present.has(f.path)) return true;
    const user = configNaming(confDirs, basename(f.path), going);
    if (user === undefined) return true;
    report.refused.push({ path: f.path, why: `${user} still names it; removing it would leave that config dangling` });
    return false;
  });
  if (removable.length > 0 || aside.length > 0) {
    // Still marked, although the lock keeps the watcher out: a crash from here on leaves a record
    // that no watcher acts on, and a second uninstall finishes the job.
    if (mark) writeMark(o, rec, ops);
    for (const path of aside) {
      try {
        report.movedAside.push({ path, to: moveAside(path) });
      } catch (e) {
        report.refused.push({
          path,
          why: `was edited and could not be moved aside (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
        });
      }
    }
    // Conflists first (recordedFiles' order): from then on the runtime stops calling us.
    for (const f of removable) {
      for (const t of tempsOf(f.path)) ops.remove(t);
      if (ops.remove(f.path)) report.removed.push(f.path);
    }
  }
  if (report.refused.length > 0) {
    // The record stays: once the files are seen to, uninstall again finishes.
    o.log.error(
      { refused: report.refused, removed: report.removed, movedAside: report.movedAside },
      'uninstall left files that changed since install, or that a config still names',
    );
    return removable.length > 0 || aside.length > 0;
  }
  try {
    removeRecord(o.stateDir, ops);
  } catch (e) {
    if (mark) throw e;
    // Unlocked, on a read-only state dir: the files are gone, the record names them gone.
    o.log.error({ err: (e as Error).message }, 'uninstall: the install record cannot be removed');
  }
  o.log.info({ removed: report.removed, movedAside: report.movedAside }, 'uninstall done');
  return true;
}

/**
 * What stewardd writes in a state dir, and all that --purge removes: the install record, the
 * journal, the spool, the ownership files, each with the files SQLite or a write keeps beside it
 * (-wal, -shm, -journal, temp copies): names starting with one of these. Anything else there is
 * somebody else's (a --state-dir typo naming /var/lib, an empty one naming the working
 * directory): it is left, and so is the directory.
 */
const STATE_DIR_PREFIXES = [RECORD_FILE, 'steward.db', 'spool', OWNER_LOCK_FILE, OWNER_INFO_FILE] as const;
const isStewards = (name: string) =>
  STATE_DIR_PREFIXES.some(
    (p) => name === p || name.startsWith(`${p}-`) || name.startsWith(`${p}.`) || name.startsWith(`.${p}`),
  );

/**
 * Removes the state dir (record, database, spool) while holding the lock, which is released on
 * the way: stewardd's own entries first, then the lock, then the dir if nothing else is in it
 * (it stays, empty, when it is a mount point). Returns false if the dir stays: it holds files that
 * are not stewardd's, or another stewardd took the lock (and put files there) in between.
 */
export function purgeStateDir(held: Lock): boolean {
  for (const name of readdirSync(held.stateDir)) {
    if (isStewards(name)) rmSync(join(held.stateDir, name), { recursive: true, force: true });
  }
  held.release();
  if (readdirSync(held.stateDir).some((n) => n !== LOCK_FILE)) return false; // not only stewardd's
  try {
    rmdirSync(held.stateDir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return false;
    // A mount point (the DaemonSet's hostPath volume seen from inside the pod): its contents are
    // gone; the directory itself is the node's, left as the kubelet's DirectoryOrCreate made it.
    if (code === 'EBUSY') return true;
    if (code !== 'ENOENT') throw e;
  }
  return true;
}
