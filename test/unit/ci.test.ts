// CI cannot go green by skipping or by testing stale builds: .ci/run requires the e2e suite, and
// `npm test` rebuilds the daemon, the shim bundle and dist/steward before the suites run.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
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

  it('npm test builds first (tsc, the shim bundle and dist/steward), then runs the suites', () => {
    const scripts = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).scripts as Record<string, string>;
    const steps = scripts.test!.split('&&').map((s) => s.trim());
    assert.equal(steps[0], 'npm run build');
    assert.match(scripts.build!, /tsc -b/);
    assert.match(scripts.build!, /scripts\/bundle-shim\.mjs/);
    const bundler = readFileSync(join(REPO, 'scripts/bundle-shim.mjs'), 'utf8');
    assert.match(bundler, /outfile: 'shim\/dist\/steward\.mjs'/);
    assert.match(bundler, /'--outfile', 'dist\/steward'/);
    for (const suite of ['test:unit', 'test:integration', 'test:e2e'])
      assert.ok(steps.indexOf(`npm run ${suite}`) > 0, suite);
  });
});
