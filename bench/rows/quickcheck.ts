// Benchmark: the start-up journal check (daemon/src/degraded.ts openJournal -> Store.quickCheck,
// PRAGMA quick_check) on a journal of 10,000 live attachments, as a busy node's; integrity_check
// (which also cross-checks every index) on the same file for comparison. Each run opens the
// database afresh, as a start does; the page cache stays warm (dropping it would disturb every
// other process on the machine), so a cold start after a reboot reads the file from disk first.

import { statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Scratch } from '../lib/scratch.js';
import { Store } from '../../daemon/src/store/store.js';
import { noopConf } from '../lib/netconf.js';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, p99, round } from '../lib/stats.js';

export async function benchQuickCheck(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const attachments = n(10_000, ctx, 100);
  const dbPath = join(env.dir, 'quickcheck.db');
  populateJournal(dbPath, attachments, 'bench-boot', noopConf(join(env.dir, 'qc.sock')));
  const runs = n(15, ctx, 3);
  const quick: number[] = [];
  const integrity: number[] = [];
  for (let i = 0; i < runs; i++) {
    const store = new Store(dbPath);
    const t0 = performance.now();
    const problems = store.quickCheck();
    quick.push(performance.now() - t0);
    store.close();
    if (problems.length > 0) throw new Error(`quick_check found problems in a fresh database: ${problems.join('; ')}`);
    const again = new Store(dbPath);
    const t1 = performance.now();
    again.integrityCheck();
    integrity.push(performance.now() - t1);
    again.close();
  }
  ctx.log(`quick_check ${quick.map((x) => x.toFixed(1)).join(' ')} ms`);
  return [
    {
      id: 'quickcheck',
      title: `PRAGMA quick_check at start, ${attachments.toLocaleString('en')} attachments`,
      unit: 'ms',
      candidate: {
        label: 'Store.quickCheck() on a freshly opened journal',
        median: round(median(quick), 1),
        p99: round(p99(quick), 1),
        n: runs,
      },
      target: 'reported',
      met: null,
      extra: {
        integrityCheckMedianMs: round(median(integrity), 1),
        dbBytes: statSync(dbPath).size,
      },
    },
  ];
}
