// Teardown guarantees, each incident of shared/seeds reproduced with real plugins, a real daemon
// process and real kill -9. Where a seed is about a leak, the same sequence is also run without
// steward (plugins called directly, as a runtime does) and must leak, so each test can fail.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { FAST_RETRY, startDaemon as startTestDaemon } from '../helpers/daemon.js';
import { directAdd, directDel } from '../helpers/direct.js';
import { FIXTURE_BIN, TestEnv, fixtureCalls, leases, linkExists, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('teardown');
after(() => env.close());

const startDaemon = (name: string, args?: string[]) => startTestDaemon(env, name, args);

describe('seed 000: DEL deadlock and DEL storm', () => {
  it('DEL of a never-added container succeeds, and 200 DELs run the delegate DEL at most once', async () => {
    const daemon = await startDaemon('storm');
    const fx = join(env.dir, 'storm-fx');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('ovn', '1.0.0', [fixturePlugin(fx, { requireAddForDel: true })]),
    ]);

    // Without steward: the delegate rejects every DEL (kube-ovn's "server_socket is required").
    const bare = {
      name: 'ovn',
      cniVersion: '1.0.0',
      plugins: [fixturePlugin(join(env.dir, 'storm-bare'), { requireAddForDel: true })],
    };
    let bareFailures = 0;
    for (let i = 0; i < 20; i++)
      if (!(await directDel(bare, { containerId: 'never-added', netns: '' }))) bareFailures++;
    assert.equal(bareFailures, 20, 'baseline: every direct DEL fails, so the runtime retries forever');

    const first = await shim({ command: 'DEL', containerId: 'never-added', netns: '' }, conf);
    assert.equal(first.code, 0, first.stdout);

    // The storm, with an ADD for another container in the middle of it.
    const addNetns = env.netns();
    const addConf = stewardConf(daemon.socket, '1.0.0', [delegate('ovn', '1.0.0', [fixturePlugin(fx)])]);
    const storm: Array<Promise<{ code: number | null }>> = [];
    for (let wave = 0; wave < 10; wave++) {
      for (let i = 0; i < 20; i++) storm.push(shim({ command: 'DEL', containerId: 'never-added', netns: '' }, conf));
      if (wave === 5) storm.push(shim({ command: 'ADD', containerId: 'bystander', netns: addNetns }, addConf));
      await new Promise((r) => setTimeout(r, 20));
    }
    const answers = await Promise.all(storm);
    answers.forEach((a, i) => assert.equal(a.code, 0, `request ${i}`));
    const dels = fixtureCalls(fx, 'DEL').filter((l) => l.includes(' never-added '));
    assert.ok(dels.length <= 1, `delegate DEL ran ${dels.length} times`);
    assert.equal(fixtureCalls(fx, 'ADD').filter((l) => l.includes(' bystander ')).length, 1);
    const metrics = (await daemon.get('/metrics')).text;
    assert.match(metrics, /steward_del_coalesced_total\{how="(tombstone|joined)"\} [1-9]\d*/);
    await daemon.stop();
  });
});

describe('seed 002: chained plugins leak an IP when teardown fails', () => {
  it('with steward no lease is left after 20 failed ADD + DEL rounds; without steward all 20 leak', async () => {
    const daemon = await startDaemon('chain');
    const dataDir = join(env.dir, 'chain-ipam');
    const bareDir = join(env.dir, 'chain-ipam-bare');
    const chain = (ipam: string, fx: string) => [
      bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: ipam }),
      fixturePlugin(fx, { failAdd: true, failDelTimes: 2 }),
    ];

    // Without steward: ADD fails, the teardown DEL fails at the fixture and halts; the runtime
    // swallows it and never retries. host-local keeps every address.
    const bare = { name: 'chained', cniVersion: '1.0.0', plugins: chain(bareDir, join(env.dir, 'chain-fx-bare')) };
    for (let i = 0; i < 20; i++) {
      const netns = env.netns();
      const r = await directAdd(bare, { containerId: `bare-${i}`, netns });
      assert.equal(r.ok, false);
    }
    const leakedWithout = leases(bareDir, 'chained').length;
    assert.equal(leakedWithout, 20, 'baseline leaks one address per attempt');
    for (let i = 0; i < 20; i++) {
      // Clean the baseline's leftovers by hand, as an operator would have to.
      await directDel({ ...bare, plugins: [bare.plugins[0]!] }, { containerId: `bare-${i}`, netns: '' });
    }

    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('chained', '1.0.0', chain(dataDir, join(env.dir, 'chain-fx'))),
    ]);
    for (let i = 0; i < 20; i++) {
      const netns = env.netns();
      const add = await shim({ command: 'ADD', containerId: `pod-${i}`, netns }, conf);
      assert.equal(add.code, 1);
      assert.equal(add.json.code, 201, add.stdout);
      const del = await shim({ command: 'DEL', containerId: `pod-${i}`, netns }, conf);
      assert.equal(del.code, 0, 'the runtime is told the DEL succeeded (policy defer)');
    }
    await daemon.waitFor(
      'teardown retries to settle',
      async () => (await daemon.status()).teardownQueue.depth === 0,
      30_000,
    );
    assert.deepEqual(leases(dataDir, 'chained'), [], 'with steward nothing leaks');
    const status = await daemon.status();
    assert.equal(status.steps.abandoned ?? 0, 0);
    await daemon.stop();
  });
});

describe('crash mid-chain', () => {
  it('kill -9 while a plugin runs; after restart the lease and the interface are gone without any runtime call', async () => {
    const daemon = await startDaemon('crash');
    const dataDir = join(env.dir, 'crash-ipam');
    const fx = join(env.dir, 'crash-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('crashnet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { sleepAddMs: 4000 }),
      ]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'crashy', netns }, conf);
    await daemon.waitFor('the sleeping plugin to start', () => fixtureCalls(fx, 'ADD').length === 1);
    assert.equal(leases(dataDir, 'crashnet').length, 1, 'bridge + host-local ran before the crash');
    assert.equal(linkExists(netns, 'eth0'), true);
    await daemon.kill9();
    const answer = await add;
    assert.equal(answer.code, 1, 'the runtime sees the ADD fail');

    await daemon.start();
    assert.deepEqual(leases(dataDir, 'crashnet'), []);
    assert.equal(linkExists(netns, 'eth0'), false);
    const atts = (await daemon.get('/v1/attachments?containerId=crashy')).json;
    assert.equal(atts[0].state, 'deleted');
    await daemon.stop();
  });
});

describe('seed 003: reboot', () => {
  it('a reboot sweep whose DELs hang keeps the socket closed for --recovery-wait only: stewardd serves while it goes on', async () => {
    const daemon = await startDaemon('slow-sweep', ['--recovery-wait', '1']);
    const fx = join(env.dir, 'slow-sweep-fx');
    const gate = join(env.dir, 'slow-sweep-gate');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('sweepnet', '1.0.0', [fixturePlugin(fx, { holdDelWhileFile: gate })]),
    ]);
    for (const i of [0, 1])
      assert.equal((await shim({ command: 'ADD', containerId: `sweep-${i}`, netns: env.netns() }, conf)).code, 0);
    await daemon.kill9();
    daemon.setBootId('boot-2');
    writeFileSync(gate, '');
    // Ready while both DELs of the sweep are still held (each ends only once the gate is gone).
    await daemon.start();
    assert.deepEqual(fixtureCalls(fx, 'DELDONE'), [], 'the sweep has not finished, and stewardd serves');
    const other = await shim({ command: 'ADD', containerId: 'after-reboot', netns: env.netns() }, conf);
    assert.equal(other.code, 0, other.stdout);
    // An ADD still running when the sweep ends is `adding` then: recovery took its lists before the
    // socket opened, so it never rolls this pod back (it did, found by a review of the change).
    const slowConf = stewardConf(daemon.socket, '1.0.0', [
      delegate('slownet', '1.0.0', [fixturePlugin(join(env.dir, 'slow-add-fx'), { sleepAddMs: 3000 })]),
    ]);
    const slow = shim({ command: 'ADD', containerId: 'adding-while-swept', netns: env.netns() }, slowConf);
    await daemon.waitFor(
      'the slow ADD in its plugin',
      () => fixtureCalls(join(env.dir, 'slow-add-fx'), 'ADD').length === 1,
    );
    rmSync(gate);
    await daemon.waitFor('the sweep to finish', async () => {
      const atts = (await daemon.get('/v1/attachments')).json as Array<{ containerId: string; state: string }>;
      return atts.filter((a) => a.containerId.startsWith('sweep-')).every((a) => a.state === 'deleted');
    });
    assert.equal((await slow).code, 0);
    const log = readFileSync(daemon.logFile, 'utf8');
    assert.match(log, /recovery still running: it goes on while stewardd serves/);
    assert.match(log, /"rolledBack":0,"resumed":0,"notStarted":0,"couldNotRun":0,"msg":"recovery finished"/);
    for (const id of ['after-reboot', 'adding-while-swept'])
      assert.equal((await daemon.attachment(id)).state, 'added', `${id} is left as it was added`);
    await daemon.stop();
  });

  it('a container id reused while the sweep goes on waits behind its own teardown, then is added', async () => {
    // One background slot (--max-parallel 3): the sweep's first DEL holds it, the second waits. The
    // waiting one's container is ADDed again (podman's restart policies keep the id across a reboot):
    // that ADD must wait for the old attachment's teardown, not be refused (it got 102, "DEL it before
    // adding again", while the sweep handed out its teardowns a few at a time).
    const daemon = await startDaemon('reuse-sweep', ['--recovery-wait', '1', '--max-parallel', '3']);
    const fx = join(env.dir, 'reuse-sweep-fx');
    const gate = join(env.dir, 'reuse-sweep-gate');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('reusenet', '1.0.0', [fixturePlugin(fx, { holdDelWhileFile: gate })]),
    ]);
    for (const i of [0, 1])
      assert.equal((await shim({ command: 'ADD', containerId: `reuse-${i}`, netns: env.netns() }, conf)).code, 0);
    await daemon.kill9();
    daemon.setBootId('boot-2');
    writeFileSync(gate, '');
    env.defer(() => rmSync(gate, { force: true }));
    await daemon.start();
    await daemon.waitFor("the sweep's first DEL in its plugin", () => fixtureCalls(fx, 'DEL').length > 0);
    assert.deepEqual(
      fixtureCalls(fx, 'DEL').map((l) => l.split(' ')[1]),
      ['reuse-0'],
      "the sweep's one slot holds reuse-0's DEL; reuse-1's waits",
    );
    let answered = false;
    const again = shim({ command: 'ADD', containerId: 'reuse-1', netns: env.netns() }, conf).finally(() => {
      answered = true;
    });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(answered, false, 'the ADD waits behind the old attachment of its container');
    rmSync(gate);
    const r = await again;
    assert.equal(r.code, 0, r.stdout);
    const states = ((await daemon.get('/v1/attachments?containerId=reuse-1')).json as Array<{ state: string }>).map(
      (a) => a.state,
    );
    assert.deepEqual(states.sort(), ['added', 'deleted'], 'the old attachment torn down, the new one added');
    assert.deepEqual(
      fixtureCalls(fx)
        .filter((l) => l.includes(' reuse-1 '))
        .map((l) => l.split(' ')[0]),
      ['ADD', 'DEL', 'DELDONE', 'ADD'],
      "reuse-1's old DEL ran before its new ADD",
    );
    await daemon.stop();
  });

  it('attachments of an earlier boot are torn down at start with an empty netns; every lease is released', async () => {
    const daemon = await startDaemon('reboot');
    const dataDir = join(env.dir, 'reboot-ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('rebootnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    const spaces = [env.netns(), env.netns(), env.netns()];
    for (const [i, netns] of spaces.entries()) {
      const r = await shim({ command: 'ADD', containerId: `boot-${i}`, netns }, conf);
      assert.equal(r.code, 0, r.stdout);
    }
    await daemon.stop();
    daemon.setBootId('boot-2');
    for (const netns of spaces) sh('ip', ['netns', 'del', netns.split('/').pop()!]);
    assert.equal(leases(dataDir, 'rebootnet').length, 3, 'without a sweep all three reservations stay');

    await daemon.start();
    assert.deepEqual(leases(dataDir, 'rebootnet'), []);
    const atts = (await daemon.get('/v1/attachments')).json;
    assert.ok(atts.every((a: { state: string }) => a.state === 'deleted'));
    await daemon.stop();
  });
});

describe('daemon down', () => {
  it('DEL via the shim exits 0 and spools; the daemon ingests it at start and the lease is released', async () => {
    const daemon = await startDaemon('spool');
    const dataDir = join(env.dir, 'spool-ipam');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('spoolnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'spooled', netns }, conf)).code, 0);
    await daemon.stop();

    const del = await shim({ command: 'DEL', containerId: 'spooled', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.equal(readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json')).length, 1);
    assert.equal(leases(dataDir, 'spoolnet').length, 1);

    const add = await shim({ command: 'ADD', containerId: 'other', netns: env.netns() }, conf);
    assert.equal(add.json.code, 11, 'ADD is not spooled: code 11 at once');

    await daemon.start();
    // Drained in the background once the socket is open.
    await daemon.waitFor(
      'the spool to drain',
      () => readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json')).length === 0,
    );
    assert.deepEqual(leases(dataDir, 'spoolnet'), []);
    assert.equal(linkExists(netns, 'eth0'), false);
    await daemon.stop();
  });
});

describe('spooled while running', () => {
  it('a DEL the shim spooled while the daemon was running (it could not be reached) is ingested on the next tick', async () => {
    const daemon = await startDaemon('spool-live');
    const dataDir = join(env.dir, 'spool-live-ipam');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('livenet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'live-spool', netns }, conf)).code, 0);
    // Same spool dir, a socket nobody answers: the shim spools, as after a daemon crash mid-request.
    const del = await shim(
      { command: 'DEL', containerId: 'live-spool', netns },
      { ...conf, socket: join(env.dir, 'nobody.sock') },
    );
    assert.equal(del.code, 0, del.stdout);
    // The entry is unlinked only after its DEL finished (a crash in between must not lose it), so the
    // lease goes a moment before the file does: wait for both.
    const spooled = () => readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json'));
    await daemon.waitFor(
      'the spooled DEL to be ingested',
      () => leases(dataDir, 'livenet').length === 0 && spooled().length === 0,
      30_000,
    );
    assert.deepEqual(spooled(), []);
    assert.deepEqual(leases(dataDir, 'livenet'), []);
    await daemon.stop();
  });
});

describe('retries', () => {
  it('a DEL that fails twice is still retried after the daemon restarts in between', async () => {
    // The first retry is due 4 s (±20 %) after the DEL: the checks before the restart see one attempt
    // however slow the machine is to make them (at 1.5 s a loaded one saw the retry already run).
    const daemon = await startDaemon('restart', ['--retry-base-ms', '4000', '--retry-max-ms', '8000']);
    const dataDir = join(env.dir, 'restart-ipam');
    const fx = join(env.dir, 'restart-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('restartnet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { failDelTimes: 2 }),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'flaky', netns }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'flaky', netns }, conf)).code, 0);
    assert.equal(fixtureCalls(fx, 'DEL').length, 1);
    assert.equal(leases(dataDir, 'restartnet').length, 1, 'bridge waits for the failing step after it');
    const pending = (await daemon.get('/v1/teardowns')).json.pending;
    assert.equal(pending.length, 1);
    assert.equal(pending[0].plugin, 'steward-fixture');
    assert.equal(pending[0].attempts, 1);

    await daemon.restart();
    // Two more attempts: the second due within the cap of the restart, the third 8 s (±20 %) later.
    // host-local's lease goes inside bridge's DEL, before bridge exits and its step is journaled
    // `deleted`: wait for the queue too.
    await daemon.waitFor(
      'the retried teardown to finish',
      async () => leases(dataDir, 'restartnet').length === 0 && (await daemon.status()).teardownQueue.depth === 0,
      45_000,
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, 3);
    assert.equal((await daemon.status()).teardownQueue.depth, 0);
    await daemon.stop();
  });

  it('a step that never succeeds is abandoned after the bound, and the lease before it is then released', async () => {
    const daemon = await startDaemon('abandon', [...FAST_RETRY, '--retry-max-attempts', '3']);
    const dataDir = join(env.dir, 'abandon-ipam');
    const fx = join(env.dir, 'abandon-fx');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('abandonnet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { failDelAlways: true }),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'doomed', netns }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'doomed', netns }, conf)).code, 0);
    await daemon.waitFor(
      'the step to be abandoned',
      async () => (await daemon.get('/v1/teardowns')).json.abandoned.length === 1,
    );
    // The bridge step before it runs right after the abandon is journaled.
    await daemon.waitFor(
      'the attachment to be torn down',
      async () => (await daemon.get('/v1/attachments?containerId=doomed')).json[0].state === 'deleted',
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, 3);
    assert.deepEqual(leases(dataDir, 'abandonnet'), []);
    const t = (await daemon.get('/v1/teardowns')).json;
    assert.equal(t.abandoned[0].plugin, 'steward-fixture');
    assert.match(t.abandoned[0].lastError, /DEL failed on cue/);
    assert.match((await daemon.get('/metrics')).text, /steward_teardown_abandoned_total\{plugin="steward-fixture"\} 1/);
    assert.equal((await daemon.status()).steps.abandoned, 1);
    await daemon.stop();
  });

  it('policy strict returns the teardown error to the runtime, worded so it is never read as success', async () => {
    const daemon = await startDaemon('strict', [...FAST_RETRY, '--del-policy', 'strict']);
    const fx = join(env.dir, 'strict-fx');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('strictnet', '1.0.0', [fixturePlugin(fx, { failDelTimes: 1 })]),
    ]);
    const netns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'strict', netns }, conf)).code, 0);
    const del = await shim({ command: 'DEL', containerId: 'strict', netns }, conf);
    assert.equal(del.code, 1);
    assert.equal(del.json.code, 11);
    assert.doesNotMatch(del.stdout, /not found|no such file or directory/i);
    await daemon.waitFor('the retry to succeed', async () => (await daemon.status()).teardownQueue.depth === 0);
    const again = await shim({ command: 'DEL', containerId: 'strict', netns }, conf);
    assert.equal(again.code, 0);
    await daemon.stop();
  });
});

describe('a delegate binary missing while its DEL is due', () => {
  it('is retried, not abandoned as permanently failing, and torn down once the binary is back', async () => {
    // A plugin upgrade or a remounted hostPath can leave a binary missing for a while: the DEL fails
    // with 11 ("try again later"), not 7 (a config error, which teardown gives up on after 3 tries).
    const bin = join(env.dir, 'moving-bin');
    mkdirSync(bin);
    const exe = join(bin, 'stw-moving');
    copyFileSync(join(FIXTURE_BIN, 'steward-fixture'), exe);
    chmodSync(exe, 0o755);
    const daemon = await startDaemon('missing-bin', [...FAST_RETRY, '--bin-dir', bin]);
    const fx = join(env.dir, 'moving-fx');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('moving', '1.0.0', [{ ...fixturePlugin(fx), type: 'stw-moving' }]),
    ]);
    const netns = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'upgraded', netns }, conf);
    assert.equal(add.code, 0, add.stdout);

    renameSync(exe, `${exe}.away`);
    const del = await shim({ command: 'DEL', containerId: 'upgraded', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    const steps = async () => (await daemon.get('/v1/teardowns')).json;
    // More failed attempts than a permanently failing step gets (PERMANENT_MAX_ATTEMPTS, 3).
    await daemon.waitFor('four failed DELs of the missing binary', async () =>
      (await steps()).pending.some((s: { attempts: number }) => s.attempts >= 4),
    );
    const now = await steps();
    assert.deepEqual(now.abandoned, []);
    assert.match(now.pending[0].lastError, /plugin type "stw-moving" is not in any plugin dir/);

    renameSync(`${exe}.away`, exe);
    await daemon.waitFor('the teardown to finish', async () => (await steps()).pending.length === 0);
    assert.deepEqual((await steps()).abandoned, []);
    assert.deepEqual(
      fixtureCalls(fx).map((l) => l.split(' ').slice(0, 2).join(' ')),
      ['ADD upgraded', 'DEL upgraded'],
    );
    await daemon.stop();
  });
});

describe("a stored netns path that names another pod's namespace now", () => {
  it("a DEL of the old pod leaves the new pod's interface and lease alone, and releases its own lease", async () => {
    const daemon = await startDaemon('reused-netns');
    const dataDir = join(env.dir, 'reused-ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('reusednet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    // The old pod's namespace is removed and a new one is made under the same name (a runtime that
    // names sandboxes' namespaces by pod, or a reused pid's /proc/<pid>/ns/net), and the new pod is added there.
    const netns = env.netns();
    const name = netns.split('/').pop()!;
    const old = await shim({ command: 'ADD', containerId: 'old-pod', netns }, conf);
    assert.equal(old.code, 0, old.stdout);
    sh('ip', ['netns', 'del', name]);
    sh('ip', ['netns', 'add', name]);
    const fresh = await shim({ command: 'ADD', containerId: 'new-pod', netns }, conf);
    assert.equal(fresh.code, 0, fresh.stdout);
    assert.equal(leases(dataDir, 'reusednet').length, 2);

    // The runtime's DEL of the old pod, with an empty CNI_NETNS (its namespace is gone): stewardd
    // uses the stored path, which now names the new pod's namespace.
    const del = await shim({ command: 'DEL', containerId: 'old-pod', netns: '' }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.ok(linkExists(netns, 'eth0'), "the new pod's eth0 was deleted by the old pod's DEL");
    assert.equal(leases(dataDir, 'reusednet').length, 1, "the old pod's lease is released, the new one's kept");
    const check = await shim({ command: 'CHECK', containerId: 'new-pod', netns }, conf);
    assert.equal(check.code, 0, check.stdout);
    assert.equal((await shim({ command: 'DEL', containerId: 'new-pod', netns }, conf)).code, 0);
    assert.deepEqual(leases(dataDir, 'reusednet'), []);
    await daemon.stop();
  });
});
