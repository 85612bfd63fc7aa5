// Keeping 00-steward.conflist in step with the node's primary network config: what it would be
// (planConflist), whether a file at its path is someone else's, and the crash-safe write of it with
// its record (syncConflist), for install.ts and the daemon's watcher.ts alike. The caller holds the
// install lock (lock.ts).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_NETCONF_BYTES, printableCapped } from '@cni-steward/shared';
import { conflistVersionOf } from './cni-version.js';
import { findPrimary, renderConflist, sortsBeforeOurs, STEWARD_CONFLIST, stewardConflistPlugins } from './conflist.js';
import { sha256, sha256File } from './files.js';
import {
  acceptedAt,
  foreign,
  realFileOps,
  recordedFiles,
  replaced,
  trackedWrite,
  writeRecord,
  type FileOps,
  type InstallRecord,
} from './record.js';

export type ConflistOutcome =
  | { status: 'written' | 'unchanged'; primary: string; cniVersion: string }
  | { status: 'no-primary' }
  | { status: 'invalid-primary'; primary: string; why: string }
  | { status: 'foreign'; path: string };

/** What 00-steward.conflist would be for `rec`: an outcome without a file, or the file to write. */
type ConflistPlan =
  | { kind: 'outcome'; outcome: ConflistOutcome }
  | ({ kind: 'file'; path: string; text: string; next: string; onDisk?: string; known: string[] } & {
      primary: string;
      cniVersion: string;
    });

/**
 * The most of the file at our conflist's path that is hashed, or our own rendering's size if that is
 * larger (the primary, at most MAX_NETCONF_BYTES, indented again): a larger file is someone else's,
 * and the watcher reads this path every second on the event loop (a 200 MiB file there held it for
 * most of a second).
 */
export const MAX_CONFLIST_BYTES = 4 * MAX_NETCONF_BYTES;

export function planConflist(rec: InstallRecord): ConflistPlan {
  const scan = findPrimary(rec.cniConfDir);
  if (scan.kind === 'none') return { kind: 'outcome', outcome: { status: 'no-primary' } };
  if (scan.kind === 'invalid')
    return { kind: 'outcome', outcome: { status: 'invalid-primary', primary: scan.file, why: scan.why } };
  // The runtime loads the first config by name: one sorting before ours is loaded instead of ours,
  // and steward is never called (Multus's default 00-multus.conf does). Said, not worked around.
  if (sortsBeforeOurs(scan.file)) {
    const why = `it sorts before ${STEWARD_CONFLIST}, so the runtime loads it and never calls steward; rename it to sort after ${STEWARD_CONFLIST} (e.g. 10-${scan.file.replace(/^[^A-Za-z]*/, '')})`;
    return { kind: 'outcome', outcome: { status: 'invalid-primary', primary: scan.file, why } };
  }
  const path = join(rec.cniConfDir, STEWARD_CONFLIST);
  const cniVersion = conflistVersionOf(rec.cniVersion, String(scan.conf.cniVersion));
  const text = renderConflist(scan.conf, { socket: rec.socket, spoolDir: rec.spoolDir, cniVersion });
  // Our own file can be larger than the cap (the primary indented again, 8 levels deep): up to its size.
  const onDisk = sha256File(path, Math.max(MAX_CONFLIST_BYTES, Buffer.byteLength(text)));
  return {
    kind: 'file',
    path,
    text,
    next: sha256(text),
    ...(onDisk !== undefined ? { onDisk } : {}),
    known: acceptedAt(recordedFiles(rec), path),
    primary: scan.file,
    cniVersion,
  };
}

/** A file at `path` that no record knows (`rec` knows no conflist there) and that is not what `rec` would write. */
export function unknownConflist(rec: InstallRecord, path: string): boolean {
  if (!existsSync(path)) return false;
  const plan = planConflist(rec);
  const onDisk = plan.kind === 'file' && plan.path === path ? plan.onDisk : sha256File(path, MAX_CONFLIST_BYTES);
  if (onDisk === undefined) return false;
  return plan.kind !== 'file' || plan.next !== onDisk;
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
  const plan = planConflist(rec);
  if (plan.kind === 'outcome') return { rec, outcome: plan.outcome };
  const { path, text, next, onDisk, known, primary, cniVersion } = plan;
  if (!force && foreign(onDisk, known, next)) return { rec, outcome: { status: 'foreign', path } };
  const done: InstallRecord = { ...rec, conflist: { path, sha256: next, primary, cniVersion } };
  if (onDisk === next) {
    writeRecord(stateDir, done, ops);
    return { rec: done, outcome: { status: 'unchanged', primary, cniVersion } };
  }
  const pending: InstallRecord = {
    ...rec,
    conflist: { path, sha256: next, primary, cniVersion, ...replaced(onDisk, known, next) },
  };
  trackedWrite(stateDir, ops, pending, path, text, 0o644, done);
  return { rec: done, outcome: { status: 'written', primary, cniVersion } };
}

/**
 * The types of the plugins someone appended after steward's entry in the conflist at `path` (a
 * steward config whose first plugin is ours, then others), or undefined when it is not such a file.
 */
export function pluginsChainedAfterSteward(path: string): string[] | undefined {
  try {
    const plugins = stewardConflistPlugins(path, MAX_CONFLIST_BYTES);
    if (plugins === undefined) return undefined;
    const types = plugins
      .slice(1, 6)
      .map((p) => p?.type)
      .map((t) => (typeof t === 'string' ? printableCapped(t, 64) : '(no type)'));
    const more = plugins.length - 6;
    return more > 0 ? [...types, `${more} more`] : types;
  } catch {
    return undefined;
  }
}
