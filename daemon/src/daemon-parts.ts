// What `stewardd run` starts, each part built from the config (daemon.ts wires them, in the order
// its start-up contract needs): the tracing, the engine with its plugin executor, retry scheduler
// and spool drain, the node's install kept in step, the socket's descriptor guard, /healthz, and
// the audit.

import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { DaemonConfig } from './config.js';
import type { Store } from './store/store.js';
import { Engine } from './engine/engine.js';
import { PrimaryWatcher } from './lifecycle/watcher.js';
import { decideAtStart } from './lifecycle/commands.js';
import type { ConflistVersionChoice } from './lifecycle/cni-version.js';
import { ShimCheck } from './lifecycle/shim-check.js';
import { RetryScheduler } from './engine/scheduler.js';
import { releaseMasquerade } from './engine/masquerade.js';
import type { RetryClock } from './engine/clock.js';
import type { Metrics } from './metrics.js';
import { PluginExecutor, type PluginRunner } from './plugins/executor.js';
import { Auditor } from './audit/auditor.js';
import { runtimeFor, type RuntimeSource } from './audit/runtime.js';
import { collectNodeAddresses, NET_FILES, NETNS_READ_TIMEOUT_MS } from './audit/node-addresses.js';
import { holdFlock } from './plugins/flock.js';
import { Priority } from './engine/limiter.js';
import type { SelfCheck } from './self-check.js';
import { SpoolDirs } from './spool-dirs.js';
import { ConnectionGuard } from './socket.js';
import { loadTraceCore } from './tracing/context.js';
import { Tracing } from './tracing/tracing.js';
import { VERSION } from './version.js';

/**
 * /healthz fails when the journal's filesystem has less room than this: about 256 pages of 4 KiB,
 * a few hundred journaled steps. Below it, the next burst of ADDs would fail with SQLITE_FULL.
 */
export const MIN_JOURNAL_FREE_BYTES = 1024 * 1024;

/** How long an audit pass waits for host-local's lock of one network before skipping that network. */
const HOST_LOCAL_LOCK_WAIT_MS = 30_000;

const DEFAULT_PLUGIN_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The daemon's tracing (tracing/): spans exported over OTLP/HTTP when an endpoint is configured,
 * the SDK loaded only then (tracing/export.ts); otherwise none are made.
 */
export async function startTracing(cfg: DaemonConfig, log: Logger): Promise<Tracing> {
  const t = cfg.tracing;
  if (t.url === undefined) return new Tracing();
  const { startExport } = await import('./tracing/export.js');
  // Loaded before the first request or background run can want a span's context.
  await loadTraceCore();
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

/**
 * The engine and what runs its plugins: the executor (metered), the retry scheduler, the spool
 * drain (every spool dir named: spool-dirs.ts).
 */
export function engineParts(
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
    trace: tracing,
    masquerade: (network, containerId) => releaseMasquerade(executor.runTool, network, containerId),
  });
  const scheduler = new RetryScheduler({
    engine,
    store,
    log,
    pollMs: Math.min(1000, cfg.retry.baseDelayMs),
    tombstoneTtlMs: cfg.tombstoneTtlMs,
    pruneEveryMs: cfg.pruneIntervalMs,
    spoolDir: cfg.spoolDir,
    spoolDirDrainable: () => spool.drainableNow(resolve(cfg.spoolDir)),
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
export function nodeInstall(cfg: DaemonConfig, runtime: RuntimeSource, log: Logger) {
  const watcher = cfg.cniConfDir
    ? new PrimaryWatcher({ confDir: cfg.cniConfDir, stateDir: cfg.stateDir, socket: cfg.socket, log })
    : undefined;
  // Only where this daemon keeps the node's install (--cni-conf-dir): the installed shim must be its own.
  const shimCheck = cfg.cniConfDir
    ? new ShimCheck({ stateDir: cfg.stateDir, ownShim: cfg.shim, log, restoreMissing: true })
    : undefined;
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
export function guardConnections(metrics: Metrics, log: Logger): ConnectionGuard {
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

/**
 * /healthz: plugins can be started and the socket and journal files are what is served; a change of
 * verdict is logged once. Whether the journal can be written is readiness (journalWritable).
 */
export function healthCheck(executor: PluginExecutor, selfCheck: SelfCheck, log: Logger) {
  let lastHealth = '';
  const health = async (): Promise<string[]> => {
    const problems: string[] = [];
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

/** How often the journal's write probe (one fsync'd commit, Store.writeProbe) runs for readiness. */
export const JOURNAL_PROBE_MS = 5000;

/**
 * Whether the journal can be written (a real commit, and 1 MiB free under it), looked at every
 * JOURNAL_PROBE_MS. Not ready while it cannot, but alive: a restart frees no disk, and a daemon
 * restarted in a loop by its liveness probe answered nothing (STATUS 50, DELs spooled onto the same
 * full disk) where one kept running answers 11 and is ready again as soon as room is made, as a
 * corrupt journal keeps /healthz at 200 (hostile review, 30 Nov).
 */
export function journalWritable(store: Store, log: Logger, everyMs = JOURNAL_PROBE_MS) {
  let problem: string | undefined;
  const look = () => {
    const now = store.writeProbe(MIN_JOURNAL_FREE_BYTES);
    if (now !== problem) {
      if (now === undefined) log.info('the journal can be written again: ready');
      else log.error({ problem: now }, 'the journal cannot be written: not ready until it can');
    }
    problem = now;
  };
  look();
  const timer = setInterval(look, everyMs);
  timer.unref();
  return { problem: () => problem, stop: () => clearInterval(timer) };
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
export function buildAuditor(
  cfg: DaemonConfig,
  { store, engine, run, executor, runtime, metrics, log }: AuditParts,
): Auditor {
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
      releaseMasquerade: (network, containerId) => releaseMasquerade(executor.runTool, network, containerId),
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
            // No if_inet6 where IPv6 is off in that namespace; any other failure (a timeout, a fork
            // refused) leaves the namespace unread, not "without IPv6 addresses".
            const v6 = await executor
              .runTool('nsenter', [net, 'cat', NET_FILES[1]], NETNS_READ_TIMEOUT_MS)
              .catch((e: Error) => {
                if (/No such file or directory/.test(e.message)) return '';
                throw e;
              });
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
