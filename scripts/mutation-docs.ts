// The generated part of docs/mutation.md: the per-directory table and the survivors of one
// `npm run mutate:report` run, between markers, rendered from docs/mutation/latest.json (the
// committed summary of that run, written by scripts/mutation-report.ts). Each survivor's class
// (equivalent / accepted / to kill) and reason come from docs/mutation/classes.json, written by
// hand after reading the mutant; a survivor without an entry there is shown as "unclassified".
// test/unit/mutation-docs.test.ts checks that the block is what the committed summary renders.

import type { Survivor, Tally } from './mutation-summary.js';
import { generatedBlocks } from './generated-block.js';

export const DOC_FILE = 'docs/mutation.md';
/** The committed summary of the run the doc quotes. */
export const DOC_RESULTS = 'docs/mutation/latest.json';
/** Hand-written classification of survivors, keyed by survivorKey(). */
export const DOC_CLASSES = 'docs/mutation/classes.json';

export interface PartRun {
  /** The part's name (scripts/mutation-report.ts PARTS): a directory, or half of one. */
  part: string;
  /** Its directory, as in SCOPES (e.g. `daemon/src/engine/`). */
  scope: string;
  /** The exact Stryker command line the script ran for it. */
  command: string;
  concurrency: number;
  seconds: number;
  /**
   * The commit the part was measured at, when it is not the table's own: a scope kept from an
   * earlier run (`npm run mutate:report -- --parts … --keep`) because nothing it depends on changed.
   */
  commit?: string;
  /**
   * The test files Stryker reported as covering or killing the part's mutants (coveredBy/killedBy):
   * the part's verdicts depend on them. Absent in runs recorded before it was kept; the freshness
   * check (scripts/mutation-fresh.ts) then counts every file of stryker.config.mjs's tap.testFiles
   * that reaches the scope through its imports.
   */
  testFiles?: string[];
}

export interface MutationResults {
  /** 2: survivors carry their column and original text, runs their test files. */
  schema: 1 | 2;
  date: string;
  commit: string;
  /** The work tree had changes not committed (such a run is not reproducible at `commit`). */
  dirty: boolean;
  node: string;
  machine: { cores: number; cpuModel: string };
  /** One-minute load average when the run started and when it ended. */
  load: { before: number; after: number };
  /** The command as typed, e.g. `npm run mutate:report`. */
  command: string;
  /** Wall-clock time of the whole run (the directories run in parallel lanes). */
  seconds: number;
  /** The parts that finished, in PARTS order. */
  runs: PartRun[];
  /** Parts the run was asked for that did not finish (it was stopped): their mutants are not counted. */
  missing: Array<{ part: string; scope: string }>;
  /** Per directory with at least one part finished. */
  tallies: Tally[];
  survivors: Survivor[];
  /** The Go shim's statement coverage at the same commit (StrykerJS mutates TypeScript only). */
  goCoverage?: { command: string; percent: number };
}

export type SurvivorClass = 'equivalent' | 'accepted' | 'to kill';

export interface Classification {
  /** `file:line:column mutator replacement`, as survivorKey() builds it. */
  key: string;
  class: SurvivorClass;
  why: string;
}

/** A verdict's key: a new survivor on the same line with the same mutator but another column has no verdict. */
export const survivorKey = (s: Survivor): string =>
  `${s.file}:${s.line}:${s.column ?? '?'} ${s.mutator} ${s.replacement}`;

export const { begin, end, extract, replace } = generatedBlocks('mutation');

/** The totals of several directories as one row (score over the valid mutants of all of them). */
export function overall(tallies: readonly Tally[]): Tally {
  const t: Tally = { scope: 'all', killed: 0, survived: 0, noCoverage: 0, timeout: 0, errors: 0, score: null };
  for (const x of tallies) {
    t.killed += x.killed;
    t.survived += x.survived;
    t.noCoverage += x.noCoverage;
    t.timeout += x.timeout;
    t.errors += x.errors;
  }
  const valid = t.killed + t.timeout + t.survived + t.noCoverage;
  t.score = valid === 0 ? null : (100 * (t.killed + t.timeout)) / valid;
  return t;
}

const pct = (score: number | null) => (score === null ? 'n/a' : `${score.toFixed(2)}%`);

export function duration(seconds: number): string {
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds % 60);
  return m === 0 ? `${s} s` : `${m} min ${s} s`;
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/`/g, "'");

export function renderTable(res: MutationResults): string {
  const head =
    '| directory | mutants | killed | timeout | survived | no coverage | errors | score | run time |\n' +
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |';
  const row = (t: Tally, time: string, bold = false) => {
    const n = t.killed + t.timeout + t.survived + t.noCoverage + t.errors;
    const partial = res.missing.filter((m) => m.scope === t.scope).map((m) => m.part);
    const name = bold
      ? `**all ${res.tallies.length} directories**`
      : `\`${t.scope.replace(/\/$/, '')}\`${partial.length > 0 ? ` (without ${partial.join(', ')})` : ''}`;
    const score = bold ? `**${pct(t.score)}**` : pct(t.score);
    return `| ${name} | ${n} | ${t.killed} | ${t.timeout} | ${t.survived} | ${t.noCoverage} | ${t.errors} | ${score} | ${time} |`;
  };
  const rows = res.tallies.map((t) => {
    const runs = res.runs.filter((r) => r.scope === t.scope);
    const time = runs.length === 0 ? 'not run' : duration(runs.reduce((sum, r) => sum + r.seconds, 0));
    return row(t, time);
  });
  return [head, ...rows, row(overall(res.tallies), `${duration(res.seconds)} (wall)`, true)].join('\n');
}

export function renderSurvivors(res: MutationResults, classes: readonly Classification[]): string {
  if (res.survivors.length === 0) return 'No mutant survived.';
  const byKey = new Map(classes.map((c) => [c.key, c]));
  const counts = new Map<string, number>();
  const lines = res.survivors.map((s) => {
    const c = byKey.get(survivorKey(s));
    const cls = c?.class ?? 'unclassified';
    counts.set(cls, (counts.get(cls) ?? 0) + 1);
    const status = s.status === 'NoCoverage' ? 'no coverage' : 'survived';
    return `| ${s.file}:${s.line}:${s.column ?? '?'} | ${status} | ${s.mutator} → \`${cell(s.replacement)}\` | ${cls} | ${cell(c?.why ?? '')} |`;
  });
  const summary = [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  return (
    `${res.survivors.length} mutants survived or had no coverage: ${summary}.\n\n` +
    '| where | status | mutator → replacement | class | why |\n| --- | --- | --- | --- | --- |\n' +
    lines.join('\n')
  );
}

export function renderBlock(res: MutationResults, classes: readonly Classification[]): string {
  const state = res.dirty ? ', **with uncommitted changes**' : '';
  const runs = res.runs
    .map((r) => `${r.command}   # ${r.part}: ${duration(r.seconds)}${r.commit ? `, at ${r.commit}` : ''}`)
    .join('\n');
  const keptScopes = [...new Set(res.runs.filter((r) => r.commit).map((r) => `\`${r.scope}\` (at \`${r.commit}\`)`))];
  const kept =
    keptScopes.length === 0
      ? ''
      : ` Kept from an earlier run, each at the commit that measured it (whether it is still fresh is ` +
        `scripts/mutation-fresh.ts's to say): ${keptScopes.join(', ')}.`;
  const missing =
    res.missing.length === 0
      ? ''
      : `\n\n**Incomplete:** the run was stopped before ${res.missing.map((m) => `\`${m.part}\``).join(', ')} ` +
        'finished; those mutants are not in the table.';
  return [
    `<!-- generated by \`npm run mutate:report\` from ${DOC_RESULTS} and ${DOC_CLASSES}: do not edit by hand -->`,
    '',
    `One run of \`${res.command}\` at commit \`${res.commit}\`${state}, ${res.date}: Node ${res.node}, ` +
      `${res.machine.cores} cores (${res.machine.cpuModel}), load average ${res.load.before.toFixed(1)} at the start ` +
      `and ${res.load.after.toFixed(1)} at the end. Every mutant was tested (no incremental state).${kept}${missing}`,
    '',
    renderTable(res),
    '',
    ...(res.goCoverage
      ? [
          `The Go shim (\`shim/\`) is not mutated by StrykerJS (TypeScript only; its gremlins score, \`npm run ` +
            `mutate:go\`, is in "The Go shim" above); its statement coverage at the same commit, ` +
            `\`${res.goCoverage.command}\`: **${res.goCoverage.percent.toFixed(1)} %** (floor 90 %, ` +
            'enforced by `npm run test:go`).',
          '',
        ]
      : []),
    'The Stryker runs it made (two lanes side by side; run time is per part, a directory’s is the sum of its parts):',
    '',
    '```sh',
    runs,
    '```',
    '',
    renderSurvivors(res, classes),
  ].join('\n');
}
