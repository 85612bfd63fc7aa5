// The trace context as it travels (docs/tracing.md): from routes/ through the engine to plugins/ by
// AsyncLocalStorage (OpenTelemetry's context manager), so the engine knows nothing of it. Here: the
// span attribute names, the one clock a trace's spans share, the W3C propagator that reads the
// runtime's TRACEPARENT and writes the delegates' (loaded on first need), and each request's
// context as it arrived.

import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  context,
  createContextKey,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type TextMapPropagator,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { podFromCniArgs, type CniRequestBody } from '@cni-steward/shared';

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

/**
 * The wall time of performance.now()'s zero, read once per trace (a request, or a run outside any):
 * every time this module gives a span is that plus performance.now(), so the spans of a trace share
 * one clock. (The SDK reads Date.now(), to the millisecond, for each span on its own: a child could
 * seem to start up to a millisecond before its parent, or the wait before a delegate end after it.)
 */
export const ANCHOR = createContextKey('stewardd trace clock');
export const anchorOf = (ctx: Context): number =>
  (ctx.getValue(ANCHOR) as number | undefined) ?? Date.now() - performance.now();

type TraceCore = typeof import('@opentelemetry/core');
let core: { module: TraceCore; w3c: TextMapPropagator } | undefined;
let loadingCore: Promise<TraceCore> | undefined;

/**
 * OpenTelemetry's core (its W3C propagator, suppressTracing), imported on first need: a request that
 * brings a trace context, or exporting. Most runtimes never send one, and importing it costs ~11 MiB
 * of resident memory for the daemon's whole life (docs/performance.md, restart row).
 */
export function loadTraceCore(): Promise<TraceCore> {
  loadingCore ??= import('@opentelemetry/core').then((module) => {
    core = { module, w3c: new module.W3CTraceContextPropagator() };
    return module;
  });
  return loadingCore;
}

/** The W3C propagator once loadTraceCore has resolved; before that no trace context can exist here. */
export const w3cPropagator = (): TextMapPropagator | undefined => core?.w3c;

/** OpenTelemetry's core once loadTraceCore has resolved. */
export const loadedTraceCore = (): TraceCore | undefined => core?.module;

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
export function traceEnv(ctx: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  w3cPropagator()?.inject(ctx, carrier, defaultTextMapSetter);
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

/** Notes the context a request arrived with (Tracing.listener), for inRequestContext. */
export function noteRequestContext(req: IncomingMessage, ctx: Context): void {
  requestContexts.set(req, ctx);
}
