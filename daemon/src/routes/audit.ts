// The audit over the socket: GET /v1/audit reports what nobody owns on the node; POST
// /v1/audit?release=true&grace=DUR&cap=N&capFraction=F also releases the orphans past the grace, at
// most N of them (audit/run.ts). Both take runtimeEndpoint=unix:///PATH (that pass asks this CRI
// runtime instead) and deadline=DUR (no release starts later than DUR after the request came).

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  DEFAULT_GRACE_MS,
  MAX_RELEASE_CAP,
  parseCap,
  parseCapFraction,
  parseDeadline,
  parseDuration,
  parseRuntimeEndpoint,
} from '../audit/options.js';
import { AuditCallerGone, AuditQueueFull } from '../audit/auditor.js';
import type { AuditOptions, AuditReport } from '../audit/run.js';
import { clientGone } from './client-gone.js';
import { QUERY_KEYS } from './query-keys.js';

export interface AuditRouteDeps {
  /** One pass; `callerGone` says whether the client has hung up (a pass still waiting then never runs). */
  audit: (opts: AuditOptions, callerGone?: () => boolean) => Promise<AuditReport>;
}

/** The pass, or 503 when too many already wait for their turn. */
async function pass(deps: AuditRouteDeps, opts: AuditOptions, req: FastifyRequest, reply: FastifyReply) {
  try {
    return await deps.audit(opts, () => clientGone(req.raw, reply.raw));
  } catch (e) {
    // Not errors of stewardd's: the queue is full, or the client left before its pass's turn (it
    // hears nothing; answered only so that fastify does not log it as an unexpected error).
    if (e instanceof AuditQueueFull || e instanceof AuditCallerGone) return reply.code(503).send({ error: e.message });
    throw e;
  }
}

export async function auditRoutes(app: FastifyInstance, deps: AuditRouteDeps): Promise<void> {
  // No HEAD: fastify would run the whole pass (and ask the runtime) to answer it with no body.
  app.get('/v1/audit', { exposeHeadRoute: false, config: { query: QUERY_KEYS.auditGet } }, async (req, reply) => {
    const q = req.query as { runtimeEndpoint?: unknown; deadline?: unknown };
    const endpoint = runtimeEndpointOf(q);
    if (endpoint === null) return reply.code(400).send({ error: RUNTIME_ENDPOINT_ERROR });
    const deadlineMs = deadlineOf(q);
    if (deadlineMs === null) return reply.code(400).send({ error: DEADLINE_ERROR });
    const opts: AuditOptions = {
      release: false,
      graceMs: DEFAULT_GRACE_MS,
      ...(endpoint ? { runtimeEndpoint: endpoint } : {}),
      ...(deadlineMs !== undefined ? { deadlineMs } : {}),
    };
    return pass(deps, opts, req, reply);
  });

  app.post('/v1/audit', { config: { query: QUERY_KEYS.auditPost } }, async (req, reply) => {
    const opts = releaseOptions(req.query as ReleaseQuery);
    if (typeof opts === 'string') return reply.code(400).send({ error: opts });
    return pass(deps, opts, req, reply);
  });
}

interface ReleaseQuery {
  release?: string;
  grace?: string;
  cap?: string;
  capFraction?: string;
  deadline?: unknown;
  runtimeEndpoint?: unknown;
}

/** POST /v1/audit's options, or what is wrong with its query. */
function releaseOptions(q: ReleaseQuery): AuditOptions | string {
  const endpoint = runtimeEndpointOf(q);
  if (endpoint === null) return RUNTIME_ENDPOINT_ERROR;
  const deadlineMs = deadlineOf(q);
  if (deadlineMs === null) return DEADLINE_ERROR;
  const capFraction = q.capFraction === undefined ? undefined : parseCapFraction(q.capFraction);
  if (q.capFraction !== undefined && capFraction === undefined)
    return 'capFraction must be a number above 0 and at most 1';
  if (q.release !== undefined && !['true', 'false', '1', '0'].includes(q.release))
    return 'release must be true or false (or 1 or 0)';
  const graceMs = q.grace === undefined ? DEFAULT_GRACE_MS : parseDuration(q.grace);
  if (graceMs === undefined) return 'grace must be a duration such as 90s, 15m or 2h';
  const cap = q.cap === undefined ? undefined : parseCap(q.cap);
  if (q.cap !== undefined && cap === undefined) return `cap must be a whole number from 0 to ${MAX_RELEASE_CAP}`;
  return {
    release: q.release === 'true' || q.release === '1',
    graceMs,
    ...(cap !== undefined ? { cap } : {}),
    ...(capFraction !== undefined ? { capFraction } : {}),
    ...(endpoint ? { runtimeEndpoint: endpoint } : {}),
    ...(deadlineMs !== undefined ? { deadlineMs } : {}),
  };
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
