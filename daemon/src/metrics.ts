// Prometheus metrics (prom-client), all named steward_*. Counters are bumped where things happen;
// gauges that mirror the database or the spool dir are computed on scrape so they never drift.
// docs/metrics.md lists every metric and what to alert on; deploy/monitoring/ ships the rules.

import { opendirSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { UNVERSIONED_PROTOCOL } from '@cni-steward/shared';
import type { PluginRunner } from './plugins/executor.js';

export interface GaugeSource {
  counts(): { attachments: Record<string, number>; steps: Record<string, number> };
  oldestPendingTeardownAt(): number | undefined;
  countPendingTeardowns(): number;
}

/**
 * What the audit metrics read of one pass (audit/auditor.ts hands its PassOutcome, which has this
 * shape): metrics know nothing else of the audit.
 */
export interface AuditPassFigures {
  /** When the pass finished (ms since epoch). */
  at: number;
  graceMs: number;
  /** Undefined when the pass itself failed (`error`). */
  report?: {
    orphans: ReadonlyArray<{ kind: string; released: boolean; ageSeconds: number | null }>;
    runtime: {
      reachable: boolean;
      endpoint?: string | null;
      sandboxes?: number;
      message?: string;
      lostDuringPass?: boolean;
      distrusted?: string;
    };
  };
  error?: Error;
}

/** What steward_conflist_info says of the conflist the daemon keeps. */
export interface ConflistMetric {
  cniVersion: string;
  mode: string;
  runtime: string;
  statusAsked: boolean;
}

/** Why a span was dropped (trace-export.ts): every reason is reported, 0 included. */
const TRACE_DROP_REASONS = ['queue_full', 'export_failed'] as const;
type TraceDropReason = (typeof TRACE_DROP_REASONS)[number];

/** Every kind of audit finding is reported, 0 included. */
const AUDIT_KINDS = ['lease', 'cache', 'portmap', 'attachment'] as const;
const ATTACHMENT_STATES = ['adding', 'added', 'deleting', 'deleted'] as const;
const STEP_STATES = [
  'planned',
  'adding',
  'added',
  'add_failed',
  'deleting',
  'del_failed',
  'deleted',
  'abandoned',
] as const;

export interface MetricsOptions {
  /** Spooled DELs waiting here (*.json) are counted on scrape. */
  spoolDir?: string | undefined;
  version?: string | undefined;
  now?: () => number;
}

/** Spool files the shim wrote that the daemon has not ingested yet; 0 when the dir does not exist. */
export function countSpooled(dir: string): number {
  // Iterated, not listed at once: a backlog can be 100,000 files.
  let d;
  try {
    d = opendirSync(dir, { bufferSize: 256 });
  } catch {
    return 0;
  }
  let n = 0;
  try {
    for (let e = d.readSync(); e !== null; e = d.readSync()) if (e.name.endsWith('.json')) n++;
  } finally {
    d.closeSync();
  }
  return n;
}

export class Metrics {
  readonly registry = new Registry();
  /** Every answered CNI request by command and CNI error code ("0": success). */
  readonly requests = new Counter({
    name: 'steward_cni_requests_total',
    help: 'CNI requests answered, by command and CNI error code (0 = success)',
    labelNames: ['command', 'code'] as const,
    registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: 'steward_cni_request_duration_seconds',
    help: 'Time to answer a CNI request',
    labelNames: ['command'] as const,
    registers: [this.registry],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });
  readonly pluginExecutions = new Counter({
    name: 'steward_plugin_executions_total',
    help: 'Delegate plugin executions, by plugin type, command and outcome',
    labelNames: ['plugin', 'command', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly pluginSeconds = new Histogram({
    name: 'steward_plugin_duration_seconds',
    help: 'Wall time of one delegate plugin execution, by plugin type and command',
    labelNames: ['plugin', 'command'] as const,
    registers: [this.registry],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  });
  readonly journalCommitSeconds = new Histogram({
    name: 'steward_journal_commit_seconds',
    help: 'Time of one journal write transaction, commit included, by whether it was synced (fsync) or relaxed',
    labelNames: ['synced'] as const,
    registers: [this.registry],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });
  readonly queueWaitSeconds = new Histogram({
    name: 'steward_queue_wait_seconds',
    help: "Time a request or teardown waited in its container's queue before it started",
    registers: [this.registry],
    buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
  });
  readonly teardownFailures = new Counter({
    name: 'steward_teardown_failures_total',
    help: 'Failed delegate DELs (each is retried)',
    labelNames: ['plugin'] as const,
    registers: [this.registry],
  });
  readonly abandonedSteps = new Counter({
    name: 'steward_teardown_abandoned_total',
    help: 'Teardown steps given up on after the retry bound',
    labelNames: ['plugin'] as const,
    registers: [this.registry],
  });
  readonly coalescedDels = new Counter({
    name: 'steward_del_coalesced_total',
    help: 'DELs answered by joining one queued or in flight, or by a tombstone',
    labelNames: ['how'] as const,
    registers: [this.registry],
  });
  readonly dbWriteErrors = new Counter({
    name: 'steward_db_write_errors_total',
    help: 'Journal writes the database refused (disk full, I/O error, read-only)',
    registers: [this.registry],
  });
  readonly versionSkew = new Counter({
    name: 'steward_version_skew_seen_total',
    help: 'Shim requests refused because the shim speaks a protocol version stewardd does not (code 108)',
    labelNames: ['shim_protocol'] as const,
    registers: [this.registry],
  });
  readonly socketRelistens = new Counter({
    name: 'steward_socket_relistens_total',
    help: 'Times stewardd listened on its socket path again after finding the socket file deleted or replaced',
    labelNames: ['why'] as const,
    registers: [this.registry],
  });
  /** Orphans the last audit pass found and left held, by kind. */
  readonly auditOrphans = new Gauge({
    name: 'steward_audit_orphans',
    help: 'Orphans (held by no sandbox the runtime lists) the last audit pass found and did not release, by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly auditOrphansPastGrace = new Gauge({
    name: 'steward_audit_orphans_past_grace',
    help: "Of steward_audit_orphans, those older than the pass's grace whose owner the runtime said is gone (a release would free them), by kind",
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly auditReleased = new Counter({
    name: 'steward_audit_released_total',
    help: 'Orphans released by audit passes, by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly auditRuntimeDistrusted = new Gauge({
    name: 'steward_audit_runtime_distrusted',
    help: "1 when the last audit pass did not trust the runtime's answer (its list contradicted the node: a pod steward set up with its netns present was missing, or ids not in the runtime's form), so it only reported",
    registers: [this.registry],
  });

  /** 1, labelled with the conflist's cniVersion and whether the runtime asks STATUS (lifecycle/cni-version.ts). */
  readonly conflistInfo: Gauge<'cni_version' | 'mode' | 'runtime' | 'status_asked'> = new Gauge({
    name: 'steward_conflist_info',
    help: "1, labelled with the cniVersion steward's conflist is written at, how it was chosen (--cni-version), the runtime that said what it is, and whether that runtime asks STATUS (status_asked)",
    labelNames: ['cni_version', 'mode', 'runtime', 'status_asked'] as const,
    registers: [this.registry],
    collect: () => this.collectConflist(),
  });

  private conflistSource: () => ConflistMetric | undefined = () => undefined;

  readonly auditLastRun = new Gauge({
    name: 'steward_audit_last_run_timestamp_seconds',
    help: 'When the last audit pass finished (Unix time; 0 before the first)',
    registers: [this.registry],
  });
  readonly auditLastSuccess = new Gauge({
    name: 'steward_audit_last_run_success',
    help: 'Whether the last audit pass succeeded: 1, or 0 when it failed or no container runtime answered (or none ran yet)',
    registers: [this.registry],
  });
  /** Connections to the CNI socket closed at once for want of file descriptors (socket.ts ConnectionGuard). */
  readonly connectionsRefused = new Counter({
    name: 'steward_connections_refused_total',
    help: 'Connections to the CNI socket closed at once for want of file descriptors: past the cap kept below RLIMIT_NOFILE (fd_cap), or accept(2) failing (EMFILE, ENFILE)',
    labelNames: ['why'] as const,
    registers: [this.registry],
  });
  /** Stale temp files the spool dirs' sweep removed (spool-dirs.ts). */
  readonly spoolTempFilesRemoved = new Counter({
    name: 'steward_spool_temp_files_removed_total',
    help: 'Spool temp files (.<name>.tmp) left by a writer killed mid-write, removed once older than 10 minutes',
    registers: [this.registry],
  });
  private readiness: () => boolean = () => false;
  private spoolDirs: (() => readonly string[]) | undefined;
  private shimMismatch: () => number = () => 0;
  private logDropped: () => number = () => 0;
  private traceDropped: () => Record<TraceDropReason, number> = () => ({ queue_full: 0, export_failed: 0 });

  /**
   * The gauges read at each scrape from the journal and the daemon's state. Long on purpose: one
   * gauge per metric, each a few lines, in the order the README's metrics table lists them.
   */
  constructor(source: GaugeSource, opts: MetricsOptions = {}) {
    const now = opts.now ?? Date.now;
    // One database read per scrape for the three gauges that need the counts (collect() runs per metric).
    let cached: { at: number; counts: ReturnType<GaugeSource['counts']> } | undefined;
    const counts = () => {
      const t = Date.now();
      if (cached === undefined || t - cached.at > 250) cached = { at: t, counts: source.counts() };
      return cached.counts;
    };
    collectDefaultMetrics({ register: this.registry, prefix: 'steward_' });
    // Exported at 0 from the start: an alert's increase() over a series that first appears at 1
    // misses a first lone skew. An older shim (protocol 1) is the skew a node meets.
    this.versionSkew.inc({ shim_protocol: String(UNVERSIONED_PROTOCOL) }, 0);
    const gauge = (name: string, help: string, collect: (g: Gauge) => void, labelNames: string[] = []) => {
      const g: Gauge = new Gauge({
        name,
        help,
        labelNames,
        registers: [this.registry],
        collect() {
          collect(g);
        },
      });
      return g;
    };
    // Every known state is reported, 0 included, so a series never vanishes when its count drops to 0.
    const byState = (g: Gauge, known: readonly string[], counts: Record<string, number>) => {
      g.reset();
      for (const state of known) g.set({ state }, counts[state] ?? 0);
      for (const [state, n] of Object.entries(counts)) if (!known.includes(state)) g.set({ state }, n);
    };
    gauge(
      'steward_attachments',
      'Attachments in the database, by state',
      (g) => byState(g, ATTACHMENT_STATES, counts().attachments),
      ['state'],
    );
    gauge('steward_steps', 'Delegate steps in the database, by state', (g) => byState(g, STEP_STATES, counts().steps), [
      'state',
    ]);
    gauge(
      'steward_teardown_pending_steps',
      'Teardown steps still owing a successful DEL (failed and waiting for a retry, or running)',
      (g) => g.set(source.countPendingTeardowns()),
    );
    gauge(
      'steward_teardown_abandoned_steps',
      'Teardown steps given up on and still in the database: resources an operator must release by hand',
      (g) => g.set(counts().steps.abandoned ?? 0),
    );
    gauge('steward_oldest_pending_teardown_seconds', 'Age of the oldest unfinished teardown (0 when none)', (g) => {
      const t = source.oldestPendingTeardownAt();
      g.set(t === undefined ? 0 : Math.max(0, (now() - t) / 1000));
    });
    const spoolDir = opts.spoolDir;
    gauge(
      'steward_spool_pending_dels',
      'DELs the shim spooled while the daemon was unreachable, not ingested yet',
      (g) => {
        const dirs = this.spoolDirs?.() ?? (spoolDir === undefined ? [] : [spoolDir]);
        g.set(dirs.reduce((n, d) => n + countSpooled(d), 0));
      },
    );
    gauge(
      'steward_ready',
      '1 when the daemon is ready to serve ADDs (recovered, not shutting down, primary network known)',
      (g) => g.set(this.readiness() ? 1 : 0),
    );
    gauge(
      'steward_installed_shim_mismatch',
      "1 when the shim installed on the node is not this stewardd's own build (readiness fails until stewardd install)",
      (g) => g.set(this.shimMismatch()),
    );
    this.registerOwn(opts.version);
    this.zeroSeries();
  }

  /** The log-drop counter read from the sink, and the build info. */
  private registerOwn(version: string | undefined): void {
    const dropped: Counter = new Counter({
      name: 'steward_log_lines_dropped_total',
      help: 'Log lines dropped because stdout was not read (more than 4 MiB waiting): log.ts LogSink',
      registers: [this.registry],
      collect: () => {
        dropped.reset();
        dropped.inc(this.logDropped());
      },
    });
    const info = new Gauge({
      name: 'steward_build_info',
      help: 'Always 1; the version label says which stewardd runs',
      labelNames: ['version'] as const,
      registers: [this.registry],
    });
    info.set({ version: version ?? 'unknown' }, 1);
    const spansDropped: Counter<'reason'> = new Counter({
      name: 'steward_trace_spans_dropped_total',
      help: 'Trace spans dropped instead of exported (docs/tracing.md): the export queue was full (queue_full) or the collector did not take their batch in time (export_failed); 0 while tracing is off',
      labelNames: ['reason'] as const,
      registers: [this.registry],
      collect: () => {
        const d = this.traceDropped();
        spansDropped.reset();
        for (const reason of TRACE_DROP_REASONS) spansDropped.inc({ reason }, d[reason]);
      },
    });
  }

  /** Series that exist from the first scrape, so rate() and error ratios have a denominator. */
  private zeroSeries(): void {
    for (const command of ['ADD', 'DEL', 'CHECK']) this.requests.inc({ command, code: '0' }, 0);
    for (const kind of AUDIT_KINDS) {
      this.auditOrphans.set({ kind }, 0);
      this.auditOrphansPastGrace.set({ kind }, 0);
      this.auditReleased.inc({ kind }, 0);
    }
    this.auditLastRun.set(0);
    this.auditLastSuccess.set(0);
    this.auditRuntimeDistrusted.set(0);
    this.coalescedDels.inc({ how: 'joined' }, 0);
    this.coalescedDels.inc({ how: 'tombstone' }, 0);
    for (const why of ['fd_cap', 'EMFILE', 'ENFILE']) this.connectionsRefused.inc({ why }, 0);
  }

  /** The dirs steward_spool_pending_dels counts (spool-dirs.ts: every one drained); until called, opts.spoolDir. */
  setSpoolDirs(dirs: () => readonly string[]): void {
    this.spoolDirs = dirs;
  }

  /** What steward_ready reports; until called, 0. */
  setReadiness(isReady: () => boolean): void {
    this.readiness = isReady;
  }

  /** Where steward_conflist_info reads the conflist's version at each scrape (one series at a time). */
  setConflistSource(source: () => ConflistMetric | undefined): void {
    this.conflistSource = source;
  }

  private collectConflist(): void {
    this.conflistInfo.reset();
    const c = this.conflistSource();
    if (c === undefined) return;
    const labels = { cni_version: c.cniVersion, mode: c.mode, runtime: c.runtime, status_asked: String(c.statusAsked) };
    this.conflistInfo.set(labels, 1);
  }

  /** What steward_log_lines_dropped_total reports (log.ts LogSink.dropped); until called, 0. */
  setLogDropped(dropped: () => number): void {
    this.logDropped = dropped;
  }

  /** What steward_trace_spans_dropped_total reports (tracing.ts Tracing.dropped); until called, 0. */
  setTraceDropped(dropped: () => Record<TraceDropReason, number>): void {
    this.traceDropped = dropped;
  }

  /** What steward_installed_shim_mismatch reports (lifecycle/shim-check.ts); until called, 0. */
  setShimMismatch(mismatch: () => number): void {
    this.shimMismatch = mismatch;
  }

  /** One audit pass's outcome (audit/auditor.ts onPass). A failed pass leaves the orphan gauges as they were. */
  readonly recordAudit = (o: AuditPassFigures): void => {
    this.auditLastRun.set(o.at / 1000);
    const r = o.report;
    const distrusted = r?.runtime.distrusted !== undefined;
    this.auditLastSuccess.set(r !== undefined && r.runtime.reachable && !distrusted ? 1 : 0);
    if (r === undefined) return;
    this.auditRuntimeDistrusted.set(distrusted ? 1 : 0);
    const held = new Map<string, number>();
    const past = new Map<string, number>();
    for (const x of r.orphans) {
      if (x.released) {
        this.auditReleased.inc({ kind: x.kind });
        continue;
      }
      held.set(x.kind, (held.get(x.kind) ?? 0) + 1);
      // Past the grace only when the runtime said its owner is gone (its first ask answered): with no
      // runtime the owner is unknown (StewardAuditFailing says so), and nothing would be released.
      // A runtime whose answer contradicted the node does not tell who is gone either.
      const ownerKnown = (r.runtime.reachable || r.runtime.lostDuringPass === true) && !distrusted;
      if (ownerKnown && x.ageSeconds !== null && x.ageSeconds * 1000 >= o.graceMs)
        past.set(x.kind, (past.get(x.kind) ?? 0) + 1);
    }
    for (const kind of new Set([...AUDIT_KINDS, ...held.keys()])) {
      this.auditOrphans.set({ kind }, held.get(kind) ?? 0);
      this.auditOrphansPastGrace.set({ kind }, past.get(kind) ?? 0);
    }
  };

  /** The Store's onCommit hook: every committed journal write, timed. */
  readonly observeCommit = (seconds: number, synced: boolean): void => {
    this.journalCommitSeconds.observe({ synced: synced ? 'true' : 'false' }, seconds);
  };

  /** The Store's onWriteError hook: one count per journal write that failed. */
  readonly countWriteError = (_err: Error): void => {
    this.dbWriteErrors.inc();
  };

  /** Wraps a PluginRunner so every execution is counted and timed by plugin type and command. */
  instrument(run: PluginRunner): PluginRunner {
    return async (call) => {
      const labels = { plugin: call.type, command: call.command };
      const stop = this.pluginSeconds.startTimer(labels);
      try {
        const out = await run(call);
        this.pluginExecutions.inc({ ...labels, outcome: 'ok' });
        return out;
      } catch (e) {
        this.pluginExecutions.inc({ ...labels, outcome: 'error' });
        throw e;
      } finally {
        stop();
      }
    };
  }
}
