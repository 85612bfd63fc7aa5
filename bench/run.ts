// `npm run bench [-- --json [FILE]] [--only a,b] [--scale X] [--strict]`: runs every benchmark
// against its floor in the same run, prints a Markdown table, and with --json writes the same
// figures to FILE (default bench-results/latest.json). Every netns, bridge, process and temp dir
// a benchmark makes is registered with one TestEnv and removed at the end, on failure or Ctrl-C.

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { TestEnv } from '../test/helpers/env.js';
import { benchChain } from './chain.js';
import { benchDbSize } from './dbsize.js';
import { benchQuickCheck } from './quickcheck.js';
import { benchNetns } from './lib/netconf.js';
import { REPO, shimExecutable } from './lib/paths.js';
import type { BenchContext, Row } from './lib/report.js';
import { benchRestart } from './restart.js';
import { benchScrape } from './scrape.js';
import { benchShim } from './shim.js';
import { benchShimStorm } from './shim-storm.js';
import { benchStorm } from './storm.js';
import { benchThroughput } from './throughput.js';

type Bench = (env: TestEnv, ctx: BenchContext) => Promise<Row[]>;
const BENCHES: Array<[string, Bench]> = [
  ['shim', benchShim],
  ['chain', benchChain],
  ['throughput', benchThroughput],
  ['storm', benchStorm],
  ['shim-storm', benchShimStorm],
  ['restart', benchRestart],
  ['dbsize', benchDbSize],
  ['quickcheck', benchQuickCheck],
  ['scrape', benchScrape],
];

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    json: { type: 'boolean' },
    out: { type: 'string' },
    only: { type: 'string' },
    scale: { type: 'string' },
    strict: { type: 'boolean' },
  },
});
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

const fmt = (x: number | undefined, unit: string) => (x === undefined || Number.isNaN(x) ? '' : `${x} ${unit}`);

function table(rows: Row[]): string {
  const lines = ['| benchmark | steward | floor | ratio | target | met |', '|---|--:|--:|--:|---|---|'];
  for (const r of rows) {
    const c =
      r.candidate.p99 !== undefined
        ? `p50 ${fmt(r.candidate.median, r.unit)}, p99 ${fmt(r.candidate.p99, r.unit)}`
        : fmt(r.candidate.median, r.unit);
    const f =
      r.floor === undefined
        ? '—'
        : r.floor.p99 !== undefined
          ? `p50 ${fmt(r.floor.median, r.unit)}, p99 ${fmt(r.floor.p99, r.unit)}`
          : fmt(r.floor.median, r.unit);
    const ratio = r.ratio === undefined ? '—' : `${r.ratio}×${r.ratioOf ? ` (${r.ratioOf})` : ''}`;
    const met = r.met === null ? 'reported' : r.met ? 'met' : '**missed**';
    lines.push(`| ${r.title} | ${c} | ${f} | ${ratio} | ${r.target} | ${met} |`);
  }
  return lines.join('\n');
}

function details(rows: Row[]): string {
  const out: string[] = [];
  for (const r of rows) {
    const parts = Object.entries(r.extra ?? {}).map(([k, v]) => `${k}=${v}`);
    out.push(
      `- ${r.id}: steward = ${r.candidate.label} (n=${r.candidate.n})` +
        (r.floor ? `; floor = ${r.floor.label} (n=${r.floor.n})` : '') +
        (parts.length ? `; ${parts.join(', ')}` : ''),
    );
    for (const note of r.notes ?? []) out.push(`  - ${note}`);
  }
  return out.join('\n');
}

async function main(): Promise<number> {
  const env = new TestEnv('bench');
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${sig}: cleaning up`);
    void env.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  benchNetns(env);
  const ctx: BenchContext = { scale, log: (m) => console.error(`  ${m}`) };
  const rows: Row[] = [];
  const failures: string[] = [];
  const started = Date.now();
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

  const commit = (() => {
    try {
      return execFileSync('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    } catch {
      return 'unknown';
    }
  })();
  const machine = `${cpus().length} cores (${cpus()[0]?.model ?? '?'}), load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}, node ${process.version}`;
  console.log(
    `\n${table(rows)}\n\n${details(rows)}\n\ncommit ${commit}; ${machine}; ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  if (failures.length > 0) console.error(`\nfailed:\n${failures.join('\n')}`);

  if (values.json) {
    const file = values.out ?? join(REPO, 'bench-results', 'latest.json');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(
      file,
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          commit,
          machine,
          shim: shimExecutable().kind,
          scale,
          seconds: Math.round((Date.now() - started) / 1000),
          rows,
          failures,
        },
        null,
        2,
      )}\n`,
    );
    console.error(`wrote ${file}`);
  }
  if (failures.length > 0) return 1;
  if (values.strict && rows.some((r) => r.met === false)) return 3;
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
