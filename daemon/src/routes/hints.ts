// The admission hints of a POST /v1/cni request (HINT_HEADERS in the shared contract): read from
// the raw headers before the body is parsed, and checked against the body once it is. The body is
// the contract; a request whose headers disagree with it is refused with code 4, never served.

import { CniError, ErrorCode, HINT_HEADERS, STATUS_KEY_HEADER, type CniRequestBody } from '@cni-steward/shared';

export interface Hints {
  command: string;
  containerId: string | undefined;
  ifname: string | undefined;
  network: string | undefined;
  /** A STATUS's network as the alive beacon names it (STATUS_KEY_HEADER; not checked against the body). */
  statusKey?: string | undefined;
}

/** Hint headers, each as every value it was given (hintValues) or as one. */
export type DistinctHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

const HINT_NAMES: ReadonlySet<string> = new Set([...Object.values(HINT_HEADERS), STATUS_KEY_HEADER]);

/**
 * The hint headers of a request's raw headers (name, value, name, value, …), each with every value
 * it was given: node joins a repeated x- header's values with ", " in `headers`, and a hint given
 * twice is refused as such, not as a hint that disagrees with the body. (Not `headersDistinct`: in
 * Node before 24.14.1 it threw on a header named "constructor", having cached half of itself.)
 */
export function hintValues(rawHeaders: readonly string[]): DistinctHeaders {
  const found = new Map<string, string[]>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (!HINT_NAMES.has(name)) continue;
    const values = found.get(name) ?? [];
    values.push(rawHeaders[i + 1] as string);
    found.set(name, values);
  }
  return Object.fromEntries(found);
}

function one(headers: DistinctHeaders, name: string): string | undefined {
  const given = headers[name];
  if (given === undefined) return undefined;
  const v = typeof given === 'string' ? [given] : given;
  if (v.length !== 1) throw new CniError(ErrorCode.InvalidEnv, `request header ${name} is given ${v.length} times`);
  try {
    return decodeURIComponent(v[0] as string);
  } catch {
    throw new CniError(ErrorCode.InvalidEnv, `request header ${name} is not percent-encoded text`);
  }
}

/** The hints a request carries (hintValues); undefined for a request without them (an older shim, curl). */
export function readHints(headers: DistinctHeaders): Hints | undefined {
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
