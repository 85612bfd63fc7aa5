// The tree's shape as a newcomer reads it (issue 31): no function in daemon/src over 60 lines unless
// the comment above it says why ("Long on purpose"); metrics.ts and metrics/ import nothing from audit/
// (they take their own input shape); bench/ imports no SQLite driver and writes no SQL of its own.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const REPO = new URL('../..', import.meta.url).pathname;
const MAX_LINES = 60;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Functions longer than `max` lines whose leading comment does not say why. */
export function longFunctions(file: string, text: string, max = MAX_LINES): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (n: ts.Node, excused = false) => {
    if (
      ts.isFunctionDeclaration(n) ||
      ts.isMethodDeclaration(n) ||
      ts.isConstructorDeclaration(n) ||
      ts.isArrowFunction(n) ||
      ts.isFunctionExpression(n)
    ) {
      const first = sf.getLineAndCharacterOfPosition(n.getStart()).line;
      const lines = sf.getLineAndCharacterOfPosition(n.getEnd()).line - first + 1;
      // The comment above the function, or above the statement that holds it (const f = () => …).
      const holder = ts.isArrowFunction(n) || ts.isFunctionExpression(n) ? (n.parent?.parent ?? n) : n;
      const comments = (ts.getLeadingCommentRanges(text, holder.getFullStart()) ?? [])
        .map((r) => text.slice(r.pos, r.end))
        .join('\n');
      // What a long function says of itself covers the functions inside it (its promise's executor).
      const why = excused || /Long on purpose/.test(comments);
      if (lines > max && !why) out.push(`${lines} lines at line ${first + 1}`);
      ts.forEachChild(n, (c) => visit(c, why));
      return;
    }
    ts.forEachChild(n, (c) => visit(c, excused));
  };
  visit(sf);
  return out;
}

test(`no function in daemon/src is over ${MAX_LINES} lines unless its comment says why`, () => {
  const found = sources(join(REPO, 'daemon/src')).flatMap((f) =>
    longFunctions(f, readFileSync(f, 'utf8')).map((x) => `${relative(REPO, f)}: ${x}`),
  );
  assert.deepEqual(found, []);
});

test('the length check finds a long function, and lets one whose comment says why pass', () => {
  const body = Array.from({ length: 70 }, (_, i) => `  const x${i} = ${i};`).join('\n');
  assert.equal(longFunctions('a.ts', `function f() {\n${body}\n}\n`).length, 1);
  assert.equal(longFunctions('a.ts', `/** Long on purpose: one table. */\nfunction f() {\n${body}\n}\n`).length, 0);
  assert.equal(longFunctions('a.ts', `const f = () => {\n${body}\n};\n`).length, 1);
});

test('metrics.ts and its areas (metrics/) import nothing from audit/', () => {
  const files = ['daemon/src/metrics.ts', ...sources(join(REPO, 'daemon/src/metrics')).map((f) => relative(REPO, f))];
  const found = files.flatMap((f) => readFileSync(join(REPO, f), 'utf8').match(/from '(\.\.?\/)+audit\/[^']+'/g) ?? []);
  assert.deepEqual(found, []);
});

test('bench/ imports no SQLite driver and writes no SQL of its own', () => {
  const offenders = sources(join(REPO, 'bench')).filter((f) => {
    const text = readFileSync(f, 'utf8');
    return /from 'better-sqlite3'|require\('better-sqlite3'\)|\b(INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE TABLE)\b/.test(
      text,
    );
  });
  assert.deepEqual(
    offenders.map((f) => relative(REPO, f)),
    [],
  );
});

test('docs/architecture.md names every directory and top-level file under daemon/src, and every file of each directory', () => {
  const doc = readFileSync(join(REPO, 'docs/architecture.md'), 'utf8');
  const root = join(REPO, 'daemon/src');
  const missing: string[] = [];
  for (const name of readdirSync(root)) {
    const p = join(root, name);
    if (statSync(p).isDirectory()) {
      if (!doc.includes(`${name}/`)) missing.push(`${name}/`);
      for (const f of readdirSync(p)) if (f.endsWith('.ts') && !doc.includes(f)) missing.push(`${name}/${f}`);
    } else if (!doc.includes(name)) missing.push(name);
  }
  assert.deepEqual(missing, []);
});
