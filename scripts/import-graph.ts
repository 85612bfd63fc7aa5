// The repository's import graph, read from the sources (no compiler): the relative imports of a
// module resolved to source files (`./x.js` is `./x.ts`), and `@cni-steward/shared` resolved to
// shared/src/index.ts (the daemon runs shared/dist, built from it). Used by
// test/unit/import-cycles.test.ts (no circle) and scripts/mutation-fresh.ts (the modules a mutated
// file imports decide its mutants too).

import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** Every .ts file under dir (absolute paths). */
export function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

// Static imports and re-exports, side-effect imports, and `import('./x.js')` (a module loaded only
// when needed, e.g. tracing/export.ts, is still code the importer runs).
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'|(?:^|\n)\s*import\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g;

/**
 * The imports of a module that resolve to files of the repository (absolute paths): relative ones
 * always; `@cni-steward/shared` only when `repo` is given (the workspace package's source).
 */
export function importsOf(file: string, repo?: string, read?: (abs: string) => string | undefined): string[] {
  const text = read ? read(file) : readFileSync(file, 'utf8');
  if (text === undefined) return [];
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = (m[1] ?? m[2] ?? m[3]) as string;
    if (spec.startsWith('./') || spec.startsWith('../')) out.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
    else if (repo !== undefined && spec === '@cni-steward/shared') out.push(join(repo, 'shared/src/index.ts'));
  }
  return out;
}

/**
 * The modules `roots` import, directly or through others, as paths relative to `repo` (sorted),
 * not counting the roots themselves; a module is followed only while `follow(rel)` says so
 * (it is still listed).
 */
export function importClosure(
  repo: string,
  roots: readonly string[],
  follow: (rel: string) => boolean = () => true,
  /** Reads a module (default: the work tree); undefined when it does not exist. */
  read?: (abs: string) => string | undefined,
  /** Follow `@cni-steward/shared` into shared/src (it runs as shared/dist, built from it: code, not the mutated files). */
  packages = true,
): string[] {
  const seen = new Set<string>();
  const rootSet = new Set(roots.map((r) => resolve(repo, r)));
  const stack = [...rootSet];
  const visited = new Set<string>(rootSet);
  while (stack.length > 0) {
    const f = stack.pop() as string;
    for (const d of importsOf(f, packages ? repo : undefined, read)) {
      if (visited.has(d) || (read ? read(d) === undefined : !existsSync(d))) continue;
      visited.add(d);
      const rel = relative(repo, d);
      seen.add(rel);
      if (follow(rel)) stack.push(d);
    }
  }
  return [...seen].sort();
}
