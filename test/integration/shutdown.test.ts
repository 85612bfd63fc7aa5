// Shutdown: while stewardd drains before an uninstall (SIGTERM after `kubectl delete`), it keeps
// serving DELs, since the shim spools only when the daemon is unreachable; ADD and CHECK get code 11.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('shutdown');
after(() => env.close());

describe('SIGTERM with uninstall', () => {
  it('during the drain a DEL is served and tears down, and an ADD gets code 11', async () => {
    const daemon = new Daemon(env, {
      args: [
        '--uninstall-on-delete',
        'always',
        '--drain-timeout',
        '6',
        '--retry-base-ms',
        '200',
        '--retry-max-ms',
        '400',
      ],
    });
    await daemon.start();
    const dataDir = join(env.dir, 'ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('drainnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    // A teardown that keeps failing holds the drain open for its whole timeout.
    const stuck = stewardConf(daemon.socket, '1.0.0', [
      delegate('stucknet', '1.0.0', [fixturePlugin(join(env.dir, 'fx'), { failDelAlways: true })]),
    ]);
    const stuckNetns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'stuck', netns: stuckNetns }, stuck)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'stuck', netns: stuckNetns }, stuck)).code, 0);
    const netns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'leaving', netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'drainnet').length, 1);

    const exited = new Promise<number | null>((r) => daemon.proc!.once('exit', (code) => r(code)));
    daemon.proc!.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 800));
    assert.equal(daemon.proc!.exitCode, null, 'still draining');

    const add = await shim({ command: 'ADD', containerId: 'latecomer', netns: env.netns() }, conf);
    assert.equal(add.code, 1);
    assert.equal(add.json.code, 11, add.stdout);
    const del = await shim({ command: 'DEL', containerId: 'leaving', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(leases(dataDir, 'drainnet'), [], 'the DEL ran during the drain');
    assert.equal(daemon.proc!.exitCode, null, 'the DEL was served before the daemon exited');
    await exited;
  });
});
