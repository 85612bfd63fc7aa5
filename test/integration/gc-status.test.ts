// CNI 1.1 GC and STATUS through the shim and a real daemon process: GC tears down exactly the
// attachments missing from cni.dev/valid-attachments (real bridge + host-local leases), and STATUS
// reports a delegate that is not available. Moved out of teardown.test.ts, which keeps the seeds.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon as startTestDaemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('gc-status');
after(() => env.close());

const startDaemon = (name: string, args?: string[]) => startTestDaemon(env, name, args);

describe('GC and STATUS (CNI 1.1)', () => {
  it('GC tears down every attachment missing from cni.dev/valid-attachments and keeps the listed one; a GC without the list is code 7', async () => {
    const daemon = await startDaemon('gc');
    const dataDir = join(env.dir, 'gc-ipam');
    const conf = stewardConf(daemon.socket, '1.1.0', [
      delegate('gcnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    const ids = ['gc-a', 'gc-b', 'gc-c'];
    for (const id of ids)
      assert.equal((await shim({ command: 'ADD', containerId: id, netns: env.netns() }, conf)).code, 0);
    assert.equal(leases(dataDir, 'gcnet').length, 3);
    // No list at all (cnitool's `gc` sends none) is refused, not read as "none is valid".
    const bare = await shim({ command: 'GC', env: { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' } }, conf);
    assert.equal(bare.json.code, 7, bare.stdout);
    assert.equal(leases(dataDir, 'gcnet').length, 3, 'a GC without a list tears down nothing');
    const gc = await shim(
      { command: 'GC', env: { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' } },
      { ...conf, 'cni.dev/valid-attachments': [{ containerID: 'gc-b', ifname: 'eth0' }] },
    );
    assert.equal(gc.code, 0, gc.stdout);
    assert.equal(leases(dataDir, 'gcnet').length, 1);
    const live = (await daemon.get('/v1/attachments?state=added')).json;
    assert.deepEqual(
      live.map((a: { containerId: string }) => a.containerId),
      ['gc-b'],
    );
    await daemon.stop();
  });

  it('a GC arriving while a DEL hangs: the stale pod goes at once, a pod ADD waits behind the GC for 2 s, not until the DEL ends, and is kept though the GC does not list it', async () => {
    const daemon = await startDaemon('gc-hang');
    const dataDir = join(env.dir, 'gc-hang-ipam');
    const fx = join(env.dir, 'fx-gc-hang');
    const gate = join(env.dir, 'gate-gc-hang');
    env.defer(() => rmSync(gate, { force: true }));
    const bridge = bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir });
    const conf = stewardConf(daemon.socket, '1.1.0', [
      delegate('hangnet', '1.0.0', [bridge, fixturePlugin(fx, { holdDelWhileFile: gate })]),
    ]);
    const call = (command: string, containerId: string, netconf = conf) =>
      shim({ command, containerId, netns: env.netns() }, netconf);
    // The stale pod's DEL is not held: a teardown runs the config stored at its ADD.
    const unheld = stewardConf(daemon.socket, '1.1.0', [delegate('hangnet', '1.0.0', [bridge, fixturePlugin(fx, {})])]);
    assert.equal((await call('ADD', 'gch-stale', unheld)).code, 0);
    assert.equal((await call('ADD', 'gch-del')).code, 0);
    writeFileSync(gate, '');
    const del = call('DEL', 'gch-del');
    await daemon.waitFor('the DEL to reach its held delegate', () => fixtureCalls(fx, 'DEL').length === 1);

    // The runtime's list, made before it creates gch-new; gch-del is still listed while it is deleted.
    const gcEnv = { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' };
    let gcDone = false;
    const gc = shim(
      { command: 'GC', env: gcEnv },
      { ...conf, 'cni.dev/valid-attachments': [{ containerID: 'gch-del', ifname: 'eth0' }] },
    ).then((a) => ((gcDone = true), a));
    await daemon.waitFor('the stale pod to be swept at once', () => leases(dataDir, 'hangnet').length === 1);
    await new Promise((r) => setTimeout(r, 800)); // the GC waiting for the gate
    const started = performance.now();
    const add = await call('ADD', 'gch-new');
    const addMs = performance.now() - started;
    assert.equal(add.code, 0, add.stdout);
    assert.ok(addMs > 600, `the ADD took ${addMs} ms: the GC was not waiting ahead of it`);
    assert.ok(addMs < 10_000, `the ADD took ${addMs} ms: held behind the GC until the DEL's plugin timed out`);
    assert.equal(fixtureCalls(fx, 'DELDONE').length, 0, 'all of it while the DEL still hangs');
    assert.equal(gcDone, false, 'the GC still waits for the DEL');

    rmSync(gate);
    assert.equal((await del).code, 0);
    const answer = await gc;
    assert.equal(answer.code, 0, answer.stdout);
    const live = (await daemon.get('/v1/attachments?state=added')).json;
    assert.deepEqual(
      live.map((a: { containerId: string }) => a.containerId),
      ['gch-new'],
      'the pod added after the GC arrived is kept (it was torn down a moment after its ADD)',
    );
    assert.equal(leases(dataDir, 'hangnet').length, 1, 'its lease too');
    await daemon.stop();
  });

  it('GC with disableGC does nothing, and GC below 1.1.0 is refused with code 1', async () => {
    const daemon = await startDaemon('gc2');
    const fx = join(env.dir, 'gc2-fx');
    const conf = stewardConf(daemon.socket, '1.1.0', [delegate('gc2net', '1.1.0', [fixturePlugin(fx)])]);
    assert.equal((await shim({ command: 'ADD', containerId: 'keep', netns: env.netns() }, conf)).code, 0);
    const gcEnv = { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' };
    assert.equal((await shim({ command: 'GC', env: gcEnv }, { ...conf, disableGC: true })).code, 0);
    assert.equal((await daemon.get('/v1/attachments?state=added')).json.length, 1);
    const old = await shim({ command: 'GC', env: gcEnv }, { ...conf, cniVersion: '1.0.0' });
    assert.equal(old.json.code, 1);
    // A 1.1 delegate is told which attachments steward still holds.
    assert.equal(
      (
        await shim(
          { command: 'GC', env: gcEnv },
          { ...conf, 'cni.dev/valid-attachments': [{ containerID: 'keep', ifname: 'eth0' }] },
        )
      ).code,
      0,
    );
    const gcFiles = readdirSync(fx).filter((f) => f.startsWith('gc-'));
    assert.equal(gcFiles.length, 1);
    await daemon.stop();
  });

  it("GC tells a 1.1 delegate the interface its ADD ran at: the first delegate's own ifname, not CNI_IFNAME", async () => {
    const daemon = await startDaemon('gc-ifname');
    const fx = join(env.dir, 'gc-ifname-fx');
    const conf = stewardConf(daemon.socket, '1.1.0', [
      { ...delegate('ownif', '1.1.0', [fixturePlugin(fx)]), ifname: 'eth9' },
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'own-if', netns: env.netns() }, conf)).code, 0);
    assert.deepEqual(
      fixtureCalls(fx, 'ADD').map((l) => l.split(' ').slice(0, 3).join(' ')),
      ['ADD own-if eth9'],
    );
    const gc = await shim(
      { command: 'GC', env: { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' } },
      { ...conf, 'cni.dev/valid-attachments': [{ containerID: 'own-if', ifname: 'eth0' }] },
    );
    assert.equal(gc.code, 0, gc.stdout);
    const [file] = readdirSync(fx).filter((f) => f.startsWith('gc-'));
    // An IPAM keyed by container and interface keeps the lease only if it is told eth9.
    assert.deepEqual(JSON.parse(readFileSync(join(fx, file!), 'utf8')), [{ containerID: 'own-if', ifname: 'eth9' }]);
    await daemon.stop();
  });

  it('STATUS reports a delegate that is not available with its code, and success otherwise', async () => {
    const daemon = await startDaemon('status');
    const fx = join(env.dir, 'status-fx');
    const statusEnv = { CNI_COMMAND: 'STATUS', CNI_PATH: '/usr/lib/cni' };
    const ok = stewardConf(daemon.socket, '1.1.0', [delegate('upnet', '1.1.0', [fixturePlugin(fx)])]);
    assert.equal(await daemon.decideStatus(ok), 200);
    assert.equal((await shim({ command: 'STATUS', env: statusEnv }, ok)).code, 0);
    const down = stewardConf(daemon.socket, '1.1.0', [
      delegate('downnet', '1.1.0', [fixturePlugin(fx, { failStatus: true })]),
    ]);
    assert.equal(await daemon.decideStatus(down), 503);
    const res = await shim({ command: 'STATUS', env: statusEnv }, down);
    assert.equal(res.code, 1);
    assert.equal(res.json.code, 50);
    assert.doesNotMatch(
      res.json.msg,
      /no answer within the STATUS bound/,
      "the delegate's verdict, not the shim's bound",
    );
    // Cached: a second STATUS within the TTL runs no plugin.
    const before = fixtureCalls(fx, 'STATUS').length;
    await shim({ command: 'STATUS', env: statusEnv }, down);
    assert.equal(fixtureCalls(fx, 'STATUS').length, before);
    // A delegate whose binary no plugin dir has cannot serve an ADD: 50 (not available), not 7.
    const gone = stewardConf(daemon.socket, '1.1.0', [delegate('gonenet', '1.1.0', [{ type: 'stw-no-such-plugin' }])]);
    const missing = await shim({ command: 'STATUS', env: statusEnv }, gone);
    assert.equal(missing.code, 1);
    assert.equal(missing.json.code, 50, missing.stdout);
    assert.match(missing.json.msg, /plugin type "stw-no-such-plugin" is not in any plugin dir/);
    // Below 1.1.0 a delegate is asked no STATUS, and its plugin is not looked up either (as libcni):
    // ready, though its ADD would be code 7. A missing binary is no reason to mark the node NotReady.
    const older = stewardConf(daemon.socket, '1.1.0', [delegate('oldnet', '1.0.0', [{ type: 'stw-no-such-plugin' }])]);
    const olderStatus = await shim({ command: 'STATUS', env: statusEnv }, older);
    assert.equal(olderStatus.code, 0, olderStatus.stdout);
    const olderAdd = await shim({ command: 'ADD', containerId: 'old-add', netns: env.netns() }, older);
    assert.equal(olderAdd.json.code, 7, olderAdd.stdout);
    assert.match(olderAdd.json.msg, /plugin type "stw-no-such-plugin" is not in any plugin dir/);
    await daemon.stop();
  });

  it('STATUS single flight: concurrent STATUS requests after the cache expired run the delegate STATUS once and share its answer', async () => {
    const daemon = await startDaemon('status-flight');
    const statusBody = (conf: unknown) =>
      JSON.stringify({ env: { CNI_COMMAND: 'STATUS', CNI_PATH: '/usr/lib/cni' }, config: conf });
    const burst = async (conf: unknown, n: number) =>
      Promise.all(Array.from({ length: n }, () => daemon.request('POST', '/v1/cni', statusBody(conf))));
    for (const failStatus of [false, true]) {
      const fx = join(env.dir, `flight-fx-${failStatus}`);
      // The delegate's STATUS takes 300 ms, so every request of the burst arrives while it runs.
      const conf = stewardConf(daemon.socket, '1.1.0', [
        delegate(`flight${failStatus ? 'down' : 'up'}`, '1.1.0', [
          fixturePlugin(fx, { sleepStatusMs: 300, failStatus }),
        ]),
      ]);
      const first = await daemon.request('POST', '/v1/cni', statusBody(conf));
      assert.equal(first.status, failStatus ? 503 : 200, first.text);
      assert.equal(fixtureCalls(fx, 'STATUS').length, 1);
      await new Promise((r) => setTimeout(r, 5300)); // past the cache's 5 s
      const answers = await burst(conf, 60);
      for (const a of answers) {
        assert.equal(a.status, failStatus ? 503 : 200, a.text);
        if (failStatus) assert.equal(a.json.code, 50);
      }
      assert.equal(fixtureCalls(fx, 'STATUS').length, 2, 'one delegate STATUS for the whole burst');
    }
    await daemon.stop();
  });
});
