// `stewardd install`: put the shim and 00-steward.conflist on the node (and keep the conflist in
// step with the primary network: syncConflist, also the watcher's). Every file is written
// atomically and recorded with its sha256 (record.ts); uninstall.ts removes a file only if it is
// still byte-for-byte what we wrote.
//
// Crash safety: each file write is bracketed by two record writes (trackedWrite): first the
// record with the sha256 about to be written plus the sha256 of our file it replaces, then the
// file, then the record without the old sha256. Whatever point a crash stops install at, every
// file install may have written is in the record with a sha256 that matches it, so uninstall
// removes it and a re-run of install converges.
//
// Concurrency: install, uninstall and the daemon's watcher (syncConflist) each hold the install
// lock (lock.ts) from reading the record to their last write, so they never interleave.

import { chmodSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { conflistVersionOf, type ConflistVersionChoice } from './cni-version.js';
import { findPrimary, renderConflist, sortsBeforeOurs, STEWARD_CONFLIST } from './conflist.js';
import { changeOf, readRegularFile, sha256, sha256File, tempsOf } from './files.js';
import { loggedWait, withLock } from './lock.js';
import {
  acceptedAt,
  readRecord,
  realFileOps,
  recordedFiles,
  settled,
  writeRecord,
  type FileOps,
  type InstallRecord,
  type RetiredFile,
} from './record.js';
import type { InstallConfig } from './options.js';

export const SHIM_NAME = 'steward';

/** What `stewardd install` was asked (command-line.ts), with a logger instead of a level. */
export interface InstallOptions extends Omit<
  InstallConfig,
  'logLevel' | 'shimLibc' | 'cniVersion' | 'runtimeEndpoint'
> {
  log: Logger;
  /** The conflist's cniVersion, decided by the caller (cni-version.ts); absent: the primary's. */
  cniVersion?: ConflistVersionChoice;
  /** How files are written and removed; tests pass failing ones to simulate a crash. */
  ops?: FileOps;
  /** How long to wait for the install lock (lock.ts); LOCK_WAIT_MS by default. */
  lockWaitMs?: number;
}

export type ConflistOutcome =
  | { status: 'written' | 'unchanged'; primary: string; cniVersion: string }
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
  // The runtime loads the first config by name: one sorting before ours is loaded instead of ours,
  // and steward is never called (Multus's default 00-multus.conf does). Said, not worked around.
  if (sortsBeforeOurs(scan.file)) {
    const why = `it sorts before ${STEWARD_CONFLIST}, so the runtime loads it and never calls steward; rename it to sort after ${STEWARD_CONFLIST} (e.g. 10-${scan.file.replace(/^[0-9]*-?/, '')})`;
    return { rec, outcome: { status: 'invalid-primary', primary: scan.file, why } };
  }
  const path = join(rec.cniConfDir, STEWARD_CONFLIST);
  const cniVersion = conflistVersionOf(rec.cniVersion, String(scan.conf.cniVersion));
  const text = renderConflist(scan.conf, { socket: rec.socket, spoolDir: rec.spoolDir, cniVersion });
  const next = sha256(text);
  const onDisk = sha256File(path);
  const known = acceptedAt(recordedFiles(rec), path);
  if (!force && foreign(onDisk, known, next)) return { rec, outcome: { status: 'foreign', path } };
  const done: InstallRecord = { ...rec, conflist: { path, sha256: next, primary: scan.file, cniVersion } };
  if (onDisk === next) {
    writeRecord(stateDir, done, ops);
    return { rec: done, outcome: { status: 'unchanged', primary: scan.file, cniVersion } };
  }
  const pending: InstallRecord = {
    ...rec,
    conflist: { path, sha256: next, primary: scan.file, cniVersion, ...replaced(onDisk, known, next) },
  };
  trackedWrite(stateDir, ops, pending, path, text, 0o644, done);
  return { rec: done, outcome: { status: 'written', primary: scan.file, cniVersion } };
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
        report.kept.push({ path: f.path, why: `${changeOf(f.path, now)}; left in place` });
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

export async function install(o: InstallOptions): Promise<InstallReport> {
  let shimBytes: Buffer;
  try {
    shimBytes = readRegularFile(o.shim);
  } catch (e) {
    throw new LifecycleError(
      `cannot read the shim executable ${o.shim}: ${(e as Error).message} (build it with npm run build, or pass --shim)`,
    );
  }
  mkdirSync(o.cniBinDir, { recursive: true });
  mkdirSync(o.cniConfDir, { recursive: true });
  mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
  return withLock(o.stateDir, 'install', loggedWait(o.stateDir, o.lockWaitMs, o.log), () => installHeld(o, shimBytes));
}

/** Our conflist at the (possibly new) conf dir path, if any earlier record knows it. */
function earlierConflist(
  prev: InstallRecord | undefined,
  prevFiles: RetiredFile[],
  conflistPath: string,
): InstallRecord['conflist'] {
  if (prev?.conflist?.path === conflistPath) return prev.conflist;
  const at = prevFiles.find((f) => f.path === conflistPath);
  if (at === undefined) return undefined;
  return { path: at.path, sha256: at.sha256, ...(at.previous !== undefined ? { previous: at.previous } : {}) };
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

  const conflist = earlierConflist(prev, prevFiles, conflistPath);
  // Everything recorded at other paths: the bin or conf dir changed. Removed below, once the new files are in place.
  const retired: RetiredFile[] = prevFiles.filter((f) => f.path !== shimPath && f.path !== conflistPath);
  const base = {
    version: 1 as const,
    state: 'installed' as const,
    cniBinDir: o.cniBinDir,
    cniConfDir: o.cniConfDir,
    socket: o.socket,
    spoolDir: o.spoolDir,
    ...(o.cniVersion !== undefined ? { cniVersion: o.cniVersion } : {}),
    ...(o.restartGraceS !== undefined ? { restartGraceS: o.restartGraceS } : {}),
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
