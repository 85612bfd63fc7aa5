// `node --import tsx bench/tools/cri-phases.ts [--out FILE.json]` (root; after `npm run build`; needs
// perf, Debian's linux-perf): the cri-pod row (one pod at a time through containerd's CRI, steward's
// and the plain chain's alternating) run under `perf record -a` of the kernel's process tracepoints,
// then each CNI call split into its parts (bench/lib/sched-trace.ts): for steward, the shim's start,
// the daemon and its spawner before the first delegate, each delegate, the gaps between them and the
// answer's way back; for the plain chain, the same plugins as containerd runs them. With the
// scheduler's switch and wakeup tracepoints, each delegate's run (it and what it starts) is split into
// time on a CPU, waiting for one and asleep, with what held the CPUs while it waited (sched-states.ts).
// Prints Markdown tables of medians, steward's call beside the plain chain's; --out writes them as
// JSON too. The row's own figures (paired cost, stewardd's histograms) are printed from its JSON.

import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO } from '../lib/paths.js';
import { median, round } from '../lib/stats.js';
import { STATE_EVENTS, stateReader, splitStates, type StateSplit, type Timeline } from '../lib/sched-states.js';
import {
  PERF_SCRIPT_FIELDS,
  SCHED_EVENTS,
  callLabel,
  descendants,
  directCalls,
  procReader,
  stewardCalls,
  summarise,
  type Call,
  type PartSummary,
  type Proc,
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

/**
 * Whose a thread is, for what held the CPUs: Node names every main thread MainThread, so stewardd's
 * and its spawner's (the parent of steward's delegates, and its parent) are named for what they are.
 */
function threadNamer(tl: Timeline, procs: Map<number, Proc>, stewardCalls: Call[]): (tid: number) => string {
  const spawners = new Set(stewardCalls.flatMap((c) => c.delegates.map((d) => d.parent)));
  const daemons = new Set([...spawners].map((pid) => procs.get(pid as number)?.parent));
  return (tid) => {
    const pid = tl.tgid.get(tid);
    const comm = tl.comm.get(tid) ?? String(tid);
    return spawners.has(pid) ? `stewardd's spawner (${comm})` : daemons.has(pid) ? `stewardd (${comm})` : comm;
  };
}

/** Each delegate's exec → exit of `calls`, by label and delegate name: how its time went (sched-states.ts). */
function delegateStates(
  tl: Timeline,
  procs: Map<number, Proc>,
  calls: Call[],
  name: (tid: number) => string,
): Map<string, StateSplit[]> {
  const tree = descendants(procs);
  const runs = calls.flatMap((c) =>
    c.delegates.map((d) => ({
      key: `${callLabel(c)} ${basename(d.file ?? '')}`,
      window: { pids: tree(d), from: d.exec as number, to: d.exit as number },
    })),
  );
  const by = new Map<string, StateSplit[]>();
  splitStates(
    tl,
    runs.map((r) => r.window),
    name,
  ).forEach((s, i) => {
    const k = (runs[i] as { key: string }).key;
    by.set(k, [...(by.get(k) ?? []), s]);
  });
  return by;
}

/** What held the CPUs while the delegates waited for one: ms per call (mean), the five largest. */
function heldBy(splits: StateSplit[]): string {
  const sum: Record<string, number> = {};
  for (const s of splits) for (const [name, ms] of Object.entries(s.heldBy)) sum[name] = (sum[name] ?? 0) + ms;
  return Object.entries(sum)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
    .map(([name, ms]) => `${name} ${round(ms / splits.length, 3)}`)
    .join(', ');
}

/** A Markdown table: each delegate's exec → exit as time on a CPU, waiting for one, asleep (medians). */
function statesTable(steward: Map<string, StateSplit[]>, direct: Map<string, StateSplit[]>): string {
  const rows = [
    '#### Each delegate exec → exit: medians ms on a CPU / waiting for a CPU / asleep (it and the processes it started)',
    '',
    '| call, delegate | steward | plain chain | held the CPUs while steward’s waited (ms a call) |',
    '|---|--:|--:|---|',
  ];
  const cell = (ss: StateSplit[] | undefined) =>
    ss
      ? [median(ss.map((s) => s.onCpu)), median(ss.map((s) => s.waiting)), median(ss.map((s) => s.asleep))]
          .map((x) => round(x, 2))
          .join(' / ')
      : '';
  for (const [k, ss] of steward) rows.push(`| ${k} | ${cell(ss)} | ${cell(direct.get(k))} | ${heldBy(ss)} |`);
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
  const perf = spawn('perf', ['record', '-q', '-a', '-e', [...SCHED_EVENTS, ...STATE_EVENTS].join(','), '-o', data], {
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
    // The trace runs to hundreds of megabytes of text (a string holds at most 512 MiB): a line at a time.
    const procReading = procReader();
    const stateReading = stateReader();
    const script = spawn('perf', ['script', '-i', data, '-F', PERF_SCRIPT_FIELDS], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let scriptErr = '';
    script.stderr.on('data', (b: Buffer) => void (scriptErr = (scriptErr + b.toString()).slice(-4096)));
    const scriptDone = new Promise<number | null>((r) => script.once('close', (code) => r(code)));
    for await (const line of createInterface({ input: script.stdout, crlfDelay: Infinity })) {
      procReading.line(line);
      stateReading.line(line);
    }
    const scriptCode = await scriptDone;
    if (scriptCode !== 0) throw new Error(`perf script exited ${scriptCode}: ${scriptErr.trim()}`);
    const procs = procReading.procs;
    const [stewards, directs] = [stewardCalls(procs, SHAPE), directCalls(procs, SHAPE)];
    const summary = summarise(stewards, directs);
    const tl = stateReading.timeline();
    const name = threadNamer(tl, procs, stewards);
    const states = {
      steward: delegateStates(tl, procs, stewards, name),
      direct: delegateStates(tl, procs, directs, name),
    };
    const row = (JSON.parse(readFileSync(rowFile, 'utf8')) as { rows: { id: string; extra?: object }[] }).rows.find(
      (r) => r.id === 'cri-pod',
    );
    console.log(`\nthe row: ${JSON.stringify(row?.extra ?? {})}\n`);
    const perPod = summary.reduce((a, s) => a + (s.steward - s.direct), 0);
    console.log(`per pod, the calls' medians summed: steward − the plain chain = ${round(perPod)} ms\n`);
    for (const s of summary) console.log(`${table(s)}\n`);
    console.log(`${statesTable(states.steward, states.direct)}\n`);
    if (values.out) {
      const json = {
        row: row?.extra,
        perPod,
        calls: summary,
        states: Object.fromEntries(Object.entries(states).map(([k, m]) => [k, Object.fromEntries(m)])),
      };
      writeFileSync(values.out, `${JSON.stringify(json, null, 2)}\n`);
    }
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
