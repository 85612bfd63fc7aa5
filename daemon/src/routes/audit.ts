// The audit over the socket: GET /v1/audit reports what nobody owns on the node; POST
// /v1/audit?release=true&grace=DUR&cap=N also releases the orphans past the grace, at most N of them
// (audit/run.ts). Both take runtimeEndpoint=unix:///PATH: that pass asks this CRI runtime instead.

import type { FastifyInstance } from 'fastify';
import { DEFAULT_GRACE_MS, MAX_RELEASE_CAP, parseCap, parseDuration, parseRuntimeEndpoint } from '../audit/options.js';
import type { AuditOptions, AuditReport } from '../audit/run.js';

export interface AuditRouteDeps {
  audit: (opts: AuditOptions) => Promise<AuditReport>;
}

export async function auditRoutes(app: FastifyInstance, deps: AuditRouteDeps): Promise<void> {
  app.get('/v1/audit', async (req, reply) => {
    const endpoint = runtimeEndpointOf(req.query as { runtimeEndpoint?: unknown });
    if (endpoint === null) return reply.code(400).send({ error: RUNTIME_ENDPOINT_ERROR });
    return deps.audit({
      release: false,
      graceMs: DEFAULT_GRACE_MS,
      ...(endpoint ? { runtimeEndpoint: endpoint } : {}),
    });
  });

  app.post('/v1/audit', async (req, reply) => {
    const q = req.query as { release?: string; grace?: string; cap?: string; runtimeEndpoint?: unknown };
    const endpoint = runtimeEndpointOf(q);
    if (endpoint === null) return reply.code(400).send({ error: RUNTIME_ENDPOINT_ERROR });
    if (q.release !== undefined && q.release !== 'true' && q.release !== 'false')
      return reply.code(400).send({ error: 'release must be true or false' });
    let graceMs = DEFAULT_GRACE_MS;
    if (q.grace !== undefined) {
      const g = parseDuration(q.grace);
      if (g === undefined) return reply.code(400).send({ error: 'grace must be a duration such as 90s, 15m or 2h' });
      graceMs = g;
    }
    let cap: number | undefined;
    if (q.cap !== undefined) {
      cap = parseCap(q.cap);
      if (cap === undefined)
        return reply.code(400).send({ error: `cap must be a whole number from 0 to ${MAX_RELEASE_CAP}` });
    }
    return deps.audit({
      release: q.release === 'true',
      graceMs,
      ...(cap !== undefined ? { cap } : {}),
      ...(endpoint ? { runtimeEndpoint: endpoint } : {}),
    });
  });
}

const RUNTIME_ENDPOINT_ERROR = 'runtimeEndpoint must be unix:///ABSOLUTE/PATH';

/** ?runtimeEndpoint=: the socket path, undefined when absent, null when not a runtime endpoint. */
function runtimeEndpointOf(q: { runtimeEndpoint?: unknown }): string | undefined | null {
  if (q.runtimeEndpoint === undefined) return undefined;
  return typeof q.runtimeEndpoint === 'string' ? (parseRuntimeEndpoint(q.runtimeEndpoint) ?? null) : null;
}
