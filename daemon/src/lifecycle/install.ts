// `stewardd install`: put the shim and 00-steward.conflist on the node (the conflist through
// conflist-sync.ts, which the watcher keeps in step with the primary network). Every file is
// written atomically and recorded with its sha256 (record.ts); uninstall.ts removes a file only if
// it is still byte-for-byte what we wrote.
//
// Crash safety: each file write is bracketed by two record writes (record.ts trackedWrite): first
// the record with the sha256 about to be written plus the sha256 of our file it replaces, then the
// file, then the record without the old sha256. Whatever point a crash stops install at, every
// file install may have written is in the record with a sha256 that matches it, so uninstall
// removes it and a re-run of install converges.
//
// Concurrency: install, uninstall and the daemon's watcher (syncConflist) each hold the install
// lock (lock.ts) from reading the record to their last write, so they never interleave.

import { chmodSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ConflistVersionChoice } from './cni-version.js';
import { STEWARD_CONFLIST } from './conflist.js';
import { syncConflist, unknownConflist, type ConflistOutcome } from './conflist-sync.js';
import { changeOf, readRegularFile, sha256, sha256File, tempsOf } from './files.js';
import { loggedWait, withLock } from './lock.js';
import {
  acceptedAt,
  foreign,
  readRecord,
  readRecordOrSetAside,
  realFileOps,
  recordedFiles,
  replaced,
  settled,
  trackedWrite,
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

export interface InstallReport {
  shim: 'copied' | 'unchanged';
  shimPath: string;
  conflist: ConflistOutcome;
  /** Files of an earlier install at paths no longer used (--cni-bin-dir or --cni-conf-dir changed). */
  retired: { removed: string[]; kept: Array<{ path: string; why: string }> };
}

export class LifecycleError extends Error {}

function refusedConflist(path: string): LifecycleError {
  return new LifecycleError(`${path} exists and is not the one stewardd wrote; refusing to overwrite it (use --force)`);
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
  // A path no longer named may still be the very file now installed, reached another way (the bin
  // dir named through a link to it): an install that removed it deleted the shim it had just put
  // there, exit 0, every pod's ADD then failing (hostile run, 1 Dec). Compared by device and inode.
  const inUse = new Set([rec.shim.path, rec.conflist?.path].map((p) => (p === undefined ? undefined : fileId(p))));
  inUse.delete(undefined);
  for (const f of retired) {
    const id = fileId(f.path);
    if (id !== undefined && inUse.has(id)) continue;
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

/** A file's device and inode ("dev:ino"), or undefined when it is not there. */
function fileId(path: string): string | undefined {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
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

/**
 * The record this install writes, given its shim entry: `conflist` as an earlier record knew it, and
 * every file recorded at other paths than `paths` (the bin or conf dir changed) as retired, removed
 * once the new files are in place.
 */
function recordWith(
  o: InstallOptions,
  conflist: InstallRecord['conflist'],
  prevFiles: RetiredFile[],
  paths: readonly string[],
): (shim: InstallRecord['shim']) => InstallRecord {
  const retired = prevFiles.filter((f) => !paths.includes(f.path));
  return (shim) => ({
    version: 1,
    state: 'installed',
    cniBinDir: o.cniBinDir,
    cniConfDir: o.cniConfDir,
    socket: o.socket,
    spoolDir: o.spoolDir,
    ...(o.cniVersion !== undefined ? { cniVersion: o.cniVersion } : {}),
    ...(o.restartGraceS !== undefined ? { restartGraceS: o.restartGraceS } : {}),
    shim,
    ...(conflist ? { conflist } : {}),
    ...(retired.length > 0 ? { retired } : {}),
  });
}

/** install, holding the lock: everything from reading the record to the last write. */
function installHeld(o: InstallOptions, shimBytes: Buffer): InstallReport {
  const ops = o.ops ?? realFileOps;
  const prev = o.force ? readRecordOrSetAside(o.stateDir, o.log) : readRecord(o.stateDir);
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
  const withShim = recordWith(o, conflist, prevFiles, [shimPath, conflistPath]);
  // A conflist at our path that no record of ours knows is refused before anything is written, the
  // record included (one that wrote the shim and a record first left a record claiming that shim,
  // whose uninstall removed it under a conflist still naming it). Refused with no usable primary
  // too: the first install after one appears would refuse it, in the init container of a rollout.
  if (
    !o.force &&
    conflist === undefined &&
    unknownConflist(withShim({ path: shimPath, sha256: shimSha }), conflistPath)
  )
    throw refusedConflist(conflistPath);

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

  // A conflist we wrote and someone edited since is left as it is, and install succeeds: the
  // daemon then starts and says it is not ready (watcher.ts). Failing here would fail the
  // DaemonSet's init container after the new shim is in place, and keep the daemon every pod's
  // call needs from starting, where the edited conflist had worked (found by a hostile review).
  const synced = syncConflist(o.stateDir, rec, o.force, ops);
  const c = synced.outcome;
  if (c.status === 'foreign' && conflist === undefined) throw refusedConflist(c.path); // appeared meanwhile
  if (c.status === 'foreign')
    o.log.warn({ path: c.path }, `${c.path} was edited since stewardd wrote it; left as it is`);
  const r = retire(o.stateDir, synced.rec, ops, o.log);
  o.log.info({ shim, shimPath, conflist: c, retired: r.report }, 'install done');
  return { shim, shimPath, conflist: c, retired: r.report };
}
