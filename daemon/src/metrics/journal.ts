// The journal's metrics: each write transaction timed (synced or relaxed), the writes SQLite refused,
// and the attachments and steps it holds by state, read from it at each scrape.

import { Counter, Histogram, type Registry } from 'prom-client';
import { scrapedGauge, setByState } from './registry.js';

/** What the scraped gauges read of the journal (the Store has it). */
export interface GaugeSource {
  counts(): { attachments: Record<string, number>; steps: Record<string, number> };
  oldestPendingTeardownAt(): number | undefined;
  countPendingTeardowns(): number;
}

export type JournalCounts = ReturnType<GaugeSource['counts']>;

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

/**
 * The journal's counts, read at most once per 250 ms: one database read per scrape for the three
 * gauges that need them (collect() runs per metric).
 */
export function cachedCounts(source: GaugeSource): () => JournalCounts {
  let cached: { at: number; counts: JournalCounts } | undefined;
  return () => {
    const t = Date.now();
    if (cached === undefined || t - cached.at > 250) cached = { at: t, counts: source.counts() };
    return cached.counts;
  };
}

export class JournalMetrics {
  readonly commitSeconds: Histogram<'synced'>;
  readonly writeErrors: Counter;

  constructor(registry: Registry, counts: () => JournalCounts) {
    this.commitSeconds = new Histogram({
      name: 'steward_journal_commit_seconds',
      help: 'Time of one journal write transaction, commit included, by whether it was synced (fsync) or relaxed',
      labelNames: ['synced'] as const,
      registers: [registry],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    });
    this.writeErrors = new Counter({
      name: 'steward_db_write_errors_total',
      help: 'Journal writes the database refused (disk full, I/O error, read-only)',
      registers: [registry],
    });
    scrapedGauge(
      registry,
      'steward_attachments',
      'Attachments in the database, by state',
      (g) => setByState(g, ATTACHMENT_STATES, counts().attachments),
      ['state'],
    );
    scrapedGauge(
      registry,
      'steward_steps',
      'Delegate steps in the database, by state',
      (g) => setByState(g, STEP_STATES, counts().steps),
      ['state'],
    );
  }

  /** The Store's onCommit hook: every committed journal write, timed. */
  readonly observeCommit = (seconds: number, synced: boolean): void => {
    this.commitSeconds.observe({ synced: synced ? 'true' : 'false' }, seconds);
  };

  /** The Store's onWriteError hook: one count per journal write that failed. */
  readonly countWriteError = (_err: Error): void => {
    this.writeErrors.inc();
  };
}
