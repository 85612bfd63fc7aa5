// A DEL whose delegate hangs: stewardd answers it within its answer budget (the shim's DEL bound less
// a margin) and the teardown goes on, rather than leaving it to the shim's bound. Before, the shim
// spooled it at its bound, and the runtime's next DEL (containerd's RemovePodSandbox after
// StopPodSandbox) joined the same teardown and waited out the bound again: a minute a pod with a hung
// delegate, under containerd 1.6 (a hostile review, 30 Nov). A DEL not yet journaled (queued behind
// its container's ADD) is still left to the shim's bound, which spools it. A runtime DEL joining a
// spooled DEL (drained with no budget: no shim waits for it) gets a runtime DEL's budget.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('del-budget');
const deferring = new Daemon(env, { name: 'defer' });
const strict = new Daemon(env, { name: 'strict', args: ['--del-policy', 'strict'] });
before(() => Promise.all([deferring.start(), strict.start()]));
after(() => env.close());

/** The shim's DEL bound in these netconfs; stewardd's budget is 3 s of it (a quarter less). */
const DEL_BOUND_MS = 4000;

/** Spooled DELs of `containerId` (a spool file's name carries it: shared/vectors/spool.json). */
const spooled = (d: Daemon, containerId: string) =>
  existsSync(d.spoolDir) ? readdirSync(d.spoolDir).filter((f) => f.endsWith('.json') && f.includes(containerId)) : [];

/** A bridge network whose chained fixture holds every DEL while `gate` exists. */
function heldNetwork(d: Daemon, what: string) {
  const dataDir = join(env.dir, `ipam-${what}`);
  const fx = join(env.dir, `fx-${what}`);
  const gate = join(env.dir, `gate-${what}`);
  const conf = stewardConf(
    d.socket,
    '1.0.0',
    [
      delegate(`${what}net`, '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { holdDelWhileFile: gate }),
      ]),
    ],
    { name: what, timeouts: { del: DEL_BOUND_MS } },
  );
  env.defer(() => rmSync(gate, { force: true }));
  return { dataDir, fx, gate, conf, net: `${what}net` };
}

describe("a DEL whose delegate hangs past the shim's DEL bound", () => {
  it('defer: answered success by stewardd, not spooled; the next DEL joins it at once; the teardown finishes once the delegate does', async () => {
    const n = heldNetwork(deferring, 'hang');
    const netns = env.netns();
    const call = (command: string) => shim({ command, containerId: 'hung-del', netns }, n.conf);
    assert.equal((await call('ADD')).code, 0);
    writeFileSync(n.gate, '');

    const stop = await call('DEL');
    assert.equal(stop.code, 0, stop.stdout);
    assert.deepEqual(spooled(deferring, 'hung-del'), [], "stewardd answered it: the shim's fallback (spool) never ran");
    assert.equal(fixtureCalls(n.fx, 'DELDONE').length, 0, 'answered while the delegate still holds its DEL');
    const [att] = (await deferring.get('/v1/attachments?containerId=hung-del')).json;
    assert.equal(att.state, 'deleting', 'the teardown is journaled and still running');

    // RemovePodSandbox's DEL: joins the running teardown's answer instead of waiting out a bound.
    const started = performance.now();
    const remove = await call('DEL');
    assert.equal(remove.code, 0, remove.stdout);
    assert.ok(performance.now() - started < DEL_BOUND_MS / 2, 'the second DEL did not wait for the delegate');
    assert.deepEqual(spooled(deferring, 'hung-del'), []);
    assert.equal(fixtureCalls(n.fx, 'DEL').length, 1, 'one delegate DEL for both runtime DELs');

    rmSync(n.gate);
    await deferring.waitFor('the teardown to finish', async () => {
      const [a] = (await deferring.get('/v1/attachments?containerId=hung-del')).json;
      return a.state === 'deleted';
    });
    assert.deepEqual(leases(n.dataDir, n.net), []);
  });

  it('strict: answered 105 by stewardd, not spooled; the teardown goes on and a DEL after it succeeds', async () => {
    const n = heldNetwork(strict, 'strict');
    const netns = env.netns();
    const call = (command: string) => shim({ command, containerId: 'hung-strict', netns }, n.conf);
    assert.equal((await call('ADD')).code, 0);
    writeFileSync(n.gate, '');

    const stop = await call('DEL');
    assert.equal(stop.code, 1, stop.stdout);
    assert.equal(stop.json.code, 105, stop.stdout);
    assert.match(stop.json.msg, /still running/);
    assert.deepEqual(spooled(strict, 'hung-strict'), []);

    rmSync(n.gate);
    await strict.waitFor('the teardown to finish', async () => {
      const [a] = (await strict.get('/v1/attachments?containerId=hung-strict')).json;
      return a.state === 'deleted';
    });
    assert.equal((await call('DEL')).code, 0);
    assert.deepEqual(leases(n.dataDir, n.net), []);
  });

  it('a runtime DEL joining a spooled DEL whose delegate hangs is answered by stewardd at its budget, not spooled again', async () => {
    const n = heldNetwork(deferring, 'joinspool');
    const netns = env.netns();
    const call = (command: string) => shim({ command, containerId: 'join-spooled', netns }, n.conf);
    assert.equal((await call('ADD')).code, 0);
    writeFileSync(n.gate, '');
    // StopPodSandbox's DEL while stewardd is down: the shim spools it; the restarted stewardd drains it.
    await deferring.stop();
    try {
      assert.equal((await call('DEL')).code, 0);
      assert.equal(spooled(deferring, 'join-spooled').length, 1);
    } finally {
      await deferring.start();
    }
    await deferring.waitFor('the spooled DEL to reach its held delegate', () => fixtureCalls(n.fx, 'DEL').length === 1);

    // RemovePodSandbox's DEL joins the spooled teardown: stewardd answers it at its budget (3 s)
    // rather than leaving it to wait out the shim's bound (4 s) and be spooled a second time.
    const remove = await call('DEL');
    assert.equal(remove.code, 0, remove.stdout);
    assert.equal(spooled(deferring, 'join-spooled').length, 1, 'only the first DEL is in the spool');
    assert.equal(fixtureCalls(n.fx, 'DELDONE').length, 0, 'answered while the delegate still holds its DEL');
    assert.equal(fixtureCalls(n.fx, 'DEL').length, 1, 'one delegate DEL for both');

    rmSync(n.gate);
    await deferring.waitFor('the teardown to finish and the spool to drain', async () => {
      const [a] = (await deferring.get('/v1/attachments?containerId=join-spooled')).json;
      return a.state === 'deleted' && spooled(deferring, 'join-spooled').length === 0;
    });
    assert.deepEqual(leases(n.dataDir, n.net), []);
  });

  it('a DEL queued behind its container’s ADD (not journaled yet) is left to the shim: spooled at its bound, then done', async () => {
    const fx = join(env.dir, 'fx-queued');
    const slow = stewardConf(
      deferring.socket,
      '1.0.0',
      [delegate('slownet', '1.0.0', [fixturePlugin(fx, { sleepAddMs: 6000 })])],
      {
        name: 'slow',
        timeouts: { del: DEL_BOUND_MS },
      },
    );
    const netns = env.netns();
    const call = (command: string) => shim({ command, containerId: 'queued-del', netns }, slow);
    const add = call('ADD');
    await deferring.waitFor('the ADD to reach its plugin', () => fixtureCalls(fx, 'ADD').length === 1);
    const del = await call('DEL');
    assert.equal(del.code, 0, del.stdout);
    assert.equal(
      spooled(deferring, 'queued-del').length,
      1,
      'spooled by the shim: stewardd did not answer a DEL it had not journaled',
    );
    assert.equal((await add).code, 0);
    await deferring.waitFor('the DEL to run and the spool to drain', async () => {
      const atts = (await deferring.get('/v1/attachments?containerId=queued-del')).json;
      return spooled(deferring, 'queued-del').length === 0 && atts.length === 1 && atts[0].state === 'deleted';
    });
  });
});
