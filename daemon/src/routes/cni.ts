// POST /v1/cni: the shim's one request. Validates the envelope with the shared CNI validators,
// hands it to the engine, and answers 200 with the text to print or a CNI error.

import type { FastifyInstance } from 'fastify';
import { CNI_ROUTE, CniError, ErrorCode, parseCniEnv, podFromCniArgs, podLogFields, type CniRequestBody } from '@cni-steward/shared';
import type { AppDeps } from '../server.js';

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
  if (typeof body !== 'object' || body === null) throw new CniError(ErrorCode.DecodeFailure, 'request body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.env !== 'object' || b.env === null || Array.isArray(b.env)) {
    throw new CniError(ErrorCode.InvalidEnv, 'request has no "env" object of CNI_* variables');
  }
  const rawEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(b.env as Record<string, unknown>)) {
    if (typeof v !== 'string') throw new CniError(ErrorCode.InvalidEnv, `env.${k} must be a string`);
    rawEnv[k] = v;
  }
  if (typeof b.config !== 'object' || b.config === null || Array.isArray(b.config)) {
    throw new CniError(ErrorCode.InvalidConfig, 'request has no netconf object in "config"');
  }
  if (nestsDeeperThan(b.config, MAX_NETCONF_DEPTH)) {
    throw new CniError(ErrorCode.InvalidConfig, `netconf nests objects and arrays deeper than ${MAX_NETCONF_DEPTH} levels`);
  }
  return { env: parseCniEnv(rawEnv), config: b.config as Record<string, unknown> };
}

export async function cniRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.post(CNI_ROUTE, async (request, reply) => {
    const req = decodeWireRequest(request.body);
    // While shutting down (the SIGTERM drain can take a while) DELs are still served: the shim
    // spools only when the daemon is unreachable, so a refused DEL would simply fail.
    if (req.env.command !== 'DEL' && !deps.isServing()) {
      throw new CniError(ErrorCode.TryAgainLater, 'stewardd is shutting down; try again later');
    }
    const command = req.env.command;
    const stop = deps.metrics.requestSeconds.startTimer({ command });
    try {
      const text = await deps.engine.handle(req);
      deps.metrics.requests.inc({ command, code: '0' });
      return reply.code(200).type('application/json').send(text);
    } catch (e) {
      const err = CniError.from(e);
      deps.metrics.requests.inc({ command, code: String(err.code) });
      request.log.warn({ containerId: req.env.containerId, ...podLogFields(podFromCniArgs(req.env.args)), command, code: err.code, err: err.message }, 'CNI request failed');
      throw err;
    } finally {
      stop();
    }
  });
}
