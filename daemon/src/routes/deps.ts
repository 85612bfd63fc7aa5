// What the HTTP routes are given: the engine and the views they read, passed in explicitly by the
// app (server.ts) so that routes never import the server, and the server never reaches into them.

import type { Engine } from '../engine/engine.js';
import type { Store } from '../store/store.js';
import type { Metrics } from '../metrics.js';
import type { StatusNotReady } from '../status-not-ready.js';
import type { RetryScheduler } from '../engine/scheduler.js';
import type { Logger } from 'pino';
import type { AdmissionStats } from './admission.js';
import type { AuditOptions, AuditReport } from '../audit/run.js';
import type { Tracing } from '../tracing/tracing.js';
import type { AliveBeacon } from '../lifecycle/alive-beacon.js';

/** What the operator views read of the journal: queries only, never a write. */
export type JournalView = Pick<
  Store,
  | 'counts'
  | 'oldestPendingTeardownAt'
  | 'nextTeardownDueAt'
  | 'countPendingTeardowns'
  | 'pendingTeardownSteps'
  | 'abandonedSteps'
  | 'getAttachment'
  | 'listAttachments'
  | 'stepsOf'
>;

export interface AppDeps {
  /** POST /v1/cni hands requests here and nothing else. */
  engine: Pick<Engine, 'handle' | 'isTombstoned' | 'hasAddOrCheck' | 'rearmAbandoned'>;
  journal: JournalView;
  /** Plugin execution slots: how many, in use, waiting. */
  executions: () => { slots: number; inUse: number; queued: number };
  /** Netconf problems the engine noticed (capabilities the runtime will never pass, ...). */
  warnings: () => string[];
  metrics: Metrics;
  /** Spans of the CNI requests (tracing/); none without, nor while nothing is exported. */
  tracing?: Tracing;
  scheduler: RetryScheduler;
  log: Logger;
  /** Readiness for probes: serving, and (with --cni-conf-dir) a primary network to wrap. */
  isReady: () => boolean;
  /** Why the daemon is not ready, when it knows (e.g. the installed shim is another build); shown by /readyz. */
  readyProblems?: () => string[];
  /** False once shutdown begins: ADD and CHECK are then refused with code 11, DEL still served. */
  isServing: () => boolean;
  /** When STATUS last answered not ready, from either side (status-not-ready.ts). */
  statusNotReady?: StatusNotReady;
  /** Where each STATUS's verdict is published for the shim (lifecycle/alive-beacon.ts). */
  aliveBeacon?: Pick<AliveBeacon, 'noteStatus'>;
  /** Spooled DELs found at start and still being drained in the background (0 once done). */
  spoolDraining?: () => number;
  version: string;
  startedAt: number;
  /** The admission path's counters (routes/admission.ts), shown in /v1/status; set by buildApp. */
  admission?: () => AdmissionStats;
  /** Why the daemon is not healthy (the journal cannot be written, no plugin spawner); [] when it is. */
  health: () => Promise<string[]>;
  /**
   * The conflist this daemon keeps (with --cni-conf-dir): the cniVersion written and why, and the
   * line `stewardd status` shows (lifecycle/cni-version.ts describeChoice). Shown in /v1/status.
   */
  conflist?: () => { cniVersion: string | null; choice: unknown; summary: string } | undefined;
  /** One audit pass (audit/run.ts): GET/POST /v1/audit. */
  audit?: (opts: AuditOptions, callerGone?: () => boolean) => Promise<AuditReport>;
}
