// The audit over the socket: GET /v1/audit reports what nobody owns on the node; POST
// /v1/audit?release=true&grace=DUR&cap=N&capFraction=F also releases the orphans past the grace, at
// most N of them (audit/run.ts). Both take runtimeEndpoint=unix:///PATH (that pass asks this CRI
// runtime instead) and deadline=DUR (no release starts later than DUR after the request came).

import type { FastifyInstance } from 'fastify';
import {
  DEFAULT_GRACE_MS,
  MAX_RELEASE_CAP,
  parseCap,
  parseCapFraction,
  parseDeadline,
  parseDuration,
  parseRuntimeEndpoint,
} from '../audit/options.js';
import type { AuditOptions, AuditReport } from '../audit/run.js';

export interface AuditRouteDeps {
  audit: (opts: AuditOptions) => Promise<AuditReport>;
}

export async function auditRoutes(app: FastifyInstance, deps: AuditRouteDeps): Promise<void> {
  // No HEAD: fastify would run the whole pass (and ask the runtime) to answer it with no body.
  app.get('/v1/audit', { exposeHeadRoute: false }, async (req, reply) => {
    const q = req.query as { runtimeEndpoint?: unknown; deadline?: unknown };
    const endpoint = runtimeEndpointOf(q);
    if (endpoint === null) return reply.code(400).send({ error: RUNTIME_ENDPOINT_ERROR });
    const deadlineMs = deadlineOf(q);
    if (deadlineMs === null) return reply.code(400).send({ error: DEADLINE_ERROR });
    return deps.audit({
      release: false,
      graceMs: DEFAULT_GRACE_MS,
      ...(endpoint ? { runtimeEndpoint: endpoint } : {}),
      ...(deadlineMs !== undefined ? { deadlineMs } : {}),
    });
  });

  app.post('/v1/audit', async (req, reply) => {
    const q = req.query as {
      release?: string;
      grace?: string;
      cap?: string;
      capFraction?: string;
      deadline?: unknown;
      runtimeEndpoint?: unknown;
    };
    const endpoint = runtimeEndpointOf(q);
    if (endpoint === null) return reply.code(400).send({ error: RUNTIME_ENDPOINT_ERROR });
    const deadlineMs = deadlineOf(q);
    if (deadlineMs === null) return reply.code(400).send({ error: DEADLINE_ERROR });
    let capFraction: number | undefined;
    if (q.capFraction !== undefined) {
      capFraction = parseCapFraction(q.capFraction);
      if (capFraction === undefined)
        return reply.code(400).send({ error: 'capFraction must be a number above 0 and at most 1' });
    }
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
      ...(capFraction !== undefined ? { capFraction } : {}),
      ...(endpoint ? { runtimeEndpoint: endpoint } : {}),
      ...(deadlineMs !== undefined ? { deadlineMs } : {}),
    });
  });
}

const DEADLINE_ERROR = 'deadline must be a duration from 1s to 596h, such as 50s or 5m';

/** ?deadline=: ms, undefined when absent, null when not a deadline. */
function deadlineOf(q: { deadline?: unknown }): number | undefined | null {
  if (q.deadline === undefined) return undefined;
  return typeof q.deadline === 'string' ? (parseDeadline(q.deadline) ?? null) : null;
}

const RUNTIME_ENDPOINT_ERROR = 'runtimeEndpoint must be unix:///ABSOLUTE/PATH';

/** ?runtimeEndpoint=: the socket path, undefined when absent, null when not a runtime endpoint. */
function runtimeEndpointOf(q: { runtimeEndpoint?: unknown }): string | undefined | null {
  if (q.runtimeEndpoint === undefined) return undefined;
  return typeof q.runtimeEndpoint === 'string' ? (parseRuntimeEndpoint(q.runtimeEndpoint) ?? null) : null;
}
