// `npm run bench [-- --json] [--out FILE] [--only a,b] [--scale X] [--strict]`: runs every benchmark
// against its floor in the same run, prints a Markdown table against issue 14's targets
// (lib/targets.ts) with the run's machine, load, node and commit, and with --json writes the same
// to FILE (default bench-results/latest.json), which `npm run bench:docs` puts into the docs.
// Every netns, bridge, process and temp dir a benchmark makes is registered with one Scratch and
// removed at the end, on failure or Ctrl-C.
//
// Where things live in bench/:
//   run.ts, docs.ts  the two entry points: `npm run bench` (this file) and `npm run bench:docs`
//   rows/            one file per row, each a `bench*(env, ctx)` giving its rows; its id is the --only name:
//     shim.ts          shim         one shim call against curl sending the same request
//     chain.ts         chain        ADD+DEL of bridge + host-local through steward against run directly
//     throughput.ts    throughput   the daemon alone over its socket, with the shim's exact bodies
//     storm.ts         storm        a DEL storm, and ADD latency during it (driver: lib/storm-driver.ts)
//     shim-storm.ts    shim-storm   the storm as a kubelet sends it, through the shipped shim and curl
//                                   (clients started from Go: lib/exec-runner.ts, fixtures/exec-runner)
//     status.ts        status       the steady cost of CNI STATUS
//     status-storm.ts  status-storm CNI STATUS while the node is at its busiest
//     cri-pod.ts       cri-pod      one pod through containerd's CRI
//                      cri-pod-tracing  the same pod, stewardd exporting to a stopped collector vs off
//     cri-burst.ts     cri-burst    a burst of pods through containerd's CRI
//     cri-churn.ts     cri-churn    a churn soak through containerd's CRI
//     restart.ts       restart      restart to ready with 10,000 live attachments
//     dbsize.ts        dbsize       the journal's size after 10,000 ADD+DEL cycles and pruning
//     quickcheck.ts    quickcheck   the start-up journal check on a busy journal
//     scrape.ts        scrape       one /metrics scrape with 10,000 live attachments
//     scrape-flood.ts  scrape-flood ADD latency while 64 connections scrape --metrics-listen back to back
//                                   (driver: lib/scrape-flood-driver.ts)
//     spool-drain.ts   spool-drain  a spool backlog drained at start
//     spawner-heap.ts  spawner-heap the plugin spawner's memory and per-run time under plugin starts back to back
//     tracing.ts       tracing      the chain row against stewardds that differ only in tracing
//   lib/             what rows share (a daemon process, the driver processes (driver.ts), exec,
//                    netconfs, loopback ports, scratch space, stats, the table, targets, the docs
//                    blocks); it imports no test helper (eslint.config.js)
//   tools/           one-off tools run by hand, not rows: attachments-loop.ts, beacon-loop.ts,
//                    cpuprofile-summary.ts, cri-phases.ts, daemon-ab.ts, journal-syncs.ts, shim-variants.ts,
//                    spawn-cost.ts
//   fixtures/        the no-op delegate and the Go programs the rows execute, and the preload that
//                    gives the spawner-heap row its default-heap spawner

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { Scratch } from './lib/scratch.js';
import { otherCpu } from './lib/other-cpu.js';
import { benchChain } from './rows/chain.js';
import { benchCriBurst } from './rows/cri-burst.js';
import { benchCriChurn } from './rows/cri-churn.js';
import { benchCriPod, benchCriPodTracing } from './rows/cri-pod.js';
import { benchDbSize } from './rows/dbsize.js';
import { benchQuickCheck } from './rows/quickcheck.js';
import { benchNetns } from './lib/netconf.js';
import { REPO, ensureFreshShims, shimExecutable } from './lib/paths.js';
import { LOAD_LIMIT, type BenchContext, type BenchResults, type Row } from './lib/report.js';
import { report } from './lib/table.js';
import { applyTargets } from './lib/targets.js';
import { benchRestart } from './rows/restart.js';
import { benchScrape } from './rows/scrape.js';
import { benchScrapeFlood } from './rows/scrape-flood.js';
import { benchShim } from './rows/shim.js';
import { benchShimStorm } from './rows/shim-storm.js';
import { benchSpawnerHeap } from './rows/spawner-heap.js';
import { benchSpoolDrain } from './rows/spool-drain.js';
import { benchStatus } from './rows/status.js';
import { benchStatusStorm } from './rows/status-storm.js';
import { benchStorm } from './rows/storm.js';
import { benchThroughput } from './rows/throughput.js';
import { benchTracing } from './rows/tracing.js';
import { findGo } from '../scripts/build-shims.mjs';

type Bench = (env: Scratch, ctx: BenchContext) => Promise<Row[]>;
const BENCHES: Array<[string, Bench]> = [
  ['shim', benchShim],
  ['chain', benchChain],
  ['throughput', benchThroughput],
  ['storm', benchStorm],
  ['shim-storm', benchShimStorm],
  ['status', benchStatus],
  ['status-storm', benchStatusStorm],
  ['cri-pod', benchCriPod],
  ['cri-burst', benchCriBurst],
  ['cri-churn', benchCriChurn],
  ['restart', benchRestart],
  ['dbsize', benchDbSize],
  ['quickcheck', benchQuickCheck],
  ['scrape', benchScrape],
  ['scrape-flood', benchScrapeFlood],
  ['spool-drain', benchSpoolDrain],
  ['spawner-heap', benchSpawnerHeap],
  ['tracing', benchTracing],
  ['cri-pod-tracing', benchCriPodTracing],
];

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    json: { type: 'boolean' },
    out: { type: 'string' },
    only: { type: 'string' },
    scale: { type: 'string' },
    strict: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(
    [
      'usage: npm run bench -- [--only ROW,ROW] [--scale X] [--json] [--out FILE] [--strict]',
      `  --only    run only these rows (${BENCHES.map(([id]) => id).join(', ')})`,
      '  --scale   sample counts times X (1: the documented run)',
      '  --json    write the results to bench-results/latest.json (`npm run bench:docs` puts them into the docs)',
      '  --out     write the results to FILE instead',
      '  --strict  exit 3 when a row misses its target',
      'Environment knobs of single rows are listed at the top of their files (e.g. bench/cri-burst.ts: CRI_BURST_*).',
    ].join('\n'),
  );
  process.exit(0);
}
const only = values.only?.split(',').filter((s) => s !== '');
const unknown = only?.filter((o) => !BENCHES.some(([id]) => id === o)) ?? [];
if (unknown.length > 0) {
  console.error(`unknown benchmark(s) ${unknown.join(', ')}; known: ${BENCHES.map(([id]) => id).join(', ')}`);
  process.exit(2);
}
const scale = values.scale === undefined ? 1 : Number(values.scale);
if (!(scale > 0)) {
  console.error('--scale must be a positive number');
  process.exit(2);
}

const load1 = () => Math.round((loadavg()[0] ?? 0) * 100) / 100;

function git(...args: string[]): string | undefined {
  try {
    return execFileSync('git', ['-C', REPO, ...args], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}

/**
 * The version of the Go that builds the shim and the floor programs (scripts/build-shims.mjs findGo:
 * the go on PATH, else /usr/local/go/bin/go, at least shim/go.mod's version): "1.26.8"; an older one
 * is reported as it is, "missing" when there is none.
 */
function goVersion(): string {
  try {
    const g = findGo();
    return g.ok ? g.version : g.reason === 'old' ? (g.version ?? 'unknown') : 'missing';
  } catch {
    return 'missing';
  }
}

async function main(): Promise<number> {
  const env = new Scratch('bench');
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${sig}: cleaning up`);
    void env.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const ctx: BenchContext = { scale, log: (m) => console.error(`  ${m}`) };
  const rows: Row[] = [];
  const failures: string[] = [];
  try {
    benchNetns(env);
    // Before the load is read: a rebuild burns CPU for a minute or two.
    ensureFreshShims(ctx.log);
  } catch (e) {
    // A shim that does not build ends the run here: what was made so far (the netns) goes first.
    await env.close();
    throw e;
  }
  const started = Date.now();
  const loadBefore = load1();
  const othersCpu = otherCpu();
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(load1()), 5000);
  sampler.unref();
  try {
    for (const [id, bench] of BENCHES) {
      if (only && !only.includes(id)) continue;
      const t0 = Date.now();
      console.error(`[bench] ${id} ...`);
      try {
        rows.push(...(await bench(env, ctx)));
      } catch (e) {
        failures.push(`${id}: ${(e as Error).stack ?? String(e)}`);
        console.error(`[bench] ${id} FAILED: ${(e as Error).message}`);
      }
      console.error(`[bench] ${id} done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  } finally {
    await env.close();
  }

  clearInterval(sampler);
  const loadAfter = load1();
  const otherCores = othersCpu();
  const during = samples.length > 0 ? samples : [loadBefore];
  const duringMean = Math.round((during.reduce((x, y) => x + y, 0) / during.length) * 100) / 100;
  const res: BenchResults = {
    schema: 2,
    date: new Date().toISOString(),
    commit: git('rev-parse', '--short', 'HEAD') ?? 'unknown',
    dirty: (git('status', '--porcelain') ?? '') !== '',
    node: process.version,
    go: goVersion(),
    machine: {
      cpuModel: cpus()[0]?.model ?? '?',
      cores: cpus().length,
      kernel: release(),
      memMiB: Math.round(totalmem() / 2 ** 20),
    },
    load: {
      before: loadBefore,
      during: { mean: duringMean, max: Math.max(...during), samples: samples.length },
      after: loadAfter,
      otherCores,
    },
    // The load average during the run counts the run's own processes (the storm alone keeps both cores
    // busy), so what qualifies a run is the load it started in and what everything else burnt meanwhile.
    quiet: loadBefore < LOAD_LIMIT && otherCores < LOAD_LIMIT,
    shim: shimExecutable().kind,
    scale,
    only: only ?? null,
    seconds: Math.round((Date.now() - started) / 1000),
    rows: applyTargets(rows),
    failures,
  };
  console.log(`\n${report(res)}`);
  if (failures.length > 0) console.error(`\nfailed:\n${failures.join('\n')}`);

  if (values.json || values.out) {
    const file = values.out ?? join(REPO, 'bench-results', 'latest.json');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(res, null, 2)}\n`);
    console.error(`wrote ${file}; \`npm run bench:docs\` puts it into README.md and docs/`);
  }
  if (failures.length > 0) return 1;
  if (values.strict && res.rows.some((r) => r.met === false)) return 3;
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
