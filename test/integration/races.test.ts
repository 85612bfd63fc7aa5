// Races a real runtime produces: requests for one attachment overlapping each other, and the
// plugin spawner dying under a running plugin.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('races');
const daemon = new Daemon(env, { args: ['--retry-base-ms', '100', '--retry-max-ms', '400'] });
before(() => daemon.start());
after(() => env.close());

describe('overlapping requests for one attachment', () => {
  it('a DEL sent after a queued re-ADD waits for that ADD and tears it down, instead of joining the earlier DEL', async () => {
    const dataDir = join(env.dir, 'ipam-race');
    const fx = join(env.dir, 'fx-race');
    const gate = join(env.dir, 'hold-del1');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('racenet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        // DEL1 is held in the plugin until both later requests are in (DELs wait while the file exists).
        fixturePlugin(fx, { holdDelWhileFile: gate }),
      ]),
    ]);
    const netns = env.netns();
    const call = (command: string) => shim({ command, containerId: 'racer', netns }, conf);
    assert.equal((await call('ADD')).code, 0);

    writeFileSync(gate, '');
    env.defer(() => rmSync(gate, { force: true }));
    const del1 = call('DEL');
    await daemon.waitFor('the first DEL to reach the held plugin', () => fixtureCalls(fx, 'DEL').length === 1);
    const add2 = call('ADD');
    // Admission counts the ADD as it arrives (othersInFlight, the only one now); the same connection's
    // body then reaches the engine, queueing it behind DEL1, while DEL2 has yet to start a shim at all.
    await daemon.waitFor('the second ADD to reach stewardd', async () => {
      return (await daemon.status()).admission.othersInFlight === 1;
    });
    assert.equal(fixtureCalls(fx, 'ADD').length, 1, 'the second ADD waits behind DEL1');
    const del2 = call('DEL');
    // Both DELs admitted (DEL2 at once, behind its container's ADD in flight), then DEL1 may finish.
    await daemon.waitFor('the second DEL to reach stewardd', async () => {
      return (await daemon.status()).admission.delsAdmitted === 2;
    });
    rmSync(gate);
    const [d1, a2, d2] = await Promise.all([del1, add2, del2]);
    assert.deepEqual([d1.code, a2.code, d2.code], [0, 0, 0], `${d1.stdout} ${a2.stdout} ${d2.stdout}`);
    assert.equal(fixtureCalls(fx, 'ADD').length, 2);
    assert.equal(fixtureCalls(fx, 'DEL').length, 2, 'the second ADD was torn down by the second DEL');
    assert.deepEqual(leases(dataDir, 'racenet'), []);
    const atts = (await daemon.get('/v1/attachments?containerId=racer')).json;
    assert.ok(atts.every((a: { state: string }) => a.state === 'deleted'));
  });
});

describe('a DEL the shim spooled while stewardd served, then the same container ADDed again', () => {
  it('runs before that ADD, so the new attachment is not torn down by it a second later', async () => {
    // A DEL queued past the shim's DEL bound (behind the same container's slow ADD on another network,
    // so its teardown is not journaled yet and stewardd does not answer it) is spooled and answered 0;
    // the runtime, told it is done, ADDs the same container id again (podman restart) before the
    // scheduler's next spool pass. (A DEL whose teardown is journaled but slow is answered by stewardd
    // inside its budget and never spooled: del-budget.test.ts.)
    const fx = join(env.dir, 'fx-respool');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('respoolnet', '1.0.0', [fixturePlugin(fx)])], {
      timeouts: { del: 1000 },
    });
    const slowConf = stewardConf(
      daemon.socket,
      '1.0.0',
      [delegate('slowaddnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-slowadd'), { sleepAddMs: 2500 })])],
      { name: 'slowadd' },
    );
    const netns = env.netns();
    const call = (command: string, c: unknown = conf) => shim({ command, containerId: 'respooled', netns }, c);
    assert.equal((await call('ADD')).code, 0);
    // On another interface: eth0 in that netns is the first network's (an ADD of it is 102).
    const slowAdd = shim({ command: 'ADD', containerId: 'respooled', netns, ifname: 'net7' }, slowConf);
    await daemon.waitFor(
      'the slow ADD to reach its plugin',
      () => fixtureCalls(join(env.dir, 'fx-slowadd'), 'ADD').length === 1,
    );
    const del = await call('DEL');
    assert.equal(del.code, 0, del.stdout);
    assert.ok(
      readdirSync(daemon.spoolDir).some((f) => f.includes('respooled')),
      'the DEL was spooled by the shim',
    );
    const add = await call('ADD');
    assert.equal(add.code, 0, add.stdout);
    assert.equal((await slowAdd).code, 0);
    // Two scheduler ticks (one a second) and more: nothing left to tear the new attachment down.
    await new Promise((r) => setTimeout(r, 2500));
    assert.deepEqual(
      fixtureCalls(fx).map((l) => l.split(' ')[0]),
      ['ADD', 'DEL', 'ADD'],
      'one DEL, for the first attachment',
    );
    const atts = (await daemon.get('/v1/attachments?containerId=respooled')).json.filter(
      (a: { network: string }) => a.network === 'steward',
    );
    assert.deepEqual(atts.map((a: { state: string }) => a.state).sort(), ['added', 'deleted']);
    assert.equal((await call('DEL')).code, 0);
    assert.equal((await call('DEL', slowConf)).code, 0);
  });
});

/** Live children of a process, from /proc. */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(/\s+/).map(Number);
}

describe('the plugin spawner dies', () => {
  it('a plugin in flight fails with code 100 and is rolled back; the next request gets a new spawner', async () => {
    const dataDir = join(env.dir, 'ipam-spawner');
    const fx = join(env.dir, 'fx-spawner');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('spawnnet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { sleepAddMs: 2000 }),
      ]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'orphaned', netns: env.netns() }, conf);
    await daemon.waitFor('the slow plugin to start', () => fixtureCalls(fx, 'ADD').length === 1);
    const spawners = childrenOf(daemon.proc!.pid!);
    assert.equal(spawners.length, 1, 'one spawner process');
    process.kill(spawners[0]!, 'SIGKILL');

    const res = await add;
    assert.equal(res.code, 1);
    assert.equal(res.json.code, 100, res.stdout);
    assert.match(res.json.msg, /spawner exited/);
    // The fixture may still finish its ADD (it is its own process group); its DEL is retried until it runs.
    await daemon.waitFor('the rollback to finish', async () => (await daemon.status()).teardownQueue.depth === 0);
    assert.deepEqual(leases(dataDir, 'spawnnet'), []);

    const quick = stewardConf(daemon.socket, '1.0.0', [
      delegate('spawnnet2', '1.0.0', [fixturePlugin(join(env.dir, 'fx-after'))]),
    ]);
    const next = await shim({ command: 'ADD', containerId: 'after-spawner', netns: env.netns() }, quick);
    assert.equal(next.code, 0, next.stdout);
    assert.equal(childrenOf(daemon.proc!.pid!).length, 1, 'a new spawner took over');
  });
});
