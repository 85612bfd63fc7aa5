// A flood of scrapes on --metrics-listen (64 keep-alive connections scraping back to back from
// another process, lib/scrape-flood-driver.ts) against ADD latency over the socket: each round
// measures ADDs on the idle daemon and ADDs during the flood, the order alternating per round. The
// metrics port answers one request per 50 ms and shares one rendering among the scrapes of 250 ms
// (metrics-listener.ts), so a flood gets 20 answers/s of stewardd's event loop, not one per
// connection round trip; this row holds it to the DEL storm's bound for the ADDs of the node's pods
// (p99 <= 2x idle). 10,000 live attachments are in the database, as in the scrape row, so each
// rendering is the real one.

import { readFileSync } from 'node:fs';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { forkDriver, type Driver } from '../lib/driver.js';
import { noopConf, wireBody } from '../lib/netconf.js';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { n, spread, type BenchContext, type Row } from '../lib/report.js';
import { p99, round, timeMs } from '../lib/stats.js';
import type { FloodOrder, FloodReport } from '../lib/scrape-flood-driver.js';
import { freeLoopbackPort } from '../lib/ports.js';

const ATTACHMENTS = 10_000;
const CONNECTIONS = 64;

export async function benchScrapeFlood(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const port = await freeLoopbackPort();
  const daemon = new BenchDaemon(env, 'scrape-flood', ['--metrics-listen', `127.0.0.1:${port}`]);
  populateJournal(daemon.dbPath, ATTACHMENTS, readFileSync(daemon.bootIdFile, 'utf8').trim(), noopConf(daemon.socket));
  let driver: Driver<FloodReport> | undefined;
  try {
    await daemon.start();
    driver = await forkDriver<FloodOrder, FloodReport>(
      env,
      new URL('../lib/scrape-flood-driver.ts', import.meta.url).pathname,
      { url: `http://127.0.0.1:${port}/metrics`, connections: CONNECTIONS },
    );
    const conf = noopConf(daemon.socket);
    let made = 0;
    // One timed ADD of a fresh container, then its DEL (not timed), so the journal stays the same size.
    const addOnce = async () => {
      const cid = `flood-${made++}`;
      const ms = await timeMs(() => daemon.cni(wireBody('ADD', cid, conf)));
      await daemon.cni(wireBody('DEL', cid, conf));
      return ms;
    };
    for (let i = 0; i < 20; i++) await addOnce();

    const rounds = n(3, ctx, 1);
    const each = n(40, ctx, 10);
    const idle: number[] = [];
    const during: number[] = [];
    const floods: FloodReport[] = [];
    for (let r = 0; r < rounds; r++) {
      for (const phase of r % 2 === 0 ? ['idle', 'flood'] : ['flood', 'idle']) {
        if (phase === 'idle') {
          for (let i = 0; i < each; i++) idle.push(await addOnce());
          continue;
        }
        await driver.ask('go', 'started', 60_000);
        // Let the flood reach its pace before the first timed ADD.
        await new Promise((res) => setTimeout(res, 500));
        for (let i = 0; i < each; i++) during.push(await addOnce());
        floods.push((await driver.ask('stop', 'done', 60_000)).report as FloodReport);
        // The flood's connections closed, so the next flood's 64 are not refused by the port's cap of 64.
        await new Promise((res) => setTimeout(res, 300));
      }
    }
    const scrapes = floods.reduce((s, f) => s + f.scrapes, 0);
    const floodMs = floods.reduce((s, f) => s + f.ms, 0);
    const answered200 = floods.reduce((s, f) => s + (f.statuses['200'] ?? 0), 0);
    // -1: a connection the port closed (its cap of 64, or a request pipelined on a busy one).
    const refused = floods.reduce((s, f) => s + (f.statuses['-1'] ?? 0), 0);
    const ratio = p99(during) / p99(idle);
    const perSec = (scrapes * 1000) / floodMs;
    return [
      {
        id: 'scrape-flood',
        title: `ADD latency while ${CONNECTIONS} connections scrape --metrics-listen back to back (${ATTACHMENTS.toLocaleString('en')} attachments in the DB)`,
        unit: 'ms',
        candidate: spread('ADD over the socket during the flood', during),
        floor: spread('ADD over the socket, no scrapes', idle),
        ratio: round(ratio),
        ratioOf: 'p99',
        target: 'p99 <= 2x idle, every answered scrape 200 (refused connections counted apart)',
        met: ratio <= 2 && answered200 + refused === scrapes,
        tableNote: `${Math.round(perSec)} scrapes/s served`,
        extra: {
          connections: CONNECTIONS,
          scrapes,
          scrapesPerSec: round(perSec),
          answeredOther: scrapes - answered200 - refused,
          refused,
          meanScrapeBytes: round(floods.reduce((s, f) => s + f.bytes, 0) / Math.max(1, scrapes)),
          rounds,
        },
        notes: [
          `each round: ${each} ADDs (each followed by its DEL, not timed) on the idle daemon and ${each} during the flood, the order alternating; the flood starts 500 ms before its first ADD`,
          'the flood: another process, 64 keep-alive connections each sending GET /metrics again as soon as the last is answered',
        ],
      },
    ];
  } finally {
    driver?.exit();
    await daemon.stop();
  }
}
