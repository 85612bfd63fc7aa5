// The Go that builds the shim: at least the version of shim/go.mod's `go` line (the one place it is
// written), found the same way by scripts/go-env.sh (setup.sh, test.sh, test-go.sh, lint-go.sh) and
// scripts/build-shims.mjs (npm run build, build:shims, the bench's floor programs): the go on PATH when
// it is new enough, else $STEWARD_GO_FALLBACK/go (/usr/local/go/bin/go). An older one fails the build
// and the Go tests in ONE line naming it, where it is and go.mod's version. Checked with fake `go`
// scripts that only print a version (nothing is compiled here).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findGo, parseGoVersion, requiredGo, versionAtLeast } from '../../scripts/build-shims.mjs';
import { REPO } from '../helpers/env.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-gotool-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A directory holding a `go` that prints `go version go<version> linux/amd64`. */
function fakeGo(name: string, version: string): string {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, 'go'), `#!/bin/sh\necho "go version go${version} linux/amd64"\n`);
  chmodSync(join(d, 'go'), 0o755);
  return d;
}
const OLD = fakeGo('old', '1.19.8');
const NEW = fakeGo('new', '1.26.8');
const NONE = join(dir, 'none');
// The tools the scripts need (bash, sed, grep, git), after the fake: this machine's /usr/bin may hold
// Debian's go too, which the fake comes before.
const SYSTEM = '/usr/local/bin:/usr/bin:/bin';

const required = requiredGo();
const oldLine = (at: string, fallback: string) =>
  `Go 1.19.8 at ${at} is older than the go ${required} shim/go.mod requires; install Go ${required}+ ` +
  `(https://go.dev/dl/; ${fallback}/go is used when the go on PATH is missing or older)`;

function sh(script: string, path: string, fallback: string) {
  return spawnSync('/bin/bash', ['-c', script], {
    cwd: REPO,
    env: { ...process.env, PATH: path, STEWARD_GO_FALLBACK: fallback },
    encoding: 'utf8',
  });
}
const lines = (s: string) => s.split('\n').filter((l) => l !== '');

describe("the shim's Go: go.mod's version or newer", () => {
  it('go.mod names a supported Go (1.26 or newer), and the shell helper reads the same version', () => {
    assert.match(required, /^\d+\.\d+(\.\d+)?$/);
    assert.ok(versionAtLeast(required, '1.26'), required);
    const r = sh('source scripts/go-env.sh && steward_go_required', SYSTEM, NONE);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), required);
  });

  it('versions: parsed from `go version`, compared number by number (the shell helper agrees)', () => {
    assert.equal(parseGoVersion('go version go1.26.8 linux/amd64'), '1.26.8');
    assert.equal(parseGoVersion('go version go1.27rc1 linux/arm64'), '1.27');
    assert.equal(parseGoVersion('go version devel go1.28-abcdef Mon Jan 1 linux/amd64'), '1.28');
    assert.equal(parseGoVersion('bash: go: command not found'), undefined);
    const cases: Array<[string, string, boolean]> = [
      ['1.26.8', '1.26', true],
      ['1.26', '1.26', true],
      ['1.26.0', '1.26', true],
      ['1.27', '1.26', true],
      ['1.100.1', '1.26', true],
      ['2.0', '1.26', true],
      ['1.19.8', '1.26', false],
      ['1.25.9', '1.26', false],
      ['1.26', '1.26.1', false],
    ];
    const script = cases.map(([a, b]) => `steward_version_ge ${a} ${b} && echo yes || echo no`).join('\n');
    const r = sh(`source scripts/go-env.sh\n${script}`, SYSTEM, NONE);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(
      lines(r.stdout),
      cases.map(([, , want]) => (want ? 'yes' : 'no')),
    );
    for (const [a, b, want] of cases) assert.equal(versionAtLeast(a, b), want, `${a} >= ${b}`);
  });

  it('findGo: the go on PATH when new enough, else the fallback; an older one is named in one line', () => {
    assert.deepEqual(findGo({ path: `${NEW}:${OLD}`, fallback: OLD }), {
      ok: true,
      go: join(NEW, 'go'),
      version: '1.26.8',
      required,
    });
    assert.deepEqual(findGo({ path: `${OLD}:${NEW}`, fallback: NEW }), {
      ok: true,
      go: join(NEW, 'go'),
      version: '1.26.8',
      required,
    });
    const old = findGo({ path: OLD, fallback: NONE });
    assert.equal(old.ok, false);
    assert.ok(!old.ok);
    assert.equal(old.reason, 'old');
    assert.equal(old.message, oldLine(join(OLD, 'go'), NONE));
    const none = findGo({ path: NONE, fallback: NONE });
    assert.ok(!none.ok);
    assert.equal(none.reason, 'missing');
    assert.match(
      none.message,
      new RegExp(`^Go is missing \\(no go on PATH, none in ${NONE}\\); install Go ${required}\\+`),
    );
  });

  it('scripts/go-env.sh puts the fallback first on PATH when the go on PATH is older, and sets GOTOOLCHAIN=local', () => {
    const use = 'source scripts/go-env.sh && steward_go_use && command -v go && echo "$GOTOOLCHAIN"';
    assert.deepEqual(lines(sh(use, `${OLD}:${SYSTEM}`, NEW).stdout), [join(NEW, 'go'), 'local']);
    // A go on PATH that is new enough stays first.
    assert.deepEqual(lines(sh(use, `${NEW}:${SYSTEM}`, OLD).stdout), [join(NEW, 'go'), 'local']);
    // Neither: the older one stays, and the check says so.
    const r = sh('source scripts/go-env.sh && steward_go_use && steward_go_check prefix', `${OLD}:${SYSTEM}`, NONE);
    assert.equal(r.status, 1);
    assert.deepEqual(lines(r.stderr), [`prefix: ${oldLine(join(OLD, 'go'), NONE)}`]);
  });

  it('an older Go fails npm run test:go, npm run lint (lint-go.sh) and npm run build (build-shims.mjs --local) in one line', () => {
    const before = statSync(join(REPO, 'dist/steward'), { throwIfNoEntry: false })?.mtimeMs;
    const path = `${OLD}:${SYSTEM}`;
    const goTest = sh('bash scripts/test-go.sh', path, NONE);
    assert.equal(goTest.status, 1);
    assert.deepEqual(lines(goTest.stderr), [`test:go: FAILED: ${oldLine(join(OLD, 'go'), NONE)}`]);
    assert.equal(goTest.stdout, '');
    const lint = sh('bash scripts/lint-go.sh', path, NONE);
    assert.equal(lint.status, 1);
    assert.deepEqual(lines(lint.stderr), [`lint: ${oldLine(join(OLD, 'go'), NONE)}`]);
    const build = sh(`${JSON.stringify(process.execPath)} scripts/build-shims.mjs --local`, path, NONE);
    assert.equal(build.status, 1);
    assert.deepEqual(lines(build.stderr), [`build: ${oldLine(join(OLD, 'go'), NONE)}`]);
    assert.equal(build.stdout, '');
    const shims = sh(
      `${JSON.stringify(process.execPath)} scripts/build-shims.mjs --out ${join(dir, 'shims')}`,
      path,
      NONE,
    );
    assert.equal(shims.status, 1);
    assert.deepEqual(lines(shims.stderr), [`build: ${oldLine(join(OLD, 'go'), NONE)}`]);
    // Nothing was built.
    assert.equal(statSync(join(REPO, 'dist/steward'), { throwIfNoEntry: false })?.mtimeMs, before);
    assert.equal(statSync(join(dir, 'shims'), { throwIfNoEntry: false }), undefined);
  });

  it('without any Go, npm run build builds the daemon alone and says so in one line (exit 0); test:go fails', () => {
    // No go at all: an empty PATH (node by its path; no git either, so the version has no commit) and no
    // fallback. (The system directories may hold a go: Debian's golang-go puts one in /usr/bin.)
    const bare = join(dir, 'bare');
    mkdirSync(bare, { recursive: true });
    const build = sh(`${JSON.stringify(process.execPath)} scripts/build-shims.mjs --local`, bare, NONE);
    assert.equal(build.status, 0, build.stderr);
    assert.deepEqual(lines(build.stdout), [
      `build: the shim (dist/steward) is not built: Go is missing (no go on PATH, none in ${NONE}); install Go ${required}+ (https://go.dev/dl/; ${NONE}/go is used when the go on PATH is missing or older)`,
    ]);
    // The shell helper: only the tools it uses, without any go.
    const tools = join(dir, 'tools');
    mkdirSync(tools, { recursive: true });
    for (const t of ['dirname', 'sed', 'head', 'grep']) {
      const at = spawnSync('/bin/sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).stdout.trim();
      symlinkSync(at, join(tools, t));
    }
    const goTest = sh('source scripts/go-env.sh && steward_go_use && steward_go_check "test:go: FAILED"', tools, NONE);
    assert.equal(goTest.status, 2);
    assert.match(goTest.stderr, /^test:go: FAILED: Go is missing \(no go on PATH/);
  });
});
