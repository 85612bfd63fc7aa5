// Benchmark: a spool backlog at start (issue 19, item 1). Two cases, each a fresh state dir:
// 100,000 spooled DELs for 100 containers (a kubelet retrying DEL every few seconds while the
// daemon was down) and 3,000 for distinct containers steward never saw. Figures: time from spawn
// to the socket answering (/readyz 200: ready while draining), the drain's time (until /v1/status
// says nothing is left to drain and the spool dir is empty), an ADD for another container's latency
// while draining, and stewardd's peak RSS (VmHWM) over the whole drain. Each container must get
// exactly one delegate DEL (the no-op delegate logs its calls); the row fails otherwise.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { FAKE_NETNS, cniVars, noopConf } from '../lib/netconf.js';
import type { BenchContext, Row } from '../lib/report.js';
import { round } from '../lib/stats.js';

interface Case {
  id: string;
  files: number;
  containers: number;
}

const CASES: Case[] = [
  { id: 'spool-drain-storm', files: 100_000, containers: 100 },
  { id: 'spool-drain-distinct', files: 3_000, containers: 3_000 },
];

/** The name spoolRequest (shared/src/spool.ts) gives a file. */
const spoolName = (t: number, cid: string, i: number) =>
  `${String(t).padStart(15, '0')}-${cid.slice(0, 64)}-${(i >>> 0).toString(16).padStart(8, '0')}.json`;

async function runCase(env: Scratch, ctx: BenchContext, c: Case): Promise<Row> {
  const d = new BenchDaemon(env, c.id);
  const spool = join(d.stateDir, 'spool');
  mkdirSync(spool, { recursive: true, mode: 0o700 });
  const delLog = join(env.dir, `${c.id}-calls.log`);
  const conf = noopConf(d.socket, delLog);
  const ids = Array.from({ length: c.containers }, (_, i) => `${c.id}-${String(i).padStart(5, '0')}`.padEnd(64, '0'));
  const t = Date.now() - 3_600_000;
  const t0 = Date.now();
  for (let i = 0; i < c.files; i++) {
    const cid = ids[i % c.containers] as string;
    const body = JSON.stringify({ env: cniVars('DEL', cid, ''), config: conf });
    writeFileSync(join(spool, spoolName(t + Math.floor(i / c.containers), cid, i)), body);
  }
  ctx.log(`${c.id}: wrote ${c.files} spool files in ${Date.now() - t0} ms`);

  const toSocketMs = await d.start();
  const drainT0 = Date.now();
  const status = async () => JSON.parse((await d.request('GET', '/v1/status')).text) as { spool: { draining: number } };
  const draining0 = (await status()).spool.draining;
  // An ADD for another container while the spool drains.
  const addT0 = process.hrtime.bigint();
  const add = await d.request(
    'POST',
    '/v1/cni',
    JSON.stringify({ env: cniVars('ADD', 'bench-other-pod', FAKE_NETNS), config: noopConf(d.socket) }),
  );
  const addMs = Number(process.hrtime.bigint() - addT0) / 1e6;
  if (add.status !== 200) throw new Error(`ADD during the drain answered ${add.status}: ${add.text}`);
  const drainingAfterAdd = (await status()).spool.draining;
  const deadline = Date.now() + 30 * 60_000;
  while ((await status()).spool.draining > 0) {
    if (Date.now() > deadline) throw new Error(`${c.id}: drain not finished in 30 min`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const drainMs = Date.now() - drainT0;
  const { peakMiB, rssMiB } = d.rss();
  await d.stop();

  const dels = new Map<string, number>();
  for (const line of readFileSync(delLog, 'utf8').split('\n'))
    if (line.startsWith('DEL ')) {
      const cid = line.split(' ')[1] as string;
      dels.set(cid, (dels.get(cid) ?? 0) + 1);
    }
  const wrong = ids.filter((id) => dels.get(id) !== 1);
  ctx.log(
    `${c.id}: socket ${round(toSocketMs, 0)} ms, drain ${drainMs} ms, ADD ${round(addMs, 0)} ms, peak RSS ${round(peakMiB, 1)} MiB`,
  );
  return {
    id: c.id,
    title: `spool backlog at start: ${c.files.toLocaleString('en')} spooled DELs for ${c.containers.toLocaleString('en')} containers`,
    unit: 'ms',
    candidate: { label: 'spawn to socket answering (ready while draining)', median: round(toSocketMs, 0), n: 1 },
    target: 'socket <= 5000 ms; one delegate DEL per container',
    met: toSocketMs <= 5000 && wrong.length === 0,
    extra: {
      drainMs,
      addDuringDrainMs: round(addMs, 0),
      drainingAtStart: draining0,
      drainingAfterAdd,
      peakRssMiB: round(peakMiB, 1),
      rssAfterMiB: round(rssMiB, 1),
      containersWithoutExactlyOneDel: wrong.length,
    },
  };
}

export async function benchSpoolDrain(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const rows: Row[] = [];
  for (const c of CASES) rows.push(await runCase(env, ctx, c));
  return rows;
}
