// The shim's whole logic as a function of its inputs: env + stdin in, stdout + exit code out.
// I/O (the socket request, the spool) is injected, so tests drive it with plain values.

import {
  CNI_ENV_VARS,
  CNI_ROUTE,
  CniError,
  DEFAULT_SHIM_TIMEOUT_MS,
  DEFAULT_SOCKET,
  DEFAULT_SPOOL_DIR,
  ErrorCode,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  SKEW_ADVICE,
  UNVERSIONED_PROTOCOL,
  LATEST_VERSION,
  MAX_NETCONF_BYTES,
  MAX_REQUEST_BYTES,
  MAX_SOCKET_PATH_BYTES,
  SUPPORTED_VERSIONS,
  hintHeaders,
  failureSafeText,
  parseCniEnv,
  type EnvSource,
} from '@cni-steward/shared';
import { UnreachableError, type Reply } from './client.js';

export interface ShimIO {
  env: EnvSource;
  /** stdin as read, at most MAX_NETCONF_BYTES + 1 bytes (more means over the bound). */
  stdin: Buffer;
  /** `headers`: the admission hints (HINT_HEADERS in the shared contract); the body is the contract. */
  send(
    socket: string,
    route: string,
    body: string,
    timeoutMs: number,
    headers?: Record<string, string>,
  ): Promise<Reply>;
  spool(dir: string, containerId: string, body: string): string;
  /** Milliseconds since the process started (the STATUS bound counts the exec too); 0 if unknown. */
  elapsedMs?(): number;
}

/**
 * STATUS answers within this long of the shim's start, exec included (containerd 2.x runs it every
 * 5 s under a lock with no deadline of its own). Fixed: not overridable in the netconf.
 */
export const STATUS_BOUND_MS = 750;

/** Per-command response bounds (ms); the netconf's "timeouts" object overrides add/check/del/gc. */
export const DEFAULT_COMMAND_BOUNDS_MS: Readonly<Record<'add' | 'check' | 'del' | 'gc', number>> = {
  add: DEFAULT_SHIM_TIMEOUT_MS,
  check: DEFAULT_SHIM_TIMEOUT_MS,
  del: DEFAULT_SHIM_TIMEOUT_MS,
  gc: DEFAULT_SHIM_TIMEOUT_MS,
};

/** The bound for one request: what is left of it, and how an expiry names it. */
export function commandBound(
  command: string,
  timeouts: unknown,
  elapsedMs: number,
): { remaining: number; label: string } {
  const key = command.toLowerCase() as keyof typeof DEFAULT_COMMAND_BOUNDS_MS;
  let ms = DEFAULT_COMMAND_BOUNDS_MS[key] ?? DEFAULT_SHIM_TIMEOUT_MS;
  // Checked for every command, STATUS too: a STATUS that passes a netconf every ADD refuses (7)
  // would report the network ready while no pod can start.
  if (timeouts !== undefined) {
    if (typeof timeouts !== 'object' || timeouts === null || Array.isArray(timeouts))
      throw new CniError(ErrorCode.InvalidConfig, '"timeouts" must be an object of milliseconds per command');
    for (const [k, v] of Object.entries(timeouts)) {
      if (!(k in DEFAULT_COMMAND_BOUNDS_MS))
        throw new CniError(ErrorCode.InvalidConfig, `"timeouts" has an unknown key "${k}" (add, check, del, gc)`);
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 3_600_000)
        throw new CniError(ErrorCode.InvalidConfig, `"timeouts.${k}" must be an integer from 1 to 3600000 (ms)`);
    }
    const own = (timeouts as Record<string, number>)[key];
    if (own !== undefined) ms = own;
  }
  if (command === 'STATUS') {
    const remaining = Math.max(1, STATUS_BOUND_MS - Math.max(0, elapsedMs));
    return { remaining, label: `the STATUS bound of ${STATUS_BOUND_MS} ms` };
  }
  return { remaining: ms, label: `the ${command} bound of ${ms} ms` };
}

/**
 * How long the shim waits for stdin to be written and closed: the command's default bound (the
 * netconf, which could override it, is what is being read), what is left of STATUS's.
 */
export function stdinBoundMs(env: EnvSource, elapsedMs: number): number {
  return commandBound(env.CNI_COMMAND === 'STATUS' ? 'STATUS' : 'ADD', undefined, elapsedMs).remaining;
}

/** The answer when stdin stayed open past stdinBoundMs. */
export function stdinNotClosed(ms: number): ShimOutput {
  return fail(
    new CniError(ErrorCode.DecodeFailure, `stdin was not closed within ${Math.round(ms)} ms: no netconf to act on`),
    LATEST_VERSION,
  );
}

/** Races the request against the bound, whatever the transport does with its own timeout. */
function withDeadline<T>(p: Promise<T>, ms: number, label: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UnreachableError(`no answer within ${label}`)), ms);
  });
  return Promise.race([p, expiry]).finally(() => clearTimeout(timer));
}

/**
 * STATUS errors that say stewardd itself cannot serve (shutting down, not ready, degraded: 11 from
 * its side; its own bug, 104): the runtime hears 50, "the plugin is not available". Every other
 * code is passed on as it came: a fault in the request (1, 2, 4, 6, 7), a delegate's own STATUS
 * answer (50, 51, anything) or a delegate that could not be run (100, 101).
 */
const STATUS_DAEMON_CODES: ReadonlySet<number> = new Set([ErrorCode.TryAgainLater, ErrorCode.Internal]);

/** Why `socket` cannot name stewardd's socket, or undefined. */
function socketProblem(socket: unknown): string | undefined {
  if (typeof socket !== 'string' || socket === '') return '"socket" must be a non-empty string';
  // Relative to the runtime's working directory, which is nobody's choice.
  if (!socket.startsWith('/')) return '"socket" must be an absolute path';
  // A NUL ends the path for the kernel: the shim would talk to another socket than the one named.
  if (socket.includes('\0')) return '"socket" must not contain a NUL character';
  if (Buffer.byteLength(socket, 'utf8') > MAX_SOCKET_PATH_BYTES)
    return `"socket" is longer than the ${MAX_SOCKET_PATH_BYTES} bytes a Unix socket path can be`;
  return undefined;
}

export interface ShimOutput {
  stdout: string;
  exitCode: number;
}

function fail(err: CniError, cniVersion: string): ShimOutput {
  return { stdout: JSON.stringify(err.toJSON(cniVersion)), exitCode: 1 };
}

export async function runShim(io: ShimIO): Promise<ShimOutput> {
  let out: ShimOutput;
  try {
    out = await answer(io);
  } catch (e) {
    // Whatever went wrong, the runtime gets a CNI error on stdout, never a stack trace.
    out = fail(
      new CniError(ErrorCode.Internal, `steward shim: unexpected error: ${(e as Error)?.message ?? String(e)}`),
      LATEST_VERSION,
    );
  }
  return io.env.CNI_COMMAND === 'DEL' && out.exitCode !== 0 ? failureSafe(out) : out;
}

/**
 * containerd's go-cni reads "not found" or "no such file or directory" in a DEL error as success:
 * every DEL failure leaves here without those words, whoever wrote it.
 */
function failureSafe(out: ShimOutput): ShimOutput {
  let parsed: unknown;
  try {
    parsed = JSON.parse(out.stdout);
  } catch {
    return { stdout: failureSafeText(out.stdout), exitCode: out.exitCode };
  }
  const err = CniError.fromJSON(parsed);
  if (!err) return { stdout: failureSafeText(out.stdout), exitCode: out.exitCode };
  const v = (parsed as { cniVersion?: unknown }).cniVersion;
  const safe = new CniError(
    err.code,
    failureSafeText(err.message),
    err.details === undefined ? undefined : failureSafeText(err.details),
  );
  return { stdout: JSON.stringify(safe.toJSON(typeof v === 'string' ? v : LATEST_VERSION)), exitCode: out.exitCode };
}

async function answer(io: ShimIO): Promise<ShimOutput> {
  const overBound = io.stdin.length > MAX_NETCONF_BYTES;
  let conf: Record<string, unknown> | undefined;
  let decodeError: CniError | undefined;
  if (!overBound && io.stdin.length > 0) {
    try {
      const parsed: unknown = JSON.parse(io.stdin.toString('utf8'));
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
        conf = parsed as Record<string, unknown>;
      else decodeError = new CniError(ErrorCode.DecodeFailure, 'netconf on stdin is not a JSON object');
    } catch (e) {
      decodeError = new CniError(
        ErrorCode.DecodeFailure,
        `netconf on stdin is not valid JSON: ${(e as Error).message}`,
      );
    }
  }
  const cniVersion = typeof conf?.cniVersion === 'string' ? conf.cniVersion : LATEST_VERSION;

  if (io.env.CNI_COMMAND === 'VERSION') {
    // The answer's own version: the one asked for when this shim speaks it, else its newest (as the
    // reference plugins answer with theirs), never an echo of whatever string came in.
    const own = (SUPPORTED_VERSIONS as readonly string[]).includes(cniVersion) ? cniVersion : LATEST_VERSION;
    return { stdout: JSON.stringify({ cniVersion: own, supportedVersions: SUPPORTED_VERSIONS }), exitCode: 0 };
  }

  let env;
  try {
    env = parseCniEnv(io.env);
  } catch (e) {
    return fail(CniError.from(e), cniVersion);
  }
  if (overBound)
    return fail(
      new CniError(ErrorCode.InvalidConfig, `netconf on stdin is larger than ${MAX_NETCONF_BYTES} bytes`),
      cniVersion,
    );
  if (decodeError) return fail(decodeError, cniVersion);
  if (!conf) return fail(new CniError(ErrorCode.DecodeFailure, 'no netconf on stdin'), cniVersion);

  // The shim's own keys. A bad one is code 7, except on DEL: a DEL refused for them would fail on
  // every retry and pin the sandbox (stewardd tears down from the ADD's stored config anyway), so
  // a DEL falls back to the default of each key it cannot use.
  const lenient = env.command === 'DEL';
  const givenSocket = conf.socket ?? DEFAULT_SOCKET;
  const givenSpoolDir = conf.spoolDir ?? DEFAULT_SPOOL_DIR;
  const socketWhy = socketProblem(givenSocket);
  if (socketWhy && !lenient) return fail(new CniError(ErrorCode.InvalidConfig, socketWhy), cniVersion);
  const socket = socketWhy ? DEFAULT_SOCKET : (givenSocket as string);
  // Absolute: a relative one would spool a DEL into the runtime's working directory, where stewardd never looks.
  const spoolOk = typeof givenSpoolDir === 'string' && givenSpoolDir.startsWith('/') && !givenSpoolDir.includes('\0');
  if (!spoolOk && !lenient)
    return fail(new CniError(ErrorCode.InvalidConfig, '"spoolDir" must be an absolute path'), cniVersion);
  const spoolDir = spoolOk ? givenSpoolDir : DEFAULT_SPOOL_DIR;

  const wireEnv: Record<string, string> = {};
  for (const name of CNI_ENV_VARS) {
    const v = io.env[name];
    if (v !== undefined) wireEnv[name] = v;
  }
  let body: string;
  try {
    body = JSON.stringify({ env: wireEnv, config: conf });
  } catch (e) {
    // JSON.parse is iterative, JSON.stringify is not: a netconf nested ~100,000 deep parses and
    // then overflows the stack here (found by test/integration/fuzz.test.ts).
    return fail(
      new CniError(
        ErrorCode.InvalidConfig,
        `netconf on stdin cannot be forwarded (nested too deeply?): ${(e as Error).message}`,
      ),
      cniVersion,
    );
  }

  // What stewardd reads at most: a bigger request could only be refused, and a DEL spooled that big
  // would be set aside at ingest and never run.
  const bytes = Buffer.byteLength(body, 'utf8');
  if (bytes > MAX_REQUEST_BYTES)
    return fail(
      new CniError(
        ErrorCode.InvalidConfig,
        `the request (netconf and CNI_* variables) is ${bytes} bytes, more than the ${MAX_REQUEST_BYTES} stewardd reads`,
      ),
      cniVersion,
    );

  let bound: { remaining: number; label: string };
  try {
    bound = commandBound(env.command, conf.timeouts, io.elapsedMs?.() ?? 0);
  } catch (e) {
    if (!lenient) return fail(CniError.from(e), cniVersion);
    bound = commandBound(env.command, undefined, io.elapsedMs?.() ?? 0);
  }
  let reply: Reply;
  try {
    // hintHeaders carries PROTOCOL_HEADER (this shim's protocol version) with the hints.
    reply = await withDeadline(
      io.send(socket, CNI_ROUTE, body, bound.remaining, hintHeaders(wireEnv, conf)),
      bound.remaining,
      bound.label,
    );
  } catch (e) {
    if (!(e instanceof UnreachableError)) throw e;
    if (env.command === 'STATUS') {
      return fail(
        new CniError(ErrorCode.PluginNotAvailable, `stewardd is unreachable at ${socket} (${e.reason})`),
        cniVersion,
      );
    }
    if (env.command === 'DEL') {
      // The daemon drains the spool when it is back (per container, before that container's next
      // ADD), so the teardown is only postponed.
      try {
        io.spool(spoolDir, env.containerId, body);
        return { stdout: '', exitCode: 0 };
      } catch (se) {
        return fail(
          new CniError(
            ErrorCode.TryAgainLater,
            `stewardd is unreachable at ${socket} (${e.reason}) and the DEL could not be spooled to ${spoolDir}: ${(se as Error).message}`,
          ),
          cniVersion,
        );
      }
    }
    return fail(
      new CniError(ErrorCode.TryAgainLater, `stewardd is unreachable at ${socket} (${e.reason}); try again later`),
      cniVersion,
    );
  }

  const skew = versionSkew(env.command, reply, socket);
  if (skew) {
    // A DEL must never be lost: the daemon replays the spool when it starts, i.e. once the
    // DaemonSet is rolled to the shim's release (an older daemon that served it answered 200 already).
    if (env.command === 'DEL' && reply.status !== 200) {
      try {
        io.spool(spoolDir, env.containerId, body);
        return { stdout: '', exitCode: 0 };
      } catch {
        /* the skew error below says what to do */
      }
    }
    return fail(skew, cniVersion);
  }
  if (reply.status === 200) return { stdout: reply.body, exitCode: 0 };
  try {
    const err = CniError.fromJSON(JSON.parse(reply.body));
    // STATUS: whatever keeps the daemon from serving (degraded, not ready, shutting down: 11 from
    // its side) means "the plugin is not available" to the runtime; a fault in the request itself
    // (its version, environment or netconf) keeps its own code.
    if (err && env.command === 'STATUS' && STATUS_DAEMON_CODES.has(err.code))
      return fail(new CniError(ErrorCode.PluginNotAvailable, `stewardd is not available: ${err.message}`), cniVersion);
    if (err) return { stdout: reply.body, exitCode: 1 };
  } catch {
    /* fall through */
  }
  return fail(
    new CniError(
      ErrorCode.Internal,
      `stewardd answered HTTP ${reply.status} without a CNI error`,
      reply.body.slice(0, 200),
    ),
    cniVersion,
  );
}

/**
 * A CNI error when the daemon speaks another protocol version: it refused this shim (code 108), or
 * it sent no version at all (a release before versions; its answer is not trusted, except a DEL's
 * 200: the teardown was done). STATUS answers 50 (the plugin is not available) with the same text.
 */
function versionSkew(command: string, reply: Reply, socket: string): CniError | undefined {
  const code = command === 'STATUS' ? ErrorCode.PluginNotAvailable : ErrorCode.VersionSkew;
  if (reply.protocol === undefined) {
    if (command === 'DEL' && reply.status === 200) return undefined;
    return new CniError(
      code,
      `version skew: this shim speaks protocol ${PROTOCOL_VERSION}, stewardd at ${socket} speaks protocol ${UNVERSIONED_PROTOCOL} (a release before protocol versions; it sent no ${PROTOCOL_HEADER} header); ${SKEW_ADVICE}`,
    );
  }
  if (reply.status === 200) return undefined;
  let err: CniError | undefined;
  try {
    err = CniError.fromJSON(JSON.parse(reply.body));
  } catch {
    return undefined;
  }
  if (err?.code !== ErrorCode.VersionSkew) return undefined;
  return new CniError(
    code,
    `${err.message} (this shim speaks protocol ${PROTOCOL_VERSION}; stewardd at ${socket} answered protocol ${reply.protocol})`,
  );
}
