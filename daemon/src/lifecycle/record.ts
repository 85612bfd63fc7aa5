// The install record, <state-dir>/install.json: what install put on the node and the sha256 of
// each file, so uninstall removes exactly that and nothing someone else has since rewritten.
//
// Crash safety: the record is written (atomically, fsynced) BEFORE each file it describes, with
// the sha256 about to be written, and with `previous` = the sha256 of our file that is there now.
// The file write is atomic too, so after a crash at any point the file on disk is either absent,
// the previous one or the intended one, and the record accepts all three as ours. Once the write
// is durable, the record is rewritten without `previous`.

import { mkdirSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  atomicWrite,
  FileTooLargeError,
  fsyncDir,
  NotRegularFileError,
  readRegularFile,
  removeDurably,
  tempsOf,
} from './files.js';

export const RECORD_FILE = 'install.json';

export interface InstalledFile {
  path: string;
  /** What install wrote there last, or is about to write. */
  sha256: string;
  /** Set only while a write is in flight: the sha256 of our file that the write replaces. */
  previous?: string;
}

/** A file of an earlier install at a path no longer in use (--cni-bin-dir or --cni-conf-dir changed). */
export type RetiredFile = InstalledFile & { kind: 'shim' | 'conflist' };

import type { ConflistVersionChoice } from './cni-version.js';

export interface InstallRecord {
  version: 1;
  /** "uninstalling" while uninstall removes files, so a running watcher stops rewriting them. */
  state: 'installed' | 'uninstalling';
  cniBinDir: string;
  cniConfDir: string;
  socket: string;
  spoolDir: string;
  shim: InstalledFile;
  /**
   * Absent until a primary network config exists. `primary` is unknown for a file taken over from
   * `retired`; `cniVersion` is the version it was written at (absent in records older than that).
   */
  conflist?: InstalledFile & { primary?: string; cniVersion?: string };
  /** Which cniVersion the conflist is written at and why (cni-version.ts); absent: the primary's. */
  cniVersion?: ConflistVersionChoice;
  /** install's --restart-grace, for `stewardd run` without its own (restart-record.ts). */
  restartGraceS?: number;
  /**
   * Files an earlier install wrote at other paths. Install removes them once the new ones are in
   * place and then drops them from the record; they are listed until then so that a crash in
   * between cannot orphan them (uninstall removes them too).
   */
  retired?: RetiredFile[];
}

/** Every sha256 that counts as ours at f.path. */
export function accepted(f: InstalledFile | undefined): string[] {
  if (!f) return [];
  return f.previous !== undefined && f.previous !== f.sha256 ? [f.sha256, f.previous] : [f.sha256];
}

/** Every sha256 that counts as ours at `path`, over all of `files` (normally one entry per path). */
export function acceptedAt(files: InstalledFile[], path: string): string[] {
  return [...new Set(files.filter((f) => f.path === path).flatMap(accepted))];
}

/** The file as it is once its write is durable. */
export function settled<T extends InstalledFile>(f: T): T {
  const { previous: _, ...rest } = f;
  return rest as T;
}

/** Every file the record accounts for: conflists first (the runtime stops calling us), then shims. */
export function recordedFiles(rec: InstallRecord): RetiredFile[] {
  return [
    ...(rec.conflist ? [{ kind: 'conflist' as const, ...rec.conflist }] : []),
    ...(rec.retired ?? []).filter((f) => f.kind === 'conflist'),
    { kind: 'shim', ...rec.shim },
    ...(rec.retired ?? []).filter((f) => f.kind === 'shim'),
  ];
}

export function recordPath(stateDir: string): string {
  return join(stateDir, RECORD_FILE);
}

/** A record is a few KiB; one far bigger is not one stewardd wrote. */
const MAX_RECORD_BYTES = 1024 * 1024;

export function readRecord(stateDir: string): InstallRecord | undefined {
  let text: string;
  try {
    // Only a regular file, never blocking, bounded: a FIFO here held install, uninstall and the
    // daemon's loop (which reads the record every second) for good; a link to /dev/zero grew install
    // to gigabytes (hostile run, 1 Dec).
    text = readRegularFile(recordPath(stateDir), MAX_RECORD_BYTES).toString('utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if (e instanceof NotRegularFileError || e instanceof FileTooLargeError)
      throw new UnreadableRecordError(recordPath(stateDir), e.message);
    throw e;
  }
  let rec: InstallRecord;
  try {
    rec = JSON.parse(text) as InstallRecord;
  } catch (e) {
    throw new UnreadableRecordError(recordPath(stateDir), (e as Error).message);
  }
  if (rec?.version !== 1)
    throw new UnreadableRecordError(
      recordPath(stateDir),
      `unknown version ${String((rec as { version?: unknown } | null)?.version)}`,
    );
  return rec;
}

/** An install record that is not one (cut short, edited by hand, another release's): it names the file. */
export class UnreadableRecordError extends Error {
  constructor(
    readonly path: string,
    readonly why: string,
  ) {
    super(
      `${path} is not a readable install record (${why}); \`stewardd install --force\` sets it aside and installs again`,
    );
  }
}

/**
 * The record, or none when it is unreadable: then it is renamed aside (install.json.unreadable-<ms>,
 * which --purge removes with the rest) so that `install --force` can repair a node without hand edits.
 */
export function readRecordOrSetAside(
  stateDir: string,
  log: { warn: (o: object, msg: string) => void },
): InstallRecord | undefined {
  try {
    return readRecord(stateDir);
  } catch (e) {
    if (!(e instanceof UnreadableRecordError)) throw e;
    const aside = `${e.path}.unreadable-${Date.now()}`;
    renameSync(e.path, aside);
    fsyncDir(dirname(e.path));
    log.warn(
      { record: e.path, setAside: aside },
      `${e.path} is not a readable install record (${e.why}): set aside, installing as if none`,
    );
    return undefined;
  }
}

/** How node and record files are written and removed; tests swap these in to simulate a crash. */
export interface FileOps {
  write: (path: string, data: Buffer | string, mode: number) => void;
  remove: (path: string) => boolean;
}

export const realFileOps: FileOps = { write: atomicWrite, remove: removeDurably };

/**
 * Writes the record atomically and durably, but only when it changed, so a repeated install leaves
 * the file untouched. Returns once the new record is on disk (file and directory fsynced).
 */
export function writeRecord(stateDir: string, rec: InstallRecord, ops: FileOps = realFileOps): void {
  const text = `${JSON.stringify(rec, null, 2)}\n`;
  let old: string | undefined;
  try {
    old = readRegularFile(recordPath(stateDir), MAX_RECORD_BYTES).toString('utf8');
  } catch {
    old = undefined;
  }
  if (old === text) return;
  const created = mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  if (created !== undefined) fsyncDir(dirname(created));
  ops.write(recordPath(stateDir), text, 0o600);
}

export function removeRecord(stateDir: string, ops: FileOps = realFileOps): void {
  ops.remove(recordPath(stateDir));
}

/** Not ours: a file at our path whose sha256 is neither one we recorded nor what we are about to write. */
export function foreign(onDisk: string | undefined, known: string[], next: string): boolean {
  return onDisk !== undefined && onDisk !== next && !known.includes(onDisk);
}

/** The sha256 of our file now at the path, which a write is about to replace (kept in the record until it is durable). */
export function replaced(
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
export function trackedWrite(
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
