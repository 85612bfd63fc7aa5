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
/**
 * The largest request body (the netconf and the CNI_* variables, as JSON) stewardd reads, and the
 * largest spool file it ingests: the shim refuses a bigger one up front (code 7) rather than send
 * or spool a DEL that could never be served.
 */
export const MAX_REQUEST_BYTES = MAX_NETCONF_BYTES + 64 * 1024;

/**
 * An error answer is written in the netconf's cniVersion only when it has a version's shape: three
 * parts of 1 to this many ASCII digits, dot-separated (1.0.0, or an unsupported 0.2.0 the error is
 * about); otherwise in the latest. A netconf's cniVersion is the client's: a megabyte of it with a
 * bidi override was echoed raw. stewardd and the shim decide the same.
 */
export const MAX_VERSION_PART_DIGITS = 4;

/** A Unix socket path's longest length in bytes (sun_path is 108 bytes with its terminating NUL). */
export const MAX_SOCKET_PATH_BYTES = 107;

/**
 * The shim's ADD bound (ms): how long it waits for stewardd's answer to an ADD unless the netconf's
 * "timeouts.add" sets another (plugins may take a while). stewardd fits an ADD's plugins under it
 * (engine/add.ts answerBudgetMs). The kubelet gives RunPodSandbox 4 minutes: an ADD's bound plus the
 * undo of a skewed ADD (a DEL, within SHIM_DEL_BOUND_MS) stays under it even at MAX_SHIM_ADD_TIMEOUT_MS.
 */
export const DEFAULT_SHIM_TIMEOUT_MS = 120_000;

/**
 * The shim's DEL bound (ms). CRI-O gives a DEL 1 minute and the kubelet StopPodSandbox 2: the shim
 * spools the DEL and answers success well before either, so a frozen stewardd never fails a pod's deletion.
 */
export const SHIM_DEL_BOUND_MS = 30_000;

/** The shim's CHECK and GC bound (ms): no runtime deadline is tighter than the default. */
export const SHIM_CHECK_BOUND_MS = 120_000;

/**
 * The shim's STATUS bound (ms), counted from the shim's start: containerd 2.x runs STATUS every 5 s
 * under a lock with no deadline of its own. Not overridable in the netconf.
 */
export const SHIM_STATUS_BOUND_MS = 750;

/**
 * The most the netconf's "timeouts.add" may set (ms): an ADD and the undo of a skewed one must end
 * inside the kubelet's 4 minutes for RunPodSandbox. Each key of "timeouts" is an integer from 1 up.
 */
export const MAX_SHIM_ADD_TIMEOUT_MS = 200_000;
/**
 * The most the netconf's "timeouts.del" may set (ms): a DEL stewardd does not answer is spooled
 * before the runtime's own deadline (CRI-O: 1 minute).
 */
export const MAX_SHIM_DEL_TIMEOUT_MS = 50_000;
/** The most the netconf's "timeouts.check" and "timeouts.gc" may set (ms): an hour. */
export const MAX_SHIM_OTHER_TIMEOUT_MS = 3_600_000;

/**
 * The deepest nesting of objects and arrays the shim reads on stdin: Go's encoding/json stops at
 * this depth. stewardd refuses a netconf nesting deeper than MAX_NETCONF_DEPTH (wire.ts) anyway.
 */
export const MAX_SHIM_JSON_DEPTH = 10_000;

/** The most the shim reads of stewardd's answer (bytes); its results are a few KiB. */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

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

/**
 * Request headers the shim adds to POST /v1/cni so the daemon can admit a request before it parses
 * the body (a DEL storm must not delay ADDs; a DEL already torn down is answered at once). They are
 * hints: the body stays the contract, a request without them is served as before, and one whose
 * body disagrees with them is refused with code 4 (InvalidEnv). Values are percent-encoded
 * (encodeURIComponent), so any container id or network name fits in a header.
 */
export const HINT_HEADERS = {
  command: 'x-cni-command',
  containerId: 'x-cni-containerid',
  ifname: 'x-cni-ifname',
  network: 'x-cni-network',
} as const;

/**
 * Longest hint value sent (percent-encoded). A longer value is left out (a hint is optional), so the
 * four stay far below the HTTP server's 16 KiB header limit whatever a runtime passes.
 */
export const MAX_HINT_BYTES = 1024;

/** The hint headers for a request body's env and netconf, and PROTOCOL_HEADER (strings only, each at most MAX_HINT_BYTES encoded). */
export function hintHeaders(
  env: Record<string, string | undefined>,
  config: Record<string, unknown>,
): Record<string, string> {
  const h: Record<string, string> = {};
  const put = (name: string, v: unknown) => {
    if (typeof v !== 'string') return;
    let encoded: string;
    try {
      encoded = encodeURIComponent(v);
    } catch {
      return; // a lone UTF-16 surrogate: no hint, and the daemon judges the value from the body
    }
    if (encoded.length <= MAX_HINT_BYTES) h[name] = encoded;
  };
  put(HINT_HEADERS.command, env.CNI_COMMAND);
  put(HINT_HEADERS.containerId, env.CNI_CONTAINERID);
  put(HINT_HEADERS.ifname, env.CNI_IFNAME);
  put(HINT_HEADERS.network, config.name);
  // Not a hint: the protocol version (below) travels with them, so a hinted request always names it.
  h[PROTOCOL_HEADER] = String(PROTOCOL_VERSION);
  return h;
}

/**
 * Shim <-> daemon protocol version. The shim sends it on every request in PROTOCOL_HEADER; the daemon
 * sends its own on every answer. A daemon refuses (code 108, VersionSkew) a shim request whose version
 * it does not speak, and one that carries the hint headers but no version (a shim from a release before
 * versions existed, called protocol 1 here); a request with neither (curl, a hand-written client) is
 * served as before. A shim refuses an answer without the header (a daemon from before versions). Bump
 * PROTOCOL_VERSION when the wire contract changes incompatibly; a daemon that keeps serving the old
 * version lists it in ACCEPTED_PROTOCOLS so a rolling update across one bump works (docs/errors.md).
 */
export const PROTOCOL_HEADER = 'x-steward-protocol';
export const PROTOCOL_VERSION = 2;
/** The version a shim or daemon that sends no PROTOCOL_HEADER speaks (releases before it existed). */
export const UNVERSIONED_PROTOCOL = 1;
export const ACCEPTED_PROTOCOLS: readonly number[] = [PROTOCOL_VERSION];

/** What to do about a skew, for both sides' messages. */
export const SKEW_ADVICE =
  'the shim installed on this node and stewardd come from different releases: roll the stewardd DaemonSet so its install step replaces the shim (or reinstall the shim with `stewardd install`)';
