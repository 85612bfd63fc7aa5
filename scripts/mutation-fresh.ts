// Is the mutation table of docs/mutation.md still the table a run at HEAD would give? A scope's
// verdicts depend on more than its own files. A scope is stale when, between the commit that
// measured it and HEAD, any of these changed:
// - its mutated files (the directory in scope, or the one file);
// - the test files that cover or kill its mutants: the list Stryker reported at run time (PartRun
//   testFiles, recorded by scripts/mutation-report.ts). A run recorded before the list was kept is
//   judged by every file of stryker.config.mjs's tap.testFiles that imports a file of the scope,
//   directly or through others, at HEAD or at the measuring commit (a test file can only cover
//   mutants of modules it loads: the tap runner records coverage in the test file's own process);
// - the test helpers those test files import (files under test/, transitively, at HEAD): a fake or
//   a rig changed under an unchanged test file changes what it asserts just the same;
// - stryker.config.mjs and stryker-ignore-logging.mjs (which mutants exist, which tests run);
// - the modules the mutated files import, transitively, within the repository and outside the
//   scope (scripts/import-graph.ts), at HEAD.
// Changes are content changes: `git diff <measuring commit> HEAD`, so a file changed and changed
// back does not count.
//
//   node --import tsx scripts/mutation-fresh.ts    # prints each scope's verdict, exit 1 if any is stale

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import { importClosure, sources } from './import-graph.js';
import { DOC_RESULTS, type MutationResults } from './mutation-docs.js';

/** Files besides the sources and tests that decide every scope's mutants and verdicts. */
export const CONFIG_FILES = ['stryker.config.mjs', 'stryker-ignore-logging.mjs'] as const;

export type Reason = 'mutated file' | 'test file' | 'test helper' | 'stryker config' | 'imported module';

export interface ScopeFreshness {
  scope: string;
  /** The commit that measured the scope (full hash). */
  commit: string;
  /** Where the scope's test files come from: the run's own list, or tap.testFiles reaching the scope. */
  testsFrom: 'run' | 'config';
  tests: string[];
  /** The files under test/ those test files import (transitively), other than test files of the list. */
  helpers: string[];
  /** The modules outside the scope its mutated files import (transitively). */
  imports: string[];
  /** Files changed since `commit` that the scope depends on, with why it depends on them. */
  changed: Array<{ file: string; reason: Reason }>;
}

const git = (repo: string, ...args: string[]) =>
  execFileSync('git', args, { cwd: repo, encoding: 'utf8', maxBuffer: 64 << 20 }).trim();

/** The mutated files of a scope (relative paths): a directory's .ts files, or the one file. */
export function scopeFiles(repo: string, scope: string): string[] {
  if (!scope.endsWith('/')) return [scope];
  const dir = join(repo, scope);
  return existsSync(dir) ? sources(dir).map((f) => relative(repo, f)) : [];
}

/** Does `test` import a file of `inScope` (directly or through others), reading files with `read`? */
function reaches(
  repo: string,
  test: string,
  inScope: (rel: string) => boolean,
  read?: (abs: string) => string | undefined,
): boolean {
  // Only relative imports: a test loading `@cni-steward/shared` runs shared/dist, not the mutated shared/src.
  return importClosure(repo, [test], () => true, read, false).some(inScope);
}

/** Reads a file as it was at `commit` (undefined when it did not exist). */
function readAt(repo: string, commit: string): (abs: string) => string | undefined {
  const cache = new Map<string, string | undefined>();
  return (abs) => {
    const rel = relative(repo, abs);
    if (!cache.has(rel)) {
      try {
        cache.set(
          rel,
          execFileSync('git', ['show', `${commit}:${rel}`], {
            cwd: repo,
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'ignore'],
          }),
        );
      } catch {
        cache.set(rel, undefined);
      }
    }
    return cache.get(rel);
  };
}

/** Every scope of the table, with what it depends on and what of that changed since its commit. */
export function freshness(
  repo: string,
  results: Pick<MutationResults, 'commit' | 'runs'>,
  tapTestFiles: readonly string[],
): ScopeFreshness[] {
  const scopes = [...new Set(results.runs.map((r) => r.scope))];
  return scopes.map((scope) => {
    const runs = results.runs.filter((r) => r.scope === scope);
    const commits = new Set(runs.map((r) => r.commit ?? results.commit));
    if (commits.size !== 1)
      throw new Error(`${scope}: its parts were measured at different commits ${[...commits].join(', ')}`);
    const commit = git(repo, 'rev-parse', '--verify', `${[...commits][0]}^{commit}`);
    const files = new Set(scopeFiles(repo, scope));
    const inScope = (rel: string) => (scope.endsWith('/') ? rel.startsWith(scope) : rel === scope);
    const imports = importClosure(repo, [...files], (rel) => !rel.startsWith('test/')).filter((f) => !inScope(f));
    const recorded = runs.every((r) => r.testFiles !== undefined);
    const candidates = [...new Set(recorded ? runs.flatMap((r) => r.testFiles ?? []) : tapTestFiles)].sort();
    const atCommit = readAt(repo, commit);
    const isTest = (f: string) =>
      candidates.includes(f) &&
      (recorded ||
        (existsSync(join(repo, f)) && reaches(repo, f, inScope)) ||
        (atCommit(join(repo, f)) !== undefined && reaches(repo, f, inScope, atCommit)));
    const tests = recorded
      ? candidates
      : candidates.filter((t) => existsSync(join(repo, t)) && reaches(repo, t, inScope));
    const helpers = importClosure(
      repo,
      tests.filter((t) => existsSync(join(repo, t))),
      (rel) => rel.startsWith('test/'),
      undefined,
      false,
    ).filter((rel) => rel.startsWith('test/') && !candidates.includes(rel));
    const diff = git(
      repo,
      'diff',
      '--name-only',
      commit,
      'HEAD',
      '--',
      scope,
      ...CONFIG_FILES,
      ...imports,
      ...candidates,
      ...helpers,
    );
    const changedFiles = diff === '' ? [] : diff.split('\n');
    const changed: ScopeFreshness['changed'] = [];
    for (const file of changedFiles) {
      if (inScope(file)) changed.push({ file, reason: 'mutated file' });
      else if ((CONFIG_FILES as readonly string[]).includes(file)) changed.push({ file, reason: 'stryker config' });
      else if (imports.includes(file)) changed.push({ file, reason: 'imported module' });
      else if (isTest(file)) changed.push({ file, reason: 'test file' });
      else if (helpers.includes(file)) changed.push({ file, reason: 'test helper' });
    }
    return { scope, commit, testsFrom: recorded ? 'run' : 'config', tests, helpers, imports, changed };
  });
}

/** stryker.config.mjs's tap.testFiles, as the repository at `repo` has it. */
export async function tapTestFiles(repo: string): Promise<string[]> {
  const url = pathToFileURL(resolve(repo, 'stryker.config.mjs')).href;
  const config = (await import(url)) as { default: { tap: { testFiles: string[] } } };
  return config.default.tap.testFiles;
}

/** One line per stale scope: what changed since its commit and why the scope depends on it. */
export function describeStale(f: ScopeFreshness): string {
  return (
    `${f.scope} is measured at ${f.commit.slice(0, 10)}; changed since: ` +
    f.changed.map((c) => `${c.file} (${c.reason})`).join(', ') +
    ` — run npm run mutate:report -- --parts <its parts> --keep`
  );
}

async function main(): Promise<void> {
  const repo = resolve(dirname(new URL(import.meta.url).pathname), '..');
  const results = JSON.parse(readFileSync(join(repo, DOC_RESULTS), 'utf8')) as MutationResults;
  const all = freshness(repo, results, await tapTestFiles(repo));
  for (const f of all) {
    const state = f.changed.length === 0 ? 'fresh' : 'STALE';
    console.log(
      `${state}  ${f.scope} at ${f.commit.slice(0, 10)}: ${f.tests.length} test files (${f.testsFrom === 'run' ? "the run's list" : 'tap.testFiles reaching it'}), ${f.helpers.length} test helpers, ${f.imports.length} imported modules`,
    );
    for (const c of f.changed) console.log(`       changed: ${c.file} (${c.reason})`);
  }
  if (all.some((f) => f.changed.length > 0)) process.exit(1);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
