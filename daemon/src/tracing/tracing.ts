// The daemon's traces (docs/tracing.md). A CNI request continues the runtime's trace (the shim
// forwards TRACEPARENT/TRACESTATE as the W3C headers) or starts its own; under its span come the
// wait before its first delegate ("queue + journal", its part in the container's queue "queue wait"),
// each delegate's run and each journal commit; a background teardown is a trace of its own, linked to
// the DEL that left it (EngineTrace: what the engine tells).
// Every delegate is given its own span's TRACEPARENT/TRACESTATE, as libcni gives a plugin the
// runtime's. The context travels from routes/ through the engine to plugins/ by AsyncLocalStorage
// (OpenTelemetry's context manager, context.ts): the engine knows nothing of it. Here: Tracing, the
// request's spans and the journal commits'; a delegate's is delegate.ts's.
//
// Spans exist only while exporting (--otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT: export.ts,
// loaded only then). Off, no span is made at all: a runtime's context is handed to the delegates
// unchanged and its trace id put in the log lines, and a request without one costs a header lookup.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  context,
  createContextKey,
  defaultTextMapGetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Span,
  type SpanContext,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import { CniError, type CniRequestBody } from '@cni-steward/shared';
import {
  ANCHOR,
  anchorOf,
  ATTR,
  enableTraceContext,
  loadedTraceCore,
  loadTraceCore,
  noteRequestContext,
  requestAttributes,
  w3cPropagator,
} from './context.js';
import { passThrough, RecordingDelegate, type DelegateInfo, type DelegateTrace } from './delegate.js';
import type { EngineTrace, TeardownDone } from '../engine/engine-trace.js';
import type { Attachment } from '../store/types.js';

/** DEL requests remembered for the teardown retries they leave (a link from each retry's trace). */
export const REMEMBERED_DELS = 10_000;

/** Spans dropped, by why: the export queue was full, or the collector did not take them. */
export interface DroppedSpans {
  queue_full: number;
  export_failed: number;
}

/** What export.ts gives back: the tracer of the exporting provider, its drop counts, its end. */
export interface SpanExport {
  tracer: Tracer;
  dropped(): DroppedSpans;
  /** Flushes what is queued and stops, within `timeoutMs` whatever the collector does. */
  shutdown(timeoutMs: number): Promise<void>;
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

/** A request that waited at least this long between its arrival and being served gets an `admission` span. */
export const ADMISSION_SPAN_MIN_MS = 1;

/** An attachment's key as a DEL names it and a teardown's row holds it. */
const delKey = (containerId: string, network: string, ifname: string): string =>
  JSON.stringify([containerId, network, ifname]);

export class Tracing implements EngineTrace {
  private readonly tracer: Tracer | undefined;
  /** The span of the latest DEL request of each attachment key, oldest forgotten first. */
  private readonly dels = new Map<string, SpanContext>();

  /** `exporting` undefined: no span is ever made (export.ts makes one that exports). */
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

  /**
   * The HTTP server's request listener, noting each request's trace context (inRequestContext).
   * A request that brings a context before the propagator is loaded waits for it (once per process);
   * if it cannot be loaded, the request is served without its context.
   */
  listener(
    l: (req: IncomingMessage, res: ServerResponse) => void,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    const recording = this.tracer !== undefined;
    const note = (w3c: TextMapPropagator, req: IncomingMessage, arrived: number | undefined, anchor: number) => {
      const ctx = w3c.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
      noteRequestContext(req, arrived === undefined ? ctx : ctx.setValue(ANCHOR, anchor).setValue(ARRIVED, arrived));
    };
    return (req, res) => {
      if (!recording && req.headers.traceparent === undefined) return l(req, res);
      const anchor = Date.now() - performance.now();
      const arrived = recording ? anchor + performance.now() : undefined;
      const w3c = w3cPropagator();
      if (w3c !== undefined) {
        note(w3c, req, arrived, anchor);
        return l(req, res);
      }
      loadTraceCore().then(
        () => {
          note(w3cPropagator()!, req, arrived, anchor);
          l(req, res);
        },
        () => l(req, res),
      );
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
    const core = loadedTraceCore();
    // Not yet loaded (a request that did not come through listener): wait for it, in this context.
    if (core === undefined)
      return loadTraceCore().then(context.bind(context.active(), () => this.request(command, serve)));
    const parent = context.active();
    if (command === 'STATUS' && trace.getSpanContext(parent) === undefined)
      return context.with(core.suppressTracing(parent), () => serve(() => undefined));
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
  teardown<T extends TeardownDone>(a: Attachment, work: () => Promise<T>): Promise<T> {
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
