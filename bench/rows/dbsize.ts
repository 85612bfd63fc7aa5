// Benchmark 7: database size after 10,000 ADD+DEL cycles (no-op delegate, bridge-sized configs,
// 8 concurrent clients) and pruning, with --tombstone-ttl 0. Pruning runs in the retry scheduler's
// first tick after start and then every 60 s (engine/scheduler.ts); there is no other trigger, so
// the benchmark restarts the daemon to prune. A second, smaller batch of cycles then shows the
// pruned pages are reused (the file does not grow). Sizes are the files on disk: db + -wal + -shm.

import { Store } from '../../daemon/src/store/store.js';
import { existsSync, statSync } from 'node:fs';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { round } from '../lib/stats.js';
import { addDelLoad } from './throughput.js';

function sizes(dbPath: string): { db: number; wal: number; shm: number; total: number } {
  const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);
  const db = size(dbPath);
  const wal = size(`${dbPath}-wal`);
  const shm = size(`${dbPath}-shm`);
  return { db, wal, shm, total: db + wal + shm };
}

async function waitPruned(d: BenchDaemon): Promise<Record<string, number>> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const st = JSON.parse((await d.request('GET', '/v1/status')).text) as { attachments: Record<string, number> };
    if (!st.attachments.deleted) return st.attachments;
    if (Date.now() > deadline)
      throw new Error(`tombstones not pruned 20 s after start: ${JSON.stringify(st.attachments)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function benchDbSize(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const cycles = n(10_000, ctx, 100);
  const d = new BenchDaemon(env, 'dbsize', ['--tombstone-ttl', '0']);
  await d.start();
  try {
    const load = await addDelLoad(d, 'db', 8, { pairs: cycles });
    const beforePrune = sizes(d.dbPath);
    await d.stop();
    await d.start();
    await waitPruned(d);
    const afterPrune = sizes(d.dbPath);
    const again = Math.max(100, Math.round(cycles / 5));
    await addDelLoad(d, 'db2', 8, { pairs: again });
    await d.stop();
    await d.start();
    await waitPruned(d);
    const afterSecond = sizes(d.dbPath);
    await d.stop();
    const closed = sizes(d.dbPath);
    const store = new Store(d.dbPath);
    const pages = store.pageStats();
    store.close();
    return [
      {
        id: 'dbsize',
        title: `DB size after ${cycles.toLocaleString('en')} ADD+DEL cycles and pruning`,
        unit: 'bytes',
        candidate: { label: 'db + wal + shm after pruning, daemon running', median: afterPrune.total, n: 1 },
        target: 'bounded; report bytes',
        met: afterSecond.total <= afterPrune.total * 1.05,
        extra: {
          cyclesPerSec: round(load.pairsPerSec, 1),
          beforePruneBytes: beforePrune.total,
          beforePruneDbBytes: beforePrune.db,
          beforePruneWalBytes: beforePrune.wal,
          afterPruneDbBytes: afterPrune.db,
          afterPruneWalBytes: afterPrune.wal,
          [`after${again}MoreCyclesAndPruneBytes`]: afterSecond.total,
          closedDbBytes: closed.total,
          pageSize: pages.pageSize,
          pageCount: pages.pageCount,
          freelistPages: pages.freelist,
          bytesPerTombstone: round((beforePrune.db - closed.db + pages.freelist * pages.pageSize) / cycles, 0),
        },
        notes: [
          'pruning is triggered by restarting the daemon (the scheduler prunes on its first tick, then every 60 s)',
        ],
      },
    ];
  } finally {
    await d.stop();
  }
}
