// `stewardd install` and `stewardd uninstall`: put the shim and 00-steward.conflist on the node,
// and take exactly those away again. Every file is written atomically and recorded with its
// sha256 (record.ts); uninstall removes a file only if it is still byte-for-byte what we wrote.
//
// Crash safety: each file write is bracketed by two record writes (trackedWrite): first the
// record with the sha256 about to be written plus the sha256 of our file it replaces, then the
// file, then the record without the old sha256. Whatever point a crash stops install at, every
// file install may have written is in the record with a sha256 that matches it, so uninstall
// removes it and a re-run of install converges.
//
// Concurrency: install, uninstall and the daemon's watcher (syncConflist) each hold the install
// lock (lock.ts) from reading the record to their last write, so they never interleave.

import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { findPrimary, renderConflist, STEWARD_CONFLIST } from './conflist.js';
import { drain, type Leftover } from './drain.js';
import { sha256, sha256File, tempsOf } from './files.js';
import { describeHolder, lock, LOCK_FILE, withLock, type Lock } from './lock.js';
import {
  acceptedAt,
  readRecord,
  realFileOps,
  recordedFiles,
  removeRecord,
  settled,
  writeRecord,
  type FileOps,
  type InstallRecord,
  type RetiredFile,
} from './record.js';
import type { InstallConfig } from './options.js';

export const SHIM_NAME = 'steward';

/** What `stewardd install` was asked (config.ts), with a logger instead of a level. */
export interface InstallOptions extends Omit<InstallConfig, 'logLevel' | 'shimLibc'> {
  log: Logger;
  /** How files are written and removed; tests pass failing ones to simulate a crash. */
  ops?: FileOps;
  /** How long to wait for the install lock (lock.ts); LOCK_WAIT_MS by default. */
  lockWaitMs?: number;
}

export type ConflistOutcome =
  | { status: 'written' | 'unchanged'; primary: string }
  | { status: 'no-primary' }
  | { status: 'invalid-primary'; primary: string; why: string }
  | { status: 'foreign'; path: string };

export interface InstallReport {
  shim: 'copied' | 'unchanged';
  shimPath: string;
  conflist: ConflistOutcome;
  /** Files of an earlier install at paths no longer used (--cni-bin-dir or --cni-conf-dir changed). */
  retired: { removed: string[]; kept: Array<{ path: string; why: string }> };
}

export class LifecycleError extends Error {}

/** Not ours: a file at our path whose sha256 is neither one we recorded nor what we are about to write. */
function foreign(onDisk: string | undefined, known: string[], next: string): boolean {
  return onDisk !== undefined && onDisk !== next && !known.includes(onDisk);
}

/** The sha256 of our file now at the path, which a write is about to replace (kept in the record until it is durable). */
function replaced(
  onDisk: string | undefined,
  known: string[],
  next: string,
): { previous: string } | Record<string, never> {
  return onDisk !== undefined && onDisk !== next && known.includes(onDisk) ? { previous: onDisk } : {};
}

/**
 * One crash-safe file write: `pending` (the record naming the intended and the replaced sha256)
 * is durable before the file is touched, `done` (without the replaced one) only after it is.
 */
function trackedWrite(
  stateDir: string,
  ops: FileOps,
  pending: InstallRecord,
  path: string,
  data: Buffer | string,
  mode: number,
  done: InstallRecord,
): InstallRecord {
  writeRecord(stateDir, pending, ops);
  for (const t of tempsOf(path)) ops.remove(t);
  ops.write(path, data, mode);
  writeRecord(stateDir, done, ops);
  return done;
}

/**
 * Brings 00-steward.conflist in step with the primary config; shared by install and the watcher.
 * Writes the record itself (before and after the file) and returns it: the same object when
 * nothing changed. The caller holds the install lock and read `rec` under it.
 */
export function syncConflist(
  stateDir: string,
  rec: InstallRecord,
  force: boolean,
  ops: FileOps = realFileOps,
): { rec: InstallRecord; outcome: ConflistOutcome } {
  const scan = findPrimary(rec.cniConfDir);
  if (scan.kind === 'none') return { rec, outcome: { status: 'no-primary' } };
  if (scan.kind === 'invalid')
    return { rec, outcome: { status: 'invalid-primary', primary: scan.file, why: scan.why } };
  const path = join(rec.cniConfDir, STEWARD_CONFLIST);
  const text = renderConflist(scan.conf, { socket: rec.socket, spoolDir: rec.spoolDir });
  const next = sha256(text);
  const onDisk = sha256File(path);
  const known = acceptedAt(recordedFiles(rec), path);
  if (!force && foreign(onDisk, known, next)) return { rec, outcome: { status: 'foreign', path } };
  const done: InstallRecord = { ...rec, conflist: { path, sha256: next, primary: scan.file } };
  if (onDisk === next) {
    writeRecord(stateDir, done, ops);
    return { rec: done, outcome: { status: 'unchanged', primary: scan.file } };
  }
  const pending: InstallRecord = {
    ...rec,
    conflist: { path, sha256: next, primary: scan.file, ...replaced(onDisk, known, next) },
  };
  trackedWrite(stateDir, ops, pending, path, text, 0o644, done);
  return { rec: done, outcome: { status: 'written', primary: scan.file } };
}

/**
 * Removes the files of an earlier install at paths no longer in use, if they are still ours; a
 * file someone rewrote since is left where it is and forgotten. The record lists them until then.
 */
function retire(
  stateDir: string,
  rec: InstallRecord,
  ops: FileOps,
  log: Logger,
): { rec: InstallRecord; report: InstallReport['retired'] } {
  const report: InstallReport['retired'] = { removed: [], kept: [] };
  const retired = rec.retired ?? [];
  if (retired.length === 0) return { rec, report };
  for (const f of retired) {
    for (const t of tempsOf(f.path)) ops.remove(t);
    const now = sha256File(f.path);
    if (now === undefined) continue;
    const known = acceptedAt(retired, f.path);
    if (!known.includes(now)) {
      if (!report.kept.some((k) => k.path === f.path))
        report.kept.push({ path: f.path, why: `was rewritten since install (sha256 now ${now}); left in place` });
      continue;
    }
    if (ops.remove(f.path)) report.removed.push(f.path);
  }
  const { retired: _, ...rest } = rec;
  writeRecord(stateDir, rest, ops);
  if (report.removed.length > 0)
    log.info({ removed: report.removed }, 'removed the files of the previous install at paths no longer used');
  if (report.kept.length > 0)
    log.warn(
      { kept: report.kept },
      'files of the previous install were rewritten by someone else; left in place and no longer recorded',
    );
  return { rec: rest, report };
}

/** Waits for the install lock, saying once on the log whom it waits for. */
function lockOptions(stateDir: string, waitMs: number | undefined, log: Logger) {
  return {
    ...(waitMs !== undefined ? { waitMs } : {}),
    onWait: (h: Parameters<typeof describeHolder>[0]) =>
      log.info({ lock: join(stateDir, LOCK_FILE) }, `waiting for the install lock, held by ${describeHolder(h)}`),
  };
}

export async function install(o: InstallOptions): Promise<InstallReport> {
  let shimBytes: Buffer;
  try {
    shimBytes = readFileSync(o.shim);
  } catch (e) {
    throw new LifecycleError(
      `cannot read the shim executable ${o.shim}: ${(e as Error).message} (build it with npm run build, or pass --shim)`,
    );
  }
  mkdirSync(o.cniBinDir, { recursive: true });
  mkdirSync(o.cniConfDir, { recursive: true });
  mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
  return withLock(o.stateDir, 'install', lockOptions(o.stateDir, o.lockWaitMs, o.log), () => installHeld(o, shimBytes));
}

/** install, holding the lock: everything from reading the record to the last write. */
function installHeld(o: InstallOptions, shimBytes: Buffer): InstallReport {
  const ops = o.ops ?? realFileOps;
  const prev = readRecord(o.stateDir);
  const prevFiles = prev ? recordedFiles(prev) : [];

  const shimPath = join(o.cniBinDir, SHIM_NAME);
  const conflistPath = join(o.cniConfDir, STEWARD_CONFLIST);
  const shimSha = sha256(shimBytes);
  const onDisk = sha256File(shimPath);
  const knownShim = acceptedAt(prevFiles, shimPath);
  if (!o.force && foreign(onDisk, knownShim, shimSha)) {
    throw new LifecycleError(
      `${shimPath} exists and was not installed by stewardd (sha256 ${onDisk}); refusing to overwrite it (use --force)`,
    );
  }

  // Our conflist at the (possibly new) conf dir path, if any earlier record knows it.
  const atConflist = prevFiles.find((f) => f.path === conflistPath);
  const conflist =
    prev?.conflist?.path === conflistPath
      ? prev.conflist
      : atConflist
        ? {
            path: atConflist.path,
            sha256: atConflist.sha256,
            ...(atConflist.previous !== undefined ? { previous: atConflist.previous } : {}),
          }
        : undefined;
  // Everything recorded at other paths: the bin or conf dir changed. Removed below, once the new files are in place.
  const retired: RetiredFile[] = prevFiles.filter((f) => f.path !== shimPath && f.path !== conflistPath);
  const base = {
    version: 1 as const,
    state: 'installed' as const,
    cniBinDir: o.cniBinDir,
    cniConfDir: o.cniConfDir,
    socket: o.socket,
    spoolDir: o.spoolDir,
  };
  const withShim = (shim: InstallRecord['shim']): InstallRecord => ({
    ...base,
    shim,
    ...(conflist ? { conflist } : {}),
    ...(retired.length > 0 ? { retired } : {}),
  });

  for (const p of [shimPath, conflistPath]) for (const t of tempsOf(p)) ops.remove(t);
  const shim = onDisk === shimSha ? 'unchanged' : 'copied';
  let rec: InstallRecord;
  if (shim === 'copied') {
    const pending = withShim({ path: shimPath, sha256: shimSha, ...replaced(onDisk, knownShim, shimSha) });
    rec = trackedWrite(o.stateDir, ops, pending, shimPath, shimBytes, 0o755, withShim(settled(pending.shim)));
  } else {
    rec = withShim({ path: shimPath, sha256: shimSha });
    writeRecord(o.stateDir, rec, ops);
    if ((statSync(shimPath).mode & 0o777) !== 0o755) chmodSync(shimPath, 0o755);
  }

  const synced = syncConflist(o.stateDir, rec, o.force, ops);
  const c = synced.outcome;
  if (c.status === 'foreign') {
    // The retired files stay recorded: uninstall removes them.
    throw new LifecycleError(
      `${c.path} exists and is not the one stewardd wrote; refusing to overwrite it (use --force)`,
    );
  }
  const r = retire(o.stateDir, synced.rec, ops, o.log);
  o.log.info({ shim, shimPath, conflist: c, retired: r.report }, 'install done');
  return { shim, shimPath, conflist: c, retired: r.report };
}

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
}

export interface UninstallReport {
  installed: boolean;
  removed: string[];
  refused: Array<{ path: string; why: string }>;
  leftovers: Leftover[];
  purged: boolean;
}

export async function uninstall(o: UninstallOptions): Promise<UninstallReport> {
  const ops = o.ops ?? realFileOps;
  // Read without the lock only to find the socket: the drain below may take many seconds, and the
  // daemon's watcher keeps the conflist (and record) current meanwhile. Re-read under the lock.
  const peek = readRecord(o.stateDir);
  const report: UninstallReport = {
    installed: peek !== undefined,
    removed: [],
    refused: [],
    leftovers: [],
    purged: false,
  };
  const socket = o.socket ?? peek?.socket;
  if (socket !== undefined) {
    const d = await drain({ socket, dbPath: o.dbPath, timeoutMs: o.drainTimeoutMs, log: o.log });
    report.leftovers = d.leftovers;
    if (d.leftovers.length > 0) {
      o.log.warn(
        {
          count: d.leftovers.length,
          steps: d.leftovers.map((l) => l.step),
          containers: d.leftovers.map((l) => l.containerId),
        },
        'teardowns still pending at uninstall',
      );
    }
  }
  // No state dir: nothing recorded, nothing to lock (locking would create it), nothing to purge.
  if (!existsSync(o.stateDir)) {
    report.installed = false;
    report.purged = o.purge;
    return report;
  }
  const held = await lock(o.stateDir, 'uninstall', lockOptions(o.stateDir, o.lockWaitMs, o.log));
  try {
    removeRecorded(o, ops, report);
    if (o.purge && report.refused.length === 0) report.purged = purgeStateDir(held);
  } finally {
    held.release();
  }
  return report;
}

/** uninstall's check and removal, holding the lock: the record is read here, not before. */
function removeRecorded(o: UninstallOptions, ops: FileOps, report: UninstallReport): void {
  const rec = readRecord(o.stateDir);
  report.installed = rec !== undefined;
  if (!rec) return;
  // Conflists first: from then on the runtime stops calling us, so the shims can go. A file may
  // have either sha256 the record accepts (a crash during an install's write leaves either).
  const files = recordedFiles(rec).filter((f, i, all) => all.findIndex((g) => g.path === f.path) === i);
  for (const f of files) {
    const now = sha256File(f.path);
    const known = acceptedAt(recordedFiles(rec), f.path);
    if (now !== undefined && !known.includes(now)) {
      report.refused.push({
        path: f.path,
        why: `was rewritten since install (sha256 now ${now}, installed ${known.join(' or ')})`,
      });
    }
  }
  if (report.refused.length > 0) {
    o.log.error({ refused: report.refused }, 'uninstall refused: files changed since install; nothing removed');
    return;
  }
  // Still marked, although the lock keeps the watcher out: a crash from here on leaves a record
  // that no watcher acts on, and a second uninstall finishes the job.
  writeRecord(o.stateDir, { ...rec, state: 'uninstalling' }, ops);
  for (const f of files) {
    for (const t of tempsOf(f.path)) ops.remove(t);
    if (ops.remove(f.path)) report.removed.push(f.path);
  }
  removeRecord(o.stateDir, ops);
  o.log.info({ removed: report.removed }, 'uninstall done');
}

/**
 * Removes the state dir (record, database, spool) while holding the lock, which is released on
 * the way: everything but the lock file first, then the lock, then the empty dir (which stays,
 * empty, when it is a mount point). Returns false if the dir stays because another stewardd took
 * the lock (and put files there) in between.
 */
export function purgeStateDir(held: Lock): boolean {
  for (const name of readdirSync(held.stateDir)) {
    if (name !== LOCK_FILE) rmSync(join(held.stateDir, name), { recursive: true, force: true });
  }
  held.release();
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
