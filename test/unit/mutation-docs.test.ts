// docs/mutation.md's scores come from one `npm run mutate:report` run at one commit: the generated
// block is exactly what the committed summary (docs/mutation/latest.json) and the hand-written
// survivor classes (docs/mutation/classes.json) render, the run covers every directory in scope
// with no incremental state, and every survivor it lists is read: equivalent or accepted, none
// left to kill.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import {
  DOC_CLASSES,
  DOC_FILE,
  DOC_RESULTS,
  begin,
  end,
  extract,
  overall,
  renderBlock,
  renderTable,
  replace,
  survivorKey,
  type Classification,
  type MutationResults,
} from '../../scripts/mutation-docs.js';
import { PARTS } from '../../scripts/mutation-report.js';
import { SCOPES, type Tally } from '../../scripts/mutation-summary.js';

const REPO = new URL('../..', import.meta.url).pathname;
const read = (rel: string) => readFileSync(join(REPO, rel), 'utf8');
const results = JSON.parse(read(DOC_RESULTS)) as MutationResults;
const classes = JSON.parse(read(DOC_CLASSES)) as Classification[];

describe('docs/mutation.md report block', () => {
  test('the committed summary is one run at one commit without incremental state; parts not finished are named', () => {
    assert.equal(results.schema, 1);
    assert.match(results.commit, /^[0-9a-f]{7,}$/);
    assert.equal(results.dirty, false, 'a run with uncommitted changes is not reproducible at its commit');
    assert.match(results.date, /^\d{4}-\d\d-\d\dT/);
    assert.match(results.command, /^npm run mutate:report/);
    // Every part is either measured or listed as not finished (and then the block says so).
    assert.deepEqual(
      [...results.runs.map((r) => r.part), ...results.missing.map((m) => m.part)].sort(),
      PARTS.map((p) => p.name).sort(),
    );
    const scopes = new Set(results.runs.map((r) => r.scope));
    assert.deepEqual(
      results.tallies.map((t) => t.scope),
      SCOPES.filter((s) => scopes.has(s)),
    );
    for (const r of results.runs) {
      const part = PARTS.find((p) => p.name === r.part)!;
      assert.match(r.command, / --force /, `${r.part}: every mutant tested, no incremental state reused`);
      assert.ok(
        r.command.includes(`--mutate ${part.mutate.join(',')}`) ||
          r.command.includes(`--mutate '${part.mutate.join(',')}'`),
        r.command,
      );
    }
    if (results.missing.length > 0) assert.match(extract(read(DOC_FILE), 'report') ?? '', /\*\*Incomplete:\*\*/);
  });

  test('each scope is measured at a commit no older than the last change to its mutated files, and every part finished', () => {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO, encoding: 'utf8' }).trim();
    // A scope is measured at the table's commit, or kept (--keep) from an earlier run at its own.
    for (const scope of SCOPES) {
      const runs = results.runs.filter((r) => r.scope === scope);
      assert.ok(runs.length > 0, `${scope} is not measured`);
      const commits = new Set(runs.map((r) => r.commit ?? results.commit));
      assert.equal(
        commits.size,
        1,
        `${scope}: its parts were measured at different commits ${[...commits].join(', ')}`,
      );
      const measuredAt = git('rev-parse', '--verify', `${[...commits][0]}^{commit}`);
      // The mutated files are the directory in scope (a scope ending in .ts is one file).
      const lastChange = git('log', '-1', '--format=%H', 'HEAD', '--', scope.replace(/\/$/, ''));
      assert.match(lastChange, /^[0-9a-f]{40}$/);
      let atOrAfter = true;
      try {
        execFileSync('git', ['merge-base', '--is-ancestor', lastChange, measuredAt], { cwd: REPO, stdio: 'ignore' });
      } catch {
        atOrAfter = false;
      }
      assert.ok(
        atOrAfter,
        `${scope} is measured at ${measuredAt.slice(0, 10)}, older than ${lastChange.slice(0, 10)}, the last change to its files: run npm run mutate:report -- --parts <its parts> --keep`,
      );
    }
    assert.deepEqual(results.missing, [], 'the shipped table measures every part');
  });

  test("the Go shim's statement coverage at the same commit is reported beside the table", () => {
    assert.ok(results.goCoverage, 'docs/mutation/latest.json has no goCoverage: run npm run mutate:report');
    assert.match(results.goCoverage.command, /go test -count=1 -cover/);
    assert.ok(results.goCoverage.percent > 0 && results.goCoverage.percent <= 100);
    assert.ok((extract(read(DOC_FILE), 'report') ?? '').includes(`**${results.goCoverage.percent.toFixed(1)} %**`));
  });

  test('the parts cover each directory in scope, the engine split in two halves that do not overlap', () => {
    assert.deepEqual([...new Set(PARTS.map((p) => p.scope))].sort(), [...SCOPES].sort());
    const chain = PARTS.find((p) => p.name === 'engine-chain')!.mutate;
    const rest = PARTS.find((p) => p.name === 'engine-rest')!.mutate;
    assert.equal(rest[0], 'daemon/src/engine/**/*.ts');
    assert.deepEqual(
      rest.slice(1),
      chain.map((f) => `!${f}`),
      'the rest is the directory less exactly the chain files',
    );
  });

  test('the generated block is exactly what docs/mutation/latest.json and classes.json render', () => {
    const block = extract(read(DOC_FILE), 'report');
    assert.ok(block, `${DOC_FILE} has no ${begin('report')} … ${end('report')}`);
    assert.equal(block, renderBlock(results, classes), 'stale: run npm run mutate:report');
    assert.ok(block.includes(results.commit) && block.includes(results.command));
  });

  test('every survivor of the run is classified (equivalent / accepted / to kill), and no class is left over', () => {
    const keys = new Set(results.survivors.map(survivorKey));
    const unclassified = results.survivors.filter((s) => !classes.some((c) => c.key === survivorKey(s)));
    assert.deepEqual(unclassified.map(survivorKey), []);
    for (const c of classes) {
      assert.ok(['equivalent', 'accepted', 'to kill'].includes(c.class), c.key);
      assert.ok(c.why.length > 0, `${c.key}: says why`);
      assert.ok(keys.has(c.key), `${c.key}: not a survivor of the committed run`);
    }
  });

  test('no survivor is left to kill: each is killed by a test, or read and judged equivalent or accepted', () => {
    assert.deepEqual(
      classes.filter((c) => c.class === 'to kill').map((c) => c.key),
      [],
    );
  });

  test('the overall score is over the valid mutants of every directory; the table has one row each and the total', () => {
    const t = (scope: string, killed: number, timeout: number, survived: number, noCoverage: number): Tally => ({
      scope,
      killed,
      timeout,
      survived,
      noCoverage,
      errors: 1,
      score: null,
    });
    const all = overall([t('a/', 8, 1, 1, 0), t('b/', 0, 0, 0, 10)]);
    assert.deepEqual([all.killed, all.timeout, all.survived, all.noCoverage, all.errors], [8, 1, 1, 10, 2]);
    assert.equal(all.score, 45);
    const table = renderTable({ ...results, tallies: [t('a/', 8, 1, 1, 0)], runs: [], missing: [], seconds: 61 });
    assert.match(table, /\| `a` \| 11 \| 8 \| 1 \| 1 \| 0 \| 1 \| n\/a \| not run \|/);
    assert.match(
      table,
      /\| \*\*all 1 directories\*\* \| 11 \| 8 \| 1 \| 1 \| 0 \| 1 \| \*\*90\.00%\*\* \| 1 min 1 s \(wall\) \|/,
    );
  });

  test('the block markers are replaced in place and refuse a file without them', () => {
    const text = `a\n${begin('report')}\nold\n${end('report')}\nb\n`;
    assert.equal(replace(text, 'report', 'new'), `a\n${begin('report')}\nnew\n${end('report')}\nb\n`);
    assert.equal(extract(replace(text, 'report', 'new'), 'report'), 'new');
    assert.throws(() => replace('no markers', 'report', 'x'), /markers/);
    assert.throws(() => replace(`${text}${begin('report')}`, 'report', 'x'), /twice/);
  });
});
