// `stewardd install` and `stewardd uninstall`: put the shim and 00-steward.conflist on the node,
// and take exactly those away again. Every file is written atomically and recorded with its
// sha256 (record.ts); uninstall removes a file only if it is still byte-for-byte what we wrote.

import { chmodSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { findPrimary, renderConflist, STEWARD_CONFLIST } from './conflist.js';
import { drain, type Leftover } from './drain.js';
import { atomicWrite, removeDurably, sha256, sha256File } from './files.js';
import { readRecord, removeRecord, writeRecord, type InstallRecord } from './record.js';

export const SHIM_NAME = 'steward';

export interface InstallOptions {
  cniBinDir: string;
  cniConfDir: string;
  stateDir: string;
  /** The single-executable shim to copy. */
  shim: string;
  socket: string;
  spoolDir: string;
  /** Overwrite files at our paths that we did not write. */
  force: boolean;
  log: Logger;
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
}

export class LifecycleError extends Error {}

/** Not ours: a file at our path whose sha256 is neither what we recorded nor what we are about to write. */
function foreign(onDisk: string | undefined, recorded: string | undefined, next: string): boolean {
  return onDisk !== undefined && onDisk !== recorded && onDisk !== next;
}

/**
 * Brings 00-steward.conflist in step with the primary config; shared by install and the watcher.
 * Returns the updated record (unchanged object when nothing changed).
 */
export function syncConflist(rec: InstallRecord, force: boolean): { rec: InstallRecord; outcome: ConflistOutcome } {
  const scan = findPrimary(rec.cniConfDir);
  if (scan.kind === 'none') return { rec, outcome: { status: 'no-primary' } };
  if (scan.kind === 'invalid') return { rec, outcome: { status: 'invalid-primary', primary: scan.file, why: scan.why } };
  const path = join(rec.cniConfDir, STEWARD_CONFLIST);
  const text = renderConflist(scan.conf, { socket: rec.socket, spoolDir: rec.spoolDir });
  const next = sha256(text);
  const onDisk = sha256File(path);
  if (!force && foreign(onDisk, rec.conflist?.sha256, next)) return { rec, outcome: { status: 'foreign', path } };
  const status = onDisk === next ? 'unchanged' : 'written';
  if (status === 'written') atomicWrite(path, text, 0o644);
  const updated: InstallRecord = { ...rec, conflist: { path, sha256: next, primary: scan.file } };
  return { rec: updated, outcome: { status, primary: scan.file } };
}

export function install(o: InstallOptions): InstallReport {
  let shimBytes: Buffer;
  try {
    shimBytes = readFileSync(o.shim);
  } catch (e) {
    throw new LifecycleError(`cannot read the shim executable ${o.shim}: ${(e as Error).message} (build it with npm run build, or pass --shim)`);
  }
  mkdirSync(o.cniBinDir, { recursive: true });
  mkdirSync(o.cniConfDir, { recursive: true });
  mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
  const prev = readRecord(o.stateDir);

  const shimPath = join(o.cniBinDir, SHIM_NAME);
  const shimSha = sha256(shimBytes);
  const onDisk = sha256File(shimPath);
  if (!o.force && foreign(onDisk, prev?.shim.sha256, shimSha)) {
    throw new LifecycleError(`${shimPath} exists and was not installed by stewardd (sha256 ${onDisk}); refusing to overwrite it (use --force)`);
  }
  const shim = onDisk === shimSha ? 'unchanged' : 'copied';
  if (shim === 'copied') atomicWrite(shimPath, shimBytes, 0o755);
  else if ((statSync(shimPath).mode & 0o777) !== 0o755) chmodSync(shimPath, 0o755);

  let rec: InstallRecord = {
    version: 1, state: 'installed', cniBinDir: o.cniBinDir, cniConfDir: o.cniConfDir, socket: o.socket, spoolDir: o.spoolDir,
    shim: { path: shimPath, sha256: shimSha },
    ...(prev?.conflist && prev.cniConfDir === o.cniConfDir ? { conflist: prev.conflist } : {}),
  };
  // Record the shim before the conflist exists, so a crash in between never leaves an unrecorded file.
  writeRecord(o.stateDir, rec);
  const synced = syncConflist(rec, o.force);
  rec = synced.rec;
  writeRecord(o.stateDir, rec);
  const c = synced.outcome;
  if (c.status === 'foreign') {
    throw new LifecycleError(`${c.path} exists and is not the one stewardd wrote; refusing to overwrite it (use --force)`);
  }
  o.log.info({ shim, shimPath, conflist: c }, 'install done');
  return { shim, shimPath, conflist: c };
}

export interface UninstallOptions {
  stateDir: string;
  dbPath: string;
  /** The daemon socket to drain through; defaults to the one recorded at install. */
  socket?: string;
  drainTimeoutMs: number;
  purge: boolean;
  log: Logger;
}

export interface UninstallReport {
  installed: boolean;
  removed: string[];
  refused: Array<{ path: string; why: string }>;
  leftovers: Leftover[];
  purged: boolean;
}

export async function uninstall(o: UninstallOptions): Promise<UninstallReport> {
  const rec = readRecord(o.stateDir);
  const report: UninstallReport = { installed: rec !== undefined, removed: [], refused: [], leftovers: [], purged: false };
  const socket = o.socket ?? rec?.socket;
  if (socket !== undefined) {
    const d = await drain({ socket, dbPath: o.dbPath, timeoutMs: o.drainTimeoutMs, log: o.log });
    report.leftovers = d.leftovers;
    if (d.leftovers.length > 0) {
      o.log.warn({ count: d.leftovers.length, steps: d.leftovers.map((l) => l.step), containers: d.leftovers.map((l) => l.containerId) },
        'teardowns still pending at uninstall');
    }
  }
  if (rec) {
    // The conflist first: from then on the runtime stops calling us, so the shim can go.
    const files = [...(rec.conflist ? [rec.conflist] : []), rec.shim];
    for (const f of files) {
      const now = sha256File(f.path);
      if (now !== undefined && now !== f.sha256) {
        report.refused.push({ path: f.path, why: `was rewritten since install (sha256 now ${now}, installed ${f.sha256})` });
      }
    }
    if (report.refused.length > 0) {
      o.log.error({ refused: report.refused }, 'uninstall refused: files changed since install; nothing removed');
      return report;
    }
    writeRecord(o.stateDir, { ...rec, state: 'uninstalling' });
    for (const f of files) if (removeDurably(f.path)) report.removed.push(f.path);
    removeRecord(o.stateDir);
    o.log.info({ removed: report.removed }, 'uninstall done');
  }
  if (o.purge) {
    rmSync(o.stateDir, { recursive: true, force: true });
    report.purged = true;
  }
  return report;
}
