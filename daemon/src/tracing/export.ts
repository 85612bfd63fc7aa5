// Exporting the daemon's spans over OTLP/HTTP (protobuf) with OpenTelemetry's own SDK, loaded only
// when an endpoint is configured (config-checks.ts: --otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT). A slow,
// frozen or absent collector never holds a CNI request: spans end into a BatchSpanProcessor whose
// queue is bounded (--otlp-queue-size); past it they are dropped, and so are batches the collector
// does not take within the export timeout. Both are counted (steward_trace_spans_dropped_total)
// from the processor's own self-observability counter (otel.sdk.processor.span.processed, whose
// error.type is queue_full for a span dropped at the queue), and failures are logged at most once
// a minute.

import { hostname } from 'node:os';
import type { Logger } from 'pino';
import {
  context,
  createNoopMeter,
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  type DiagLogger,
  type MeterProvider,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  defaultResource,
  detectResources,
  resourceAttributesEnvDetector,
  resourceFromAttributes,
  serviceNameEnvDetector,
} from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { DroppedSpans, SpanExport } from './tracing.js';
import { settleWithin } from '../settle-within.js';

export interface ExportOptions {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  url: string;
  /** Spans waiting for export at most; more are dropped (counted). */
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  /** A batch the collector has not taken by then is given up (its spans counted as dropped). */
  exportTimeoutMs: number;
  version: string;
  log: Logger;
}

/** The BatchSpanProcessor's self-observability counter (semantic conventions, otel.sdk.*). */
const PROCESSED = 'otel.sdk.processor.span.processed';

/**
 * A MeterProvider that only hears the processor's `processed` counter: error.type queue_full is a
 * span dropped at the full queue, any other error.type a span in a batch the exporter failed.
 */
function droppedCounter(count: (why: keyof DroppedSpans, n: number) => void): MeterProvider {
  const meter = createNoopMeter();
  const noopCounter = meter.createCounter.bind(meter);
  meter.createCounter = (name, opts) => {
    if (name !== PROCESSED) return noopCounter(name, opts);
    return {
      add(n, attributes) {
        const why = attributes?.['error.type'];
        if (why === undefined) return;
        count(why === 'queue_full' ? 'queue_full' : 'export_failed', n);
      },
    };
  };
  return { getMeter: () => meter };
}

/** OpenTelemetry's diagnostics (export failures, drops) into the daemon's log: warn and above, at most one line a minute. */
function diagToLog(log: Logger): DiagLogger {
  const EVERY_MS = 60_000;
  let last = 0;
  let suppressed = 0;
  const say =
    (level: 'warn' | 'error') =>
    (message: string, ...args: unknown[]) => {
      const now = Date.now();
      if (now - last < EVERY_MS) {
        suppressed++;
        return;
      }
      last = now;
      const detail = args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ');
      // Outside any request's context: the export runs on a timer a traced request may have set, and
      // its line would carry that request's traceId (the logger's `component` is set once, by the caller).
      context.with(ROOT_CONTEXT, () =>
        log[level]({ suppressed, detail: detail.slice(0, 500) }, `trace export: ${message.slice(0, 500)}`),
      );
      suppressed = 0;
    };
  const quiet = () => undefined;
  return { error: say('error'), warn: say('warn'), info: quiet, debug: quiet, verbose: quiet };
}

/** How much later than deadlined's the processor's own export timeout comes. */
const DEADLINE_MARGIN_MS = 1000;

/**
 * The exporter with a deadline of its own: a batch not taken by then is failed, so the processor
 * counts it (export_failed). The HTTP exporter's timeout is an idle one: a collector trickling its
 * answer a byte a second held each batch for minutes, and the processor's own timeout gave them up
 * without counting a span (a hostile review: 0 dropped in 150 s of nothing exported).
 */
function deadlined(exporter: SpanExporter, ms: number): SpanExporter {
  return {
    export(spans, done) {
      let settled = false;
      const settle = (r: ExportResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        done(r);
      };
      const timer = setTimeout(
        () =>
          settle({
            code: ExportResultCode.FAILED,
            error: new Error(`the collector did not take the batch within ${ms} ms`),
          }),
        ms,
      );
      timer.unref();
      exporter.export(spans, settle);
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

/** The exporting provider (Tracing's SpanExport). */
export function startExport(o: ExportOptions): SpanExport {
  diag.setLogger(diagToLog(o.log.child({ component: 'tracing' })), {
    logLevel: DiagLogLevel.WARN,
    suppressOverrideMessage: true,
  });
  const dropped: DroppedSpans = { queue_full: 0, export_failed: 0 };
  const processor = new BatchSpanProcessor({
    // At most 2 requests open: one given up on (deadlined) may still be trickling; a third export fails at once, counted.
    exporter: deadlined(
      new OTLPTraceExporter({ url: o.url, timeoutMillis: o.exportTimeoutMs, concurrencyLimit: 2 }),
      o.exportTimeoutMs,
    ),
    maxQueueSize: o.maxQueueSize,
    maxExportBatchSize: Math.min(o.maxExportBatchSize, o.maxQueueSize),
    scheduledDelayMillis: o.scheduledDelayMs,
    // After deadlined's own: a batch given up on by the processor itself is never counted.
    exportTimeoutMillis: o.exportTimeoutMs + DEADLINE_MARGIN_MS,
    selfObsMeterProvider: droppedCounter((why, n) => (dropped[why] += n)),
  });
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override ours, as the specification has it.
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: 'stewardd',
        [ATTR_SERVICE_VERSION]: o.version,
        'host.name': hostname(),
        ...(process.env.NODE_NAME ? { 'k8s.node.name': process.env.NODE_NAME } : {}),
      }),
    )
    .merge(detectResources({ detectors: [resourceAttributesEnvDetector, serviceNameEnvDetector] }));
  const provider = new TracerProvider({ resource, spanProcessors: [processor] });
  // The URL as logged: without credentials, should it carry any (user:password@).
  const shown = new URL(o.url);
  shown.username = '';
  shown.password = '';
  o.log.info(
    { otlpEndpoint: shown.href, maxQueueSize: o.maxQueueSize, exportTimeoutMs: o.exportTimeoutMs },
    'exporting traces over OTLP/HTTP',
  );
  return {
    tracer: provider.getTracer('stewardd', o.version),
    dropped: () => ({ ...dropped }),
    shutdown: async (timeoutMs) => {
      await settleWithin(provider.shutdown(), timeoutMs);
    },
  };
}
