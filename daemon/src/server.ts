// One concern: the HTTP app around the routes (its hooks, body parsing, the one error handler).
//
// The fastify app: explicit routes, the one error handler and the one CNI-code -> HTTP table.
// It only builds the app; listening, signals and shutdown belong to main.ts. The daemon's app
// runs on an HTTP server whose request listener is the admission path (routes/admission.ts).

export { httpStatusFor } from './routes/http-status.js';

/** Request body limit: a netconf at its bound plus room for the envelope. */
const BODY_LIMIT = MAX_REQUEST_BYTES;

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyServerFactory,
  type RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';
import {
  CNI_ROUTE,
  CniError,
  ErrorCode,
  MAX_REQUEST_BYTES,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
} from '@cni-steward/shared';
import { Admission, withBodyDeadline } from './routes/admission.js';
import { cniRoutes, serveCni } from './routes/cni.js';
import { cniErrorAnswer, writeJsonAnswer } from './routes/http-status.js';
import { degradedRoutes, type DegradedDeps } from './routes/degraded.js';
import type { AppDeps } from './routes/deps.js';
import { capText } from './routes/echo.js';
import { statusRoutes } from './routes/status.js';
import { auditRoutes } from './routes/audit.js';
import { parseWireJson } from './faithful-json.js';

/** The methods any route here is served under, for a 405's Allow. */
const ROUTE_METHODS = ['GET', 'HEAD', 'POST'] as const;

/**
 * A connection with no request in flight that stays silent this long is closed. One that never
 * sends a byte has no request for Node to time, and each holds a descriptor: enough of them (a
 * leaky client) reached the connection cap and the shim's ADD was refused (hostile review, 30 Nov).
 * A request in flight (an ADD waiting for its plugins, up to minutes) keeps its connection.
 */
export const IDLE_CONNECTION_MS = 10_000;

/**
 * Requests one connection may have in flight at once (received, their answers not yet written out).
 * Without a bound node:http read on until a client's unread answers backed up: about 11,000
 * pipelined GETs and 46 MB of stewardd's memory held per connection for as long as it stayed open
 * (measured 1 Dec), so a few such clients could take gigabytes. No client of this socket pipelines
 * (the shim sends one request per connection): one past this is closed. Node still hands over the
 * requests it had already read (at most one read, 64 KiB of them), then reads nothing more.
 */
export const MAX_IN_FLIGHT_PER_CONNECTION = 64;

/**
 * A request's headers must all have arrived this long after its first byte. Node's default (60 s,
 * checked every 30 s) let a client sending a header byte every 2 s hold its connection 68-75 s, where
 * a silent one is closed at IDLE_CONNECTION_MS and a slow body at 5 s (hostile run, 1 Dec).
 */
export const HEADERS_TIMEOUT_MS = 10_000;
/** How often Node enforces HEADERS_TIMEOUT_MS: such a connection closes 10-11 s after its first byte. */
const CONNECTION_CHECK_MS = 1000;

/**
 * The socket's HTTP server: node:http with the header deadline above. Node's own answers to an HTTP/1.1
 * request without Host (400, RFC 9112 3.2) and to an Expect other than 100-continue (417) are bare,
 * without a body or the protocol header; these say what they refused, before admission (the shim's
 * hinted requests never reach fastify's hooks).
 */
function httpServer(listener: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer(
    { connectionsCheckingInterval: CONNECTION_CHECK_MS, requireHostHeader: false },
    (req, res) => {
      if (req.httpVersion === '1.1' && req.headers.host === undefined)
        return refuseEarly(req, res, 400, 'an HTTP/1.1 request names its Host: send "Host: localhost"');
      listener(req, res);
    },
  );
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) =>
    refuseEarly(
      req,
      res,
      417,
      `Expect "${capText(String(req.headers.expect), 64)}" cannot be met: only 100-continue is`,
    ),
  );
  return server;
}

/** An answer before any route: CNI's error object (code 6) on the CNI route, { error } elsewhere; then close. */
function refuseEarly(req: IncomingMessage, res: ServerResponse, status: number, message: string): void {
  const onCniRoute = (req.url ?? '').split('?')[0] === CNI_ROUTE;
  const json = onCniRoute
    ? cniErrorAnswer(new CniError(ErrorCode.DecodeFailure, message), undefined).json
    : { error: message };
  // Stamped as admission stamps a raw answer (routes/protocol.ts admitProtocol), then written as it writes one.
  res.setHeader(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
  res.setHeader('connection', 'close');
  writeJsonAnswer(res, status, JSON.stringify(json));
}

// Routes say which query parameters they take (config.query); one that does not say takes any.
declare module 'fastify' {
  interface FastifyContextConfig {
    query?: readonly string[];
  }
}

/**
 * A netconf's numbers reach the plugins as written (faithful-json.ts), from curl as from the shim's
 * path (routes/raw-cni.ts). A body the default parser refuses (empty, not JSON) it still refuses,
 * with its own errors; a leading byte-order mark is skipped, as it skips one. JSON is the only type.
 */
function keepNumbersAsWritten(app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, Logger>): void {
  const fallback = app.getDefaultJsonParser('ignore', 'ignore');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    try {
      if (text.length > 0) return done(null, parseWireJson(text));
    } catch {
      // fallback answers it
    }
    fallback(request, text, done);
  });
  // Fastify's own text/plain parser would hand a route a string: every body here is JSON, and any
  // other type is 415 (a hostile review found text/plain served).
  app.removeContentTypeParser('text/plain');
}

/**
 * Every answer's protocol header, and what a request must be before a route sees it: no fragment,
 * no coded body, known single-valued queries.
 */
function requestChecks(app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, Logger>): void {
  // Every answer names the daemon's protocol version (routes/protocol.ts); the shim refuses one without.
  // A request target holds no fragment (RFC 9112 3.2; a client keeps it to itself): the router read
  // "/v1/attachments#limit=1" as a query, and listed one row.
  app.addHook('onRequest', async (request, reply) => {
    reply.header(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
    if (request.raw.url?.includes('#'))
      return reply
        .code(400)
        .type('application/json')
        .send({ error: `a request target holds no fragment ("#"; write it as %23): ${capText(request.raw.url, 256)}` });
    // A coded body (gzip, br) is not decoded here: read as it is, a gzip body was "not valid JSON"
    // (400) and a "br" one of plain JSON was taken as if uncoded. RFC 9110 15.5.16: 415, saying which.
    const coding = request.headers['content-encoding'];
    const body =
      (request.headers['content-length'] ?? '0') !== '0' || request.headers['transfer-encoding'] !== undefined;
    if (body && coding !== undefined && !isIdentity(coding) && request.routeOptions.url !== CNI_ROUTE)
      return reply
        .code(415)
        .header('accept-encoding', 'identity')
        .type('application/json')
        .send({ error: `a body with Content-Encoding "${capText(coding, 64)}" is not taken: send it unencoded` });
  });

  // Every query parameter is single-valued: ?containerId=a&containerId=b is a client error, said so;
  // and one the route does not take is too (?container= for ?containerId= would list every row).
  app.addHook('preValidation', async (request, reply) => {
    const q = request.query as Record<string, unknown> | undefined;
    if (!q || typeof q !== 'object') return;
    const takes = request.routeOptions.config.query;
    for (const [k, v] of Object.entries(q)) {
      const error = Array.isArray(v)
        ? `query parameter "${capText(k, 64)}" is given ${v.length} times; give it at most once`
        : takes !== undefined && !takes.includes(k)
          ? `unknown query parameter "${capText(k, 64)}": ${request.routeOptions.url ?? ''} takes ${takes.length > 0 ? takes.join(', ') : 'none'}`
          : undefined;
      if (error !== undefined) return reply.code(400).type('application/json').send({ error });
    }
  });
}

/**
 * Content-Encoding is a list (RFC 9110 8.4): an empty one, or one of "identity" alone ("identity, identity",
 * or two such headers, which Node joins with ", "), names no coding, and the body is as sent.
 */
function isIdentity(coding: string): boolean {
  return coding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .every((c) => c === '' || c === 'identity');
}

/** The app with what every variant shares: limits, JSON parsing, query hygiene, the error handler. */
function baseApp(log: Logger, serverFactory?: FastifyServerFactory) {
  const app = Fastify({
    ...(serverFactory ? { serverFactory } : {}),
    // A path the router cannot decode ("/v1/%ZZ") is answered as every other client error here.
    frameworkErrors: (error, _request, reply) =>
      void (reply as FastifyReply)
        .code(400)
        .type('application/json')
        .send({ error: capText(error.message, 1024) }),
    loggerInstance: log,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    return503OnClosing: true,
    // A netconf is plain JSON: a "__proto__" or "constructor" key is data (JSON.parse makes it an
    // own property, never the prototype), accepted and stored as given. Nothing here copies
    // request keys with assignment, which is where such a key would do harm.
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
  });

  requestChecks(app);
  keepNumbersAsWritten(app);
  errorAnswers(app);
  watchConnections(app.server, log);
  return app;
}

/**
 * Closes a connection silent for IDLE_CONNECTION_MS while none of its requests is in flight, and one
 * with more than MAX_IN_FLIGHT_PER_CONNECTION in flight.
 */
function watchConnections(server: Server, log: Logger): void {
  const inFlight = new WeakMap<Socket, number>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const n = (inFlight.get(socket) ?? 0) + 1;
    inFlight.set(socket, n);
    res.once('close', () => inFlight.set(socket, (inFlight.get(socket) ?? 1) - 1));
    if (n > MAX_IN_FLIGHT_PER_CONNECTION && !socket.destroyed) {
      log.warn(
        { inFlight: n, max: MAX_IN_FLIGHT_PER_CONNECTION },
        'a connection had more requests in flight than a connection may: closed',
      );
      socket.destroy();
    }
  });
  // With a listener here Node leaves the timed-out socket to it (it would destroy it, request or not).
  server.timeout = IDLE_CONNECTION_MS;
  server.on('timeout', (socket: Socket) => {
    if ((inFlight.get(socket) ?? 0) === 0) socket.destroy();
  });
}

/** The one error handler, and the answer for a route that does not exist. */
function errorAnswers(app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, Logger>): void {
  // The methods each path is served under, as the routes are registered (every path here is plain).
  // Not app.hasRoute: it reads its url as a route pattern, and a client's "/a*b" or "/:(" threw (a 500).
  const served = new Map<string, Set<string>>();
  app.addHook('onRoute', (r) => {
    const methods = served.get(r.url) ?? new Set<string>();
    for (const m of [r.method].flat()) methods.add(m);
    served.set(r.url, methods);
  });
  app.setErrorHandler((e, request, reply) => {
    const error = e as Error & { code?: string; statusCode?: number };
    let err: CniError;
    if (error instanceof CniError) {
      err = error;
    } else if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      err = new CniError(ErrorCode.InvalidConfig, `request body is larger than ${BODY_LIMIT} bytes`);
    } else if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      const type = capText(String(request.headers['content-type'] ?? 'none'), 64);
      err = new CniError(
        ErrorCode.DecodeFailure,
        `a body of Content-Type "${type}" is not taken: send application/json`,
      );
    } else if (error.statusCode === 400 || error.code?.startsWith('FST_ERR_CTP')) {
      err = new CniError(ErrorCode.DecodeFailure, `cannot decode request: ${error.message}`);
    } else {
      request.log.error({ err: error }, 'unexpected error handling request');
      err = new CniError(ErrorCode.Internal, `internal error in stewardd: ${error.message}`);
    }
    const { status, json } = cniErrorAnswer(err, request.body);
    // Only the CNI route speaks CNI's error envelope; an operator route answers as its other
    // errors do, { "error": ... }, with the same HTTP status.
    if (request.routeOptions.url === CNI_ROUTE) return void reply.code(status).type('application/json').send(json);
    // 413 and 415 (a Content-Type other than JSON) say more to a client than any 400.
    const own = error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE';
    void reply
      .code(own && error.statusCode !== undefined ? error.statusCode : status)
      .type('application/json')
      .send({ error: capText(err.message, 1024) });
  });

  // A path served under another method is 405 with the methods it takes (RFC 9110 15.5.6); any
  // other path 404.
  app.setNotFoundHandler((request, reply) => {
    const url = decodedPath(request.url.split('?')[0] ?? '');
    const allow = ROUTE_METHODS.filter((method) => served.get(url)?.has(method));
    if (allow.length > 0) {
      return void reply
        .code(405)
        .header('allow', allow.join(', '))
        .type('application/json')
        .send({
          error: `${capText(request.method, 16)} is not served on ${capText(url, 256)}; use ${allow.join(' or ')}`,
        });
    }
    void reply
      .code(404)
      .type('application/json')
      .send({ error: `no route ${request.method} ${capText(request.url, 256)}` });
  });
}

/**
 * Runtime DELs admitted to the engine at once (routes/admission.ts): 2 (1 while an ADD or CHECK is in
 * flight), never more than the plugin slots less 2, so an ADD arriving during a storm finds a slot and
 * little work ahead of it. Measured at load 7: with 6 (2 while adding) the storm's ADD p50 was 4.7x idle,
 * with 2 (1) 2.6x, DEL throughput the same. The price: slow plugin DELs run at most 2 at a time for
 * runtime requests (the retry scheduler's teardowns are not admitted here). DELs answered from a
 * tombstone have their own cap (admission.ts). The rest wait with only their headers parsed.
 *
 * While ADDs are being served (one in flight or answered within the last second), tombstoned DELs are
 * answered at most one per 8 ms. At one per millisecond the HTTP storm's ADD p99 fell from 4–7x idle
 * to 1.0x (its repeated DELs from ~3,000/s to ~600/s), but a storm of shim executions (a runtime
 * retrying StopPodSandbox, 12 at a time) kept ~590/s, and each costs ~3 ms of CPU in the shim and
 * stewardd: on 2 cores the ADD's own shim waited, p99 4.7–7.4x idle. One per 8 ms (~125/s, about 0.4
 * of a core) made it 1.2–1.5x, one per 4 ms 1.8–2.5x (npm run bench -- --only shim-storm, 3 runs
 * each alternated, docs/performance.md). Only repeated DELs of what is already torn down wait.
 */
export function admissionLimits(pluginSlots: number): {
  maxDels: number;
  maxDelsWhileAdding: number;
  tombstonePaceMs: number;
  priorityMs: number;
} {
  const maxDels = Math.max(1, Math.min(2, pluginSlots - 2));
  return { maxDels, maxDelsWhileAdding: 1, tombstonePaceMs: 8, priorityMs: 1000 };
}

/**
 * The `shim_protocol` label of steward_version_skew_seen_total: the versions a real shim can speak
 * (up to PROTOCOL_VERSION + SKEW_LABELS_AHEAD) by number, any other "other". The header is the
 * client's: one series per value it sent made 20,000 series (1.2 MB of /metrics) from one loop.
 */
export function skewLabel(shim: string): string {
  const n = /^[0-9]{1,6}$/.test(shim) ? Number(shim) : NaN;
  return n <= PROTOCOL_VERSION + SKEW_LABELS_AHEAD ? String(n) : shim === 'unknown' ? shim : 'other';
}

/** How many protocol versions past its own stewardd names in the skew metric (a rollout's newer shims). */
const SKEW_LABELS_AHEAD = 8;

export function buildApp(deps: AppDeps) {
  const admission = new Admission({
    ...admissionLimits(deps.executions().slots),
    maxBodyBytes: BODY_LIMIT,
    isTombstoned: (h) =>
      h.containerId !== undefined &&
      h.ifname !== undefined &&
      h.network !== undefined &&
      deps.engine.isTombstoned({ containerId: h.containerId, network: h.network, ifname: h.ifname }),
    hasAddOrCheck: (containerId) => deps.engine.hasAddOrCheck(containerId),
    serve: (body, hints, clientGone) => serveCni(deps, body, hints, deps.log, clientGone),
    onSkew: (shim) => deps.metrics.versionSkew.inc({ shim_protocol: skewLabel(shim) }),
  });
  // Each request's trace context noted as it arrives (tracing/tracing.ts), before admission parks it.
  const listen = deps.tracing ? deps.tracing.listener.bind(deps.tracing) : <L>(l: L) => l;
  const app = baseApp(deps.log, (handler) => httpServer(listen(admission.listener(handler))));
  void app.register(cniRoutes, deps);
  void app.register(statusRoutes, { ...deps, admission: () => admission.stats });
  const audit = deps.audit;
  if (audit) void app.register(auditRoutes, { audit });
  return app;
}

/**
 * The app of a daemon whose journal failed its start-up check (routes/degraded.ts). It has no
 * admission (nothing reaches an engine), but every request is under the body deadline all the same:
 * a stalled body would hold its connection until node:http's request timeout.
 */
export function buildDegradedApp(deps: DegradedDeps & { log: Logger }) {
  const app = baseApp(deps.log, (handler) => httpServer(withBodyDeadline(handler)));
  void app.register(degradedRoutes, deps);
  return app;
}

/**
 * The path as the router matched it, or as given when it does not decode. find-my-way decodes as
 * decodeURI does, leaving what a path component escapes (`%2F`, `%3F`, `%23`) as written, so
 * "/v1%2Fstatus" is no route here either: decodeURIComponent made it /v1/status, a 405 that offered
 * the very method asked.
 */
function decodedPath(path: string): string {
  try {
    return decodeURI(path);
  } catch {
    return path;
  }
}
