// No import circle in the daemon, shim or shared sources: data flows one way (runtime -> shim ->
// socket -> route -> engine -> store/plugins). Type-only imports count too: a circle of types is
// still two modules that cannot be read apart.

import assert from 'node:assert/strict';
import { join, relative } from 'node:path';
import { test } from 'node:test';

import { importsOf, sources } from '../../scripts/import-graph.js';

const REPO = new URL('../..', import.meta.url).pathname;

function cycles(files: string[]): string[][] {
  const graph = new Map(files.map((f) => [f, importsOf(f).filter((d) => files.includes(d))]));
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string) => {
    state.set(f, 'open');
    stack.push(f);
    for (const d of graph.get(f) ?? []) {
      if (state.get(d) === 'open') found.push([...stack.slice(stack.indexOf(d)), d].map((p) => relative(REPO, p)));
      else if (!state.has(d)) visit(d);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of files) if (!state.has(f)) visit(f);
  return found;
}

for (const pkg of ['daemon/src', 'shared/src']) {
  test(`${pkg} has no import circle`, () => {
    assert.deepEqual(
      cycles(sources(join(REPO, pkg))).map((c) => c.join(' -> ')),
      [],
    );
  });
}

test('the cycle finder finds a circle when there is one', () => {
  const dir = join(REPO, 'test/fixtures/import-cycle');
  assert.equal(cycles(sources(dir)).length, 1);
});

test("a dynamic import('./x.js') is an import too (a module loaded only when needed is still run by its importer)", () => {
  const dir = join(REPO, 'test/fixtures/import-cycle-dynamic');
  assert.deepEqual(
    importsOf(join(dir, 'a.ts')).map((p) => relative(REPO, p)),
    ['test/fixtures/import-cycle-dynamic/b.ts'],
  );
  assert.equal(cycles(sources(dir)).length, 1);
});
