// The daemon's traces (docs/tracing.md). A CNI request continues the runtime's trace (the shim
// forwards TRACEPARENT/TRACESTATE as the W3C headers) or starts its own; under its span come the
// wait before its first delegate ("queue + journal"), each delegate's run and each journal commit.
// Every delegate is given its own span's TRACEPARENT/TRACESTATE, as libcni gives a plugin the
// runtime's. The context travels from routes/ through the engine to plugins/ by AsyncLocalStorage
// (OpenTelemetry's context manager): the engine knows nothing of it.
//
// Spans exist only while exporting (--otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT: trace-export.ts,
// loaded only then). Off, no span is made at all: a runtime's context is handed to the delegates
// unchanged and its trace id put in the log lines, and a request without one costs a header lookup.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  context,
  createContextKey,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { suppressTracing, W3CTraceContextPropagator } from '@opentelemetry/core';
import { CniError, podFromCniArgs, type CniRequestBody } from '@cni-steward/shared';
import type { EngineTrace } from './engine/engine.js';
import type { TeardownOutcome } from './engine/teardown.js';
import type { Attachment } from './store/types.js';

/**
 * Span attribute names: OpenTelemetry's semantic conventions where they name the thing (k8s.*,
 * process.*: from its incubating set, written here as its docs advise instrumentations to), cni.*
 * and steward.* this project's own.
 */
export const ATTR = {
  command: 'cni.command',
  containerId: 'cni.container_id',
  network: 'cni.network',
  ifname: 'cni.ifname',
  cniVersion: 'cni.version',
  /** The CNI code of the answer or of the delegate's error: 0 for success. */
  code: 'cni.code',
  pluginType: 'cni.plugin.type',
  podNamespace: 'k8s.namespace.name',
  podName: 'k8s.pod.name',
  podUid: 'k8s.pod.uid',
  exitCode: 'process.exit.code',
  pid: 'process.pid',
  signal: 'steward.plugin.signal',
  timedOut: 'steward.plugin.timed_out',
  /** A delegate run outside any request: a teardown retry, the spool's DELs, recovery, an audit release. */
  background: 'steward.background',
  synced: 'steward.journal.synced',
  /** A delegate DEL run by a failed ADD's rollback (within the ADD's trace). */
  rollback: 'steward.rollback',
  attachmentId: 'steward.attachment.id',
  /** A background teardown's outcome: every step torn down (or abandoned), or some left for a retry. */
  teardownDone: 'steward.teardown.done',
} as const;

/** DEL requests remembered for the teardown retries they leave (a link from each retry's trace). */
export const REMEMBERED_DELS = 10_000;

/** Spans dropped, by why: the export queue was full, or the collector did not take them. */
export interface DroppedSpans {
  queue_full: number;
  export_failed: number;
}

/** What trace-export.ts gives back: the tracer of the exporting provider, its drop counts, its end. */
export interface SpanExport {
  tracer: Tracer;
  dropped(): DroppedSpans;
  /** Flushes what is queued and stops, within `timeoutMs` whatever the collector does. */
  shutdown(timeoutMs: number): Promise<void>;
}

/** What plugins/ tells of a delegate run. */
export interface DelegateInfo {
  type: string;
  command: string;
  containerId: string;
  ifname: string;
  /** The delegate network's name (its netconf's `name`). */
  network?: string | undefined;
}

/** What the spawner told of a finished run. */
export interface DelegateOutcome {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
}

/** One delegate run's part of the trace. */
export interface DelegateTrace {
  /** TRACEPARENT and TRACESTATE for its environment: its own span's (or, not exporting, the runtime's). */
  readonly env: Record<string, string>;
  /** `onStart` run in the delegate's context (its journal commit is the delegate's child), noting the pid. */
  onStart<P extends { pid: number }>(fn: ((p: P) => void) | undefined): ((p: P) => void) | undefined;
  exited(o: DelegateOutcome): void;
  /** Ends its span; `err` is what the run rejected with. */
  end(err?: unknown): void;
}

/** The request a context belongs to: its span, when serving began (wall ms), how many delegates it ran. */
interface RequestRecord {
  span: Span;
  servedAt: number;
  delegates: number;
  /** The CNI command, once the body is decoded. */
  command?: string;
}

const REQUEST = createContextKey('stewardd CNI request');
/** When the request arrived (wall ms). */
const ARRIVED = createContextKey('stewardd CNI request arrival');
/**
 * The wall time of performance.now()'s zero, read once per trace (a request, or a run outside any):
 * every time this module gives a span is that plus performance.now(), so the spans of a trace share
 * one clock. (The SDK reads Date.now(), to the millisecond, for each span on its own: a child could
 * seem to start up to a millisecond before its parent, or the wait before a delegate end after it.)
 */
const ANCHOR = createContextKey('stewardd trace clock');
const anchorOf = (ctx: Context): number =>
  (ctx.getValue(ANCHOR) as number | undefined) ?? Date.now() - performance.now();
const propagator = new W3CTraceContextPropagator();

/** A request that waited at least this long between its arrival and being served gets an `admission` span. */
export const ADMISSION_SPAN_MIN_MS = 1;

let contextManager: AsyncLocalStorageContextManager | undefined;

/**
 * OpenTelemetry's AsyncLocalStorage context manager, registered once per process: a context entered
 * in routes/ is the active one in plugins/ within the same async flow.
 */
export function enableTraceContext(): void {
  if (contextManager !== undefined) return;
  contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
}

/** The fields pino adds to every line logged within a traced request (log.ts): its `traceId`. */
export function traceLogFields(): Record<string, string> {
  const sc = trace.getSpanContext(context.active());
  // A fresh object each time: pino merges the line's fields into it.
  return sc === undefined ? {} : { traceId: sc.traceId };
}

/** TRACEPARENT and TRACESTATE of a context's span, for a delegate's environment. */
function traceEnv(ctx: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, defaultTextMapSetter);
  const env: Record<string, string> = {};
  if (carrier.traceparent !== undefined) env.TRACEPARENT = carrier.traceparent;
  if (carrier.tracestate !== undefined) env.TRACESTATE = carrier.tracestate;
  return env;
}

/** The request's attributes, once its body is decoded. */
export function requestAttributes(req: CniRequestBody): Attributes {
  const pod = podFromCniArgs(req.env.args);
  const a: Attributes = {
    [ATTR.command]: req.env.command,
    [ATTR.containerId]: req.env.containerId,
    [ATTR.ifname]: req.env.ifname,
  };
  if (typeof req.config.name === 'string') a[ATTR.network] = req.config.name;
  if (typeof req.config.cniVersion === 'string') a[ATTR.cniVersion] = req.config.cniVersion;
  if (pod.namespace !== null) a[ATTR.podNamespace] = pod.namespace;
  if (pod.name !== null) a[ATTR.podName] = pod.name;
  if (pod.uid !== null) a[ATTR.podUid] = pod.uid;
  return a;
}

/** Not exporting: the runtime's context, if the request brought one, handed on unchanged. */
function passThrough(parent: Context): DelegateTrace | undefined {
  if (trace.getSpanContext(parent) === undefined) return undefined;
  return { env: traceEnv(parent), onStart: (fn) => fn, exited: () => undefined, end: () => undefined };
}

class RecordingDelegate implements DelegateTrace {
  readonly env: Record<string, string>;

  constructor(
    private readonly span: Span,
    private readonly ctx: Context,
    private readonly anchor: number,
  ) {
    this.env = traceEnv(ctx);
  }

  onStart<P extends { pid: number }>(fn: ((p: P) => void) | undefined): (p: P) => void {
    return context.bind(this.ctx, (p: P) => {
      this.span.setAttribute(ATTR.pid, p.pid);
      fn?.(p);
    });
  }

  exited(o: DelegateOutcome): void {
    if (o.code !== null) this.span.setAttribute(ATTR.exitCode, o.code);
    if (o.signal !== null) this.span.setAttribute(ATTR.signal, o.signal);
    if (o.timedOut) this.span.setAttribute(ATTR.timedOut, true);
  }

  end(err?: unknown): void {
    if (err === undefined) {
      this.span.setAttribute(ATTR.code, 0);
    } else {
      const e = CniError.from(err);
      this.span.setAttribute(ATTR.code, e.code);
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
    }
    this.span.end(this.anchor + performance.now());
  }
}

/**
 * Each request's trace context as it arrived (the runtime's span, and when: its span starts there,
 * admission's wait included), noted by Tracing.listener; none for a request that brought no context
 * while nothing is exported.
 */
const requestContexts = new WeakMap<IncomingMessage, Context>();

/**
 * Runs `fn` (serving one CNI request: routes/raw-cni.ts, routes/cni.ts) in the trace context the
 * request arrived with, entered from the root: never in another request's, whichever callback
 * admitted it.
 */
export function inRequestContext<T>(req: IncomingMessage, fn: () => T): T {
  const ctx = requestContexts.get(req);
  return ctx === undefined ? fn() : context.with(ctx, fn);
}

/** An attachment's key as a DEL names it and a teardown's row holds it. */
const delKey = (containerId: string, network: string, ifname: string): string =>
  JSON.stringify([containerId, network, ifname]);

export class Tracing implements EngineTrace {
  private readonly tracer: Tracer | undefined;
  /** The span of the latest DEL request of each attachment key, oldest forgotten first. */
  private readonly dels = new Map<string, SpanContext>();

  /** `exporting` undefined: no span is ever made (trace-export.ts makes one that exports). */
  constructor(private readonly exporting?: SpanExport) {
    this.tracer = exporting?.tracer;
    enableTraceContext();
  }

  /** Whether spans are made (and exported). */
  get recording(): boolean {
    return this.tracer !== undefined;
  }

  dropped(): DroppedSpans {
    return this.exporting?.dropped() ?? { queue_full: 0, export_failed: 0 };
  }

  shutdown(timeoutMs: number): Promise<void> {
    return this.exporting?.shutdown(timeoutMs) ?? Promise.resolve();
  }

  /** The HTTP server's request listener, noting each request's trace context (inRequestContext). */
  listener(
    l: (req: IncomingMessage, res: ServerResponse) => void,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    const recording = this.tracer !== undefined;
    return (req, res) => {
      if (recording) {
        const anchor = Date.now() - performance.now();
        const ctx = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter).setValue(ANCHOR, anchor);
        requestContexts.set(req, ctx.setValue(ARRIVED, anchor + performance.now()));
      } else if (req.headers.traceparent !== undefined) {
        requestContexts.set(req, propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter));
      }
      l(req, res);
    };
  }

  /**
   * One CNI request's span (`cni ADD`, …) around `serve`, a child of the runtime's span when the
   * request carried one; `serve` is given `describe`, to name it and set its attributes once the body
   * is decoded. The answer's CNI code is set on it (0: success). Only while exporting. A STATUS that
   * brought no context of the runtime's (containerd asks one every 5 s) makes no span at all, nor do
   * its delegates' runs: it is traced when the runtime's own trace asks for it.
   */
  request<T>(command: string | undefined, serve: (describe: (req: CniRequestBody) => void) => Promise<T>): Promise<T> {
    const tracer = this.tracer;
    if (tracer === undefined) return serve(() => undefined);
    const parent = context.active();
    if (command === 'STATUS' && trace.getSpanContext(parent) === undefined)
      return context.with(suppressTracing(parent), () => serve(() => undefined));
    const anchor = anchorOf(parent);
    const now = anchor + performance.now();
    const arrived = parent.getValue(ARRIVED) as number | undefined;
    const span = tracer.startSpan(
      command === undefined ? 'cni' : `cni ${command}`,
      { kind: SpanKind.SERVER, startTime: arrived ?? now },
      parent,
    );
    const record: RequestRecord = { span, servedAt: now, delegates: 0 };
    const ctx = trace.setSpan(parent, span).setValue(REQUEST, record).setValue(ANCHOR, anchor);
    if (arrived !== undefined && now - arrived >= ADMISSION_SPAN_MIN_MS)
      tracer.startSpan('admission', { startTime: arrived }, ctx).end(now);
    const describe = (req: CniRequestBody) => {
      record.command = req.env.command;
      span.updateName(`cni ${req.env.command}`);
      span.setAttributes(requestAttributes(req));
      if (req.env.command === 'DEL' && typeof req.config.name === 'string')
        this.rememberDel(delKey(req.env.containerId, req.config.name, req.env.ifname), span.spanContext());
    };
    return context
      .with(ctx, () => serve(describe))
      .then(
        (v) => {
          span.setAttribute(ATTR.code, 0);
          span.end(anchor + performance.now());
          return v;
        },
        (e: unknown) => {
          const err = CniError.from(e);
          span.setAttribute(ATTR.code, err.code);
          span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
          span.end(anchor + performance.now());
          throw e;
        },
      );
  }

  /**
   * A delegate's run (plugins/executor.ts): its span, a child of the active context's (the request,
   * or a root of its own for a run outside any request, such as a teardown retry). The request's
   * first delegate also closes its `queue + journal` span: from serving to this start. Not
   * exporting: the runtime's context, if any, to hand on; else undefined.
   */
  delegate(d: DelegateInfo): DelegateTrace | undefined {
    const parent = context.active();
    const tracer = this.tracer;
    if (tracer === undefined) return passThrough(parent);
    const anchor = anchorOf(parent);
    const now = anchor + performance.now();
    const request = parent.getValue(REQUEST) as RequestRecord | undefined;
    if (request !== undefined && request.delegates++ === 0)
      tracer
        .startSpan('queue + journal', { startTime: request.servedAt }, trace.setSpan(parent, request.span))
        .end(now);
    const attributes: Attributes = {
      [ATTR.pluginType]: d.type,
      [ATTR.command]: d.command,
      [ATTR.containerId]: d.containerId,
      [ATTR.ifname]: d.ifname,
    };
    if (d.network !== undefined) attributes[ATTR.network] = d.network;
    if (request === undefined) attributes[ATTR.background] = true;
    else if (request.command === 'ADD' && d.command === 'DEL') attributes[ATTR.rollback] = true;
    const span = tracer.startSpan(`delegate ${d.type} ${d.command}`, { startTime: now, attributes }, parent);
    return new RecordingDelegate(span, trace.setSpan(parent, span).setValue(ANCHOR, anchor), anchor);
  }

  /**
   * EngineTrace: a request's wait in its container's queue (and for the gate), as a `queue wait` span
   * of the request ending now. Only within a request that is traced.
   */
  queueWait(seconds: number): void {
    const tracer = this.tracer;
    if (tracer === undefined) return;
    const parent = context.active();
    const request = parent.getValue(REQUEST) as RequestRecord | undefined;
    if (request === undefined) return;
    const end = anchorOf(parent) + performance.now();
    tracer.startSpan('queue wait', { startTime: end - seconds * 1000 }, trace.setSpan(parent, request.span)).end(end);
  }

  /**
   * EngineTrace: a background teardown of `a` (a retry, the recovery's, the audit's) as a trace of its
   * own, `teardown`, linked to the DEL request that last named the attachment; its delegates' runs and
   * commits are its children, and its log lines carry its trace id.
   */
  teardown(a: Attachment, work: () => Promise<TeardownOutcome>): Promise<TeardownOutcome> {
    const tracer = this.tracer;
    if (tracer === undefined) return work();
    const anchor = Date.now() - performance.now();
    const del = this.dels.get(delKey(a.containerId, a.network, a.ifname));
    const span = tracer.startSpan(
      'teardown',
      {
        root: true,
        startTime: anchor + performance.now(),
        attributes: {
          [ATTR.containerId]: a.containerId,
          [ATTR.network]: a.network,
          [ATTR.ifname]: a.ifname,
          [ATTR.attachmentId]: a.id,
          [ATTR.background]: true,
        },
        links: del === undefined ? [] : [{ context: del }],
      },
      ROOT_CONTEXT,
    );
    const ctx = trace.setSpan(ROOT_CONTEXT, span).setValue(ANCHOR, anchor);
    const end = (err?: unknown) => {
      if (err !== undefined) {
        const e = CniError.from(err);
        span.setAttribute(ATTR.code, e.code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
      }
      span.end(anchor + performance.now());
    };
    return context.with(ctx, work).then(
      (out) => {
        span.setAttribute(ATTR.teardownDone, out.done);
        // Not done: a step failed and waits for its retry (the outcome's error says which).
        end(out.done ? undefined : (out.error ?? new Error('teardown unfinished')));
        return out;
      },
      (e: unknown) => {
        end(e);
        throw e;
      },
    );
  }

  private rememberDel(key: string, sc: SpanContext): void {
    this.dels.delete(key);
    this.dels.set(key, sc);
    if (this.dels.size > REMEMBERED_DELS) this.dels.delete(this.dels.keys().next().value as string);
  }

  /**
   * The journal's onCommit hook: a `journal commit` span for a commit made within a sampled trace (a
   * request, or a delegate run), timed by the store. Commits outside any trace make none.
   */
  readonly commit = (seconds: number, synced: boolean): void => {
    const tracer = this.tracer;
    if (tracer === undefined) return;
    const parent = context.active();
    const sc = trace.getSpanContext(parent);
    if (sc === undefined || (sc.traceFlags & TraceFlags.SAMPLED) === 0) return;
    const end = anchorOf(parent) + performance.now();
    tracer
      .startSpan('journal commit', { startTime: end - seconds * 1000, attributes: { [ATTR.synced]: synced } }, parent)
      .end(end);
  };
}
