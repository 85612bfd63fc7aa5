// `npm run bench:docs [-- --from FILE] [--check]`: the one command to run after `npm run bench --
// --json`. Copies the run's results (default bench-results/latest.json) to docs/bench/latest.json,
// the committed copy, and rewrites the generated blocks of README.md, docs/performance.md and
// docs/packaging.md from it (lib/docs-block.ts). --check writes nothing and exits 1 when a file's
// block is not what docs/bench/latest.json renders.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { BLOCKS, DOC_RESULTS, extract, replace } from './lib/docs-block.js';
import { REPO } from './lib/paths.js';
import type { BenchResults } from './lib/report.js';

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { from: { type: 'string' }, check: { type: 'boolean' } },
});

const committed = join(REPO, DOC_RESULTS);
if (!values.check) {
  const from = values.from ?? join(REPO, 'bench-results', 'latest.json');
  if (!existsSync(from)) {
    console.error(`${from} does not exist: run \`npm run bench -- --json\` first`);
    process.exit(2);
  }
  const res = JSON.parse(readFileSync(from, 'utf8')) as Partial<BenchResults>;
  if (res.schema !== 2) {
    console.error(`${from} is not a bench result of schema 2 (written by an older bench/run.ts?)`);
    process.exit(2);
  }
  mkdirSync(dirname(committed), { recursive: true });
  writeFileSync(committed, `${JSON.stringify(res, null, 2)}\n`);
  console.error(`copied ${from} to ${DOC_RESULTS}`);
}

const res = JSON.parse(readFileSync(committed, 'utf8')) as BenchResults;
let stale = 0;
for (const block of BLOCKS) {
  const body = block.render(res);
  for (const rel of block.files) {
    const file = join(REPO, rel);
    const text = readFileSync(file, 'utf8');
    if (values.check) {
      if (extract(text, block.name) !== body) {
        console.error(`${rel}: the ${block.name} block is not what ${DOC_RESULTS} renders`);
        stale++;
      }
      continue;
    }
    const next = replace(text, block.name, body);
    if (next !== text) writeFileSync(file, next);
    console.error(`${rel}: ${block.name} block ${next === text ? 'unchanged' : 'rewritten'}`);
  }
}
if (values.check && stale > 0) process.exit(1);
