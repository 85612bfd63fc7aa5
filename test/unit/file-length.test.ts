// No TypeScript source file in daemon/src or shared/src a newcomer must scroll (issue 42): over
// 320 lines, a file is split where its concerns part, or says at its top why it is one concern,
// with a line `// One concern: <why>` among its first 10 lines. docs/architecture.md names the rule.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const REPO = new URL('../..', import.meta.url).pathname;
const MAX_LINES = 320;
/** The marker, in a `//` comment within the first HEAD lines. */
const MARKER = /^\/\/ One concern: \S/;
const HEAD = 10;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Why a file breaks the rule (its line count), or undefined when it keeps it. */
export function overLong(text: string, max = MAX_LINES): string | undefined {
  const lines = text.split('\n');
  const count = text.endsWith('\n') ? lines.length - 1 : lines.length;
  if (count <= max) return undefined;
  if (lines.slice(0, HEAD).some((l) => MARKER.test(l))) return undefined;
  return `${count} lines and no "// One concern:" line in its first ${HEAD}`;
}

test(`no source file in daemon/src or shared/src is over ${MAX_LINES} lines without saying at its top why it is one concern`, () => {
  const found = ['daemon/src', 'shared/src']
    .flatMap((d) => sources(join(REPO, d)))
    .map((f) => [relative(REPO, f), overLong(readFileSync(f, 'utf8'))] as const)
    .filter(([, why]) => why !== undefined)
    .map(([f, why]) => `${f}: ${why}`);
  assert.deepEqual(found, []);
});

test('the length check finds a long file, and lets one pass that says why at its top', () => {
  const body = Array.from({ length: 330 }, (_, i) => `const x${i} = ${i};`).join('\n') + '\n';
  assert.match(overLong(`// A module.\n${body}`) ?? '', /^331 lines/);
  assert.equal(overLong(`// A module.\n// One concern: one table, row by row.\n${body}`), undefined);
  // The marker further down than the header does not count; nor does an empty reason.
  assert.notEqual(overLong(`${'\n'.repeat(12)}// One concern: late.\n${body}`), undefined);
  assert.notEqual(overLong(`// One concern:\n${body}`), undefined);
  assert.equal(overLong(body.split('\n').slice(0, 320).join('\n') + '\n'), undefined);
});
