// A failed ADD is answered as soon as its error is known and rolled back after the answer (issue 19
// item 2): a plugin that hangs on ADD (past its 3 s timeout) and on DEL (2.7 s, then succeeds), behind
// bridge + host-local. The runtime (the shim as a process) gets the plugin's own error (101) within the plugin
// timeout plus a small margin, not after the rollback; the background rollback frees the lease; and
// the next ADD for that container waits only for that rollback. Real stewardd, real plugins, real netns.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('answer-first');
after(() => env.close());

const PLUGIN_TIMEOUT_MS = 3000;
/** The fixture's DEL hangs this long and then succeeds: a synchronous rollback would add it to the answer. */
const DEL_HANG_MS = PLUGIN_TIMEOUT_MS - 300;

describe('a failed ADD is answered before its rollback', () => {
  it('hanging ADD and DEL: 101 within the plugin timeout, lease freed in the background, next ADD not blocked past the rollback', async () => {
    const daemon = new Daemon(env, {
      name: 'af',
      args: ['--plugin-timeout', String(PLUGIN_TIMEOUT_MS / 1000), '--retry-base-ms', '200', '--retry-max-ms', '400'],
    });
    await daemon.start();
    const fx = join(env.dir, 'fx');
    const dataDir = join(env.dir, 'ipam');
    const bridge = env.bridge();
    const subnet = env.subnet();
    const hanging = stewardConf(daemon.socket, '1.0.0', [
      delegate('afnet', '1.0.0', [
        bridgePlugin({ bridge, subnet, dataDir }),
        fixturePlugin(fx, { sleepAddMs: 60_000, sleepDelMs: DEL_HANG_MS }),
      ]),
    ]);
    const netns = env.netns();

    const t0 = performance.now();
    const add = await shim({ command: 'ADD', containerId: 'hang', netns }, hanging);
    const addMs = performance.now() - t0;
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json.code, 101, add.stdout);
    // The answer is the plugin's timeout, not that plus the hanging rollback DEL (another 2.7 s).
    assert.ok(addMs < PLUGIN_TIMEOUT_MS + 1500, `ADD answered after ${addMs} ms`);
    assert.ok(addMs < PLUGIN_TIMEOUT_MS + DEL_HANG_MS, `ADD answered after ${addMs} ms: after the rollback`);
    // The rollback runs after the answer: the bridge's lease is still held or being freed now.
    await daemon.waitFor('the rollback DEL of the hanging plugin', () => fixtureCalls(fx, 'DEL').length >= 1);

    // The next ADD for the container (now a working chain) queues behind the rollback, and only it.
    const working = stewardConf(daemon.socket, '1.0.0', [
      delegate('afnet', '1.0.0', [bridgePlugin({ bridge, subnet, dataDir })]),
    ]);
    const t1 = performance.now();
    const again = await shim({ command: 'ADD', containerId: 'hang', netns }, working);
    const againMs = performance.now() - t1;
    assert.equal(again.code, 0, again.stdout);
    // Rollback: the fixture's DEL (2.7 s) then bridge's; then this ADD itself.
    assert.ok(againMs < DEL_HANG_MS + 3000, `the next ADD took ${againMs} ms`);
    // The failed ADD's lease was released by the rollback: only the new ADD's lease is held.
    assert.equal(leases(dataDir, 'afnet').length, 1);
    const rows = (await daemon.get('/v1/attachments?state=added')).json as Array<{ containerId: string }>;
    assert.deepEqual(
      rows.map((r) => r.containerId),
      ['hang'],
    );
    assert.equal((await shim({ command: 'DEL', containerId: 'hang', netns }, working)).code, 0);
    assert.equal(leases(dataDir, 'afnet').length, 0);
    await daemon.stop();
  });
});
