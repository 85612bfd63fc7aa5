// Decoding the shim's request body (CniWireRequest, api.ts) into the validated CniRequestBody the
// daemon's engine works on. It belongs to the contract: the daemon's route and its spool ingest both
// decode with it, and the shim builds the very shape it checks.

import type { CniRequestBody, CniWireRequest } from './api.js';
import { parseCniEnv } from './cni/env.js';
import { CniError, ErrorCode } from './cni/errors.js';

/**
 * Deepest nesting of objects and arrays accepted in a request. Real netconfs nest less than ten
 * levels (prevResult and runtimeConfig included); the engine walks them recursively, and a
 * netconf nested 10,000 deep overflowed its stack (code 104, found by test/integration/fuzz.test.ts).
 */
export const MAX_NETCONF_DEPTH = 100;

/** Whether `value` nests deeper than `max` (iterative: no recursion on hostile input). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const c of Object.values(v as object)) if (c !== null && typeof c === 'object') stack.push([c, depth + 1]);
  }
  return false;
}

export function decodeWireRequest(body: unknown): CniRequestBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new CniError(ErrorCode.DecodeFailure, 'request body must be a JSON object');
  const b = body as Partial<Record<keyof CniWireRequest, unknown>>;
  if (typeof b.env !== 'object' || b.env === null || Array.isArray(b.env)) {
    throw new CniError(ErrorCode.InvalidEnv, 'request has no "env" object of CNI_* variables');
  }
  // No prototype: an env key named "__proto__" is a plain (unknown, ignored) variable.
  const rawEnv: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(b.env as Record<string, unknown>)) {
    if (typeof v !== 'string') throw new CniError(ErrorCode.InvalidEnv, `env.${k.slice(0, 64)} must be a string`);
    rawEnv[k] = v;
  }
  if (typeof b.config !== 'object' || b.config === null || Array.isArray(b.config)) {
    throw new CniError(ErrorCode.InvalidConfig, 'request has no netconf object in "config"');
  }
  let config = b.config as Record<string, unknown>;
  if (nestsDeeperThan(config, MAX_NETCONF_DEPTH)) {
    if (rawEnv.CNI_COMMAND !== 'DEL')
      throw new CniError(
        ErrorCode.InvalidConfig,
        `netconf nests objects and arrays deeper than ${MAX_NETCONF_DEPTH} levels`,
      );
    config = shallowPart(config);
  }
  return { env: parseCniEnv(rawEnv), config };
}

/**
 * A DEL's netconf nesting too deep, cut to its top-level keys that do not. A DEL is never refused for
 * its netconf: refused, it pins the sandbox; spooled (the shim reads 10,000 levels), its file went to
 * rejected/ and its attachment leaked, lease and port mappings (hostile probe, 3 Dec). A known
 * attachment's DEL needs only the "name" (its stored config does the rest); a pass-through runs what
 * is left (nothing, when "delegates" was the deep key). fromEntries: a "__proto__" key stays a key.
 */
function shallowPart(config: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).filter(([, v]) => !nestsDeeperThan(v, MAX_NETCONF_DEPTH - 1)));
}
