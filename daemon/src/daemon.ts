// Wiring for `stewardd run`: state-dir lock -> socket dir -> store (quick_check; degraded.ts if it
// fails) -> engine -> recovery -> server -> listen. Owns signals, readiness and a bounded graceful close;
// what it starts (engine, scheduler, spool drain, audit, install, /healthz) is built in daemon-parts.ts.

import { readFileSync } from 'node:fs';
import type { Server as NetServer, Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { createLogger, type LogSink } from './log.js';
import { type DaemonConfig } from './config.js';
import { openJournal, startDegraded, type Journal } from './degraded.js';
import type { Store } from './store/store.js';
import type { RunningDaemon } from './running-daemon.js';
import { shutdownSequence } from './lifecycle/shutdown.js';
import { FailedBeforeServing } from './lifecycle/failed-start.js';
import { removeRestartRecord } from './lifecycle/restart-record.js';
import { AliveBeacon } from './lifecycle/alive-beacon.js';
import { StatusNotReady } from './status-not-ready.js';
import { conflistView } from './lifecycle/conflist-view.js';
import { recover } from './engine/recovery.js';
import { RetryClock, systemClock } from './engine/clock.js';
import { Metrics } from './metrics.js';
import { keepListeningMetrics } from './metrics-listener.js';
import { buildApp } from './server.js';
import { runtimeFor } from './audit/runtime.js';
import { SelfCheck } from './self-check.js';
import {
  buildAuditor,
  engineParts,
  guardConnections,
  healthCheck,
  journalWritable,
  nodeInstall,
  startTracing,
} from './daemon-parts.js';
import { listenAgain, prepareSocketPath, restrictSocket } from './socket.js';
import { takeOwnership, type OwnerLock } from './store/owner.js';
import { Tracing } from './tracing/tracing.js';
import { VERSION } from './version.js';
import { isOwnMountNs, mountNsProblem, PLUGIN_MOUNT_NS_ENV } from './plugins/mount-ns.js';
import { setOwnPriority } from './priority.js';
import { settleWithin } from './settle-within.js';

/** At shutdown, how long the spans still queued get to reach the collector. */
const TRACE_FLUSH_MS = 2000;
/** How long shutdown waits for an alive beat still being written to land (lifecycle/alive-beacon.ts). */
const BEACON_LAND_MS = 1000;
/** How long past --plugin-timeout a running recovery teardown gets to land in the journal at shutdown. */
const RECOVERY_LAND_MS = 2000;

export { traceLogFields } from './tracing/context.js';

export type { RunningDaemon } from './running-daemon.js';

export function readBootId(file: string): string {
  const id = readFileSync(file, 'utf8').trim();
  if (id === '') throw new Error(`boot id file ${file} is empty`);
  return id;
}

/** --nice: stewardd's threads above the priority of the work it starts (priority.ts); never fatal. */
function applyNice(nice: number | undefined, log: Logger): void {
  if (nice === undefined) return;
  try {
    const { before } = setOwnPriority(nice);
    log.info({ nice, before }, 'stewardd runs at its own priority; its delegates at the one it was started with');
  } catch (e) {
    log.warn(
      { nice, err: (e as Error).message },
      "cannot set stewardd's priority (--nice; needs CAP_SYS_NICE): left as started",
    );
  }
}

export async function startDaemon(
  cfg: DaemonConfig,
  log: Logger = createLogger(cfg.logLevel),
  logSink?: LogSink,
): Promise<RunningDaemon> {
  const startedAt = Date.now();
  applyNice(cfg.nice, log);
  // STEWARD_TEST_CLOCK_OFFSET_MS shifts the wall clock of the retry schedule and the journal's
  // timestamps: for tests only (a clock step between two runs), read here and nowhere else. See
  // docs/teardown.md, "Retry schedule and clock steps".
  const clock = new RetryClock(systemClock(Number(process.env.STEWARD_TEST_CLOCK_OFFSET_MS ?? 0) || 0));
  const bootId = readBootId(cfg.bootIdFile);
  // Before anything reads or writes the journal: a second daemon on this state dir stops here.
  const owner = takeOwnership([cfg.stateDir, dirname(cfg.dbPath)], cfg.socket);
  // The store's hooks count into the metrics, made once the journal is open (before any write), and
  // make a span of each commit within a trace (tracing/).
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
    throw new FailedBeforeServing(e);
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
 * start-up contract (recovery begun, and waited for up to --recovery-wait, before the socket opens;
 * the conflist in step before the first request; readiness only once everything answers), and reads
 * best in one place.
 */
async function serve(
  cfg: DaemonConfig,
  { log, logSink, owner, store, metrics, tracing, clock, bootId, startedAt }: Serving,
) {
  // Before the spawner forks: it reads where its plugins run from the environment (plugins/mount-ns.ts).
  if (cfg.pluginMountNs !== undefined) {
    const problem = mountNsProblem(cfg.pluginMountNs);
    if (problem !== undefined) throw new Error(problem);
    process.env[PLUGIN_MOUNT_NS_ENV] = cfg.pluginMountNs;
    if (isOwnMountNs(cfg.pluginMountNs))
      log.warn(
        { pluginMountNs: cfg.pluginMountNs },
        "--plugin-mount-ns names stewardd's own mount namespace: delegates see this pod's files, not the node's (is hostPID set?)",
      );
    else log.info({ pluginMountNs: cfg.pluginMountNs }, 'delegate plugins run in the mount namespace given');
  }
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
  const journal = journalWritable(store, log);
  const isReady = (): boolean =>
    ready &&
    journal.problem() === undefined &&
    (watcher?.ready() ?? true) &&
    selfCheck.problem() === undefined &&
    shimCheck?.problem() === undefined &&
    spool.problems().length === 0;
  const readyProblems = () => [
    ...[journal.problem(), watcher?.problem(), selfCheck.problem(), shimCheck?.problem()].filter(
      (p): p is string => p !== undefined,
    ),
    ...spool.problems(),
  ];
  const health = healthCheck(executor, selfCheck, log);
  const aliveBeacon = new AliveBeacon(cfg.socket, isReady, log);
  const auditor = buildAuditor(cfg, { store, engine, run, executor, runtime, metrics, log });
  metrics.setReadiness(isReady);
  if (shimCheck) metrics.setShimMismatch(() => shimCheck.mismatch());
  if (logSink) metrics.setLogDropped(() => logSink.dropped);
  const metricsListener = cfg.metricsListen ? keepListeningMetrics(cfg.metricsListen, metrics, log) : undefined;
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
    aliveBeacon,
    spoolDraining: () => spool.pending,
    version: VERSION,
    startedAt,
    health,
    audit: (opts, callerGone) => auditor.run(opts, callerGone),
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
  // Bounded: a reboot's sweep of plugins that hang (110 pods × --plugin-timeout) kept the socket closed
  // past the startup probe, and the restart began the sweep again. The rest runs while stewardd serves,
  // on the lists it took before the socket opened (engine/recovery.ts), each container's requests
  // queued behind its own teardown (engine.runTeardown).
  let recoveryStopped = false;
  let recovered = false;
  const recovery = recover(engine, bootId, log, () => recoveryStopped).then((r) => {
    // What it did not start, or could not run, waits in the journal for the next start.
    recovered = r.notStarted === 0 && r.couldNotRun === 0;
    return r;
  });
  if (await settleWithin(recovery, cfg.recoveryWaitMs)) await recovery;
  else {
    log.warn({ recoveryWaitMs: cfg.recoveryWaitMs }, 'recovery still running: it goes on while stewardd serves');
    recovery.catch((e: unknown) => log.error({ err: e }, 'recovery failed while stewardd served'));
  }
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
  // Only microtasks until ready: no request is answered in between (ShimCheck.start).
  await shimCheck?.start();
  ready = true;
  // Its first beat is written in place (microtasks only): the beacon exists before any answer says ready.
  await aliveBeacon.start();
  app.server.on('connection', (c: Socket) => aliveBeacon.watch(c)); // a shim's call is one (a relisten's too)
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
  // Serving is not ready while something keeps it from it (a journal another process holds locked):
  // the start-up line says which, as /readyz does, not "ready" beside its own "not ready" (hostile run).
  const notYet = readyProblems();
  if (notYet.length === 0) log.info({ socket: cfg.socket, version: VERSION }, 'stewardd ready');
  else
    log.warn(
      { socket: cfg.socket, version: VERSION, problems: notYet },
      'stewardd serves, but is NOT ready: see problems (/readyz answers 200 once none is left)',
    );

  let beaconStopped: Promise<void> = Promise.resolve();
  return shutdownSequence({
    cfg,
    log,
    owner,
    quiesce: () => {
      ready = false;
      beaconStopped = aliveBeacon.stop();
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
      // A beat still being written lands (and is removed) before the state dir's lock lets a
      // successor write its own beacon, or the process exits; bounded: a hung /run holds no shutdown.
      await settleWithin(beaconStopped, BEACON_LAND_MS);
      // Recovery still running starts no more teardowns; the ones running land in the journal.
      recoveryStopped = true;
      await settleWithin(recovery, cfg.pluginTimeoutMs + RECOVERY_LAND_MS);
      shimCheck?.stop();
      journal.stop();
      await spool.stop();
      connectionGuard.stop();
      await scheduler.stop();
      await metricsListener?.close();
      executor.close();
      runtime.close();
      await tracing.shutdown(TRACE_FLUSH_MS);
      store.close();
    },
    unfinished: () => (recovered ? undefined : 'start-up recovery did not finish'),
  });
}
