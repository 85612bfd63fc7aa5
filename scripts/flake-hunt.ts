// `npm run flake-hunt -- [--runs N] [--busy] [--out FILE] FILE…`: runs the given test files N times
// (default 5), each run as the suite runs them (node --test, one file at a time), optionally with one
// core kept busy by a spinning process (--busy: the other core of a 2-core CI machine taken), and
// reports every test that failed at least once, with how often and the first failure's message. A
// test whose pass depends on how fast a process starts or how loaded the machine is fails some of
// these runs; fix it by asserting on what the code decides (injected clocks, bounds the code names,
// events), not on the machine's speed. Exit 1 when any test failed, 0 otherwise.
//
//   npm run flake-hunt -- --runs 5 test/integration/*.test.ts
//   npm run flake-hunt -- --runs 5 --busy test/e2e/*.test.ts

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

export interface Failure {
  /** "file > suite > test" as the TAP report nests it. */
  test: string;
  message: string;
}

/**
 * The failed tests of one TAP report (node --test --test-reporter=tap): `not ok N - name` lines,
 * named by their enclosing subtests (indentation), with the first `error:` line below each.
 */
export function failedTests(tap: string, file: string): Failure[] {
  const out: Failure[] = [];
  const names: string[] = [];
  // Whether a result deeper than each depth came since that depth's last "# Subtest": a suite.
  const hadChildren: boolean[] = [];
  const lines = tap.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const sub = /^(\s*)# Subtest: (.*)$/.exec(line);
    if (sub) {
      const depth = (sub[1] as string).length / 4;
      names.length = depth;
      names[depth] = sub[2] as string;
      hadChildren[depth] = false;
      continue;
    }
    const result = /^(\s*)(not ok|ok) \d+ - (.*?)(?: # .*)?$/.exec(line);
    if (!result) continue;
    const depth = (result[1] as string).length / 4;
    const isSuite = hadChildren[depth] === true;
    for (let d = 0; d < depth; d++) hadChildren[d] = true;
    // A suite fails when one of its tests did: only the tests themselves are reported.
    if (result[2] !== 'not ok' || isSuite) continue;
    let message = '';
    for (let j = i + 1; j < Math.min(lines.length, i + 40); j++) {
      const m = /^\s*error: (.*)$/.exec(lines[j] as string);
      if (m) {
        // YAML: a block scalar (|-, >) starts on the next line; a quoted or plain one is here.
        const v = (m[1] as string).trim();
        message = /^[|>][-+]?$/.test(v)
          ? ((lines[j + 1] as string | undefined)?.trim() ?? '')
          : v.replace(/^'(.*)'$/, '$1');
        break;
      }
    }
    out.push({ test: [file, ...names.slice(0, depth), result[3] as string].join(' > '), message });
  }
  return out;
}

function runFile(file: string): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--test', '--test-reporter=tap', '--test-timeout=600000', file],
      // Not a subtest of whatever runs this: its own TAP report on stdout.
      { stdio: ['ignore', 'pipe', 'inherit'], env: withoutTestContext() },
    );
    const chunks: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => chunks.push(b));
    child.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

/** The environment less node:test's marker, so a child runner reports TAP instead of to a parent runner. */
export function withoutTestContext(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

/** A process that spins one core until killed. */
function spinner(): ChildProcess {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    allowPositionals: true,
    options: { runs: { type: 'string', default: '5' }, busy: { type: 'boolean' }, out: { type: 'string' } },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1 || positionals.length === 0) {
    console.error('usage: npm run flake-hunt -- [--runs N] [--busy] [--out FILE] FILE…');
    return 2;
  }
  const busy = values.busy ? spinner() : undefined;
  const seen = new Map<string, { count: number; message: string }>();
  // A failing run's whole TAP report is kept here, named in the log as it happens: a hunt stopped
  // before its end still says what failed and why.
  let keep: string | undefined;
  try {
    for (let r = 1; r <= runs; r++) {
      for (const file of positionals) {
        const t0 = Date.now();
        const tap = await runFile(file);
        const failures = failedTests(tap, file);
        console.error(
          `flake-hunt: run ${r}/${runs} ${file}: ${failures.length} failed (${Math.round((Date.now() - t0) / 1000)} s)`,
        );
        for (const f of failures) {
          console.error(`  failed: ${f.test}\n      ${f.message}`);
          const s = seen.get(f.test) ?? { count: 0, message: f.message };
          s.count++;
          seen.set(f.test, s);
        }
        if (failures.length > 0) {
          keep ??= mkdtempSync(join(tmpdir(), 'flake-hunt-'));
          const path = join(keep, `run${r}-${basename(file)}.tap`);
          writeFileSync(path, tap);
          console.error(`  its TAP report: ${path}`);
        }
      }
    }
  } finally {
    busy?.kill('SIGKILL');
  }
  const report = [...seen.entries()].map(([test, s]) => ({ test, failedRuns: s.count, runs, firstMessage: s.message }));
  console.log(
    report.length === 0
      ? `flake-hunt: no test failed in ${runs} runs of ${positionals.length} file(s)${values.busy ? ', one core kept busy' : ''}`
      : report.map((x) => `${x.failedRuns}/${x.runs}  ${x.test}\n      ${x.firstMessage}`).join('\n'),
  );
  if (values.out)
    writeFileSync(values.out, `${JSON.stringify({ runs, busy: values.busy === true, report }, null, 2)}\n`);
  return report.length === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exit(await main());
