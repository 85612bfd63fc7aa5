// The record's "uninstalling" mark (uninstall.ts): written before the drain, so a running watcher
// stops rewriting our files and an install during the drain is seen (it writes "installed" again);
// taken back when the uninstall removes nothing after all, gives up, or is interrupted in its drain.

import type { Logger } from 'pino';
import { describeHolder, lock, loggedWait, tryLock, type Lock } from './lock.js';
import { readRecord, writeRecord, type FileOps, type InstallRecord } from './record.js';

/** What the mark needs of uninstall's options. */
export interface MarkOptions {
  stateDir: string;
  log: Logger;
  lockWaitMs?: number;
}

/** A state dir that cannot take the lock file or the mark (full, out of quota, read-only): uninstall removes our files without them. */
export const NO_ROOM: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT', 'EROFS']);

/**
 * The record marked "uninstalling" under the lock (a running watcher stops rewriting our files, and
 * says not ready). false when the state dir has no room for the lock or the mark: the removal goes
 * on without it, as with no room for the lock at all.
 */
export async function markUninstalling(o: MarkOptions, ops: FileOps): Promise<boolean> {
  let held: Lock;
  try {
    held = await lock(o.stateDir, 'uninstall', loggedWait(o.stateDir, o.lockWaitMs, o.log));
  } catch (e) {
    if (NO_ROOM.has((e as NodeJS.ErrnoException).code ?? '')) return false;
    throw e;
  }
  try {
    const rec = readRecord(o.stateDir);
    return rec !== undefined && writeMark(o, rec, ops);
  } finally {
    held.release();
  }
}

/** Nothing was removed after all (every file refused): the record says installed again, as before the drain. */
export function unmark(o: MarkOptions, ops: FileOps): void {
  const rec = readRecord(o.stateDir);
  if (rec?.state === 'uninstalling') writeRecord(o.stateDir, { ...rec, state: 'installed' }, ops);
}

/** unmark, holding the lock if it is free now; said when it is not (the mark then stays until the next install or uninstall). */
export function unmarkIfFree(o: MarkOptions, ops: FileOps): void {
  const r = tryLock(o.stateDir, 'uninstall');
  if ('busy' in r) {
    o.log.error(
      { stateDir: o.stateDir, holder: describeHolder(r.busy) },
      'uninstall: the record stays marked uninstalling (the install lock is busy); install or uninstall again clears it',
    );
    return;
  }
  try {
    unmark(o, ops);
  } catch (e) {
    o.log.error({ err: (e as Error).message }, 'uninstall: the record stays marked uninstalling');
  } finally {
    r.held.release();
  }
}

/** While the drain runs: SIGINT or SIGTERM takes the mark back, then exits (130, 143). Returns the deregistration. */
export function unmarkOnSignal(o: MarkOptions, ops: FileOps): () => void {
  const on = (sig: NodeJS.Signals) => {
    o.log.warn(
      { signal: sig },
      'uninstall interrupted during its drain: nothing removed, the record says installed again',
    );
    unmarkIfFree(o, ops);
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', on);
  process.once('SIGTERM', on);
  return () => {
    process.off('SIGINT', on);
    process.off('SIGTERM', on);
  };
}

/**
 * The mark, unless the state dir has no room for it (one free block took the lock file): then false,
 * and the removal goes on without it.
 */
export function writeMark(o: MarkOptions, rec: InstallRecord, ops: FileOps): boolean {
  try {
    writeRecord(o.stateDir, { ...rec, state: 'uninstalling' }, ops);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (!NO_ROOM.has(code)) throw e;
    o.log.error({ code, stateDir: o.stateDir }, 'uninstall: the record cannot be marked; removing without the mark');
    return false;
  }
}
