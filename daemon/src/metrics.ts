// Prometheus metrics (prom-client), all named steward_*: one registry, filled by area (metrics/:
// requests, journal, teardown, audit, spool, socket, process). Counters are bumped where things
// happen; gauges that mirror the database or the spool dir are computed on scrape so they never drift.
// docs/metrics.md lists every metric and what to alert on; deploy/monitoring/ ships the rules.

import { Registry } from 'prom-client';
import type { PluginRunner } from './plugins/executor.js';
import { AuditMetrics } from './metrics/audit.js';
import { cachedCounts, JournalMetrics, type GaugeSource } from './metrics/journal.js';
import { ProcessMetrics, type ConflistMetric, type TraceDropReason } from './metrics/process.js';
import { RequestMetrics } from './metrics/requests.js';
import { SocketMetrics } from './metrics/socket.js';
import { SpoolMetrics } from './metrics/spool.js';
import { TeardownMetrics } from './metrics/teardown.js';

export type { AuditPassFigures } from './metrics/audit.js';
export type { GaugeSource } from './metrics/journal.js';
export type { ConflistMetric } from './metrics/process.js';
export { countSpooled } from './metrics/spool.js';

export interface MetricsOptions {
  /** Spooled DELs waiting here (*.json) are counted on scrape. */
  spoolDir?: string | undefined;
  version?: string | undefined;
  now?: () => number;
}

export class Metrics {
  readonly registry = new Registry();
  readonly request: RequestMetrics;
  readonly journal: JournalMetrics;
  readonly teardown: TeardownMetrics;
  readonly audit: AuditMetrics;
  readonly spool: SpoolMetrics;
  readonly socket: SocketMetrics;
  readonly process: ProcessMetrics;

  // The names the engine, routes/ and the daemon bump, kept flat: engine/ and routes/admission.ts are
  // mutation-tested and keep their spelling until their next mutation run.
  readonly requests: RequestMetrics['requests'];
  readonly requestSeconds: RequestMetrics['requestSeconds'];
  readonly queueWaitSeconds: RequestMetrics['queueWaitSeconds'];
  readonly coalescedDels: RequestMetrics['coalescedDels'];
  readonly versionSkew: RequestMetrics['versionSkew'];
  readonly statusAfterShimLeft: RequestMetrics['statusAfterShimLeft'];
  readonly teardownFailures: TeardownMetrics['failures'];
  readonly abandonedSteps: TeardownMetrics['abandonedSteps'];
  readonly socketRelistens: SocketMetrics['relistens'];
  readonly connectionsRefused: SocketMetrics['connectionsRefused'];
  readonly spoolTempFilesRemoved: SpoolMetrics['tempFilesRemoved'];
  /** The Store's onCommit hook: every committed journal write, timed. */
  readonly observeCommit: (seconds: number, synced: boolean) => void;
  /** The Store's onWriteError hook: one count per journal write that failed. */
  readonly countWriteError: (err: Error) => void;
  /** One audit pass's outcome (audit/auditor.ts onPass). A failed pass leaves the orphan gauges as they were. */
  readonly recordAudit: AuditMetrics['record'];

  constructor(source: GaugeSource, opts: MetricsOptions = {}) {
    const counts = cachedCounts(source);
    this.request = new RequestMetrics(this.registry);
    this.journal = new JournalMetrics(this.registry, counts);
    this.teardown = new TeardownMetrics(this.registry, source, counts, opts.now ?? Date.now);
    this.audit = new AuditMetrics(this.registry);
    this.spool = new SpoolMetrics(this.registry, opts.spoolDir);
    this.socket = new SocketMetrics(this.registry);
    this.process = new ProcessMetrics(this.registry, opts.version);
    this.requests = this.request.requests;
    this.requestSeconds = this.request.requestSeconds;
    this.queueWaitSeconds = this.request.queueWaitSeconds;
    this.coalescedDels = this.request.coalescedDels;
    this.statusAfterShimLeft = this.request.statusAfterShimLeft;
    this.versionSkew = this.request.versionSkew;
    this.teardownFailures = this.teardown.failures;
    this.abandonedSteps = this.teardown.abandonedSteps;
    this.socketRelistens = this.socket.relistens;
    this.connectionsRefused = this.socket.connectionsRefused;
    this.spoolTempFilesRemoved = this.spool.tempFilesRemoved;
    this.observeCommit = this.journal.observeCommit;
    this.countWriteError = this.journal.countWriteError;
    this.recordAudit = this.audit.record;
  }

  /** The dirs steward_spool_pending_dels counts (spool-dirs.ts: every one drained); until called, opts.spoolDir. */
  setSpoolDirs(dirs: () => readonly string[]): void {
    this.spool.setSpoolDirs(dirs);
  }

  /** What steward_ready reports; until called, 0. */
  setReadiness(isReady: () => boolean): void {
    this.process.sources.readiness = isReady;
  }

  /** Where steward_conflist_info reads the conflist's version at each scrape (one series at a time). */
  setConflistSource(source: () => ConflistMetric | undefined): void {
    this.process.sources.conflist = source;
  }

  /** What steward_log_lines_dropped_total reports (log.ts LogSink.dropped); until called, 0. */
  setLogDropped(dropped: () => number): void {
    this.process.sources.logDropped = dropped;
  }

  /** What steward_trace_spans_dropped_total reports (tracing/tracing.ts Tracing.dropped); until called, 0. */
  setTraceDropped(dropped: () => Record<TraceDropReason, number>): void {
    this.process.sources.traceDropped = dropped;
  }

  /** What steward_installed_shim_mismatch reports (lifecycle/shim-check.ts); until called, 0. */
  setShimMismatch(mismatch: () => number): void {
    this.process.sources.shimMismatch = mismatch;
  }

  /** Wraps a PluginRunner so every execution is counted and timed by plugin type and command. */
  instrument(run: PluginRunner): PluginRunner {
    return this.request.instrument(run);
  }
}
