// `stewardd probe` (the DaemonSet's exec probes, every 5 and 10 s in the daemon's own cgroup) loads
// only what one GET on the socket needs: no logger, journal driver, HTTP framework or schema
// validator. Through main.ts's commands it loaded 188 modules, 0.15 s of CPU and 79 MiB a run
// (a review, 30 Nov). Runs the built entry point with a module hook that lists what it loads.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO } from '../helpers/env.js';

const HOOK = `import { registerHooks } from 'node:module';
registerHooks({ load(url, context, next) { process.stderr.write('LOADED ' + url + '\\n'); return next(url, context); } });`;

describe('stewardd probe', () => {
  it('loads its own few modules and the shared package, nothing from node_modules', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        `data:text/javascript,${encodeURIComponent(HOOK)}`,
        join(REPO, 'daemon/dist/main.js'),
        'probe',
        '--socket',
        '/nonexistent/steward-probe-weight.sock',
        '/healthz',
      ],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 1, 'no daemon there: exit 1');
    assert.match(r.stdout, /^\/healthz: /);
    const loaded = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('LOADED file://'))
      .map((l) => l.slice('LOADED file://'.length));
    const daemon = loaded.filter((f) => f.includes('/daemon/dist/')).map((f) => f.split('/daemon/dist/')[1]);
    assert.deepEqual(daemon.sort(), [
      'audit/options.js',
      'flags.js',
      'lifecycle/socket-http.js',
      'main.js',
      'priority.js',
      'probe.js',
    ]);
    const elsewhere = loaded.filter((f) => !f.includes('/daemon/dist/') && !f.includes('/shared/dist/'));
    assert.deepEqual(elsewhere, [], 'nothing from node_modules (pino, better-sqlite3, fastify, ajv)');
  });
});
