// Wiring for `stewardd run`: config -> state-dir lock -> socket dir -> store (quick_check) -> engine
// -> recovery -> server -> listen. A journal that fails its check runs degraded.ts instead.
// Owns the process-level concerns: signals, readiness, and a bounded graceful close.

import { readFileSync } from 'node:fs';
import type { Server as NetServer } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { createLogger, type LogSink } from './log.js';
import { type DaemonConfig } from './config.js';
import { openJournal, startDegraded, type Journal } from './degraded.js';
import type { Store } from './store/store.js';
import type { RunningDaemon } from './running-daemon.js';
import { Engine } from './engine/engine.js';
import { shutdownSequence } from './lifecycle/shutdown.js';
import { PrimaryWatcher } from './lifecycle/watcher.js';
import { decideAtStart } from './lifecycle/commands.js';
import type { ConflistVersionChoice } from './lifecycle/cni-version.js';
import { removeRestartRecord } from './lifecycle/restart-record.js';
import { StatusNotReady } from './status-not-ready.js';
import { conflistView } from './lifecycle/conflist-view.js';
import { ShimCheck } from './lifecycle/shim-check.js';
import { recover } from './engine/recovery.js';
import { RetryScheduler } from './engine/scheduler.js';
import { RetryClock, systemClock } from './engine/clock.js';
import { Metrics } from './metrics.js';
import { listenMetrics } from './metrics-listener.js';
import { PluginExecutor, type PluginRunner } from './plugins/executor.js';
import { buildApp } from './server.js';
import { Auditor } from './audit/auditor.js';
import { runtimeFor, type RuntimeSource } from './audit/runtime.js';
import { collectNodeAddresses, NET_FILES, NETNS_READ_TIMEOUT_MS } from './audit/node-addresses.js';
import { holdFlock } from './plugins/flock.js';
import { Priority } from './engine/limiter.js';
import { SelfCheck } from './self-check.js';
import { SpoolDirs } from './spool-dirs.js';
import { ConnectionGuard, listenAgain, prepareSocketPath, restrictSocket } from './socket.js';
import { takeOwnership, type OwnerLock } from './store/owner.js';
import { Tracing } from './tracing.js';
import { VERSION } from './version.js';

/**
 * /healthz fails when the journal's filesystem has less room than this: about 256 pages of 4 KiB,
 * a few hundred journaled steps. Below it, the next burst of ADDs would fail with SQLITE_FULL.
 */
export const MIN_JOURNAL_FREE_BYTES = 1024 * 1024;

/** How long an audit pass waits for host-local's lock of one network before skipping that network. */
const HOST_LOCAL_LOCK_WAIT_MS = 30_000;

const DEFAULT_PLUGIN_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** At shutdown, how long the spans still queued get to reach the collector. */
const TRACE_FLUSH_MS = 2000;

export { traceLogFields } from './tracing.js';

/**
 * The daemon's tracing (tracing.ts): spans exported over OTLP/HTTP when an endpoint is configured,
 * the SDK loaded only then (trace-export.ts); otherwise none are made.
 */
async function startTracing(cfg: DaemonConfig, log: Logger): Promise<Tracing> {
  const t = cfg.tracing;
  if (t.url === undefined) return new Tracing();
  const { startExport } = await import('./trace-export.js');
  return new Tracing(
    startExport({
      url: t.url,
      maxQueueSize: t.maxQueueSize,
      maxExportBatchSize: t.maxExportBatchSize,
      scheduledDelayMs: t.scheduledDelayMs,
      exportTimeoutMs: t.exportTimeoutMs,
      version: VERSION,
      log,
    }),
  );
}

export type { RunningDaemon } from './running-daemon.js';

export function readBootId(file: string): string {
  const id = readFileSync(file, 'utf8').trim();
  if (id === '') throw new Error(`boot id file ${file} is empty`);
  return id;
}

export async function startDaemon(
  cfg: DaemonConfig,
  log: Logger = createLogger(cfg.logLevel),
  logSink?: LogSink,
): Promise<RunningDaemon> {
  const startedAt = Date.now();
  // STEWARD_TEST_CLOCK_OFFSET_MS shifts the wall clock of the retry schedule and the journal's
  // timestamps: for tests only (a clock step between two runs), read here and nowhere else. See
  // docs/teardown.md, "Retry schedule and clock steps".
  const clock = new RetryClock(systemClock(Number(process.env.STEWARD_TEST_CLOCK_OFFSET_MS ?? 0) || 0));
  const bootId = readBootId(cfg.bootIdFile);
  // Before anything reads or writes the journal: a second daemon on this state dir stops here.
  const owner = takeOwnership([cfg.stateDir, dirname(cfg.dbPath)], cfg.socket);
  // The store's hooks count into the metrics, made once the journal is open (before any write), and
  // make a span of each commit within a trace (tracing.ts).
  const counted: { metrics?: Metrics; tracing?: Tracing } = {};
  let journal: Journal;
  try {
    await prepareSocketPath(cfg.socket);
    journal = openJournal(cfg.dbPath, {
      now: () => clock.wall(),
      onWriteError: (e) => counted.metrics?.countWriteError(e),
      onCommit: (seconds, synced) => {
        counted.metrics?.observeCommit(seconds, synced);
        counted.tracing?.commit(seconds, synced);
      },
    });
  } catch (e) {
    owner.release();
    throw e;
  }
  if ('corrupt' in journal) return startDegraded(cfg, owner, journal, log, startedAt);
  log.info({ db: cfg.dbPath, ms: Math.round(journal.checkMs) }, 'journal passed PRAGMA quick_check');
  // Every journal write SQLite refuses is counted in steward_db_write_errors_total (the metrics
  // object exists by the time the first write can fail: recovery runs after both are made).
  const metrics = new Metrics(journal.store, { spoolDir: cfg.spoolDir, version: VERSION });
  counted.metrics = metrics;
  const tracing = await startTracing(cfg, log);
  counted.tracing = tracing;
  metrics.setTraceDropped(() => tracing.dropped());
  return serve(cfg, { log, logSink, owner, store: journal.store, metrics, tracing, clock, bootId, startedAt });
}

interface Serving {
  log: Logger;
  logSink: LogSink | undefined;
  owner: OwnerLock;
  store: Store;
  metrics: Metrics;
  tracing: Tracing;
  clock: RetryClock;
  bootId: string;
  startedAt: number;
}

/**
 * The daemon on a journal that passed its check. Long on purpose: the order of these steps is the
 * start-up contract (recovery before the socket opens, the conflist in step before the first
 * request, readiness only once everything answers), and reads best in one place.
 */
async function serve(
  cfg: DaemonConfig,
  { log, logSink, owner, store, metrics, tracing, clock, bootId, startedAt }: Serving,
) {
  const { executor, run, engine, scheduler, spool } = engineParts(cfg, { store, metrics, tracing, clock, bootId, log });
  let ready = false;
  const runtime = runtimeFor(cfg.runtimeEndpoint);
  const { view, watcher, shimCheck, decideVersion } = nodeInstall(cfg, runtime, log);
  const connectionGuard = guardConnections(metrics, log);
  // The listener serving the socket path now: the HTTP server's own, or the one a relisten made.
  let listener: { close(): unknown } | undefined;
  let relistened: NetServer | undefined;
  const selfCheck = new SelfCheck({
    dbPath: cfg.dbPath,
    log,
    socket: {
      path: cfg.socket,
      relisten: async () => {
        relistened = await listenAgain(cfg.socket, app.server, listener ?? app.server, connectionGuard);
        listener = relistened;
      },
      onRelisten: (why) => metrics.socketRelistens.inc({ why }),
    },
  });
  const isReady = () =>
    ready &&
    (watcher?.ready() ?? true) &&
    selfCheck.problem() === undefined &&
    shimCheck?.problem() === undefined &&
    spool.problems().length === 0;
  const readyProblems = () => [
    ...[selfCheck.problem(), shimCheck?.problem()].filter((p): p is string => p !== undefined),
    ...spool.problems(),
  ];
  const health = healthCheck(store, executor, selfCheck, log);
  const auditor = buildAuditor(cfg, { store, engine, run, executor, runtime, metrics, log });
  metrics.setReadiness(isReady);
  if (shimCheck) metrics.setShimMismatch(() => shimCheck.mismatch());
  if (logSink) metrics.setLogDropped(() => logSink.dropped);
  const metricsListener = cfg.metricsListen ? await listenMetrics(cfg.metricsListen, metrics, log) : undefined;
  const app = buildApp({
    engine,
    journal: store,
    executions: () => ({ slots: engine.limiter.slots, inUse: engine.limiter.inUse, queued: engine.limiter.queued }),
    warnings: () => engine.configWarnings(),
    metrics,
    tracing,
    scheduler,
    log,
    isReady,
    readyProblems,
    isServing: () => ready,
    statusNotReady: new StatusNotReady(cfg.socket, metrics.registry),
    spoolDraining: () => spool.pending,
    version: VERSION,
    startedAt,
    health,
    audit: (opts) => auditor.run(opts),
    ...(cfg.cniConfDir ? { conflist: () => conflistView(cfg.stateDir, view.decided) } : {}),
  });
  if (cfg.cniConfDir)
    metrics.setConflistSource(() => {
      const v = conflistView(cfg.stateDir, view.decided);
      return v?.cniVersion == null
        ? undefined
        : { cniVersion: v.cniVersion, mode: v.choice.mode, runtime: v.runtime, statusAsked: v.statusAsked };
    });

  log.info(
    { db: cfg.dbPath, schema: store.schemaVersion, bootId, binDirs: cfg.binDirs },
    'stewardd starting; recovering journal',
  );
  await recover(engine, bootId, log);
  // Spooled DELs are drained after the socket opens (engine/spool.ts), from every spool dir the flags
  // and the install record name (spool-dirs.ts: not ready while one cannot be drained); their
  // containers wait for them.
  spool.scan();

  // The conflist in step before the first request is served (its version: the record's until
  // decideVersion below has asked the runtime).
  watcher?.scan();
  connectionGuard.watch(app.server);
  await app.listen({ path: cfg.socket });
  listener = app.server;
  restrictSocket(cfg.socket);
  selfCheck.start();
  shimCheck?.start();
  ready = true;
  // Serving: a planned restart's record has done its work (lifecycle/restart-record.ts).
  if (removeRestartRecord(cfg.socket, log)) log.info('restart record removed: this daemon serves');
  watcher?.start();
  decideVersion().catch((e: unknown) =>
    log.warn({ err: e }, 'deciding the conflist version failed; the record stands'),
  );
  void spool.start();
  scheduler.start();
  if (cfg.auditIntervalMs !== undefined)
    auditor.startPeriodic({ intervalMs: cfg.auditIntervalMs, release: cfg.auditRelease, graceMs: cfg.auditGraceMs });
  log.info({ socket: cfg.socket, version: VERSION }, 'stewardd ready');

  return shutdownSequence({
    cfg,
    log,
    owner,
    quiesce: () => {
      ready = false;
      watcher?.stop();
      // Before the server closes: closing it unlinks the socket path, which is no deletion to repair.
      selfCheck.stop();
    },
    // A pass in progress finishes (bounded by the grace) before the journal closes under it. A
    // relistened socket stops taking connections as the server's own would (app.close closes that one).
    stopServing: () => {
      relistened?.close();
      return Promise.all([app.close(), auditor.stop()]);
    },
    release: async () => {
      shimCheck?.stop();
      await spool.stop();
      connectionGuard.stop();
      await scheduler.stop();
      await metricsListener?.close();
      executor.close();
      runtime.close();
      await tracing.shutdown(TRACE_FLUSH_MS);
      store.close();
    },
  });
}

/**
 * The engine and what runs its plugins: the executor (metered), the retry scheduler, the spool
 * drain (every spool dir named: spool-dirs.ts).
 */
function engineParts(
  cfg: DaemonConfig,
  {
    store,
    metrics,
    tracing,
    clock,
    bootId,
    log,
  }: { store: Store; metrics: Metrics; tracing: Tracing; clock: RetryClock; bootId: string; log: Logger },
) {
  const executor = new PluginExecutor({
    binDirs: cfg.binDirs,
    timeoutMs: cfg.pluginTimeoutMs,
    path: process.env.PATH ?? DEFAULT_PLUGIN_PATH,
    log,
    tracing,
  });
  executor.warm();
  const run: PluginRunner = metrics.instrument(executor.run);
  const engine = new Engine({
    store,
    run,
    locate: executor.locate,
    log,
    metrics,
    bootId,
    maxParallel: cfg.maxParallel,
    delPolicy: cfg.delPolicy,
    retry: cfg.retry,
    answerBeforeFinalCommit: true,
    hostNetns: '/proc/self/ns/net',
    clock,
  });
  const scheduler = new RetryScheduler({
    engine,
    store,
    log,
    pollMs: Math.min(1000, cfg.retry.baseDelayMs),
    tombstoneTtlMs: cfg.tombstoneTtlMs,
    pruneEveryMs: cfg.pruneIntervalMs,
    spoolDir: cfg.spoolDir,
  });
  const spool = new SpoolDirs({
    engine,
    own: cfg.spoolDir,
    stateDir: cfg.stateDir,
    log,
    onTempRemoved: (n) => metrics.spoolTempFilesRemoved.inc(n),
  });
  metrics.setSpoolDirs(() => spool.dirs());
  return { executor, run, engine, scheduler, spool };
}

/**
 * With --cni-conf-dir, the node's install this daemon keeps: the conflist's version decided again
 * (lifecycle/cni-version.ts), the primary watcher and the installed-shim check.
 */
function nodeInstall(cfg: DaemonConfig, runtime: RuntimeSource, log: Logger) {
  const watcher = cfg.cniConfDir
    ? new PrimaryWatcher({ confDir: cfg.cniConfDir, stateDir: cfg.stateDir, socket: cfg.socket, log })
    : undefined;
  // Only where this daemon keeps the node's install (--cni-conf-dir): the installed shim must be its own.
  const shimCheck = cfg.cniConfDir ? new ShimCheck({ stateDir: cfg.stateDir, ownShim: cfg.shim, log }) : undefined;
  const view: { decided: ConflistVersionChoice | undefined } = { decided: undefined };
  /**
   * The conflist's version decided again at every start (the DaemonSet's): a runtime upgraded to one
   * that calls STATUS gets 1.1.0, one downgraded below it the primary's version back. Run once the
   * daemon serves, never before: a runtime slow to answer its Version must not keep the successor
   * of a rolling update from serving (until then the record's choice, install's, stands). A runtime
   * that does not answer proves nothing: the record's choice then stays; more than one runtime socket
   * is the primary's version, as install writes it (commands.ts decideAtStart).
   */
  const decideVersion = async (): Promise<void> => {
    if (!cfg.cniConfDir || !watcher) return;
    view.decided = await decideAtStart(cfg.cniVersion, cfg.runtimeEndpoint, log, runtime, (c) =>
      watcher.chooseVersion(c),
    );
  };
  return { view, watcher, shimCheck, decideVersion };
}

/** Connections past the descriptor budget closed at once, counted and logged (socket.ts). */
function guardConnections(metrics: Metrics, log: Logger): ConnectionGuard {
  const connectionGuard: ConnectionGuard = new ConnectionGuard(
    (why) => metrics.connectionsRefused.inc({ why }),
    (refused, why) =>
      log.error(
        { refused, why, maxConnections: connectionGuard.maxConnections },
        'connections to the socket closed at once for want of file descriptors (steward_connections_refused_total): raise the open files limit or find what holds them',
      ),
  );
  return connectionGuard;
}

/** /healthz: the journal can be written and plugins started; a change of verdict is logged once. */
function healthCheck(store: Store, executor: PluginExecutor, selfCheck: SelfCheck, log: Logger) {
  let lastHealth = '';
  const health = async (): Promise<string[]> => {
    const problems: string[] = [];
    const db = store.writeProbe(MIN_JOURNAL_FREE_BYTES);
    if (db !== undefined) problems.push(db);
    const spawner = await executor.health();
    if (spawner !== undefined) problems.push(spawner);
    const self = selfCheck.problem();
    if (self !== undefined) problems.push(self);
    const now = problems.join('; ');
    if (now !== lastHealth) {
      if (now === '') log.info('healthy again');
      else log.warn({ problems }, 'unhealthy');
      lastHealth = now;
    }
    return problems;
  };
  return health;
}

interface AuditParts {
  store: Store;
  engine: Engine;
  run: PluginRunner;
  executor: PluginExecutor;
  runtime: RuntimeSource;
  metrics: Metrics;
  log: Logger;
}

/** The audit (audit/): its passes over what the node holds, asking this daemon's runtime. */
function buildAuditor(cfg: DaemonConfig, { store, engine, run, executor, runtime, metrics, log }: AuditParts): Auditor {
  return new Auditor(
    {
      journal: store,
      teardown: (id) => engine.runTeardown(id, Priority.Background, { force: true }),
      run,
      listSandboxes: runtime.listSandboxes,
      runtime: () => runtime.info(),
      leaseDirs: cfg.auditLeaseDirs,
      cacheDir: cfg.auditCacheDir,
      readNat: (family) => executor.runTool(`${family}-save`, ['-t', 'nat']),
      firstSeen: new Map<string, number>(),
      portmapNetworks: cfg.auditPortmapNetworks,
      lockNetwork: async (file) => (await holdFlock(file, HOST_LOCAL_LOCK_WAIT_MS)).release,
      nodeAddresses: (netnsDirs) =>
        collectNodeAddresses({
          netnsDirs,
          readInNetns: async (path) => {
            // Short: one namespace that hangs makes the proof incomplete, it does not hold the pass.
            const net = `--net=${path}`;
            const fib = await executor.runTool('nsenter', [net, 'cat', NET_FILES[0]], NETNS_READ_TIMEOUT_MS);
            // No if_inet6 where IPv6 is off in that namespace.
            const v6 = await executor
              .runTool('nsenter', [net, 'cat', NET_FILES[1]], NETNS_READ_TIMEOUT_MS)
              .catch(() => '');
            return `${fib}\n${v6}`;
          },
        }),
      sightings: store.sightings,
      log,
    },
    log,
    metrics.recordAudit,
    (socket) => runtimeFor(socket),
  );
}
