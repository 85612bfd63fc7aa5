// Benchmark 6: restart to ready (spawn of `stewardd run` until /readyz answers 200) with 10,000
// live attachments of the current boot in the database, alternated with the same start on an
// empty database (the floor: Node, fastify, schema, recovery with nothing to do). RSS is read from
// /proc/<pid>/status once ready: VmRSS, and VmHWM for the peak during start-up.

import { readFileSync } from 'node:fs';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { noopConf } from '../lib/netconf.js';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, pairedRatio, round } from '../lib/stats.js';

const ATTACHMENTS = 10_000;

export async function benchRestart(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const full = new BenchDaemon(env, 'restart-10k');
  const empty = new BenchDaemon(env, 'restart-empty');
  const bootId = readFileSync(full.bootIdFile, 'utf8').trim();
  const t0 = Date.now();
  populateJournal(full.dbPath, ATTACHMENTS, bootId, noopConf(full.socket));
  ctx.log(`populated ${ATTACHMENTS} attachments in ${Date.now() - t0} ms`);

  const ms = { full: [] as number[], empty: [] as number[] };
  const rss = { full: [] as number[], empty: [] as number[] };
  const peak = { full: [] as number[], empty: [] as number[] };
  const rounds = n(6, ctx);
  for (let r = -1; r < rounds; r++) {
    const order: Array<'full' | 'empty'> = r % 2 === 0 ? ['full', 'empty'] : ['empty', 'full'];
    for (const which of order) {
      const d = which === 'full' ? full : empty;
      const t = await d.start();
      const m = d.rss();
      if (which === 'full') {
        const st = JSON.parse((await d.request('GET', '/v1/status')).text) as { attachments: Record<string, number> };
        if (st.attachments.added !== ATTACHMENTS)
          throw new Error(`expected ${ATTACHMENTS} added attachments, status says ${JSON.stringify(st.attachments)}`);
      }
      await d.stop();
      if (r < 0) continue; // first start of each creates files and warms the page cache
      ms[which].push(t);
      rss[which].push(m.rssMiB);
      peak[which].push(m.peakMiB);
    }
  }
  const readyMs = median(ms.full);
  const rssMiB = median(rss.full);
  return [
    {
      id: 'restart',
      title: `restart to ready, ${ATTACHMENTS.toLocaleString('en')} attachments in the DB`,
      unit: 'ms',
      candidate: { label: `${ATTACHMENTS} live attachments`, median: round(readyMs, 0), n: ms.full.length },
      floor: { label: 'same start, empty database', median: round(median(ms.empty), 0), n: ms.empty.length },
      ratio: round(pairedRatio(ms.full, ms.empty)),
      target: '<= 2000 ms; RSS <= 100 MiB',
      met: readyMs <= 2000 && rssMiB <= 100,
      extra: {
        rssMiB: round(rssMiB, 1),
        peakRssMiB: round(median(peak.full), 1),
        emptyRssMiB: round(median(rss.empty), 1),
        emptyPeakRssMiB: round(median(peak.empty), 1),
      },
    },
  ];
}
