// `npm run mutate:report [-- --concurrency N] [--parts a,b] [--allow-dirty] [--assemble] [--check]
// [--render] [--carry [--carry-from old.json]]`:
// the mutation table of docs/mutation.md from one run at one commit. Runs Stryker once per part
// (PARTS: shared/src/cni, daemon/src/store, and daemon/src/engine in two halves) with --force, so no
// incremental state from an earlier commit is reused: every mutant is tested against the tests of
// this commit. The parts run in two lanes side by side (LANES, about equal work each), each Stryker
// with `--concurrency` workers (default 1: two workers on a 2-core machine). Each finished part is
// recorded in reports/mutation-report/parts.jsonl; at the end (or with --assemble, after a run that
// was stopped: the parts not finished are listed as such) it writes docs/mutation/latest.json (the
// summary: commit, machine, load, commands, times, tallies, survivors) and rewrites the generated
// block of docs/mutation.md from it (scripts/mutation-docs.ts). A tree with uncommitted changes is
// refused unless --allow-dirty (the table then says so). --check writes nothing and exits 1 when the
// block is not what docs/mutation/latest.json renders. Run it under `nice -n 19` on a shared machine.
// --keep with --parts runs whole scopes only (every part of each scope named) and keeps the other
// scopes from the committed table, each with the commit that measured it: test/unit/mutation-docs.test.ts
// fails when anything such a scope depends on (its files, its tests, the Stryker config) changed since
// (scripts/mutation-fresh.ts). Each part records the test files Stryker reports as covering or
// killing its mutants, and each survivor its column and original text. --render rewrites the block
// from the committed summary. --carry, after a re-run, carries old verdicts to new survivors that are
// the same mutant of the same code (scripts/mutation-carry.ts), printing each for review.

import { spawn, execFileSync } from 'node:child_process';
import {
  appendFileSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
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
  type PartRun,
} from './mutation-docs.js';
import { carry, describeCarry } from './mutation-carry.js';
import { SCOPES, bySite, coveringTestFiles, summarize, survivors, type Report } from './mutation-summary.js';

const REPO = new URL('..', import.meta.url).pathname;
const OUT = 'reports/mutation-report';
const META = `${OUT}/meta.json`;
const PARTS_LOG = `${OUT}/parts.jsonl`;

/** The engine files of the ADD/DEL/CHECK chain: one half of the engine's mutants; the rest is the other half. */
const ENGINE_CHAIN = ['add', 'del', 'teardown', 'engine', 'check', 'check-version', 'gc-status'].map(
  (f) => `daemon/src/engine/${f}.ts`,
);

export interface Part {
  name: string;
  scope: (typeof SCOPES)[number];
  mutate: string[];
}

/** Every mutated file is in exactly one part; a directory's parts together mutate all of it. */
export const PARTS: Part[] = [
  { name: 'cni', scope: 'shared/src/cni/', mutate: ['shared/src/cni/**/*.ts'] },
  { name: 'store', scope: 'daemon/src/store/', mutate: ['daemon/src/store/**/*.ts'] },
  { name: 'engine-chain', scope: 'daemon/src/engine/', mutate: ENGINE_CHAIN },
  {
    name: 'engine-rest',
    scope: 'daemon/src/engine/',
    mutate: ['daemon/src/engine/**/*.ts', ...ENGINE_CHAIN.map((f) => `!${f}`)],
  },
  { name: 'audit', scope: 'daemon/src/audit/', mutate: ['daemon/src/audit/**/*.ts'] },
  { name: 'admission', scope: 'daemon/src/routes/admission.ts', mutate: ['daemon/src/routes/admission.ts'] },
];
/** Lanes run side by side; the parts of one lane one after the other (about equal work per lane). */
const LANES = [
  ['cni', 'store', 'engine-rest'],
  ['engine-chain', 'audit', 'admission'],
];

interface Meta {
  date: string;
  commit: string;
  dirty: boolean;
  loadBefore: number;
  command: string;
  parts: string[];
  goCoverage: { command: string; percent: number };
  /** --keep: the committed table these scopes are kept from (a copy taken at the start). */
  keep?: string;
}

const KEPT = `${OUT}/kept.json`;

/** The committed table's runs, tallies and survivors of the scopes this run does not measure. */
export function keptFrom(meta: Pick<Meta, 'keep' | 'parts'>): Pick<MutationResults, 'runs' | 'tallies' | 'survivors'> {
  if (!meta.keep) return { runs: [], tallies: [], survivors: [] };
  const old = JSON.parse(readFileSync(join(REPO, meta.keep), 'utf8')) as MutationResults;
  const rerun = new Set(meta.parts.map((p) => PARTS.find((x) => x.name === p)?.scope));
  const kept = (scope: string) => !rerun.has(scope as Part['scope']);
  const inScope = (file: string) => SCOPES.find((s) => file.startsWith(s)) ?? '';
  return {
    runs: old.runs.filter((r) => kept(r.scope)).map((r) => ({ ...r, commit: r.commit ?? old.commit })),
    tallies: old.tallies.filter((t) => kept(t.scope)),
    survivors: old.survivors.filter((s) => kept(inScope(s.file))),
  };
}

function strykerArgs(part: Part, concurrency: number): string[] {
  return [
    'stryker',
    'run',
    '--mutate',
    part.mutate.join(','),
    '--force',
    '--concurrency',
    String(concurrency),
    '--incrementalFile',
    `${OUT}/${part.name}-incremental.json`,
    '--tempDirName',
    `.stryker-tmp-report-${part.name}`,
    '--reporters',
    'json,progress-append-only',
  ];
}

const quote = (a: string) => (/[*\s!]/.test(a) ? `'${a}'` : a);

async function runPart(part: Part, concurrency: number): Promise<PartRun> {
  const args = strykerArgs(part, concurrency);
  const report = `${OUT}/${part.name}.json`;
  const command = `STRYKER_REPORT=${report} npx ${args.map(quote).join(' ')}`;
  const log = createWriteStream(join(REPO, OUT, `${part.name}.log`));
  const started = Date.now();
  console.error(`[${part.name}] ${command}`);
  // A temp dir of the part's own (TMPDIR): Stryker ends a test process at its first failing test, before
  // that test's cleanup runs, and every mutant it kills so left a steward-* dir in /tmp (hundreds a run).
  const tmp = mkdtempSync(join(tmpdir(), `stw-mutate-${part.name}-`));
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('npx', args, {
      cwd: REPO,
      env: { ...process.env, STRYKER_REPORT: report, TMPDIR: tmp },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream.pipe(log, { end: false });
      stream.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString().split('\n'))
          if (/Mutation testing \d+%|ERROR|Done in/.test(line)) console.error(`[${part.name}] ${line.trim()}`);
      });
    }
    child.on('error', reject);
    child.on('close', (c) => resolve(c ?? 1));
  });
  log.end();
  rmSync(tmp, { recursive: true, force: true });
  if (code !== 0) throw new Error(`stryker for ${part.name} exited ${code}; see ${OUT}/${part.name}.log`);
  const run: PartRun = {
    part: part.name,
    scope: part.scope,
    command,
    concurrency,
    seconds: Math.round((Date.now() - started) / 1000),
    // What the part's verdicts depend on besides its code (scripts/mutation-fresh.ts).
    testFiles: coveringTestFiles(JSON.parse(readFileSync(join(REPO, report), 'utf8')) as Report),
  };
  appendFileSync(join(REPO, PARTS_LOG), `${JSON.stringify(run)}\n`);
  return run;
}

/** The Go shim's statement coverage (`go test -cover`), measured at the same commit as the mutants. */
function goCoverage(): { command: string; percent: number } {
  const command = 'cd shim && go test -count=1 -cover ./...';
  const out = execFileSync('go', ['test', '-count=1', '-cover', './...'], {
    cwd: join(REPO, 'shim'),
    encoding: 'utf8',
    env: { ...process.env, CGO_ENABLED: '0', GOPROXY: 'off', GOFLAGS: '' },
  });
  const m = /coverage: (\d+(?:\.\d+)?)% of statements/.exec(out);
  if (!m) throw new Error(`go test -cover printed no coverage:\n${out}`);
  return { command, percent: Number(m[1]) };
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

/** The summary of the parts recorded in reports/mutation-report (all of them, or those a stopped run finished). */
function assemble(): MutationResults {
  const meta = JSON.parse(readFileSync(join(REPO, META), 'utf8')) as Meta;
  const runs = existsSync(join(REPO, PARTS_LOG))
    ? readFileSync(join(REPO, PARTS_LOG), 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as PartRun)
    : [];
  const order = (name: string) => PARTS.findIndex((p) => p.name === name);
  runs.sort((a, b) => order(a.part) - order(b.part));
  const merged: Report = { files: {} };
  for (const r of runs)
    Object.assign(merged.files, (JSON.parse(readFileSync(join(REPO, OUT, `${r.part}.json`), 'utf8')) as Report).files);
  const done = new Set(runs.map((r) => r.part));
  const missing = meta.parts
    .filter((p) => !done.has(p))
    .map((p) => ({ part: p, scope: PARTS.find((x) => x.name === p)?.scope ?? '' }));
  const measured = new Set(runs.map((r) => r.scope));
  const kept = keptFrom(meta);
  const scopeOrder = (scope: string) => SCOPES.indexOf(scope as (typeof SCOPES)[number]);
  // A part ends when its report is written (the parts of one lane run one after the other).
  const ended = Math.max(
    Date.parse(meta.date),
    ...runs.map((r) => statSync(join(REPO, OUT, `${r.part}.json`)).mtimeMs),
  );
  return {
    schema: 2,
    date: meta.date,
    commit: meta.commit,
    dirty: meta.dirty,
    node: process.version,
    machine: { cores: cpus().length, cpuModel: cpus()[0]?.model.trim() ?? 'unknown' },
    load: { before: meta.loadBefore, after: loadavg()[0] as number },
    command: meta.command,
    seconds: Math.round((ended - Date.parse(meta.date)) / 1000),
    runs: [...runs, ...kept.runs].sort((a, b) => order(a.part) - order(b.part)),
    missing,
    tallies: [...summarize(merged).filter((t) => measured.has(t.scope)), ...kept.tallies].sort(
      (a, b) => scopeOrder(a.scope) - scopeOrder(b.scope),
    ),
    survivors: [...survivors(merged), ...kept.survivors].sort(bySite),
    goCoverage: meta.goCoverage,
  };
}

function publish(res: MutationResults): void {
  const out = join(REPO, DOC_RESULTS);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(res, null, 2)}\n`);
  console.error(
    `wrote ${DOC_RESULTS}${res.missing.length > 0 ? ` (parts not finished: ${res.missing.map((m) => m.part).join(', ')})` : ''}`,
  );
  writeDoc(res, false);
}

/**
 * --carry: the verdicts of the survivors of the run before (--carry-from, default the committed
 * docs/mutation/latest.json) carried to the new run's survivors that are the same mutant of the same
 * code; prints every one for review, writes classes.json and the block.
 */
function carryVerdicts(from?: string): void {
  const old = JSON.parse(
    from ? readFileSync(join(REPO, from), 'utf8') : git('show', `HEAD:${DOC_RESULTS}`),
  ) as MutationResults;
  const next = JSON.parse(readFileSync(join(REPO, DOC_RESULTS), 'utf8')) as MutationResults;
  const classes = JSON.parse(readFileSync(join(REPO, DOC_CLASSES), 'utf8')) as Classification[];
  const renamed = new Map<string, string>();
  for (const line of git('diff', '--find-renames', '--name-status', old.commit, next.commit).split('\n')) {
    const [status, a, b] = line.split('\t');
    if (status?.startsWith('R') && a && b) renamed.set(a, b);
  }
  const r = carry(old, classes, next, renamed);
  console.log(describeCarry(r));
  writeFileSync(join(REPO, DOC_CLASSES), `${JSON.stringify(r.classes, null, 2)}\n`);
  writeDoc(next, false);
  if (r.unclassified.length + r.conflicts.length > 0) process.exitCode = 1;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      concurrency: { type: 'string', default: '1' },
      parts: { type: 'string', default: PARTS.map((p) => p.name).join(',') },
      'allow-dirty': { type: 'boolean' },
      assemble: { type: 'boolean' },
      check: { type: 'boolean' },
      keep: { type: 'boolean' },
      render: { type: 'boolean' },
      carry: { type: 'boolean' },
      'carry-from': { type: 'string' },
    },
  });
  if (values.render) {
    writeDoc(JSON.parse(readFileSync(join(REPO, DOC_RESULTS), 'utf8')) as MutationResults, false);
    return;
  }
  if (values.carry) {
    carryVerdicts(values['carry-from']);
    return;
  }
  if (values.check) {
    const res = JSON.parse(readFileSync(join(REPO, DOC_RESULTS), 'utf8')) as MutationResults;
    if (!writeDoc(res, true)) {
      console.error(`${DOC_FILE}: the report block is not what ${DOC_RESULTS} renders (npm run mutate:report)`);
      process.exit(1);
    }
    return;
  }
  if (values.assemble) {
    publish(assemble());
    return;
  }
  const names = values.parts.split(',').filter((s) => s !== '');
  for (const n of names)
    if (!PARTS.some((p) => p.name === n)) throw new Error(`unknown part ${n}: one of ${PARTS.map((p) => p.name)}`);
  if (values.keep) {
    // Whole scopes only: a scope's tally is one run's, never two commits' mixed.
    for (const scope of new Set(names.map((n) => PARTS.find((p) => p.name === n)?.scope))) {
      const all = PARTS.filter((p) => p.scope === scope).map((p) => p.name);
      const left = all.filter((p) => !names.includes(p));
      if (left.length > 0) throw new Error(`--keep runs whole scopes: ${scope} also needs ${left.join(', ')}`);
    }
  }
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('--concurrency must be a positive integer');
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  if (dirty && !values['allow-dirty']) {
    console.error('the work tree has uncommitted changes: commit them (the table names one commit), or --allow-dirty');
    process.exit(2);
  }
  rmSync(join(REPO, OUT), { recursive: true, force: true });
  mkdirSync(join(REPO, OUT), { recursive: true });
  if (values.keep) writeFileSync(join(REPO, KEPT), readFileSync(join(REPO, DOC_RESULTS)));
  const argv = process.argv.slice(2);
  const meta: Meta = {
    date: new Date().toISOString(),
    commit: git('rev-parse', '--short=10', 'HEAD'),
    dirty,
    loadBefore: loadavg()[0] as number,
    command: `npm run mutate:report${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`,
    parts: names,
    goCoverage: goCoverage(),
    ...(values.keep ? { keep: KEPT } : {}),
  };
  writeFileSync(join(REPO, META), `${JSON.stringify(meta, null, 2)}\n`);
  const lanes = LANES.map((lane) => lane.filter((n) => names.includes(n))).filter((lane) => lane.length > 0);
  await Promise.all(
    lanes.map(async (lane) => {
      for (const n of lane) await runPart(PARTS.find((p) => p.name === n) as Part, concurrency);
    }),
  );
  publish(assemble());
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
