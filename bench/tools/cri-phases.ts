// `node --import tsx bench/tools/cri-phases.ts [--out FILE.json]` (root; after `npm run build`; needs
// perf, Debian's linux-perf): the cri-pod row (one pod at a time through containerd's CRI, steward's
// and the plain chain's alternating) run under `perf record -a` of the kernel's process tracepoints,
// then each CNI call split into its parts (bench/lib/sched-trace.ts): for steward, the shim's start,
// the daemon and its spawner before the first delegate, each delegate, the gaps between them and the
// answer's way back; for the plain chain, the same plugins as containerd runs them. Prints Markdown
// tables of medians, steward's call beside the plain chain's; --out writes them as JSON too. The row's
// own figures (paired cost, stewardd's histograms) are printed from its JSON.

import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO } from '../lib/paths.js';
import { round } from '../lib/stats.js';
import {
  PERF_SCRIPT_FIELDS,
  SCHED_EVENTS,
  directCalls,
  parsePerfScript,
  stewardCalls,
  summarise,
  type PartSummary,
} from '../lib/sched-trace.js';

/** The cri-pod row's chain (bench/rows/cri-pod.ts via test/helpers/cri/node.ts) and who runs it. */
const SHAPE = { chain: ['bridge', 'portmap'], runtime: 'containerd', shim: 'steward' };

const { values } = parseArgs({ options: { out: { type: 'string' } } });

function table(s: PartSummary): string {
  const rows = [
    `#### ${s.label}: steward ${round(s.steward)} ms, the plain chain ${round(s.direct)} ms (${s.stewardCalls} and ${s.directCalls} calls)`,
    '',
    '| part | steward ms | plain chain ms |',
    '|---|--:|--:|',
  ];
  const direct = new Map(s.directParts);
  for (const [name, ms] of s.stewardParts) {
    const d = direct.get(name);
    direct.delete(name);
    rows.push(`| ${name} | ${round(ms)} | ${d === undefined ? '' : round(d)} |`);
  }
  for (const [name, ms] of direct) rows.push(`| ${name} | | ${round(ms)} |`);
  return rows.join('\n');
}

async function waitForFile(file: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (existsSync(file) && statSync(file).size > 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`perf record wrote nothing to ${file} within ${ms} ms`);
}

async function main(): Promise<void> {
  if (spawnSync('perf', ['--version']).status !== 0) throw new Error('perf is not installed (Debian: linux-perf)');
  const dir = mkdtempSync(join(tmpdir(), 'cri-phases-'));
  const data = join(dir, 'perf.data');
  const perf = spawn('perf', ['record', '-q', '-a', '-e', SCHED_EVENTS.join(','), '-o', data], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const perfDone = new Promise<void>((r) => perf.once('exit', () => r()));
  try {
    await waitForFile(data, 10_000);
    const rowFile = join(dir, 'row.json');
    const bench = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--only', 'cri-pod', '--json', '--out', rowFile],
      { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    perf.kill('SIGINT');
    await perfDone;
    if (bench.status !== 0) throw new Error(`the cri-pod row failed (exit ${bench.status})`);
    const text = execFileSync('perf', ['script', '-i', data, '-F', PERF_SCRIPT_FIELDS], {
      encoding: 'utf8',
      maxBuffer: 1 << 30,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const procs = parsePerfScript(text);
    const summary = summarise(stewardCalls(procs, SHAPE), directCalls(procs, SHAPE));
    const row = (JSON.parse(readFileSync(rowFile, 'utf8')) as { rows: { id: string; extra?: object }[] }).rows.find(
      (r) => r.id === 'cri-pod',
    );
    console.log(`\nthe row: ${JSON.stringify(row?.extra ?? {})}\n`);
    const perPod = summary.reduce((a, s) => a + (s.steward - s.direct), 0);
    console.log(`per pod, the calls' medians summed: steward − the plain chain = ${round(perPod)} ms\n`);
    for (const s of summary) console.log(`${table(s)}\n`);
    if (values.out)
      writeFileSync(values.out, `${JSON.stringify({ row: row?.extra, perPod, calls: summary }, null, 2)}\n`);
  } finally {
    if (perf.exitCode === null && perf.signalCode === null) {
      perf.kill('SIGINT');
      await perfDone;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error((e as Error).message);
  process.exit(1);
});
