// The admission hints of a POST /v1/cni request (HINT_HEADERS in the shared contract): read from
// the raw headers before the body is parsed, and checked against the body once it is. The body is
// the contract; a request whose headers disagree with it is refused with code 4, never served.

import type { IncomingHttpHeaders } from 'node:http';
import { CniError, ErrorCode, HINT_HEADERS, STATUS_KEY_HEADER, type CniRequestBody } from '@cni-steward/shared';

export interface Hints {
  command: string;
  containerId: string | undefined;
  ifname: string | undefined;
  network: string | undefined;
  /** A STATUS's network as the alive beacon names it (STATUS_KEY_HEADER; not checked against the body). */
  statusKey?: string | undefined;
}

function one(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) throw new CniError(ErrorCode.InvalidEnv, `request header ${name} is given ${v.length} times`);
  try {
    return decodeURIComponent(v);
  } catch {
    throw new CniError(ErrorCode.InvalidEnv, `request header ${name} is not percent-encoded text`);
  }
}

/** The hints a request carries; undefined for a request without them (an older shim, curl). */
export function readHints(headers: IncomingHttpHeaders): Hints | undefined {
  const command = one(headers, HINT_HEADERS.command);
  if (command === undefined) return undefined;
  return {
    command,
    containerId: one(headers, HINT_HEADERS.containerId),
    ifname: one(headers, HINT_HEADERS.ifname),
    network: one(headers, HINT_HEADERS.network),
    statusKey: one(headers, STATUS_KEY_HEADER),
  };
}

/** Throws code 4 when a hint given disagrees with the decoded body. */
export function checkHints(h: Hints, req: CniRequestBody): void {
  const name = typeof req.config.name === 'string' ? req.config.name : undefined;
  const pairs: Array<[string, string | undefined, string | undefined]> = [
    [HINT_HEADERS.command, h.command, req.env.command],
    [HINT_HEADERS.containerId, h.containerId, req.env.containerId],
    [HINT_HEADERS.ifname, h.ifname, req.env.ifname],
    [HINT_HEADERS.network, h.network, name],
  ];
  for (const [header, hint, actual] of pairs) {
    if (hint === undefined || hint === actual) continue;
    throw new CniError(
      ErrorCode.InvalidEnv,
      `request header ${header} (${JSON.stringify(hint.slice(0, 128))}) disagrees with the body (${JSON.stringify((actual ?? '(none)').slice(0, 128))}); the body is the contract, the request is refused`,
    );
  }
}
