// Writing and removing the restart record (shared/src/restart.ts): SIGTERM on a node that keeps
// steward writes it before the socket closes, and again as serving stops (the successor's grace
// counts from then); the successor removes it once it serves. A failure to write it is logged and
// costs only the grace: the shim then tells the runtime the truth, stewardd is gone.

import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import {
  DEFAULT_RESTART_GRACE_S,
  KERNEL_BOOT_ID_FILE,
  MAX_RESTART_GRACE_S,
  restartRecordPath,
  type RestartRecord,
} from '@cni-steward/shared';
import { atomicWrite, removeDurably } from './files.js';
import { readRecord } from './record.js';

/**
 * The grace a SIGTERM gives the successor: `stewardd run --restart-grace`, else what install
 * recorded, else the default. Read at SIGTERM, so a reinstall with another grace counts at once.
 */
export function restartGraceMs(flagMs: number | undefined, stateDir: string): number {
  if (flagMs !== undefined) return flagMs;
  let recorded: unknown;
  try {
    recorded = readRecord(stateDir)?.restartGraceS;
  } catch {
    recorded = undefined; // an unreadable record: readiness says so elsewhere; the default here
  }
  const seconds =
    typeof recorded === 'number' && Number.isInteger(recorded) && recorded >= 0 && recorded <= MAX_RESTART_GRACE_S
      ? recorded
      : DEFAULT_RESTART_GRACE_S;
  return seconds * 1000;
}

/** Writes the record: the successor is waited for until `untilMs` (ms since the epoch). */
export function writeRestartRecord(socket: string, untilMs: number, log: Logger): void {
  try {
    // The kernel's own boot id, whatever --boot-id-file says: it is what the shim compares it with.
    const bootId = readFileSync(KERNEL_BOOT_ID_FILE, 'utf8').trim();
    const rec: RestartRecord = { bootId, until: Math.round(untilMs), pid: process.pid };
    atomicWrite(restartRecordPath(socket), `${JSON.stringify(rec)}\n`, 0o600);
    log.info(
      { record: restartRecordPath(socket), until: new Date(untilMs).toISOString() },
      'restart record written: the shim tells the runtime the network is ready until the successor serves or this passes',
    );
  } catch (e) {
    log.warn(
      { err: (e as Error).message, socket },
      'the restart record could not be written: STATUS reads not ready until the successor serves',
    );
  }
}

/** Removes the record (the successor serves, or the node is being uninstalled); true when there was one. */
export function removeRestartRecord(socket: string, log: Logger): boolean {
  try {
    return removeDurably(restartRecordPath(socket));
  } catch (e) {
    log.warn({ err: (e as Error).message, socket }, 'the restart record could not be removed');
    return false;
  }
}
