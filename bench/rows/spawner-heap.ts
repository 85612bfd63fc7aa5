// Benchmark: the plugin spawner under plugin starts back to back (a burst, a DEL storm, a spool drain).
// Every delegate run forks the spawner (daemon/src/plugins/spawner-child.ts), and fork's cost grows
// with the forking process's memory. The shipped spawner, forked as stewardd forks it, against the same
// spawner on V8's default heap (its heap flag dropped by bench/fixtures/default-heap.mjs), each given
// the same runs of the no-op delegate over IPC, one to each in turn so both see the same machine: their
// memory after the first run, after warm-up and at the end, and the time of one run as stewardd waits
// for it (send to outcome) over the tenth after warm-up and the last tenth.

import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { BENCH_BIN, NOOP_TYPE, REPO } from '../lib/paths.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, p99, round } from '../lib/stats.js';

const SHIPPED = join(REPO, 'daemon/dist/plugins/spawner-child.js');
const DEFAULT_HEAP = join(REPO, 'bench/fixtures/default-heap.mjs');
/** Runs before the memory is judged: the spawner's heap has found its size by then. */
const WARM_RUNS = 1_000;
/**
 * Anonymous memory (what fork copies the page tables of; RSS also counts the Node binary's ~47 MiB of
 * file pages) counts as flat when its high-water mark in the last tenth is within this much of the
 * tenth's after warm-up: marks, since a collection moves it by a few MiB either way at any moment
 * (17-25 MiB in a row of single readings).
 */
const FLAT = 0.25;

const JOB = {
  file: join(BENCH_BIN, NOOP_TYPE),
  env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'spawner-heap', CNI_IFNAME: 'eth0', PATH: '/usr/bin:/bin' },
  stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'spawner-heap', type: NOOP_TYPE }),
  timeoutMs: 10_000,
  maxOutputBytes: 1 << 20,
};

interface Memory {
  rss: number;
  anon: number;
}

/** One spawner process and the runs sent to it, answered in order; its death fails the run waiting. */
class Spawner {
  private readonly child: ChildProcess;
  private readonly waiting = new Map<number, { resolve: (code: unknown) => void; reject: (e: Error) => void }>();
  private next = 0;

  constructor(env: Scratch, preload?: string) {
    // As spawner.ts forks it: no Node flags of the parent's, JSON over the IPC channel.
    this.child = fork(SHIPPED, [], {
      execArgv: preload === undefined ? [] : ['--import', preload],
      serialization: 'json',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    env.defer(() => this.stop());
    this.child.on('message', (msg: { id: number; outcome?: { code: unknown } }) => {
      if (!msg.outcome) return;
      this.waiting.get(msg.id)?.resolve(msg.outcome.code);
      this.waiting.delete(msg.id);
    });
    const fail = (why: string) => {
      for (const w of this.waiting.values()) w.reject(new Error(`the spawner ${why}`));
      this.waiting.clear();
    };
    this.child.on('exit', (code, signal) => fail(`exited (${code ?? signal})`));
    this.child.on('error', (e) => fail(`failed: ${e.message}`));
  }

  /** One run of the no-op delegate, in ms from send to outcome. */
  async run(): Promise<number> {
    const id = this.next++;
    const t0 = performance.now();
    const code = await new Promise((resolve, reject) => {
      // The job's own deadline and then some: a spawner that stops answering fails the row.
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`the spawner gave no outcome in ${JOB.timeoutMs + 5_000} ms`));
      }, JOB.timeoutMs + 5_000);
      this.waiting.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.child.send({ id, job: JOB });
    });
    if (code !== 0) throw new Error(`the no-op delegate exited ${String(code)} from the spawner`);
    return performance.now() - t0;
  }

  /** VmRSS and RssAnon from /proc/<pid>/status, in MiB. */
  memory(): Memory {
    const status = readFileSync(`/proc/${this.child.pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: round(kib('VmRSS') / 1024, 1), anon: round(kib('RssAnon') / 1024, 1) };
  }

  stop(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

interface Side {
  ms: number[];
  /** Memory after the first run, then after every SAMPLE_EVERY runs (run index, reading). */
  start: Memory;
  samples: Array<[number, Memory]>;
}

/** How often both spawners' memory is read: a collection moves it by a few MiB either way. */
const SAMPLE_EVERY = 50;

async function drive(shipped: Spawner, plain: Spawner, runs: number): Promise<[Side, Side]> {
  const none = { rss: NaN, anon: NaN };
  const a: Side = { ms: [], start: none, samples: [] };
  const b: Side = { ms: [], start: none, samples: [] };
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
    for (const [s, into] of pair) into.ms.push(await s.run());
    if (i === 0) [a.start, b.start] = [shipped.memory(), plain.memory()];
    if ((i + 1) % SAMPLE_EVERY === 0 || i + 1 === runs) {
      a.samples.push([i, shipped.memory()]);
      b.samples.push([i, plain.memory()]);
    }
  }
  return [a, b];
}

/** The highest anonymous reading (with its RSS) among the samples of runs [from, to). */
function highWater(s: Side, from: number, to: number): Memory {
  const inside = s.samples.filter(([i]) => i >= from && i < to).map(([, m]) => m);
  return inside.reduce((hi, m) => (m.anon > hi.anon ? m : hi), inside[0] ?? { rss: NaN, anon: NaN });
}

export async function benchSpawnerHeap(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const runs = n(16_000, ctx, 4_000);
  const shipped = new Spawner(env);
  const plain = new Spawner(env, DEFAULT_HEAP);
  ctx.log(`spawner-heap: ${runs} runs of the no-op delegate through each spawner`);
  let a: Side, b: Side;
  try {
    [a, b] = await drive(shipped, plain, runs);
  } finally {
    shipped.stop();
    plain.stop();
  }
  return [row(a, b, runs)];
}

/** One spawner's memory: after the first run, the high-water marks of the two windows, their growth. */
interface Memories {
  start: Memory;
  warm: Memory;
  end: Memory;
  growth: number;
}

/** Memory as the high-water mark of a window: the tenth after warm-up, and the last tenth. */
function memories(s: Side, runs: number, tenth: number): Memories {
  const warm = highWater(s, WARM_RUNS, WARM_RUNS + tenth);
  const end = highWater(s, runs - tenth, runs);
  return { start: s.start, warm, end, growth: round((end.anon - warm.anon) / warm.anon, 3) };
}

/** One spawner's memory figures for the row's extras, each key after `prefix` (rssMiBStart, …). */
function memoryFigures(m: Memories, prefix = ''): Record<string, number> {
  const figures: Record<string, number> = {
    rssMiBStart: m.start.rss,
    rssMiBWarm: m.warm.rss,
    rssMiBEnd: m.end.rss,
    anonMiBStart: m.start.anon,
    anonMiBWarm: m.warm.anon,
    anonMiBEnd: m.end.anon,
    anonGrowth: m.growth,
  };
  const key = (k: string) => (prefix === '' ? k : `${prefix}${k[0]?.toUpperCase()}${k.slice(1)}`);
  return Object.fromEntries(Object.entries(figures).map(([k, v]) => [key(k), v]));
}

function row(a: Side, b: Side, runs: number): Row {
  const tenth = Math.round(runs / 10);
  const [ma, mb] = [memories(a, runs, tenth), memories(b, runs, tenth)];
  const afterWarmup = (xs: number[]) => round(median(xs.slice(WARM_RUNS, WARM_RUNS + tenth)));
  const last = (xs: number[]) => xs.slice(-tenth);
  const [lastA, lastB] = [median(last(a.ms)), median(last(b.ms))];
  const ratio = round(lastA / lastB);
  const flat = Math.abs(ma.growth) <= FLAT;
  return {
    id: 'spawner-heap',
    title: `The plugin spawner after ${runs.toLocaleString('en')} plugin runs back to back: one run over the last tenth, against the same spawner on V8's default heap`,
    unit: 'ms',
    candidate: { label: 'spawner-child.js as stewardd forks it (--optimize-for-size)', median: round(lastA), n: tenth },
    floor: { label: "the same spawner on V8's default heap", median: round(lastB), n: tenth },
    ratio,
    ratioOf: 'median',
    target: `anonymous memory's high-water mark in the last tenth within ${FLAT * 100} % of the tenth's after ${WARM_RUNS} runs; last tenth's run <= 1.05x the default heap's`,
    met: flat && ratio <= 1.05,
    tableNote: `anonymous ${ma.warm.anon} → ${ma.end.anon} MiB (default heap ${mb.warm.anon} → ${mb.end.anon}), RSS ${ma.end.rss} (${mb.end.rss})`,
    extra: {
      runs,
      warmRuns: WARM_RUNS,
      ...memoryFigures(ma),
      ...memoryFigures(mb, 'defaultHeap'),
      afterWarmupMs: afterWarmup(a.ms),
      defaultHeapAfterWarmupMs: afterWarmup(b.ms),
      lastTenthP99Ms: round(p99(last(a.ms))),
      defaultHeapLastTenthP99Ms: round(p99(last(b.ms))),
    },
    notes: [
      'ms: one run of the no-op delegate as stewardd waits for it (IPC send to outcome: fork, exec, exit, pipes); afterWarmup: the median of the tenth after warm-up; memory: after the first run (start), then the highest anonymous reading (read every 50 runs) of the tenth after warm-up (warm) and of the last tenth (end), with its RSS',
    ],
  };
}
