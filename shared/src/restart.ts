// The restart record: on SIGTERM, when the node keeps steward (a rolling update, a drain, a restart
// by its owner), stewardd writes `<socket>.restarting` before its socket closes; the successor removes
// it once it serves. While it is fresh the shim (shim/restart.go) tells the runtime the network is
// ready and lets ADD, CHECK and GC wait for the successor, so a planned restart never turns a node
// NotReady; a crash, kill -9 or a frozen stewardd writes none. Both sides read these values.

/** The record's name: the socket's path with this suffix. */
export const RESTART_RECORD_SUFFIX = '.restarting';
/** The default grace a record gives the successor (stewardd run --restart-grace). */
export const DEFAULT_RESTART_GRACE_S = 15;
/** The longest grace a record may give: the shim never believes a record for longer. */
export const MAX_RESTART_GRACE_S = 120;
/** The kernel's boot id: a record from another boot (a persistent /run) is no restart of this one. */
export const KERNEL_BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id';

/**
 * The shim's note of the last STATUS it answered not ready on its own (stewardd unreachable,
 * frozen, or a restart's grace expired), beside the socket: `{at, why, reason}`. stewardd reports it.
 */
export const STATUS_NOT_READY_SUFFIX = '.status-not-ready';

/** The record as written: JSON. */
export interface RestartRecord {
  bootId: string;
  /** Until when the successor is waited for, ms since the epoch. */
  until: number;
  /** The process that wrote it. */
  pid: number;
}

export function restartRecordPath(socket: string): string {
  return `${socket}${RESTART_RECORD_SUFFIX}`;
}
