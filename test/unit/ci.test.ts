// CI cannot go green by skipping or by testing stale builds: .ci/run requires the e2e suite, and
// `npm test` rebuilds the daemon, the shim bundle and dist/steward before the suites run.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from '../helpers/env.js';
import { skipOrFail } from '../helpers/runtimes/skip.js';

describe('CI', () => {
  it('.ci/run sets STEWARD_E2E_REQUIRE=1 before running the suite', () => {
    const run = readFileSync(join(REPO, '.ci/run'), 'utf8');
    const req = run.indexOf('export STEWARD_E2E_REQUIRE=1');
    assert.ok(req >= 0);
    assert.ok(req < run.indexOf('bash scripts/test.sh'));
  });

  it('with STEWARD_E2E_REQUIRE=1 a runtime that cannot run is a failure with the reason, not a skip', () => {
    const saved = process.env.STEWARD_E2E_REQUIRE;
    process.env.STEWARD_E2E_REQUIRE = '1';
    try {
      assert.throws(
        () => skipOrFail('podman cases', 'podman is not installed'),
        /cannot run and STEWARD_E2E_REQUIRE=1: podman is not installed/,
      );
      assert.equal(skipOrFail('podman cases', undefined), false);
    } finally {
      if (saved === undefined) delete process.env.STEWARD_E2E_REQUIRE;
      else process.env.STEWARD_E2E_REQUIRE = saved;
    }
  });

  it('npm test builds first (tsc and the Go shim dist/steward), then runs the suites, go test among them', () => {
    const scripts = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).scripts as Record<string, string>;
    const steps = scripts.test!.split('&&').map((s) => s.trim());
    assert.equal(steps[0], 'npm run build');
    assert.match(scripts.build!, /tsc -b/);
    assert.match(scripts.build!, /scripts\/build-shims\.mjs --local/);
    const builder = readFileSync(join(REPO, 'scripts/build-shims.mjs'), 'utf8');
    assert.match(builder, /join\(root, 'dist', 'steward'\)/);
    assert.match(builder, /CGO_ENABLED: '0'/);
    for (const suite of ['test:unit', 'test:go', 'test:integration', 'test:e2e'])
      assert.ok(steps.indexOf(`npm run ${suite}`) > 0, suite);
    assert.match(scripts['test:go']!, /scripts\/test-go\.sh/);
    assert.match(scripts.lint!, /scripts\/lint-go\.sh/);
  });

  describe('scripts/test.sh as a user who is not root', () => {
    // The script decides before it installs anything, so only test.sh itself is needed: it runs from
    // a copy in a temp dir every user can read (the checkout's own path may not be).
    const runAs = (env: Record<string, string>, prepare?: (dir: string) => void) => {
      const dir = mkdtempSync(join(tmpdir(), 'stw-testsh-'));
      try {
        mkdirSync(join(dir, 'scripts'));
        copyFileSync(join(REPO, 'scripts/test.sh'), join(dir, 'scripts/test.sh'));
        chmodSync(dir, 0o755);
        prepare?.(dir);
        const asRoot = process.getuid?.() === 0;
        // As root, drop to nobody; otherwise this process already is not root.
        const cmd = asRoot ? 'setpriv' : 'bash';
        const args = asRoot
          ? ['--reuid=nobody', '--regid=nogroup', '--clear-groups', 'bash', 'scripts/test.sh']
          : ['scripts/test.sh'];
        const r = spawnSync(cmd, args, {
          cwd: dir,
          encoding: 'utf8',
          env: { PATH: `${join(dir, 'bin')}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: dir, ...env },
          timeout: 30_000,
        });
        return { ...r, npmLog: existsSync(join(dir, 'npm.log')) ? readFileSync(join(dir, 'npm.log'), 'utf8') : '' };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };

    it('fails with STEWARD_E2E_REQUIRE=1, naming the root suites it cannot run', () => {
      const r = runAs({ STEWARD_E2E_REQUIRE: '1' });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /SKIPPED test:integration and test:e2e/);
      assert.match(r.stderr, /FAILED: STEWARD_E2E_REQUIRE=1 requires the root suites/);
      assert.doesNotMatch(r.stdout, /setup:/, 'nothing is installed before the decision');
    });

    it('without STEWARD_E2E_REQUIRE runs the root-free suites (setup and npm stubbed: the npm calls are recorded) and names the ones it skipped', () => {
      const r = runAs({}, (dir) => {
        // setup.sh, node-env.sh and go-env.sh as stubs (a Go that passes the check), npm and node as
        // recorders: the script's own flow is what runs.
        writeFileSync(join(dir, 'scripts/setup.sh'), 'echo setup-stub\n');
        writeFileSync(join(dir, 'scripts/node-env.sh'), 'steward_node_use() { :; }\n');
        writeFileSync(join(dir, 'scripts/go-env.sh'), 'steward_go_use() { :; }\nsteward_go_check() { return 0; }\n');
        mkdirSync(join(dir, 'bin'));
        writeFileSync(join(dir, 'bin/npm'), `#!/bin/sh\necho "$*" >> ${JSON.stringify(join(dir, 'npm.log'))}\n`, {
          mode: 0o755,
        });
        writeFileSync(join(dir, 'bin/node'), '#!/bin/sh\necho v24.0.0-stub\n', { mode: 0o755 });
        chmodSync(join(dir, 'scripts'), 0o777);
        chmodSync(dir, 0o777);
      });
      assert.equal(r.status, 0, r.stderr);
      const calls = r.npmLog.trim().split('\n');
      assert.deepEqual(calls.slice(0, 5), ['run build', 'run typecheck', 'run lint', 'run test:unit', 'run test:go']);
      assert.ok(!calls.some((c) => /test:integration|test:e2e|^test$/.test(c)), calls.join('; '));
      assert.match(r.stderr, /SKIPPED test:integration and test:e2e/);
    });
  });
});
