// One-off (kept to show how it was done): docs/mutation/latest.json's survivors recorded file, line,
// mutator and replacement but no column, and classes.json keyed verdicts by `file:line mutator
// replacement`. This adds each survivor's column and original text, found by generating the
// mutants again with Stryker's own instrumenter from the file as it was at the commit that measured
// its scope, and re-keys classes.json to `file:line:column mutator replacement`. A survivor is given
// a column only when its file, line, mutator and replacement name exactly as many generated mutants
// as there are such survivors (then all of them, in column order); otherwise it is printed and left.
//
//   node --import tsx scripts/mutation-rekey.ts [--write]

import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { Instrumenter } from '@stryker-mutator/instrumenter';

import { DOC_CLASSES, DOC_RESULTS, survivorKey, type Classification, type MutationResults } from './mutation-docs.js';
import { SCOPES, bySite, originalOf, textAt, type Survivor } from './mutation-summary.js';

const REPO = new URL('..', import.meta.url).pathname;
const quiet = new Proxy({}, { get: (_t, p) => (String(p).startsWith('is') ? () => false : () => undefined) });

const res = JSON.parse(readFileSync(join(REPO, DOC_RESULTS), 'utf8')) as MutationResults;
const classes = JSON.parse(readFileSync(join(REPO, DOC_CLASSES), 'utf8')) as Classification[];
const oldKey = (s: Survivor) => `${s.file}:${s.line} ${s.mutator} ${s.replacement}`;
const commitOf = (file: string) => {
  const scope = SCOPES.find((s) => file.startsWith(s));
  const run = res.runs.find((r) => r.scope === scope);
  if (!run) throw new Error(`${file}: no run for its scope`);
  return run.commit ?? res.commit;
};

const instrumenter = new Instrumenter(quiet as never);
const groups = new Map<string, Survivor[]>();
for (const s of res.survivors) groups.set(oldKey(s), [...(groups.get(oldKey(s)) ?? []), s]);
const byFile = new Map<string, Survivor[][]>();
for (const g of groups.values()) byFile.set(g[0]!.file, [...(byFile.get(g[0]!.file) ?? []), g]);

let placed = 0;
const unplaced: string[] = [];
for (const [file, fileGroups] of byFile) {
  const commit = commitOf(file);
  const content = execFileSync('git', ['show', `${commit}:${file}`], { cwd: REPO, encoding: 'utf8' });
  const { mutants } = await instrumenter.instrument([{ name: file, mutate: true, content }], {
    plugins: null,
    excludedMutations: [],
    ignorers: [],
  } as never);
  for (const g of fileGroups) {
    const s0 = g[0]!;
    const found = mutants
      .filter(
        (m) =>
          m.location.start.line + 1 === s0.line &&
          m.mutatorName === s0.mutator &&
          (m.replacement ?? '').replace(/\s+/g, ' ').slice(0, 80) === s0.replacement,
      )
      .sort((a, b) => a.location.start.column - b.location.start.column);
    if (found.length !== g.length) {
      unplaced.push(`${oldKey(s0)}: ${g.length} survivors, ${found.length} generated mutants at ${commit}`);
      continue;
    }
    g.forEach((s, i) => {
      const { start, end } = found[i]!.location;
      const from = { line: start.line + 1, column: start.column + 1 };
      const to = { line: end.line + 1, column: end.column + 1 };
      s.column = from.column;
      s.original = originalOf(textAt(content, from, to));
      placed++;
    });
  }
}
res.schema = 2;
res.survivors.sort(bySite);
// Every verdict moves to each survivor it was written for (one old key may now be several).
const next: Classification[] = [];
for (const c of classes) {
  const g = groups.get(c.key);
  if (!g) throw new Error(`${c.key}: no survivor`);
  for (const key of new Set(g.map(survivorKey))) next.push({ ...c, key });
}
next.sort((a, b) => a.key.localeCompare(b.key, 'en', { numeric: true }));
console.log(`${placed} of ${res.survivors.length} survivors placed; ${classes.length} classes -> ${next.length}`);
for (const u of unplaced) console.log(`not placed: ${u}`);
// A survivor not placed keeps no column (its key reads `:?`) until a run places it.
if (process.argv.includes('--write')) {
  writeFileSync(join(REPO, DOC_RESULTS), `${JSON.stringify(res, null, 2)}\n`);
  writeFileSync(join(REPO, DOC_CLASSES), `${JSON.stringify(next, null, 2)}\n`);
  console.log(`wrote ${DOC_RESULTS} and ${DOC_CLASSES}`);
}
