// Read-only views for operators (curl --unix-socket), plus the manual retry trigger.

import type { FastifyInstance } from 'fastify';
import type { Attachment, AttachmentState, Step } from '../store/types.js';
import type { RetryReport } from '../engine/scheduler.js';
import type { AppDeps } from './deps.js';
import { capNullable } from './echo.js';
import { QUERY_KEYS } from './query-keys.js';

const ATTACHMENT_STATES: readonly AttachmentState[] = ['adding', 'added', 'deleting', 'deleted'];

/** The pod fields every view of an attachment carries (null when the runtime named no pod). */
function podView(a: Attachment | undefined) {
  // Echoed capped like error texts: the runtime's CNI_ARGS can carry any length (Kubernetes names are <= 253).
  return {
    podNamespace: capNullable(a?.podNamespace ?? null, 256),
    podName: capNullable(a?.podName ?? null, 256),
    podUid: capNullable(a?.podUid ?? null, 256),
  };
}

/** `?pod=NAMESPACE/NAME`, or undefined when it is not of that form. */
function parsePod(raw: string): { namespace: string; name: string } | undefined {
  const slash = raw.indexOf('/');
  if (slash <= 0 || slash === raw.length - 1 || raw.indexOf('/', slash + 1) !== -1) return undefined;
  return { namespace: raw.slice(0, slash), name: raw.slice(slash + 1) };
}

function teardownView(s: Step, a: Attachment | undefined) {
  return {
    step: s.id,
    attachment: s.attachmentId,
    containerId: a?.containerId,
    ...podView(a),
    delegate: s.delegateName,
    ifname: s.ifname,
    plugin: s.pluginType,
    state: s.state,
    attempts: s.attempts,
    lastError: capNullable(s.error),
    nextAttemptAt: s.nextAttemptAt === null ? null : new Date(s.nextAttemptAt).toISOString(),
    failingSince: s.teardownAt === null ? null : new Date(s.teardownAt).toISOString(),
  };
}

export async function statusRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  probeRoutes(app, deps);
  app.get('/v1/status', { config: { query: QUERY_KEYS.status } }, async () => statusView(deps));
  attachmentRoutes(app, deps);
  teardownRoutes(app, deps);
  app.get('/metrics', async (_req, reply) => {
    const text = await deps.metrics.registry.metrics();
    return reply.type(deps.metrics.registry.contentType).send(text);
  });
}

/** /healthz (liveness) and /readyz (readiness), as the kubelet's probes ask them. */
function probeRoutes(app: FastifyInstance, deps: AppDeps): void {
  // Liveness: the journal can be written (store.writeProbe) and plugins can be started (a spawner
  // answers, or a new one does). 503 with the reasons otherwise.
  app.get('/healthz', { config: { query: QUERY_KEYS.healthz } }, async (_req, reply) => {
    const problems = await deps.health();
    if (problems.length > 0) return reply.code(503).send({ ok: false, problems });
    return { ok: true };
  });

  // Draining the spool does not make the daemon unready: it serves ADDs meanwhile (only a container
  // with spooled DELs pending waits for them), so /readyz stays 200 and says what is going on.
  const draining = () => {
    const n = deps.spoolDraining?.() ?? 0;
    return n > 0 ? { spool: { draining: n, message: `draining ${n} spooled DELs` } } : {};
  };

  app.get('/readyz', { config: { query: QUERY_KEYS.readyz } }, async (_req, reply) => {
    if (!deps.isReady()) {
      const problems = deps.readyProblems?.() ?? [];
      return reply.code(503).send({ ready: false, ...(problems.length > 0 ? { problems } : {}), ...draining() });
    }
    return { ready: true, ...draining() };
  });
}

/** GET /v1/status: counts by state, the retry queue, why not ready, the last errors. */
function statusView(deps: AppDeps) {
  const store = deps.journal;
  const counts = store.counts();
  const oldest = store.oldestPendingTeardownAt();
  const now = Date.now();
  return {
    version: deps.version,
    uptimeSeconds: Math.round((now - deps.startedAt) / 1000),
    ready: deps.isReady(),
    // Why not ready (as /readyz says it), so `stewardd status` names the reason too.
    ...(() => {
      const problems = deps.isReady() ? [] : (deps.readyProblems?.() ?? []);
      return problems.length > 0 ? { problems } : {};
    })(),
    spool: { draining: deps.spoolDraining?.() ?? 0 },
    ...(() => {
      const n = deps.spoolDraining?.() ?? 0;
      return n > 0 ? { message: `draining ${n} spooled DELs` } : {};
    })(),
    warnings: deps.warnings(),
    attachments: counts.attachments,
    steps: counts.steps,
    teardownQueue: {
      depth: store.countPendingTeardowns(),
      oldestPendingSeconds: oldest === undefined ? null : Math.round((now - oldest) / 1000),
      nextAttemptAt: (() => {
        const t = store.nextTeardownDueAt();
        return t === undefined ? null : new Date(t).toISOString();
      })(),
    },
    executions: deps.executions(),
    ...(deps.admission ? { admission: deps.admission() } : {}),
    ...(() => {
      const c = deps.conflist?.();
      return c ? { conflist: c } : {};
    })(),
    ...(() => {
      const n = deps.statusNotReady?.last();
      return n ? { statusNotReady: { ...n, at: new Date(n.at).toISOString() } } : {};
    })(),
    lastErrors: [...store.pendingTeardownSteps(10), ...store.abandonedSteps(10)].map((s) =>
      teardownView(s, store.getAttachment(s.attachmentId)),
    ),
  };
}

/** GET /v1/attachments?containerId=&state=&pod=&limit=. */
function attachmentRoutes(app: FastifyInstance, deps: AppDeps): void {
  const store = deps.journal;
  app.get<{ Querystring: { containerId?: string; state?: string; pod?: string; limit?: string } }>(
    '/v1/attachments',
    { config: { query: QUERY_KEYS.attachments } },
    async (req, reply) => {
      const { containerId, state, limit } = req.query;
      const pod = req.query.pod === undefined ? undefined : parsePod(req.query.pod);
      if (req.query.pod !== undefined && pod === undefined)
        return reply.code(400).send({ error: 'pod must be NAMESPACE/NAME' });
      if (state !== undefined && !(ATTACHMENT_STATES as readonly string[]).includes(state)) {
        return reply.code(400).send({ error: `state must be one of ${ATTACHMENT_STATES.join(', ')}` });
      }
      // Digits only: Number() would also take "0x10", "1e3", " 5" and "".
      const n = limit === undefined ? 1000 : /^[0-9]{1,6}$/.test(limit) ? Number(limit) : NaN;
      if (!Number.isInteger(n) || n < 1 || n > 100_000)
        return reply.code(400).send({ error: 'limit must be an integer from 1 to 100000' });
      const rows = store.listAttachments({ containerId, state: state as AttachmentState | undefined, pod, limit: n });
      // The answer is written a chunk at a time, the loop let go in between: in one turn, 100,000
      // rows held every CNI request, probe and STATUS for seconds (hostile review). A row of a later
      // chunk is read again with its steps in its own turn, so each row and its steps agree (one
      // pruned meanwhile is left out); a client gone meanwhile ends the work.
      const parts: string[] = [];
      for (let i = 0; i < rows.length && !req.raw.destroyed; i += ATTACHMENTS_PER_TURN) {
        const chunk = rows.slice(i, i + ATTACHMENTS_PER_TURN);
        const now = i === 0 ? chunk : await nextTurn(() => chunk.map((a) => store.getAttachment(a.id)));
        // Read again, a row may have moved on to another state than the one asked for: left out.
        const views = now.flatMap((a) =>
          a && (state === undefined || a.state === state) ? [attachmentView(a, store.stepsOf(a.id))] : [],
        );
        if (views.length > 0) parts.push(JSON.stringify(views).slice(1, -1));
      }
      return reply.type('application/json; charset=utf-8').send(`[${parts.join(',')}]`);
    },
  );
}

/** `fn`, in a later turn of the event loop. */
const nextTurn = <T>(fn: () => T) => new Promise<T>((r) => setImmediate(() => r(fn())));

/** How many attachments /v1/attachments reads and writes in one turn of the event loop (~10 ms). */
const ATTACHMENTS_PER_TURN = 250;

/** One attachment as /v1/attachments shows it, with its steps. */
function attachmentView(a: Attachment, steps: Step[]) {
  return {
    id: a.id,
    containerId: a.containerId,
    ...podView(a),
    network: a.network,
    ifname: a.ifname,
    netns: a.netns,
    state: a.state,
    cniVersion: a.cniVersion,
    bootId: a.bootId,
    error: capNullable(a.error),
    createdAt: new Date(a.createdAt).toISOString(),
    updatedAt: new Date(a.updatedAt).toISOString(),
    steps: steps.map((s) => ({
      seq: s.seq,
      delegate: s.delegateName,
      ifname: s.ifname,
      plugin: s.pluginType,
      state: s.state,
      attempts: s.attempts,
      error: capNullable(s.error),
    })),
  };
}

/** How many abandoned steps GET /v1/teardowns lists, newest first. */
const ABANDONED_LISTED = 1000;

/** GET /v1/teardowns and POST /v1/teardowns/retry. */
function teardownRoutes(app: FastifyInstance, deps: AppDeps): void {
  const store = deps.journal;
  const attachmentOf = (id: number) => store.getAttachment(id);
  // The newest ABANDONED_LISTED abandoned steps: /v1/status's steps.abandoned counts them all.
  app.get('/v1/teardowns', { config: { query: QUERY_KEYS.teardowns } }, async () => {
    return {
      pending: store.pendingTeardownSteps().map((s) => teardownView(s, attachmentOf(s.attachmentId))),
      abandoned: store.abandonedSteps(ABANDONED_LISTED).map((s) => teardownView(s, attachmentOf(s.attachmentId))),
    };
  });

  // One retry pass at a time: a retry asked while one runs gets that pass's answer. Each used to run
  // every pending step again: 20 retries at once spent 20 of a failing step's attempts (the budget
  // of hours of backoff) within a second, and abandoned it (hostile run, 1 Dec). A retry that re-armed
  // abandoned steps waits for the pass under way, then joins or starts one that sees them.
  let pass: Promise<RetryReport> | undefined;
  const retryPass = async (afterCurrent: boolean): Promise<RetryReport> => {
    if (afterCurrent) await pass?.catch(() => undefined);
    return (pass ??= deps.scheduler.retryNow().finally(() => (pass = undefined)));
  };

  // ?abandoned=true first re-arms the abandoned steps (stewardd retry --abandoned): the operator
  // fixed the plugin, or released by hand what it held, and wants the record cleared.
  app.post<{ Querystring: { abandoned?: string } }>(
    '/v1/teardowns/retry',
    { config: { query: QUERY_KEYS.retry } },
    async (req, reply) => {
      const { abandoned } = req.query;
      if (abandoned !== undefined && !['true', 'false', '1', '0'].includes(abandoned))
        return reply.code(400).send({ error: 'abandoned must be true or false (or 1 or 0)' });
      const rearm = abandoned === 'true' || abandoned === '1' ? await deps.engine.rearmAbandoned() : undefined;
      const result = await retryPass(rearm !== undefined);
      return { ...result, rearmed: rearm?.rearmed ?? 0, ...(rearm && { skippedNewer: rearm.skipped }) };
    },
  );
}
