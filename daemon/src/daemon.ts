// Wiring for `stewardd run`: config -> store -> engine -> recovery -> server -> listen.
// Owns the process-level concerns: signals, readiness, and a bounded graceful close.

import { readFileSync } from 'node:fs';
import { pino, type Logger } from 'pino';
import { type DaemonConfig } from './config.js';
import { Engine } from './engine/engine.js';
import { recover } from './engine/recovery.js';
import { RetryScheduler } from './engine/scheduler.js';
import { Metrics } from './metrics.js';
import { PluginExecutor, type PluginRunner } from './plugins/executor.js';
import { buildApp } from './server.js';
import { prepareSocketPath, restrictSocket } from './socket.js';
import { Store } from './store/store.js';
import { VERSION } from './version.js';

const DEFAULT_PLUGIN_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface RunningDaemon {
  close(reason: string): Promise<void>;
  closed: Promise<void>;
}

export function readBootId(file: string): string {
  const id = readFileSync(file, 'utf8').trim();
  if (id === '') throw new Error(`boot id file ${file} is empty`);
  return id;
}

export async function startDaemon(cfg: DaemonConfig, log: Logger = pino({ level: cfg.logLevel })): Promise<RunningDaemon> {
  const startedAt = Date.now();
  const bootId = readBootId(cfg.bootIdFile);
  const store = new Store(cfg.dbPath);
  const metrics = new Metrics(store);
  const executor = new PluginExecutor({
    binDirs: cfg.binDirs, timeoutMs: cfg.pluginTimeoutMs, path: process.env.PATH ?? DEFAULT_PLUGIN_PATH, log,
  });
  const run: PluginRunner = (call) => {
    metrics.pluginExecutions.inc({ command: call.command });
    return executor.run(call);
  };
  const engine = new Engine({
    store, run, locate: executor.locate, log, metrics, bootId, maxParallel: cfg.maxParallel, delPolicy: cfg.delPolicy, retry: cfg.retry,
  });
  const scheduler = new RetryScheduler({
    engine, log, pollMs: Math.min(1000, cfg.retry.baseDelayMs), tombstoneTtlMs: cfg.tombstoneTtlMs, pruneEveryMs: 60_000,
  });
  let ready = false;
  const app = buildApp({ engine, metrics, scheduler, log, isReady: () => ready, version: VERSION, startedAt });

  log.info({ db: cfg.dbPath, schema: store.schemaVersion, bootId, binDirs: cfg.binDirs }, 'stewardd starting; recovering journal');
  await recover(engine, bootId, cfg.spoolDir, log);

  await prepareSocketPath(cfg.socket);
  await app.listen({ path: cfg.socket });
  restrictSocket(cfg.socket);
  ready = true;
  scheduler.start();
  log.info({ socket: cfg.socket, version: VERSION }, 'stewardd ready');

  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let closing: Promise<void> | undefined;
  const close = (reason: string): Promise<void> => {
    closing ??= (async () => {
      ready = false;
      log.info({ reason }, 'stewardd shutting down');
      const grace = new Promise<void>((r) => setTimeout(r, cfg.shutdownGraceMs).unref());
      await Promise.race([app.close(), grace]);
      await scheduler.stop();
      store.close();
      log.info('stewardd stopped');
      resolveClosed();
    })();
    return closing;
  };
  return { close, closed };
}
