// Start-up errors name the path and the cause (issue 19 item 5): a read-only state dir made stewardd
// exit with only "attempt to write a readonly database". Real daemon, a real read-only bind mount.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, sh } from '../helpers/env.js';

const env = new TestEnv('openerr');
after(() => env.close());

/** Makes `dir` read-only (root ignores mode bits, so a read-only bind mount); undone by the env. */
function readOnly(dir: string): void {
  mkdirSync(dir, { recursive: true });
  sh('mount', ['--bind', dir, dir]);
  env.defer(() => {
    try {
      sh('umount', [dir]);
    } catch {
      /* already gone */
    }
  });
  sh('mount', ['-o', 'remount,ro,bind', dir]);
}

describe('start-up errors name the path', () => {
  it('a read-only state dir that held a journal: exit non-zero naming the state dir and "read-only"', async () => {
    const daemon = new Daemon(env, { name: 'used' });
    await daemon.start();
    await daemon.stop();
    readOnly(daemon.stateDir);
    const { code, log } = await daemon.startExpectingExit();
    assert.notEqual(code, 0);
    assert.ok(log.includes(daemon.stateDir), `the log names ${daemon.stateDir}:\n${log.slice(-2000)}`);
    assert.match(log, /read-only|readonly/);
    assert.match(log, /cannot [a-z ]+ \//);
  });

  it('an empty read-only state dir: exit non-zero naming the path', async () => {
    const daemon = new Daemon(env, { name: 'fresh' });
    readOnly(daemon.stateDir);
    const { code, log } = await daemon.startExpectingExit();
    assert.notEqual(code, 0);
    assert.ok(log.includes(daemon.stateDir), `the log names ${daemon.stateDir}:\n${log.slice(-2000)}`);
    assert.match(log, /cannot [a-z ]+ \//);
  });
});
