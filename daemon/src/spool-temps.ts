// Stale spool temp files: a writer (the shim, or a degraded daemon's shared/src/spool.ts) killed
// between creating `.<stem>.tmp` and renaming it leaves the temp file for good (18 of 200 shims
// killed at random moments did). SpoolDirs (spool-dirs.ts) sweeps every drained dir with this: regular
// files named like one (SPOOL_TEMP_NAME) and older than the grace by mtime are removed; younger ones
// may have a live writer and are left. Entries are lstat'ed, never followed.

import { lstatSync, opendirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { SPOOL_TEMP_NAME } from '@cni-steward/shared';

/**
 * A temp file older than this (by mtime) has no live writer. One lives only while its writer writes
 * and fsyncs it, milliseconds: the shim writes it once its request failed, within its run (its DEL
 * bound is at most 50 s, README "Bounds"), and the daemon's writer within one request. Should a
 * stalled filesystem hold a write longer, removing its temp file makes the writer's rename fail: the
 * shim answers 11 and the runtime retries the DEL, nothing is lost.
 */
export const STALE_TEMP_GRACE_MS = 10 * 60_000;

/** Entries listed between two yields to the event loop while sweeping. */
const SWEEP_BATCH = 1024;

/**
 * Removes `file` if it is a regular file (never a link: lstat) last written at least graceMs ago, or
 * more than graceMs from now: a file dated ahead was written before the clock was stepped back (or
 * by a writer with a wrong clock), and its writer, whose window is milliseconds, is long gone; left,
 * it would never age into the grace.
 */
function removeIfStale(file: string, graceMs: number, now: number): boolean {
  let st;
  try {
    st = lstatSync(file);
  } catch {
    return false;
  }
  if (!st.isFile() || Math.abs(now - st.mtimeMs) < graceMs) return false;
  try {
    // Replaced by a link since the lstat? unlink(2) removes the link itself, never what it names.
    unlinkSync(file);
    return true;
  } catch (e) {
    // Renamed into place (its writer finished) or removed since it was listed.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

/** The stale temp files removed from `dir` (names), listing it in batches; none when it cannot be listed. */
export async function sweepStaleTemps(dir: string, graceMs = STALE_TEMP_GRACE_MS, now = Date.now()): Promise<string[]> {
  let d;
  try {
    d = opendirSync(dir, { bufferSize: 256 });
  } catch {
    return [];
  }
  const removed: string[] = [];
  try {
    let listed = 0;
    for (let ent = d.readSync(); ent !== null; ent = d.readSync()) {
      if (SPOOL_TEMP_NAME.test(ent.name) && removeIfStale(join(dir, ent.name), graceMs, now)) removed.push(ent.name);
      if (++listed % SWEEP_BATCH === 0) await new Promise((r) => setImmediate(r));
    }
  } finally {
    d.closeSync();
  }
  return removed;
}
