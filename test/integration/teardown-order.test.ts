// The order rules of teardown (docs/teardown.md): delegates are torn down on their own, a step
// whose ADD never succeeded does not hold back the steps before it, and a DEL that can only fail
// the same way is abandoned after a few attempts and never blocks a new ADD of that attachment.
// Real bridge + host-local, the fault fixture, a real daemon process and the shim as a process.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases, linkExists } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('order');
after(() => env.close());

async function startDaemon(name: string, extra: string[] = []): Promise<Daemon> {
  const d = new Daemon(env, { name, args: ['--retry-base-ms', '200', '--retry-max-ms', '400', ...extra] });
  await d.start();
  return d;
}

describe('teardown order', () => {
  it('a chained plugin whose ADD fails and whose DEL keeps failing does not hold back the bridge: its lease is released by the rollback itself', async () => {
    const daemon = await startDaemon('unconfirmed');
    const dataDir = join(env.dir, 'unconfirmed-ipam');
    const fx = join(env.dir, 'unconfirmed-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('ovnish', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { failAdd: true, failDelAlways: true }),
      ]),
    ]);
    const add = await shim({ command: 'ADD', containerId: 'sandbox-1', netns }, conf);
    assert.equal(add.json.code, 201, add.stdout);
    // No waiting for a retry schedule: the rollback (right after the answer) DELed the bridge
    // right after the fixture's DEL failed.
    // The lease goes when bridge's DEL runs; its step is journalled `deleted` once that DEL has
    // exited, a moment later (longer on a loaded machine): both are waited for.
    await daemon.waitFor(
      'the rollback after the answer',
      async () =>
        leases(dataDir, 'ovnish').length === 0 && (await daemon.attachment('sandbox-1')).steps[0].state === 'deleted',
      5000,
    );
    assert.deepEqual(leases(dataDir, 'ovnish'), [], 'the lease is released at once');
    assert.equal(linkExists(netns, 'eth0'), false);
    const steps = (await daemon.attachment('sandbox-1')).steps;
    assert.equal(steps[0].state, 'deleted', 'bridge');
    // Failed and waiting, or already being retried by the scheduler (its backoff here is 200 ms).
    assert.ok(
      ['del_failed', 'deleting'].includes(steps[1].state),
      `the fixture is retried on its own, got ${steps[1].state}`,
    );
    // The runtime's DEL right after the failed ADD returns at once as well.
    assert.equal((await shim({ command: 'DEL', containerId: 'sandbox-1', netns }, conf)).code, 0);
    await daemon.waitFor('the fixture DEL to be retried', () => fixtureCalls(fx, 'DEL').length >= 3);
    await daemon.stop();
  });

  it("each delegate is torn down on its own: a second network whose DEL fails does not keep the first network's lease", async () => {
    const daemon = await startDaemon('delegates');
    const dataDir = join(env.dir, 'delegates-ipam');
    const fx = join(env.dir, 'delegates-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('primary', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
      delegate('secondary', '1.0.0', [fixturePlugin(fx, { failDelAlways: true })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'multi', netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'primary').length, 1);
    assert.equal((await shim({ command: 'DEL', containerId: 'multi', netns }, conf)).code, 0);
    assert.deepEqual(leases(dataDir, 'primary'), [], 'the primary network is released although net1 failed');
    const a = await daemon.attachment('multi');
    assert.equal(a.state, 'deleting');
    assert.equal(a.steps[0].state, 'deleted', 'primary');
    assert.ok(['del_failed', 'deleting'].includes(a.steps[1].state), `secondary pending, got ${a.steps[1].state}`);
    const pending = (await daemon.get('/v1/teardowns')).json.pending;
    assert.deepEqual(
      pending.map((p: any) => p.plugin),
      ['steward-fixture'],
    );
    await daemon.stop();
  });

  it('a confirmed step whose DEL fails still halts the steps before it in its own chain, as the spec orders', async () => {
    const daemon = await startDaemon('halts');
    const dataDir = join(env.dir, 'halts-ipam');
    const fx = join(env.dir, 'halts-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('halting', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { failDelTimes: 100 }),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'halted', netns }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'halted', netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'halting').length, 1, 'bridge waits for the portmap-like step after it');
    const a = await daemon.attachment('halted');
    assert.equal(a.steps[0].state, 'added', 'bridge not yet DELed');
    assert.ok(
      ['del_failed', 'deleting'].includes(a.steps[1].state),
      `the failing step pending, got ${a.steps[1].state}`,
    );
    await daemon.stop();
  });
});

describe('permanent teardown failures', () => {
  it('a rollback DEL that fails exactly as its ADD did is abandoned after 3 attempts, and a new ADD of that container and interface is never blocked', async () => {
    const daemon = await startDaemon('permanent');
    const dataDir = join(env.dir, 'permanent-ipam');
    const fx = join(env.dir, 'permanent-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('picky', '1.0.0', [
        fixturePlugin(fx),
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
      ]),
    ]);
    // Without IgnoreUnknown the reference plugins reject an unknown CNI_ARGS key, on DEL exactly as on ADD.
    const bad = await shim({ command: 'ADD', containerId: 'picky-1', netns, args: 'Frobnicate=1' }, conf);
    assert.equal(bad.json.code, 999, bad.stdout);
    assert.match(bad.json.msg, /unknown args/);
    await daemon.waitFor('the rollback after the answer', () => fixtureCalls(fx, 'DEL').length >= 1, 5000);
    assert.equal(fixtureCalls(fx, 'DEL').length, 1, 'the step before the failing bridge is DELed at once');

    // A new ADD for the same container and interface, right away: not held off with code 11.
    const good = await shim(
      { command: 'ADD', containerId: 'picky-1', netns, args: 'IgnoreUnknown=1;Frobnicate=1' },
      conf,
    );
    assert.equal(good.code, 0, good.stdout);
    assert.equal(leases(dataDir, 'picky').length, 1);
    const t = (await daemon.get('/v1/teardowns')).json;
    assert.equal(t.abandoned.length, 1, 'the permanently failing step was abandoned for the new ADD');
    assert.equal(t.abandoned[0].plugin, 'bridge');
    assert.match(t.abandoned[0].lastError, /unknown args/);
    assert.equal(
      (await shim({ command: 'DEL', containerId: 'picky-1', netns, args: 'IgnoreUnknown=1;Frobnicate=1' }, conf)).code,
      0,
    );
    assert.deepEqual(leases(dataDir, 'picky'), []);
    await daemon.stop();
  });

  it('without a new ADD, a permanently failing DEL is abandoned after exactly 3 attempts, loudly', async () => {
    const daemon = await startDaemon('permanent-bound');
    const fx = join(env.dir, 'bound-fx');
    const netns = env.netns();
    // Code 7 (invalid network configuration) is one of the spec's "bad input" codes.
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('bound', '1.0.0', [fixturePlugin(fx, { failAdd: true, failDelAlways: true, failDelCode: 7 })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'bound-1', netns }, conf)).json.code, 201);
    await daemon.waitFor(
      'the step to be abandoned',
      async () => (await daemon.attachment('bound-1')).state === 'deleted',
      15_000,
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, 3);
    const t = (await daemon.get('/v1/teardowns')).json;
    assert.equal(t.abandoned[0].attempts, 3);
    assert.match((await daemon.get('/metrics')).text, /steward_teardown_abandoned_total\{plugin="steward-fixture"\} 1/);
    await daemon.stop();
  });

  it('a DEL failing with a transient code keeps its full retry budget', async () => {
    const daemon = await startDaemon('transient', ['--retry-max-attempts', '6']);
    const fx = join(env.dir, 'transient-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('transient', '1.0.0', [fixturePlugin(fx, { failAdd: true, failDelAlways: true })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'tr-1', netns }, conf)).json.code, 201);
    await daemon.waitFor(
      'the step to be abandoned',
      async () => (await daemon.attachment('tr-1')).state === 'deleted',
      20_000,
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, 6, 'code 11 is not permanent: all 6 attempts ran');
    await daemon.stop();
  });

  it('a DEL failing with code 11 and exactly the words its ADD failed with (a backend down through both) keeps its full budget', async () => {
    const daemon = await startDaemon('transient-same', ['--retry-max-attempts', '6']);
    const fx = join(env.dir, 'transient-same-fx');
    const netns = env.netns();
    const down = 'steward-fixture: ADD failed on cue for trs-1';
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('transient-same', '1.0.0', [
        fixturePlugin(fx, { failAdd: true, failAddCode: 11, failDelAlways: true, failDelMessage: down }),
      ]),
    ]);
    const add = await shim({ command: 'ADD', containerId: 'trs-1', netns }, conf);
    assert.equal(add.json.code, 11);
    assert.match(add.json.msg, /ADD failed on cue for trs-1/);
    await daemon.waitFor(
      'the step to be abandoned',
      async () => (await daemon.attachment('trs-1')).state === 'deleted',
      20_000,
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, 6, 'not taken for bad input: all 6 attempts ran');
    await daemon.stop();
  });
});

describe('teardown that cannot finish is bounded (issue 21)', () => {
  const delCount = (fx: string) => fixtureCalls(fx, 'DEL').length;

  it('a DEL that fails with no CNI error, the same way each time, is abandoned after --retry-hold-attempts (not 3: a backend may be down) and the bridge before it is released', async () => {
    const daemon = await startDaemon('silent', ['--retry-hold-attempts', '5']);
    const dataDir = join(env.dir, 'silent-ipam');
    const fx = join(env.dir, 'silent-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('silent', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { failDelSilent: true }),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'silent-1', netns }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'silent-1', netns }, conf)).code, 0);
    await daemon.waitFor('the silent step to be abandoned', async () => {
      const a = await daemon.attachment('silent-1');
      return a.steps[1].state === 'abandoned';
    });
    const a = await daemon.attachment('silent-1');
    assert.match(a.steps[1].error, /without a CNI error/);
    assert.equal(delCount(fx), 5, 'the same uncoded failure is given the hold bound, 5 here');
    await daemon.waitFor('the bridge to be torn down', () => leases(dataDir, 'silent').length === 0);
    const status = await daemon.status();
    assert.equal(status.steps.abandoned, 1);
    await daemon.stop();
  });

  it('a DEL failing with a transient code holds the steps before it for --retry-hold-attempts failed DELs, then is abandoned and they are torn down', async () => {
    const daemon = await startDaemon('hold', ['--retry-hold-attempts', '4']);
    const dataDir = join(env.dir, 'hold-ipam');
    const fx = join(env.dir, 'hold-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('holding', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { failDelAlways: true }),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'hold-1', netns }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'hold-1', netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'holding').length, 1, 'the bridge waits while the step after it is retried');
    await daemon.waitFor('the failing step to be abandoned', async () => {
      const a = await daemon.attachment('hold-1');
      return a.steps[1].state === 'abandoned';
    });
    assert.equal(delCount(fx), 4, 'abandoned after exactly --retry-hold-attempts failed DELs');
    // The lease goes inside bridge's DEL, before its step is journaled `deleted`: wait for both.
    await daemon.waitFor(
      'the bridge to be torn down',
      async () =>
        leases(dataDir, 'holding').length === 0 && (await daemon.attachment('hold-1')).steps[0].state === 'deleted',
    );
    assert.equal((await daemon.attachment('hold-1')).steps[0].state, 'deleted');
    await daemon.stop();
  });
});
