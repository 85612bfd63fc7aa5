// One source of truth for the bench figures: README.md, docs/performance.md and docs/packaging.md
// carry the same generated table (bench/docs.ts), rendered whole from docs/bench/latest.json, the
// committed result of one `npm run bench -- --json` run; nothing else in them quotes the shim,
// chain or storm ratios by hand.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BLOCKS, DOC_FILES, DOC_RESULTS, begin, end, extract, replace } from '../../bench/lib/docs-block.js';
import type { BenchResults } from '../../bench/lib/report.js';

const REPO = new URL('../..', import.meta.url).pathname;
const read = (rel: string) => readFileSync(join(REPO, rel), 'utf8');
const results = JSON.parse(read(DOC_RESULTS)) as BenchResults;

test('the committed results are one whole run, with machine, load, node and commit', () => {
  assert.equal(results.schema, 2);
  assert.match(results.date, /^\d{4}-\d\d-\d\dT/);
  assert.match(results.commit, /^[0-9a-f]{7,}$/);
  assert.equal(typeof results.dirty, 'boolean');
  assert.match(results.node, /^v\d+\./);
  assert.ok(results.machine.cores > 0 && results.machine.cpuModel !== '');
  for (const x of [results.load.before, results.load.during.mean, results.load.after]) assert.equal(typeof x, 'number');
  const ids = results.rows.map((r) => r.id);
  assert.equal(new Set(ids).size, ids.length, 'each benchmark once: rows of two runs were not merged');
  assert.ok(ids.length > 0);
});

test('README.md, docs/performance.md and docs/packaging.md carry the identical generated table', () => {
  const blocks = DOC_FILES.map((f) => extract(read(f), 'table'));
  for (const [i, b] of blocks.entries()) assert.ok(b, `${DOC_FILES[i]} has no ${begin('table')} … ${end('table')}`);
  for (const b of blocks.slice(1)) assert.equal(b, blocks[0]);
});

test('every generated block is exactly what docs/bench/latest.json renders (npm run bench:docs)', () => {
  for (const block of BLOCKS) {
    const want = block.render(results);
    for (const f of block.files) assert.equal(extract(read(f), block.name), want, `${f}: ${block.name} block is stale`);
  }
  // Every row of the run is in the table, with its figures as the run measured them.
  const table = extract(read('README.md'), 'table') ?? '';
  for (const r of results.rows) {
    assert.ok(table.includes(`| ${r.title} |`), r.id);
    if (r.ratio !== undefined) assert.ok(table.includes(`${r.ratio}×`), `${r.id} ratio`);
  }
  assert.ok(table.includes(results.commit) && table.includes(results.node));
});

test('outside the generated table, README.md and docs/packaging.md quote no shim, chain or storm ratio', () => {
  const ratio = /\d(?:\.\d+)?\s*(?:–\s*\d(?:\.\d+)?)?\s*[×x]\s*(?:`?curl|idle|the direct|of idle)/;
  for (const f of ['README.md', 'docs/packaging.md', 'deploy/README.md']) {
    const text = read(f);
    const outside = extract(text, 'table') === undefined ? text : replace(text, 'table', '');
    for (const [i, line] of outside.split('\n').entries())
      assert.doesNotMatch(line, ratio, `${f}:${i + 1} quotes a ratio by hand: ${line}`);
  }
});

test('the block markers are replaced in place and refuse a file without them', () => {
  const text = `a\n${begin('table')}\nold\n${end('table')}\nb\n`;
  assert.equal(replace(text, 'table', 'new'), `a\n${begin('table')}\nnew\n${end('table')}\nb\n`);
  assert.equal(extract(replace(text, 'table', 'new'), 'table'), 'new');
  assert.throws(() => replace('no markers', 'table', 'x'), /markers/);
});
