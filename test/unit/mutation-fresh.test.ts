// The mutation table's freshness check (scripts/mutation-fresh.ts) on a throw-away git repository:
// a scope goes stale when a test file Stryker listed as covering it changes, or a test helper such a
// file imports, when the Stryker config or ignorer changes, or when a module its mutated files import
// changes; not when an unrelated file does.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';

import type { MutationResults, PartRun } from '../../scripts/mutation-docs.js';
import { freshness } from '../../scripts/mutation-fresh.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A repo with one scope (src/), a module it imports (lib/), two test files and the Stryker config. */
function repo(): { dir: string; commit: (files: Record<string, string>) => string } {
  const dir = mkdtempSync(join(tmpdir(), 'stw-fresh-'));
  dirs.push(dir);
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: dir,
      encoding: 'utf8',
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@t',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@t',
      },
    }).trim();
  git('init', '-q', '-b', 'main');
  const commit = (files: Record<string, string>) => {
    for (const [f, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, f)), { recursive: true });
      writeFileSync(join(dir, f), text);
    }
    git('add', '-A');
    git('commit', '-q', '-m', 'change');
    return git('rev-parse', 'HEAD');
  };
  commit({
    'src/a.ts': "import { b } from '../lib/b.js';\nexport const a = () => b + 1;\n",
    'lib/b.ts': "import { c } from './c.js';\nexport const b = c;\n",
    'lib/c.ts': 'export const c = 1;\n',
    'lib/unrelated.ts': 'export const u = 0;\n',
    'test/a.test.ts': "import { a } from '../src/a.js';\nvoid a;\n",
    'test/other.test.ts': "import { u } from '../lib/unrelated.js';\nvoid u;\n",
    'stryker.config.mjs': 'export default { tap: { testFiles: [] } };\n',
    'stryker-ignore-logging.mjs': 'export const strykerPlugins = [];\n',
  });
  return { dir, commit };
}

const TAP = ['test/a.test.ts', 'test/other.test.ts'];
const results = (commit: string, testFiles?: string[]): Pick<MutationResults, 'commit' | 'runs'> => {
  const run: PartRun = { part: 'src', scope: 'src/', command: 'x --force', concurrency: 1, seconds: 1, commit };
  return { commit, runs: [testFiles ? { ...run, testFiles } : run] };
};
const changed = (dir: string, r: Pick<MutationResults, 'commit' | 'runs'>) =>
  freshness(dir, r, TAP).flatMap((f) => f.changed.map((c) => `${c.file} (${c.reason})`));

describe('mutation table freshness', () => {
  test('fresh at its own commit; the imported modules are found transitively, outside the scope', () => {
    const { dir, commit } = repo();
    const at = commit({ README: 'x\n' });
    const [f] = freshness(dir, results(at, ['test/a.test.ts']), TAP);
    assert.deepEqual(f?.changed, []);
    assert.deepEqual(f?.imports, ['lib/b.ts', 'lib/c.ts']);
  });

  test("an edited test file in Stryker's list makes the scope stale; a test file not in it does not", () => {
    const { dir, commit } = repo();
    const at = commit({ README: 'x\n' });
    commit({ 'test/other.test.ts': '// emptied\n' });
    assert.deepEqual(changed(dir, results(at, ['test/a.test.ts'])), []);
    commit({ 'test/a.test.ts': '// emptied: nothing kills a mutant any more\n' });
    assert.deepEqual(changed(dir, results(at, ['test/a.test.ts'])), ['test/a.test.ts (test file)']);
  });

  test('a test helper the listed test files import (two hops away) makes it stale; one only an unlisted test file imports does not', () => {
    const { dir, commit } = repo();
    const at = commit({
      'test/a.test.ts':
        "import { a } from '../src/a.js';\nimport { rig } from './helpers/rig.js';\nvoid a;\nvoid rig;\n",
      'test/helpers/rig.ts': "import { fake } from './fake.js';\nexport const rig = fake;\n",
      'test/helpers/fake.ts': 'export const fake = 1;\n',
      'test/other.test.ts': "import { o } from './helpers/other.js';\nvoid o;\n",
      'test/helpers/other.ts': 'export const o = 1;\n',
    });
    const r = results(at, ['test/a.test.ts']);
    assert.deepEqual(freshness(dir, r, TAP)[0]?.helpers, ['test/helpers/fake.ts', 'test/helpers/rig.ts']);
    commit({ 'test/helpers/other.ts': 'export const o = 2;\n' });
    assert.deepEqual(changed(dir, r), []);
    commit({ 'test/helpers/fake.ts': 'export const fake = 2; // the fake answers otherwise now\n' });
    assert.deepEqual(changed(dir, r), ['test/helpers/fake.ts (test helper)']);
  });

  test("a run without the list counts the tap.testFiles that import the scope, now or at the run's commit", () => {
    const { dir, commit } = repo();
    const at = commit({ README: 'x\n' });
    commit({ 'test/other.test.ts': '// changed, never reached src/\n' });
    assert.deepEqual(changed(dir, results(at)), []);
    // It reached src/ at the run's commit and no longer does: its change counts.
    commit({ 'test/a.test.ts': 'export {};\n' });
    assert.deepEqual(changed(dir, results(at)), ['test/a.test.ts (test file)']);
  });

  test('the Stryker config, the ignorer and an imported module (two hops away) each make it stale', () => {
    for (const [file, reason] of [
      ['stryker.config.mjs', 'stryker config'],
      ['stryker-ignore-logging.mjs', 'stryker config'],
      ['lib/c.ts', 'imported module'],
      ['src/a.ts', 'mutated file'],
    ] as const) {
      const { dir, commit } = repo();
      const at = commit({ README: 'x\n' });
      commit({ 'lib/unrelated.ts': 'export const u = 2;\n' });
      assert.deepEqual(changed(dir, results(at, ['test/a.test.ts'])), [], file);
      commit({ [file]: `// edited\n${file === 'src/a.ts' ? "import '../lib/b.js';\n" : ''}` });
      assert.deepEqual(changed(dir, results(at, ['test/a.test.ts'])), [`${file} (${reason})`]);
    }
  });

  test('a file changed and changed back does not count (content since the commit)', () => {
    const { dir, commit } = repo();
    const at = commit({ README: 'x\n' });
    commit({ 'test/a.test.ts': '// emptied\n' });
    commit({ 'test/a.test.ts': "import { a } from '../src/a.js';\nvoid a;\n" });
    assert.deepEqual(changed(dir, results(at, ['test/a.test.ts'])), []);
  });
});
