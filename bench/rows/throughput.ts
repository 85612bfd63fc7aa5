// Benchmark 3: the daemon alone, driven over its socket with the exact bodies the shim sends
// (one connection per request, as each shim exec makes), so shim start-up is not in the figure.
// Each worker loops ADD then DEL of a fresh container with the no-op delegate
// (bench/fixtures/bin/steward-bench-noop: sh builtins only, ~1 ms per exec), the journal synced as
// shipped (one fsync per ADD, docs/architecture.md "Journal durability") on the machine's disk.
// Rounds alternate 1 and 8 concurrent workers. CPU per op is the daemon's own utime+stime from /proc/<pid>/stat over the round, divided by ADDs + DELs;
// the delegates' CPU (reaped children) is reported apart.

import type { Scratch } from '../lib/scratch.js';
import { BenchDaemon } from '../lib/daemon.js';
import { noopConf, wireBody } from '../lib/netconf.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, round } from '../lib/stats.js';

export interface LoadResult {
  pairs: number;
  seconds: number;
  pairsPerSec: number;
  cpuMsPerOp: number;
  childCpuMsPerOp: number;
  pairMs: number[];
}

/** Runs `workers` closed loops of ADD+DEL until `pairs` pairs are done or `seconds` pass. */
export async function addDelLoad(
  daemon: BenchDaemon,
  tag: string,
  workers: number,
  limit: { seconds?: number; pairs?: number },
): Promise<LoadResult> {
  const conf = noopConf(daemon.socket);
  const deadline = limit.seconds === undefined ? Infinity : Date.now() + limit.seconds * 1000;
  const maxPairs = limit.pairs ?? Infinity;
  let started = 0;
  const pairMs: number[] = [];
  const cpu0 = daemon.cpu();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < deadline && started < maxPairs) {
        const cid = `${tag}-${started++}`;
        const a = process.hrtime.bigint();
        await daemon.cni(wireBody('ADD', cid, conf));
        await daemon.cni(wireBody('DEL', cid, conf));
        pairMs.push(Number(process.hrtime.bigint() - a) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu1 = daemon.cpu();
  const ops = pairMs.length * 2;
  return {
    pairs: pairMs.length,
    seconds,
    pairsPerSec: pairMs.length / seconds,
    cpuMsPerOp: (cpu1.self - cpu0.self) / ops,
    childCpuMsPerOp: (cpu1.children - cpu0.children) / ops,
    pairMs,
  };
}

export async function benchThroughput(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const daemon = new BenchDaemon(env, 'throughput');
  await daemon.start();
  try {
    await addDelLoad(daemon, 'warm', 4, { pairs: 100 });
    const rounds = n(3, ctx, 2);
    const seq: LoadResult[] = [];
    const par: LoadResult[] = [];
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [1, 8] : [8, 1];
      for (const w of order) {
        const res = await addDelLoad(daemon, `tp${r}w${w}`, w, { seconds: 4 * ctx.scale });
        (w === 1 ? seq : par).push(res);
      }
    }
    const m = (rs: LoadResult[], k: keyof Omit<LoadResult, 'pairMs'>) => median(rs.map((x) => x[k]));
    const pps = m(par, 'pairsPerSec');
    return [
      {
        id: 'throughput',
        title: 'daemon alone: ADD+DEL pairs/s, no-op delegate, journal synced as shipped',
        unit: 'pairs/s',
        candidate: {
          label: '8 concurrent clients, over the socket',
          median: round(pps, 1),
          n: par.reduce((s, x) => s + x.pairs, 0),
        },
        target: '>= 100 pairs/s',
        met: pps >= 100,
        extra: {
          cpuMsPerOp: round(m(par, 'cpuMsPerOp')),
          delegateCpuMsPerOp: round(m(par, 'childCpuMsPerOp')),
          pairMsAt8: round(median(par.flatMap((x) => x.pairMs))),
          pairsPerSecAt1: round(m(seq, 'pairsPerSec'), 1),
          pairMsAt1: round(median(seq.flatMap((x) => x.pairMs))),
          cpuMsPerOpAt1: round(m(seq, 'cpuMsPerOp')),
        },
        notes: ['an op is one ADD or one DEL; CPU from /proc/<pid>/stat (10 ms ticks) over each round'],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
