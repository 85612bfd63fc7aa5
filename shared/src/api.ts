// The shim <-> daemon contract. The shim POSTs one CniRequestBody to CNI_ROUTE; a 200 answer's
// body is printed verbatim (a result, a VERSION/STATUS answer, or empty for DEL/GC), any other
// status carries a CniErrorJson body. Spooled DELs (daemon unreachable) use the same body.

import type { CniEnv } from './cni/types.js';

export const DEFAULT_SOCKET = '/run/steward/stewardd.sock';
export const DEFAULT_STATE_DIR = '/var/lib/steward';
export const DEFAULT_SPOOL_DIR = '/var/lib/steward/spool';
export const CNI_ROUTE = '/v1/cni';

/** Upper bound on a netconf read from stdin, and on request bodies the daemon accepts. */
export const MAX_NETCONF_BYTES = 1024 * 1024;

/** How long the shim waits for the daemon before giving up (ms). Plugins may take a while. */
export const DEFAULT_SHIM_TIMEOUT_MS = 120_000;

/** What travels on the wire: the CNI_* variables as the runtime set them, and the netconf. */
export interface CniWireRequest {
  env: Record<string, string>;
  /** The plugin configuration the runtime passed on stdin (the steward entry of the conflist). */
  config: Record<string, unknown>;
}

/** A request after validation: the daemon's engine only ever sees this. */
export interface CniRequestBody {
  env: CniEnv;
  config: Record<string, unknown>;
}

/** The CNI_* variables forwarded from the shim to the daemon. */
export const CNI_ENV_VARS = [
  'CNI_COMMAND',
  'CNI_CONTAINERID',
  'CNI_NETNS',
  'CNI_IFNAME',
  'CNI_ARGS',
  'CNI_PATH',
] as const;
