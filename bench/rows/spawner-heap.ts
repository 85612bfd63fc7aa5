// Benchmark: the plugin spawner over a long day. Every delegate run forks the spawner
// (daemon/src/plugins/spawner-child.ts), and fork's cost grows with the forking process's memory. The
// shipped spawner, forked as stewardd forks it, against the same spawner on V8's default heap (its
// heap flag dropped by bench/fixtures/default-heap.mjs), each given the same runs of the no-op delegate over
// IPC, one to each in turn so both see the same machine: their RSS after warm-up and at the end, and
// the time of one run as stewardd waits for it (send to outcome) over the first and last tenth.

import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { BENCH_BIN, NOOP_TYPE, REPO } from '../lib/paths.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, round } from '../lib/stats.js';

const SHIPPED = join(REPO, 'daemon/dist/plugins/spawner-child.js');
const DEFAULT_HEAP = join(REPO, 'bench/fixtures/default-heap.mjs');
/** RSS at the end within this much of RSS after warm-up counts as flat. */
const FLAT = 0.25;

const JOB = {
  file: join(BENCH_BIN, NOOP_TYPE),
  env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'spawner-heap', CNI_IFNAME: 'eth0', PATH: '/usr/bin:/bin' },
  stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'spawner-heap', type: NOOP_TYPE }),
  timeoutMs: 10_000,
  maxOutputBytes: 1 << 20,
};

/** One spawner process and the runs sent to it, answered in order. */
class Spawner {
  private readonly child: ChildProcess;
  private readonly waiting = new Map<number, (code: unknown) => void>();
  private next = 0;

  constructor(env: Scratch, preload?: string) {
    // As spawner.ts forks it: no Node flags of the parent's, JSON over the IPC channel.
    this.child = fork(SHIPPED, [], {
      execArgv: preload === undefined ? [] : ['--import', preload],
      serialization: 'json',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    env.defer(() => this.child.kill('SIGKILL'));
    this.child.on('message', (msg: { id: number; outcome?: { code: unknown } }) => {
      if (msg.outcome) this.waiting.get(msg.id)?.(msg.outcome.code);
    });
  }

  /** One run of the no-op delegate, in ms from send to outcome. */
  async run(): Promise<number> {
    const id = this.next++;
    const t0 = performance.now();
    const code = await new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.send({ id, job: JOB });
    });
    this.waiting.delete(id);
    if (code !== 0) throw new Error(`the no-op delegate exited ${String(code)} from the spawner`);
    return performance.now() - t0;
  }

  /** VmRSS and RssAnon from /proc/<pid>/status, in MiB. */
  memory(): { rss: number; anon: number } {
    const status = readFileSync(`/proc/${this.child.pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: round(kib('VmRSS') / 1024, 1), anon: round(kib('RssAnon') / 1024, 1) };
  }
}

interface Side {
  ms: number[];
  warm: { rss: number; anon: number };
  end: { rss: number; anon: number };
}

async function drive(shipped: Spawner, plain: Spawner, runs: number, warmRuns: number): Promise<[Side, Side]> {
  const a: Side = { ms: [], warm: { rss: NaN, anon: NaN }, end: { rss: NaN, anon: NaN } };
  const b: Side = { ms: [], warm: { rss: NaN, anon: NaN }, end: { rss: NaN, anon: NaN } };
  for (let i = 0; i < runs; i++) {
    // One to each in turn, the order swapped every run, so neither always runs right after the other.
    const pair: Array<[Spawner, Side]> =
      i % 2 === 0
        ? [
            [shipped, a],
            [plain, b],
          ]
        : [
            [plain, b],
            [shipped, a],
          ];
    for (const [s, side] of pair) side.ms.push(await s.run());
    if (i + 1 === warmRuns) [a.warm, b.warm] = [shipped.memory(), plain.memory()];
  }
  [a.end, b.end] = [shipped.memory(), plain.memory()];
  return [a, b];
}

export async function benchSpawnerHeap(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const runs = n(16_000, ctx, 1_000);
  const warmRuns = Math.min(1_000, Math.round(runs / 10));
  const shipped = new Spawner(env);
  const plain = new Spawner(env, DEFAULT_HEAP);
  ctx.log(`spawner-heap: ${runs} runs of the no-op delegate through each spawner`);
  const [a, b] = await drive(shipped, plain, runs, warmRuns);
  const tenth = Math.round(runs / 10);
  const first = (xs: number[]) => round(median(xs.slice(warmRuns, warmRuns + tenth)));
  const last = (xs: number[]) => round(median(xs.slice(-tenth)));
  const growth = (s: Side) => round((s.end.rss - s.warm.rss) / s.warm.rss, 3);
  const ratio = round(last(a.ms) / last(b.ms));
  const flat = Math.abs(growth(a)) <= FLAT;
  return [
    {
      id: 'spawner-heap',
      title: `The plugin spawner after ${runs.toLocaleString('en')} plugin runs: per-run time over the last tenth, against the same spawner on V8's default heap`,
      unit: 'ms',
      candidate: { label: 'spawner-child.js as stewardd forks it (--optimize-for-size)', median: last(a.ms), n: tenth },
      floor: { label: "the same spawner on V8's default heap", median: last(b.ms), n: tenth },
      ratio,
      ratioOf: 'median',
      target: `RSS at the end within ${FLAT * 100} % of after ${warmRuns} runs; last tenth's run <= 1.05x the default heap's`,
      met: flat && ratio <= 1.05,
      tableNote: `RSS ${a.warm.rss} → ${a.end.rss} MiB (default heap ${b.warm.rss} → ${b.end.rss})`,
      extra: {
        runs,
        warmRuns,
        rssMiBWarm: a.warm.rss,
        rssMiBEnd: a.end.rss,
        anonMiBEnd: a.end.anon,
        rssGrowth: growth(a),
        defaultHeapRssMiBWarm: b.warm.rss,
        defaultHeapRssMiBEnd: b.end.rss,
        defaultHeapAnonMiBEnd: b.end.anon,
        defaultHeapRssGrowth: growth(b),
        firstTenthMs: first(a.ms),
        defaultHeapFirstTenthMs: first(b.ms),
      },
      notes: [
        'ms: one run of the no-op delegate as stewardd waits for it (IPC send to outcome: fork, exec, exit, pipes); first tenth = the tenth after warm-up',
      ],
    },
  ];
}
