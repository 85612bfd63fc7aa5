// The file names the docs give must be true: every repository path in README.md, deploy/README.md
// and docs/*.md exists, and so does every file docs/architecture.md's tree and engine table and the
// README's package table name relative to their directory. A file moved or split without its docs
// fails here, not in a reader's hands.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const REPO = new URL('../..', import.meta.url).pathname;
const DOCS = [
  'README.md',
  'deploy/README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (file: string) => readFileSync(join(REPO, file), 'utf8');
const exists = (path: string) => existsSync(join(REPO, path));

/** Repository paths in prose: under a source or tooling root, without placeholders or globs. */
const PATH =
  /(?<![\w./-])((?:daemon\/src|shim|shared\/src|shared\/vectors|test|scripts|bench|deploy|docs)\/[\w./*{}<>$…-]*[\w*}>])/g;

/**
 * A doc's text without the blocks `npm run bench:docs` generates from a recorded run: they quote that
 * run's notes, which may name files since removed (the Bun shim's fixtures), and are rewritten by the
 * next run, not by hand.
 */
const withoutRunRecords = (text: string) =>
  text.replace(/<!-- bench:(\w+):begin -->[\s\S]*?<!-- bench:\1:end -->/g, '');

test('every repository path the docs name exists', () => {
  const missing: string[] = [];
  let checked = 0;
  for (const file of DOCS) {
    for (const [, path] of withoutRunRecords(read(file)).matchAll(PATH)) {
      if (/[*{}<>$…]/.test(path!)) continue;
      checked++;
      if (!exists(path!)) missing.push(`${file}: ${path}`);
    }
  }
  assert.ok(checked > 50, `found only ${checked} paths: has the pattern stopped matching?`);
  assert.deepEqual(missing, []);
});

test('docs/architecture.md: every file its tree and engine table name exists where they put it', () => {
  const text = read('docs/architecture.md');
  const missing: string[] = [];
  const tree = /```\n([\s\S]*?)```/.exec(text)?.[1];
  assert.ok(tree, 'the file tree block');
  let root = '';
  let dir = '';
  let checked = 0;
  for (const line of tree.split('\n')) {
    const top = /^([\w-]+\/(?:src\/)?)/.exec(line);
    if (top) [root, dir] = [top[1]!, ''];
    // An entry (two spaces, then its name) may name a subdirectory its files are in; deeper
    // indentation continues the entry above.
    const entry = /^ {2}([\w-]+\/)/.exec(line);
    if (entry) dir = entry[1]!;
    else if (/^ {2}\S/.test(line)) dir = '';
    for (const [name] of line.matchAll(/(?<![\w.-])[\w/-]+\.(?:ts|go)\b/g)) {
      checked++;
      const candidates = [join(root, name), join(root, dir, name), join('daemon/src', name)];
      if (!candidates.some(exists)) missing.push(`tree: ${root}${dir}${name}`);
    }
  }
  const table = text.slice(text.indexOf('`engine/`, by concern'));
  for (const [, row] of table.matchAll(/^\| (.+?) \|/gm)) {
    for (const [, name] of row!.matchAll(/`([\w-]+\.ts)`/g)) {
      checked++;
      if (!exists(join('daemon/src/engine', name!))) missing.push(`engine table: ${name}`);
    }
  }
  assert.ok(checked > 30, `found only ${checked} names`);
  assert.deepEqual(missing, []);
});

test("README's package table: every file a package's row names exists in that package", () => {
  const missing: string[] = [];
  let checked = 0;
  for (const [, pkg, row] of read('README.md').matchAll(/^\| `(shared|shim|daemon)\/` \| (.*)\|$/gm)) {
    for (const [, name] of row!.matchAll(/`([\w/.-]+\.(?:ts|go))`/g)) {
      checked++;
      const dir = pkg === 'shim' ? 'shim' : `${pkg}/src`;
      if (!exists(join(dir, name!)) && !exists(name!)) missing.push(`${pkg}/: ${name}`);
    }
  }
  assert.ok(checked > 5, `found only ${checked} names`);
  assert.deepEqual(missing, []);
});
