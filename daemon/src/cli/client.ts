// The CLI's one request to the daemon's socket, with failures turned into sentences that name
// the socket and the cause (absent, permission, nobody listening, no answer in time) and the
// exit code a script can branch on. The request itself is lifecycle/socket-http.ts.

import { statSync } from 'node:fs';
import { printable } from '@cni-steward/shared';
import { socketRequest } from '../lifecycle/socket-http.js';

/** Exit codes of `stewardd status|attachments|teardowns|retry|audit` (README "Reading its state"). */
export const Exit = {
  Ok: 0,
  /** `status --check`: abandoned teardown steps exist. */
  Abandoned: 1,
  Usage: 2,
  /** The socket is absent, not accessible, not served, or the daemon did not answer in time. */
  Unreachable: 3,
  /** The daemon answered with an error status (e.g. a filter it rejects). */
  DaemonError: 4,
  /** `audit`: no container runtime answered, or its answer was not trusted: nothing was released on its word. */
  NoRuntime: 5,
  /** The answer could not be written to stdout (a full disk, a closed pipe). */
  OutputFailed: 6,
} as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

function isSocket(path: string): boolean {
  try {
    return statSync(path).isSocket();
  } catch {
    return true; // gone meanwhile: keep the connect error's own words
  }
}

function cause(socket: string, e: NodeJS.ErrnoException, timeoutMs: number): string {
  switch (e.code) {
    case 'ENOENT':
      return `the socket does not exist (is stewardd running? give its path with --socket)`;
    case 'EACCES':
    case 'EPERM':
      return 'permission denied (the socket and its directory are root-only: run as root)';
    case 'ECONNREFUSED':
      // Linux says ECONNREFUSED, not ENOTSOCK, for a path that is no socket at all.
      if (!isSocket(socket)) return `${socket} is not a socket`;
      return 'nothing is listening on it (stewardd stopped and left the socket file behind?)';
    case 'ENOTSOCK':
      return `${socket} is not a socket`;
    default:
      if (/no answer .* within/.test(e.message))
        return `the daemon did not answer within ${timeoutMs / 1000} s (busy or hung)`;
      return e.message;
  }
}

/** GET or POST on the socket; resolves with the parsed JSON body of a 2xx answer. */
/**
 * One request; its 2xx JSON answer must pass `expected` (the shape this command reads), or it is
 * not stewardd's (another program on the socket, another version): exit 4, not a crash.
 */
export async function call(
  socket: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs: number,
  expected: (json: unknown) => boolean,
): Promise<{ body: string; json: unknown }> {
  let r;
  try {
    r = await socketRequest(socket, method, path, timeoutMs);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    // Something answered, but not in HTTP (llhttp's HPE_* codes): another program on the socket.
    if (err.code?.startsWith('HPE_'))
      throw new CliError(
        `the answer on ${socket} to ${method} ${path} is not what stewardd answers (another program on the socket, or another version of stewardd): not HTTP (${printable(err.message)})`,
        Exit.DaemonError,
      );
    throw new CliError(`cannot talk to stewardd on ${socket}: ${cause(socket, err, timeoutMs)}`, Exit.Unreachable);
  }
  let json: unknown;
  try {
    json = JSON.parse(r.body);
  } catch {
    json = undefined;
  }
  if (r.status < 200 || r.status > 299) {
    const why = (json as { error?: unknown } | undefined)?.error;
    // Whatever answered may be another program: its words reach a terminal only made printable.
    throw new CliError(
      `stewardd on ${socket} answered ${method} ${path} with ${r.status}: ${printable(typeof why === 'string' ? why : r.body.trim())}`,
      Exit.DaemonError,
    );
  }
  if (json === undefined)
    throw new CliError(
      `stewardd on ${socket} answered ${method} ${path} with a body that is not JSON`,
      Exit.DaemonError,
    );
  if (!expected(json))
    throw new CliError(
      `the answer on ${socket} to ${method} ${path} is not what stewardd answers (another program on the socket, or another version of stewardd)`,
      Exit.DaemonError,
    );
  return { body: r.body, json };
}
