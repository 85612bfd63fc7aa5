// The daemon's periodic self-check (daemon/src/self-check.ts, issue 19 item 5), against a real stewardd:
// a journal replaced by rename while serving makes it unhealthy and not ready, naming the journal.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';

const env = new TestEnv('selfchk');
after(() => env.close());

describe('self-check', () => {
  it('a journal replaced by rename while serving: /healthz and /readyz fail naming the journal', async () => {
    const daemon = new Daemon(env, { name: 'journal' });
    await daemon.start();
    const db = join(daemon.stateDir, 'steward.db');
    statSync(db);
    copyFileSync(db, `${db}.copy`);
    renameSync(`${db}.copy`, db);
    await daemon.waitFor('not ready', async () => (await daemon.get('/readyz')).status === 503, 10_000);
    const h = await daemon.get('/healthz');
    assert.notEqual(h.status, 200);
    assert.match(h.text, /journal .*steward\.db was replaced/);
    assert.match(
      await import('node:fs').then((f) => f.readFileSync(daemon.logFile, 'utf8')),
      /was replaced while stewardd served/,
    );
    await daemon.stop();
  });
});
