// The routes of a daemon whose journal failed its start-up check (PRAGMA quick_check, or the
// database would not open as one): it serves, but is never ready, and says why everywhere.
// Nothing here reads or writes the journal. ADD, CHECK, STATUS and GC get code 11 (try again
// later) with the reason; a DEL is spooled into the daemon's own spool dir in the shim's format
// and answered with success, so a runtime's teardown is never lost: once the database is repaired
// or replaced, the next start ingests it like any spooled DEL. Operators' views answer 503.

import type { FastifyInstance, FastifyReply } from 'fastify';
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { CNI_ROUTE, CniError, ErrorCode, decodeWireRequest, spoolRequest } from '@cni-steward/shared';
import { assertExactCniTarget } from './cni-route.js';
import { checkHints, hintValues, readHints, type Hints } from './hints.js';
import { skewError } from './protocol.js';
import { QUERY_KEYS } from './query-keys.js';

/** Distinct DELs a degraded daemon spools before it answers 11 (a node has ~110 pods; this is a flood). */
export const MAX_SPOOLED_KEYS = 100_000;

/**
 * The healthy daemon's admission checks (routes/admission.ts), so a shim of another release is
 * refused here too rather than spooled in a format the next start may not read; in admission's
 * order: hints that cannot be read leave the request unhinted for the protocol check (108 first),
 * then are refused (4). The request's hints, if it has any.
 */
function admitDegraded(raw: IncomingMessage): Hints | undefined {
  let hints: Hints | undefined;
  let unreadable: unknown;
  try {
    hints = readHints(hintValues(raw.rawHeaders));
  } catch (e) {
    unreadable = e;
  }
  const skew = skewError(raw, hints !== undefined);
  if (skew) throw skew.error;
  if (unreadable !== undefined) throw unreadable;
  return hints;
}

export interface DegradedDeps {
  /** Why the journal is not usable (also in the log, /readyz and /v1/status). */
  reason: string;
  problems: readonly string[];
  spoolDir: string;
  version: string;
  startedAt: number;
}

export async function degradedRoutes(app: FastifyInstance, deps: DegradedDeps): Promise<void> {
  // Alive: the process answers and can spool DELs; restarting it would not repair the database.
  app.get('/healthz', { config: { query: QUERY_KEYS.healthz } }, async () => ({
    ok: true,
    ready: false,
    reason: deps.reason,
  }));

  app.get('/readyz', { config: { query: QUERY_KEYS.readyz } }, async (_req, reply) =>
    reply.code(503).send({ ready: false, reason: deps.reason }),
  );

  app.get('/v1/status', { config: { query: QUERY_KEYS.status } }, async () => ({
    version: deps.version,
    uptimeSeconds: Math.round((Date.now() - deps.startedAt) / 1000),
    ready: false,
    reason: deps.reason,
    journalProblems: deps.problems,
  }));

  // Each DEL spooled by this process, by container, network and interface: a runtime repeating a
  // DEL (a StopPodSandbox retry storm) wrote a file of up to 1 MiB per request, without bound.
  const spooled = new Set<string>();

  app.post(CNI_ROUTE, async (request, reply) => {
    assertExactCniTarget(request.raw.url ?? '');
    const hints = admitDegraded(request.raw);
    const req = decodeWireRequest(request.body);
    if (hints) checkHints(hints, req);
    if (req.env.command === 'STATUS') {
      throw new CniError(ErrorCode.PluginNotAvailable, `stewardd is degraded: ${deps.reason}`);
    }
    if (req.env.command !== 'DEL') {
      throw new CniError(ErrorCode.TryAgainLater, `stewardd cannot serve ${req.env.command}: ${deps.reason}`);
    }
    // Hashed: a name may be up to the body's 1 MiB, and 100,000 of them are kept.
    const key = createHash('sha256')
      .update(JSON.stringify([req.env.containerId, req.config.name, req.env.ifname]))
      .digest('base64');
    if (spooled.has(key)) return reply.code(200).type('application/json').send('');
    if (spooled.size >= MAX_SPOOLED_KEYS)
      throw new CniError(
        ErrorCode.TryAgainLater,
        `stewardd cannot record this DEL (${deps.reason}) and has spooled ${MAX_SPOOLED_KEYS} already`,
      );
    try {
      const file = spoolRequest(deps.spoolDir, req.env.containerId, JSON.stringify(request.body));
      spooled.add(key);
      request.log.warn({ containerId: req.env.containerId, file }, 'DEL spooled: the journal is not usable');
    } catch (e) {
      throw new CniError(
        ErrorCode.TryAgainLater,
        `stewardd cannot record this DEL (${deps.reason}) and could not spool it: ${(e as Error).message}`,
      );
    }
    return reply.code(200).type('application/json').send('');
  });

  refusedViews(app, deps.reason);
}

/** The operator's views of the journal, refused with the reason; each takes the query its healthy route takes. */
function refusedViews(app: FastifyInstance, reason: string): void {
  const refuse = async (_req: unknown, reply: FastifyReply) => reply.code(503).send({ error: reason });
  app.get('/v1/attachments', { config: { query: QUERY_KEYS.attachments } }, refuse);
  app.get('/v1/teardowns', { config: { query: QUERY_KEYS.teardowns } }, refuse);
  app.get('/metrics', refuse);
  app.post('/v1/teardowns/retry', { config: { query: QUERY_KEYS.retry } }, refuse);
  // The audit reads the journal's attachments: refused with the reason, not a 404 as if unknown.
  app.get('/v1/audit', { exposeHeadRoute: false, config: { query: QUERY_KEYS.auditGet } }, refuse);
  app.post('/v1/audit', { config: { query: QUERY_KEYS.auditPost } }, refuse);
}
