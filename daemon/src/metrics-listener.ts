// One concern: the optional metrics port, from binding it to bounding what its clients can take.
//
// The optional TCP listener for Prometheus (--metrics-listen ADDR:PORT). It serves GET /metrics
// and nothing else: every other path and method is 404, so the control API (/v1/*, retries,
// probes) stays on the root-only Unix socket. Plain node:http: one route needs no framework. The
// port is reachable from the node's network, so what a client can take is bounded: connections
// (METRICS_MAX_CONNECTIONS), answers (one per METRICS_ANSWER_SPACING_MS, the others wait their turn)
// and renderings (one per METRICS_REUSE_MS, shared by the scrapes in it).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Metrics } from './metrics.js';
import { isIP, type Socket } from 'node:net';

export interface ListenAddress {
  host: string;
  port: number;
}

/**
 * "ADDR:PORT", "[v6]:PORT", "v6:PORT" (the last colon separates the port, so a DaemonSet can write
 * $(HOST_IP):9631 whatever the node's address family) or ":PORT" (all addresses); else `why`.
 */
export function parseListenAddress(raw: string): ListenAddress | { why: string } {
  const bad = { why: `--metrics-listen must be ADDR:PORT (e.g. 0.0.0.0:9631, [::1]:9631), got "${raw}"` };
  const colon = raw.lastIndexOf(':');
  if (colon < 0 || !/^\d{1,5}$/.test(raw.slice(colon + 1))) return bad;
  const port = Number(raw.slice(colon + 1));
  if (port > 65535) return { why: `--metrics-listen port must be 0-65535, got ${port}` };
  let host = raw.slice(0, colon);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (/[[\]\s/]/.test(host)) return bad;
  // An IP literal only: a name would be resolved at start (and an unexpanded "$(HOST_IP)" fails
  // there, late and obscurely); the DaemonSet passes the node's address.
  if (host !== '' && isIP(host) === 0)
    return { why: `--metrics-listen address must be an IP address (or empty for all), got "${host}"` };
  return { host: host === '' ? '0.0.0.0' : host, port };
}

export interface MetricsListener {
  /** The address actually bound (port 0 picks a free one). */
  address: ListenAddress;
  /** Requests waiting their turn (tests). */
  turnsWaiting(): number;
  /** The HTTP server (tests: the events it emits). */
  server: Server;
  close(): Promise<void>;
}

/** Connections the metrics port holds at once; more are closed as they come. */
export const METRICS_MAX_CONNECTIONS = 64;

/**
 * How long one rendering of the metrics answers this port's scrapes: the window in which the
 * journal's gauges reuse one read (metrics/journal.ts). The port is open on the node's address and
 * stewardd's event loop serves the CNI socket too: a flood of scrapes costs it one rendering per
 * window, not one per scrape (Prometheus scrapes every 15 s or more).
 */
export const METRICS_REUSE_MS = 250;

/**
 * `render` at most once per `reuseMs`: a call while a rendering is in flight, or within `reuseMs` of
 * its start, gets that rendering's text. A failed rendering is not reused.
 */
export function sharedRendering(
  render: () => Promise<string>,
  reuseMs = METRICS_REUSE_MS,
  now: () => number = () => performance.now(),
): () => Promise<string> {
  let last: { at: number; text: Promise<string>; settled: boolean } | undefined;
  return () => {
    const t = now();
    if (last !== undefined && (!last.settled || t - last.at < reuseMs)) return last.text;
    const entry = { at: t, text: Promise.resolve().then(render), settled: false };
    last = entry;
    entry.text.then(
      () => (entry.settled = true),
      () => {
        entry.settled = true;
        if (last === entry) last = undefined;
      },
    );
    return entry.text;
  };
}

/**
 * The port answers at most one request per this many ms; the others wait their turn in arrival
 * order. Sharing renderings alone left a closed-loop flood (64 connections, each scraping again as
 * soon as answered) at ~5,800 answers/s, and the CNI requests sharing stewardd's event loop at 4x
 * their p99 (bench/rows/scrape-flood.ts). 20 answers/s is far above what scrapers need (one per
 * 15 s or more each); during a flood a real scrape waits at most METRICS_MAX_CONNECTIONS turns
 * (3.2 s, inside Prometheus's 10 s scrape timeout).
 */
export const METRICS_ANSWER_SPACING_MS = 50;

export interface PacedTurns {
  /** Queues `answer` for its turn; the function returned takes it out (its client has gone). */
  add(answer: () => void): () => void;
  /** Turns waiting now. */
  readonly waiting: number;
}

/**
 * Runs each added `answer` in arrival order, each at least `spacingMs` after the one before (by
 * `now`); a turn taken out before it comes up takes no spacing. An answer that throws is reported to
 * `onError` and the next still gets its turn.
 */
export function pacedTurns(
  spacingMs: number,
  now: () => number = () => performance.now(),
  schedule: (fn: () => void, ms: number) => void = (fn, ms) => void setTimeout(fn, ms).unref(),
  onError: (e: unknown) => void = () => undefined,
): PacedTurns {
  // A Set keeps arrival order and takes a turn out in O(1), wherever it is in the queue.
  const waiting = new Set<{ answer: () => void }>();
  let last = Number.NEGATIVE_INFINITY;
  let scheduled = false;
  let draining = false;
  const drain = () => {
    scheduled = false;
    // An answer that adds a turn (re-entry) leaves it to the loop already running.
    if (draining) return;
    draining = true;
    try {
      for (const turn of waiting) {
        const since = now() - last;
        if (since < spacingMs) {
          // Rounded up: Node truncates a timer's delay, and an early wake-up would only re-arm.
          // Marked scheduled only once the timer is set: a schedule that threw must not stall the queue.
          schedule(drain, Math.ceil(spacingMs - since));
          scheduled = true;
          return;
        }
        waiting.delete(turn);
        last = now();
        try {
          turn.answer();
        } catch (e) {
          onError(e);
        }
      }
    } finally {
      draining = false;
    }
  };
  return {
    add(answer) {
      const turn = { answer };
      waiting.add(turn);
      if (!scheduled) drain();
      return () => void waiting.delete(turn);
    },
    get waiting() {
      return waiting.size;
    },
  };
}

export interface MetricsListenOptions {
  /** METRICS_ANSWER_SPACING_MS unless given (tests). */
  spacingMs?: number;
  /** METRICS_HEADERS_TIMEOUT_MS unless given (tests). */
  headersTimeoutMs?: number;
  /** METRICS_IDLE_TIMEOUT_MS unless given (tests). */
  idleTimeoutMs?: number;
}

/** What the port answers: GET (or HEAD) /metrics from the shared rendering, 404 else. */
function answerer(metrics: Metrics, log: Logger): (req: IncomingMessage, res: ServerResponse) => void {
  const render = sharedRendering(() => metrics.registry.metrics());
  return (req, res) => {
    // Absolute-form (`GET http://host/metrics`) names the same path (RFC 9112, 3.2.2).
    const path = (req.url ?? '').replace(/^https?:\/\/[^/?]*/i, '').split('?')[0];
    if ((req.method !== 'GET' && req.method !== 'HEAD') || path !== '/metrics') {
      res
        .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
        .end('not found: this port serves GET (and HEAD) /metrics only\n');
      return;
    }
    render().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (e: unknown) => {
        log.error({ err: (e as Error).message }, 'collecting metrics failed');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('collecting metrics failed\n');
      },
    );
  };
}

/** Each request waits its turn (`turns`) to be answered, one per connection at a time. */
function pacedHandler(
  turns: PacedTurns,
  answer: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  // Connections with a request waiting or being answered. HTTP/1.1 lets a client send requests
  // without reading answers (pipelining): each would wait its turn, so one connection could queue
  // thousands and hold every scraper back. Prometheus never pipelines: a second request on a busy
  // connection closes it.
  const busy = new WeakSet<Socket>();
  return (req, res) => {
    const socket = req.socket;
    // A body is never read: no request this port serves has one, and Node parses every byte of it on
    // stewardd's loop (64 connections streaming 1-byte chunks pushed STATUS past its 750 ms bound).
    if (carriesBody(req) || busy.has(socket) || turns.waiting >= METRICS_MAX_CONNECTIONS) return void socket.destroy();
    busy.add(socket);
    res.once('close', () => busy.delete(socket));
    // A client gone while waiting leaves the queue at once, not when its turn would have come.
    // ('close' is emitted on a later tick, so `cancel` is set by then; the turn itself may come at
    // once, inside add(), which is why it does not use `cancel`.)
    const onClose = () => cancel();
    socket.once('close', onClose);
    const cancel = turns.add(() => {
      socket.off('close', onClose);
      answer(req, res);
    });
  };
}

/** Whether a request says a body follows its headers (chunked, or a length other than 0). */
function carriesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** A request's headers must arrive within this of its first byte. */
export const METRICS_HEADERS_TIMEOUT_MS = 10_000;
/** How often the header and request timeouts are enforced: a slow request's connection closes within 10-11 s. */
export const METRICS_CONNECTION_CHECK_MS = 1000;
/**
 * A connection silent this long is closed: one that never sends a byte has no request for Node to
 * time. Longer than a turn's wait (64 turns, about 3.2 s); between scrapes Node's keep-alive
 * timeout (5 s) closes a kept connection first.
 */
export const METRICS_IDLE_TIMEOUT_MS = 10_000;

/** At most one log line per this long for the metrics port's accept errors (each may repeat per connection). */
const ACCEPT_ERROR_LOG_MS = 60_000;

export async function listenMetrics(
  addr: ListenAddress,
  metrics: Metrics,
  log: Logger,
  o: MetricsListenOptions = {},
): Promise<MetricsListener> {
  const turns = pacedTurns(o.spacingMs ?? METRICS_ANSWER_SPACING_MS, undefined, undefined, (e: unknown) =>
    log.error({ err: e instanceof Error ? e.message : String(e) }, 'answering a metrics request failed'),
  );
  // Node enforces the header and request timeouts only when it checks its connections, every 30 s
  // unless told: a client sending a byte at a time held one of the 64 connections for up to 40 s.
  const server: Server = createServer(
    { connectionsCheckingInterval: METRICS_CONNECTION_CHECK_MS },
    pacedHandler(turns, answerer(metrics, log)),
  );
  // These keep a slow client from pinning a connection: a request's headers within 10 s of its first
  // byte, and no connection silent for 10 s (one that never sends a byte has no request to time).
  server.headersTimeout = o.headersTimeoutMs ?? METRICS_HEADERS_TIMEOUT_MS;
  server.requestTimeout = 30_000;
  server.timeout = o.idleTimeoutMs ?? METRICS_IDLE_TIMEOUT_MS;
  // The port is open on the node's address: without a cap, idle connections could take every file
  // descriptor stewardd has, and with them its CNI socket (a few scrapers need a few connections).
  server.maxConnections = METRICS_MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // An accept(2) that fails once listening (no descriptor left, libuv's reserve one gone too) is an
  // 'error' on the server: unheard, it would end stewardd over its optional port. Logged once a minute.
  let lastAcceptError = -Infinity;
  server.on('error', (e: NodeJS.ErrnoException) => {
    if (performance.now() - lastAcceptError < ACCEPT_ERROR_LOG_MS) return;
    lastAcceptError = performance.now();
    log.error(
      { err: e.message, code: e.code },
      'metrics port could not accept a connection; stewardd serves the CNI socket regardless',
    );
  });
  const bound = server.address() as AddressInfo;
  const address = { host: bound.address, port: bound.port };
  log.info(
    { metricsListen: `${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}` },
    'metrics listening (GET /metrics only)',
  );
  return {
    address,
    turnsWaiting: () => turns.waiting,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** How long after a failed bind of the metrics port the next try comes. */
export const METRICS_RETRY_MS = 10_000;

/**
 * listenMetrics, but a bind that fails (the port taken, the node's address not yet up) never stops
 * stewardd: the CNI socket is what the node needs, and a daemon that exited over its optional
 * metrics port left the conflist naming a shim with no daemon behind it, the very incident steward
 * ends (hostile review of the DaemonSet, 1 Dec). It is logged, then tried again every `retryMs`
 * until it binds or close() is called; `listening()` says whether it serves now.
 */
export function keepListeningMetrics(
  addr: ListenAddress,
  metrics: Metrics,
  log: Logger,
  retryMs = METRICS_RETRY_MS,
): { listening(): boolean; close(): Promise<void> } {
  let bound: MetricsListener | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let failures = 0;
  const attempt = async () => {
    try {
      const l = await listenMetrics(addr, metrics, log);
      if (closed) return void (await l.close());
      bound = l;
      if (failures > 0) log.info({ failures }, 'metrics port bound after failing: Prometheus can scrape again');
    } catch (e) {
      failures++;
      // The first failure and then one in 30: a port taken for hours does not fill the log.
      if (failures === 1 || failures % 30 === 0)
        log.error(
          { metricsListen: `${addr.host}:${addr.port}`, err: (e as Error).message, failures, retryMs },
          'metrics port could not be bound; stewardd serves the CNI socket regardless and tries again',
        );
      if (!closed) (timer = setTimeout(() => (trying = attempt()), retryMs)).unref();
    }
  };
  let trying = attempt();
  return {
    listening: () => bound !== undefined,
    close: async () => {
      closed = true;
      clearTimeout(timer);
      await trying;
      await bound?.close();
    },
  };
}
