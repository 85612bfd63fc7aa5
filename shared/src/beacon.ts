// stewardd's alive beacon (issue 37): while it serves, stewardd's main loop rewrites
// `<socket>.alive` every ALIVE_BEACON_PERIOD_MS with the time, whether it is ready, and its last
// STATUS verdict per network (keyed by the shim's STATUS_KEY_HEADER). A shim whose STATUS has had
// no answer within STATUS_BEACON_PATIENCE_MS reads it: a beat written since the call started proves
// the daemon's loop runs (it is slow, not frozen), so the shim answers that verdict at once instead
// of waiting out its bound behind a busy loop and answering 50 for a live daemon. A frozen or dead
// stewardd writes no new beat, and its STATUS is told as before. Both sides read these values.

/** The beacon's name: the socket's path with this suffix. */
export const ALIVE_BEACON_SUFFIX = '.alive';
/** How often stewardd's main loop rewrites the beacon (ms). */
export const ALIVE_BEACON_PERIOD_MS = 100;
/**
 * How long (ms from its start) the shim waits for stewardd's own STATUS answer before it reads the
 * beacon: an idle node answers in a few ms, so the beacon speaks only for a loop that is behind.
 */
export const STATUS_BEACON_PATIENCE_MS = 100;
/** The most networks whose STATUS verdict the beacon keeps (the most recently asked). */
export const ALIVE_BEACON_MAX_NETWORKS = 16;
/**
 * The request header naming a STATUS's network for the beacon: the first 32 hex digits of the
 * SHA-256 of the request body (its CNI_* variables and netconf), so one network read one way.
 */
export const STATUS_KEY_HEADER = 'x-steward-status-key';

/** The beacon as written: JSON. */
export interface AliveBeacon {
  /** When this beat was written, ms since the epoch. */
  at: number;
  pid: number;
  /** The daemon's PROTOCOL_VERSION: a shim of another trusts no beacon. */
  protocol: number;
  /** Serving and ready (its /readyz): not while starting, shutting down or degraded. */
  ready: boolean;
  /** STATUS_KEY_HEADER -> whether the last STATUS of that network stewardd decided was a success. */
  status: Record<string, boolean>;
}

export function aliveBeaconPath(socket: string): string {
  return `${socket}${ALIVE_BEACON_SUFFIX}`;
}

/** A well-formed STATUS_KEY_HEADER value: 32 lowercase hex digits. */
export const STATUS_KEY_PATTERN = /^[0-9a-f]{32}$/;
