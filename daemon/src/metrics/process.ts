// The daemon process's metrics: Node's defaults (steward_process_*, steward_nodejs_*, less three
// totals promtool's lint refuses), which build runs, whether it is ready, whether the installed shim
// is its own, the conflist it keeps, and the log lines and trace spans it dropped. Each reads its
// source at scrape time, set once it exists.

import { Counter, Gauge, collectDefaultMetrics, type Registry } from 'prom-client';
import { scrapedGauge } from './registry.js';

/** What steward_conflist_info says of the conflist the daemon keeps. */
export interface ConflistMetric {
  cniVersion: string;
  mode: string;
  runtime: string;
  statusAsked: boolean;
}

/** Why a span was dropped (tracing/export.ts): every reason is reported, 0 included. */
const TRACE_DROP_REASONS = ['queue_full', 'export_failed'] as const;
export type TraceDropReason = (typeof TRACE_DROP_REASONS)[number];

/** Where the process's gauges read their values; each answers "none" (0) until the daemon sets it. */
export interface ProcessSources {
  readiness: () => boolean;
  shimMismatch: () => number;
  conflist: () => ConflistMetric | undefined;
  logDropped: () => number;
  traceDropped: () => Record<TraceDropReason, number>;
}

export class ProcessMetrics {
  readonly sources: ProcessSources = {
    readiness: () => false,
    shimMismatch: () => 0,
    conflist: () => undefined,
    logDropped: () => 0,
    traceDropped: () => ({ queue_full: 0, export_failed: 0 }),
  };

  constructor(registry: Registry, version: string | undefined) {
    collectDefaultMetrics({ register: registry, prefix: 'steward_' });
    // prom-client's totals of three of its gauges are gauges named "_total", which `promtool check
    // metrics` refuses for a non-counter; each is the sum of its gauge by type, still exported
    // (steward_nodejs_active_handles{type}, …): sum() them.
    for (const kind of ['handles', 'requests', 'resources'])
      registry.removeSingleMetric(`steward_nodejs_active_${kind}_total`);
    const conflistInfo: Gauge<'cni_version' | 'mode' | 'runtime' | 'status_asked'> = new Gauge({
      name: 'steward_conflist_info',
      help: "1, labelled with the cniVersion steward's conflist is written at, how it was chosen (--cni-version), the runtime that said what it is, and whether that runtime asks STATUS (status_asked)",
      labelNames: ['cni_version', 'mode', 'runtime', 'status_asked'] as const,
      registers: [registry],
      // One series at a time: the conflist's version as read at this scrape (lifecycle/cni-version.ts).
      collect: () => {
        conflistInfo.reset();
        const c = this.sources.conflist();
        if (c === undefined) return;
        const labels = {
          cni_version: c.cniVersion,
          mode: c.mode,
          runtime: c.runtime,
          status_asked: String(c.statusAsked),
        };
        conflistInfo.set(labels, 1);
      },
    });
    scrapedGauge(
      registry,
      'steward_ready',
      '1 when the daemon is ready to serve ADDs (recovered, not shutting down, primary network known)',
      (g) => g.set(this.sources.readiness() ? 1 : 0),
    );
    scrapedGauge(
      registry,
      'steward_installed_shim_mismatch',
      "1 when the shim installed on the node is not this stewardd's own build (readiness fails until stewardd install)",
      (g) => g.set(this.sources.shimMismatch()),
    );
    this.registerDrops(registry);
    const info = new Gauge({
      name: 'steward_build_info',
      help: 'Always 1; the version label says which stewardd runs',
      labelNames: ['version'] as const,
      registers: [registry],
    });
    info.set({ version: version ?? 'unknown' }, 1);
  }

  /** The log-drop counter read from the sink (log.ts LogSink), the span drops from tracing/. */
  private registerDrops(registry: Registry): void {
    const dropped: Counter = new Counter({
      name: 'steward_log_lines_dropped_total',
      help: 'Log lines dropped because stdout was not read (more than 4 MiB waiting): log.ts LogSink',
      registers: [registry],
      collect: () => {
        dropped.reset();
        dropped.inc(this.sources.logDropped());
      },
    });
    const spansDropped: Counter<'reason'> = new Counter({
      name: 'steward_trace_spans_dropped_total',
      help: 'Trace spans dropped instead of exported (docs/tracing.md): the export queue was full (queue_full) or the collector did not take their batch in time (export_failed); 0 while tracing is off',
      labelNames: ['reason'] as const,
      registers: [registry],
      collect: () => {
        const d = this.sources.traceDropped();
        spansDropped.reset();
        for (const reason of TRACE_DROP_REASONS) spansDropped.inc({ reason }, d[reason]);
      },
    });
  }
}
