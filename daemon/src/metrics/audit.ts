// The audit's metrics: what the last pass found held and left (by kind, and of those what a release
// would free), what passes released, when the last one ran, whether it succeeded and whether it
// trusted the runtime. They read only AuditPassFigures: the metrics know nothing else of the audit.

import { Counter, Gauge, type Registry } from 'prom-client';

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
    orphans: ReadonlyArray<{ kind: string; released: boolean; ageSeconds: number | null; verdict: string }>;
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

/** The audit's verdict (audit/decide.ts) on an orphan whose owner no runtime can name: never released. */
const NEVER_RELEASED = 'foreign-owner';

/** Every kind of audit finding is reported, 0 included. */
const AUDIT_KINDS = ['lease', 'cache', 'portmap', 'masquerade', 'attachment'] as const;

export class AuditMetrics {
  /** Orphans the last audit pass found and left held, by kind. */
  readonly orphans: Gauge<'kind'>;
  readonly orphansPastGrace: Gauge<'kind'>;
  readonly released: Counter<'kind'>;
  readonly runtimeDistrusted: Gauge;
  readonly lastRun: Gauge;
  readonly lastSuccess: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.orphans = new Gauge({
      name: 'steward_audit_orphans',
      help: 'Orphans (held by no sandbox the runtime lists) the last audit pass found and did not release, by kind',
      labelNames: ['kind'] as const,
      registers,
    });
    this.orphansPastGrace = new Gauge({
      name: 'steward_audit_orphans_past_grace',
      help: "Of steward_audit_orphans, those older than the pass's grace whose owner the runtime said is gone (a release would free them), by kind",
      labelNames: ['kind'] as const,
      registers,
    });
    this.released = new Counter({
      name: 'steward_audit_released_total',
      help: 'Orphans released by audit passes, by kind',
      labelNames: ['kind'] as const,
      registers,
    });
    this.runtimeDistrusted = new Gauge({
      name: 'steward_audit_runtime_distrusted',
      help: "1 when the last audit pass did not trust the runtime's answer (its list contradicted the node: a pod steward set up with its netns present was missing, or ids not in the runtime's form), so it only reported",
      registers,
    });
    this.lastRun = new Gauge({
      name: 'steward_audit_last_run_timestamp_seconds',
      help: 'When the last audit pass finished (Unix time; 0 before the first)',
      registers,
    });
    this.lastSuccess = new Gauge({
      name: 'steward_audit_last_run_success',
      help: 'Whether the last audit pass succeeded: 1, or 0 when it failed or no container runtime answered (or none ran yet)',
      registers,
    });
    // Series that exist from the first scrape, before any pass.
    for (const kind of AUDIT_KINDS) {
      this.orphans.set({ kind }, 0);
      this.orphansPastGrace.set({ kind }, 0);
      this.released.inc({ kind }, 0);
    }
    this.lastRun.set(0);
    this.lastSuccess.set(0);
    this.runtimeDistrusted.set(0);
  }

  /** One audit pass's outcome (audit/auditor.ts onPass). A failed pass leaves the orphan gauges as they were. */
  readonly record = (o: AuditPassFigures): void => {
    this.lastRun.set(o.at / 1000);
    const r = o.report;
    const distrusted = r?.runtime.distrusted !== undefined;
    this.lastSuccess.set(r !== undefined && r.runtime.reachable && !distrusted ? 1 : 0);
    if (r === undefined) return;
    this.runtimeDistrusted.set(distrusted ? 1 : 0);
    const held = new Map<string, number>();
    const past = new Map<string, number>();
    for (const x of r.orphans) {
      if (x.released) {
        this.released.inc({ kind: x.kind });
        continue;
      }
      held.set(x.kind, (held.get(x.kind) ?? 0) + 1);
      // Past the grace only when the runtime said its owner is gone (its first ask answered): with no
      // runtime the owner is unknown (StewardAuditFailing says so), and nothing would be released.
      // A runtime whose answer contradicted the node does not tell who is gone either.
      const ownerKnown = (r.runtime.reachable || r.runtime.lostDuringPass === true) && !distrusted;
      // Nor when no runtime's list can ever say its owner is gone (a hand-made host-local reservation):
      // it is never released, and counted here it held StewardOrphansHeld firing for good.
      if (ownerKnown && x.verdict !== NEVER_RELEASED && x.ageSeconds !== null && x.ageSeconds * 1000 >= o.graceMs)
        past.set(x.kind, (past.get(x.kind) ?? 0) + 1);
    }
    for (const kind of new Set([...AUDIT_KINDS, ...held.keys()])) {
      this.orphans.set({ kind }, held.get(kind) ?? 0);
      this.orphansPastGrace.set({ kind }, past.get(kind) ?? 0);
    }
  };
}
