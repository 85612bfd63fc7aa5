// The teardowns' metrics: failed and abandoned delegate DELs as they happen, and what the journal
// still owes (pending steps, abandoned steps, the oldest pending teardown's age) read at each scrape.

import { Counter, type Registry } from 'prom-client';
import type { GaugeSource, JournalCounts } from './journal.js';
import { scrapedGauge } from './registry.js';

export class TeardownMetrics {
  readonly failures: Counter<'plugin'>;
  readonly abandonedSteps: Counter<'plugin'>;

  constructor(registry: Registry, source: GaugeSource, counts: () => JournalCounts, now: () => number) {
    this.failures = new Counter({
      name: 'steward_teardown_failures_total',
      help: 'Failed delegate DELs (each is retried)',
      labelNames: ['plugin'] as const,
      registers: [registry],
    });
    this.abandonedSteps = new Counter({
      name: 'steward_teardown_abandoned_total',
      help: 'Teardown steps given up on after the retry bound',
      labelNames: ['plugin'] as const,
      registers: [registry],
    });
    scrapedGauge(
      registry,
      'steward_teardown_pending_steps',
      'Teardown steps still owing a successful DEL (failed and waiting for a retry, or running)',
      (g) => g.set(source.countPendingTeardowns()),
    );
    scrapedGauge(
      registry,
      'steward_teardown_abandoned_steps',
      'Teardown steps given up on and still in the database: resources an operator must release by hand',
      (g) => g.set(counts().steps.abandoned ?? 0),
    );
    scrapedGauge(
      registry,
      'steward_oldest_pending_teardown_seconds',
      'Age of the oldest unfinished teardown (0 when none)',
      (g) => {
        const t = source.oldestPendingTeardownAt();
        g.set(t === undefined ? 0 : Math.max(0, (now() - t) / 1000));
      },
    );
  }
}
