// What the HTTP routes are given: the engine and the views they read, passed in explicitly by the
// app (server.ts) so that routes never import the server, and the server never reaches into them.

import type { Engine } from '../engine/engine.js';
import type { Metrics } from '../metrics.js';
import type { RetryScheduler } from '../engine/scheduler.js';
import type { Logger } from 'pino';

export interface AppDeps {
  engine: Engine;
  metrics: Metrics;
  scheduler: RetryScheduler;
  log: Logger;
  /** Readiness for probes: serving, and (with --cni-conf-dir) a primary network to wrap. */
  isReady: () => boolean;
  /** False once shutdown begins: ADD and CHECK are then refused with code 11, DEL still served. */
  isServing: () => boolean;
  version: string;
  startedAt: number;
  /** Why the daemon is not healthy (the journal cannot be written, no plugin spawner); [] when it is. */
  health: () => Promise<string[]>;
}
