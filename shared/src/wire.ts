// Decoding the shim's request body (CniWireRequest, api.ts) into the validated CniRequestBody the
// daemon's engine works on. It belongs to the contract: the daemon's route and its spool ingest both
// decode with it, and the shim builds the very shape it checks.

import type { CniRequestBody, CniWireRequest } from './api.js';
import { parseCniEnv } from './cni/env.js';
import { CniError, ErrorCode } from './cni/errors.js';

export function decodeWireRequest(body: unknown): CniRequestBody {
  if (typeof body !== 'object' || body === null) throw new CniError(ErrorCode.DecodeFailure, 'request body must be a JSON object');
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
  return { env: parseCniEnv(rawEnv), config: b.config as Record<string, unknown> };
}
