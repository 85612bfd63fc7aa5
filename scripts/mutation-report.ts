// `npm run mutate:report [-- --concurrency N] [--scopes engine,store,cni] [--allow-dirty] [--check]`:
// the mutation table of docs/mutation.md from one run at one commit. Runs Stryker once per
// directory in scope (daemon/src/engine, daemon/src/store, shared/src/cni) with --force, so no
// incremental state from an earlier commit is reused: every mutant is tested against the tests of
// this commit. The engine (about half the mutants) runs in one lane and shared/src/cni then the
// store in another, side by side, each with `--concurrency` workers (default 1: two workers on a
// 2-core machine). Then it writes docs/mutation/latest.json (the summary: commit, machine, load,
// commands, times, per-directory tallies, survivors) and rewrites the generated block of
// docs/mutation.md from it (scripts/mutation-docs.ts). A tree with uncommitted changes is refused
// unless --allow-dirty (the table then says so). --check writes nothing and exits 1 when the block is
// not what docs/mutation/latest.json renders. Run it under `nice -n 19` on a shared machine.

import { spawn, execFileSync } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';

import {
  DOC_CLASSES,
  DOC_FILE,
  DOC_RESULTS,
  extract,
  renderBlock,
  replace,
  type Classification,
  type MutationResults,
  type ScopeRun,
} from './mutation-docs.js';
import { SCOPES, summarize, survivors, type Report } from './mutation-summary.js';

const REPO = new URL('..', import.meta.url).pathname;
const OUT = 'reports/mutation-report';

/** Short names for the command line, in SCOPES order. */
export const SCOPE_NAMES: Record<string, (typeof SCOPES)[number]> = {
  engine: 'daemon/src/engine/',
  store: 'daemon/src/store/',
  cni: 'shared/src/cni/',
};
/** Lanes run side by side; the scopes of one lane one after the other (about equal mutant counts). */
const LANES = [['engine'], ['cni', 'store']];

function strykerArgs(name: string, concurrency: number): { env: string; args: string[] } {
  return {
    env: `STRYKER_REPORT=${OUT}/${name}.json`,
    args: [
      'stryker',
      'run',
      '--mutate',
      `${SCOPE_NAMES[name]}**/*.ts`,
      '--force',
      '--concurrency',
      String(concurrency),
      '--incrementalFile',
      `${OUT}/${name}-incremental.json`,
      '--tempDirName',
      `.stryker-tmp-report-${name}`,
      '--reporters',
      'json,progress-append-only',
    ],
  };
}

const quote = (a: string) => (/[*\s]/.test(a) ? `'${a}'` : a);

async function runScope(name: string, concurrency: number): Promise<ScopeRun> {
  const { env, args } = strykerArgs(name, concurrency);
  const command = `${env} npx ${args.map(quote).join(' ')}`;
  const log = createWriteStream(join(REPO, OUT, `${name}.log`));
  const started = Date.now();
  console.error(`[${name}] ${command}`);
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('npx', args, {
      cwd: REPO,
      env: { ...process.env, STRYKER_REPORT: `${OUT}/${name}.json` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream.pipe(log, { end: false });
      stream.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString().split('\n'))
          if (/Mutation testing \d+%|ERROR|Done in/.test(line)) console.error(`[${name}] ${line.trim()}`);
      });
    }
    child.on('error', reject);
    child.on('close', (c) => resolve(c ?? 1));
  });
  log.end();
  if (code !== 0) throw new Error(`stryker for ${name} exited ${code}; see ${OUT}/${name}.log`);
  return {
    scope: SCOPE_NAMES[name] as string,
    command,
    concurrency,
    seconds: Math.round((Date.now() - started) / 1000),
  };
}

function git(...args: string[]): string {
  return execFileSync('git', args, { cwd: REPO, encoding: 'utf8' }).trim();
}

function writeDoc(res: MutationResults, check: boolean): boolean {
  const classes = JSON.parse(readFileSync(join(REPO, DOC_CLASSES), 'utf8')) as Classification[];
  const body = renderBlock(res, classes);
  const file = join(REPO, DOC_FILE);
  const text = readFileSync(file, 'utf8');
  if (check) return extract(text, 'report') === body;
  const next = replace(text, 'report', body);
  if (next !== text) writeFileSync(file, next);
  console.error(`${DOC_FILE}: report block ${next === text ? 'unchanged' : 'rewritten'}`);
  return true;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      concurrency: { type: 'string', default: '1' },
      scopes: { type: 'string', default: Object.keys(SCOPE_NAMES).join(',') },
      'allow-dirty': { type: 'boolean' },
      check: { type: 'boolean' },
    },
  });
  if (values.check) {
    const res = JSON.parse(readFileSync(join(REPO, DOC_RESULTS), 'utf8')) as MutationResults;
    if (!writeDoc(res, true)) {
      console.error(`${DOC_FILE}: the report block is not what ${DOC_RESULTS} renders (npm run mutate:report)`);
      process.exit(1);
    }
    return;
  }
  const names = values.scopes.split(',').filter((s) => s !== '');
  for (const n of names)
    if (!(n in SCOPE_NAMES)) throw new Error(`unknown scope ${n}: one of ${Object.keys(SCOPE_NAMES)}`);
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('--concurrency must be a positive integer');
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  if (dirty && !values['allow-dirty']) {
    console.error('the work tree has uncommitted changes: commit them (the table names one commit), or --allow-dirty');
    process.exit(2);
  }
  const commit = git('rev-parse', '--short=10', 'HEAD');
  rmSync(join(REPO, OUT), { recursive: true, force: true });
  mkdirSync(join(REPO, OUT), { recursive: true });

  const loadBefore = loadavg()[0] as number;
  const started = Date.now();
  const lanes = LANES.map((lane) => lane.filter((n) => names.includes(n))).filter((lane) => lane.length > 0);
  const runs = (
    await Promise.all(
      lanes.map(async (lane) => {
        const done: ScopeRun[] = [];
        for (const n of lane) done.push(await runScope(n, concurrency));
        return done;
      }),
    )
  ).flat();

  const order = (scope: string) => SCOPES.indexOf(scope as (typeof SCOPES)[number]);
  runs.sort((a, b) => order(a.scope) - order(b.scope));
  const merged: Report = { files: {} };
  for (const n of names) {
    const r = JSON.parse(readFileSync(join(REPO, OUT, `${n}.json`), 'utf8')) as Report;
    Object.assign(merged.files, r.files);
  }
  const measured = new Set(runs.map((r) => r.scope));
  const argv = process.argv.slice(2);
  const res: MutationResults = {
    schema: 1,
    date: new Date(started).toISOString(),
    commit,
    dirty,
    node: process.version,
    machine: { cores: cpus().length, cpuModel: cpus()[0]?.model.trim() ?? 'unknown' },
    load: { before: loadBefore, after: loadavg()[0] as number },
    command: `npm run mutate:report${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`,
    seconds: Math.round((Date.now() - started) / 1000),
    runs,
    tallies: summarize(merged).filter((t) => measured.has(t.scope)),
    survivors: survivors(merged),
  };
  const out = join(REPO, DOC_RESULTS);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(join(REPO, OUT, 'latest.json'), `${JSON.stringify(res, null, 2)}\n`);
  writeFileSync(out, `${JSON.stringify(res, null, 2)}\n`);
  console.error(`wrote ${DOC_RESULTS}`);
  writeDoc(res, false);
}

await main();
