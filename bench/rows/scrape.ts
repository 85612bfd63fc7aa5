// Benchmark 8: one Prometheus scrape of --metrics-listen (GET /metrics over TCP on loopback) with
// 10,000 live attachments in the database, alternated with the same scrape of a daemon whose
// database is empty (the floor: the Node.js process metrics and the HTTP round trip). The gauges
// that mirror the database are computed at scrape time (daemon/src/metrics/), so this is their cost.

import { readFileSync } from 'node:fs';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { freeLoopbackPort } from '../lib/ports.js';
import { noopConf } from '../lib/netconf.js';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, p99, pairedRatio, round } from '../lib/stats.js';

const ATTACHMENTS = 10_000;

async function scrapeMs(url: string): Promise<number> {
  const t = performance.now();
  const r = await fetch(url);
  await r.text();
  if (r.status !== 200) throw new Error(`${url}: ${r.status}`);
  return performance.now() - t;
}

export async function benchScrape(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const [fullPort, emptyPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
  const full = new BenchDaemon(env, 'scrape-10k', ['--metrics-listen', `127.0.0.1:${fullPort}`]);
  const empty = new BenchDaemon(env, 'scrape-empty', ['--metrics-listen', `127.0.0.1:${emptyPort}`]);
  populateJournal(full.dbPath, ATTACHMENTS, readFileSync(full.bootIdFile, 'utf8').trim(), noopConf(full.socket));
  await full.start();
  await empty.start();
  try {
    const urls = { full: `http://127.0.0.1:${fullPort}/metrics`, empty: `http://127.0.0.1:${emptyPort}/metrics` };
    const text = await (await fetch(urls.full)).text();
    if (!text.includes(`steward_attachments{state="added"} ${ATTACHMENTS}`))
      throw new Error('the scrape does not count the populated attachments');
    const ms = { full: [] as number[], empty: [] as number[] };
    const rounds = n(100, ctx);
    for (let i = -5; i < rounds; i++) {
      // Spaced beyond the gauges' 250 ms reuse window so each scrape reads the database.
      await new Promise((r) => setTimeout(r, 300));
      const order: Array<'full' | 'empty'> = i % 2 === 0 ? ['full', 'empty'] : ['empty', 'full'];
      for (const which of order) {
        const t = await scrapeMs(urls[which]);
        if (i >= 0) ms[which].push(t);
      }
    }
    return [
      {
        id: 'scrape',
        title: `GET /metrics on --metrics-listen, ${ATTACHMENTS.toLocaleString('en')} attachments in the DB`,
        unit: 'ms',
        candidate: {
          label: `${ATTACHMENTS} live attachments`,
          median: round(median(ms.full), 1),
          p99: round(p99(ms.full), 1),
          n: ms.full.length,
        },
        floor: {
          label: 'same scrape, empty database',
          median: round(median(ms.empty), 1),
          p99: round(p99(ms.empty), 1),
          n: ms.empty.length,
        },
        ratio: round(pairedRatio(ms.full, ms.empty)),
        target: '<= 50 ms median (a 30 s scrape interval)',
        met: median(ms.full) <= 50,
        extra: { bytes: text.length },
      },
    ];
  } finally {
    await full.stop();
    await empty.stop();
  }
}
