// Prometheus metrics (prom-client). Counters are bumped where things happen; gauges that mirror
// the database are computed on scrape so they can never drift from it.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface GaugeSource {
  counts(): { attachments: Record<string, number>; steps: Record<string, number> };
  oldestPendingTeardownAt(): number | undefined;
}

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'steward_cni_requests_total', help: 'CNI requests handled, by command and outcome',
    labelNames: ['command', 'outcome'] as const, registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: 'steward_cni_request_duration_seconds', help: 'Time to answer a CNI request',
    labelNames: ['command'] as const, registers: [this.registry],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });
  readonly pluginExecutions = new Counter({
    name: 'steward_plugin_executions_total', help: 'Delegate plugin executions, by command',
    labelNames: ['command'] as const, registers: [this.registry],
  });
  readonly teardownFailures = new Counter({
    name: 'steward_teardown_failures_total', help: 'Failed delegate DELs (each is retried)',
    labelNames: ['plugin'] as const, registers: [this.registry],
  });
  readonly abandonedSteps = new Counter({
    name: 'steward_teardown_abandoned_total', help: 'Teardown steps given up on after the retry bound',
    labelNames: ['plugin'] as const, registers: [this.registry],
  });
  readonly coalescedDels = new Counter({
    name: 'steward_del_coalesced_total', help: 'DELs answered by joining one queued or in flight, or by a tombstone',
    labelNames: ['how'] as const, registers: [this.registry],
  });

  constructor(source: GaugeSource, now: () => number = Date.now) {
    collectDefaultMetrics({ register: this.registry, prefix: 'stewardd_' });
    const attachments = new Gauge({
      name: 'steward_attachments', help: 'Attachments in the database, by state', labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        attachments.reset();
        for (const [state, n] of Object.entries(source.counts().attachments)) attachments.set({ state }, n);
      },
    });
    const steps = new Gauge({
      name: 'steward_steps', help: 'Delegate steps in the database, by state', labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        steps.reset();
        for (const [state, n] of Object.entries(source.counts().steps)) steps.set({ state }, n);
      },
    });
    const oldest = new Gauge({
      name: 'steward_oldest_pending_teardown_seconds', help: 'Age of the oldest unfinished teardown (0 when none)',
      registers: [this.registry],
      collect() {
        const t = source.oldestPendingTeardownAt();
        oldest.set(t === undefined ? 0 : Math.max(0, (now() - t) / 1000));
      },
    });
  }
}
