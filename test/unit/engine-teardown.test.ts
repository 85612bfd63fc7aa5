// The teardown rules (docs/teardown.md) and DEL's answers without root: retry schedule and bounds,
// abandoning, prevResult and netns on DEL, delegates torn down independently, the strict policy,
// pass-through DELs and tombstones. In-memory store, fake plugin runner, an injected clock.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import type Database from 'better-sqlite3';
import { Priority } from '../../daemon/src/engine/limiter.js';
import { foundTaken } from '../../daemon/src/engine/teardown.js';
import type { Step } from '../../daemon/src/store/types.js';
import { netnsIdentity } from '../../daemon/src/engine/netns.js';
import { Store } from '../../daemon/src/store/store.js';
import { NETNS, conf, counterValue, deferred, req, setup } from '../helpers/engine-fakes.js';

const KEY = { network: 'net', ifname: 'eth0' };
const chain = conf([{ type: 'one' }, { type: 'two' }]);

function failDel(plugins: ReturnType<typeof setup>['plugins'], type: string, err: () => Error) {
  plugins.on(type, (c) => {
    if (c.command === 'DEL') throw err();
    return c.command === 'ADD' ? { cniVersion: c.stdin.cniVersion, ips: [{ address: '10.9.0.1/24' }] } : undefined;
  });
}

describe('teardown: what each DEL is given', () => {
  test('a DEL gets the stored config, the delegate’s final result as prevResult and the stored env', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'p', chain, { args: 'K=V', path: '/stored' }));
    await engine.handle(req('DEL', 'p', chain, { args: 'OTHER=1', path: '/asked' }));
    const dels = plugins.callsOf('DEL');
    assert.deepEqual(
      dels.map((c) => [c.type, c.netns, c.ifname, c.args, c.cniPath]),
      [
        ['two', NETNS, 'eth0', 'K=V', '/stored'],
        ['one', NETNS, 'eth0', 'K=V', '/stored'],
      ],
    );
    for (const c of dels) {
      assert.equal(c.stdin.name, 'pod');
      assert.deepEqual(c.stdin.prevResult, {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'eth0' }],
        ips: [{ address: '10.1.0.2/24' }],
      });
    }
  });

  test('the ADD journals which namespace its netns named; a DEL once the path names another gets no netns', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'moved', chain));
    const a = store.currentAttachment({ containerId: 'moved', network: 'net', ifname: 'eth0' })!;
    assert.equal(a.netnsId, netnsIdentity(NETNS));
    assert.match(a.netnsId ?? '', new RegExp(`^\\d+:\\d+ pid ${process.pid} start \\d+$`));
    // As if the path were another namespace's now (a name made again, a pid reused).
    (store as unknown as { db: Database.Database }).db
      .prepare('UPDATE attachments SET netns_id = ? WHERE id = ?')
      .run(`${a.netnsId} (another)`, a.id);
    await engine.handle(req('DEL', 'moved', chain));
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => [c.type, c.netns]),
      [
        ['two', ''],
        ['one', ''],
      ],
    );
  });

  test('the rollback of a chain whose last plugin failed gives each DEL the earlier plugin’s result', async () => {
    const { engine, plugins } = setup();
    plugins.on('one', (c) =>
      c.command === 'ADD' ? { cniVersion: '1.0.0', ips: [{ address: '10.7.0.9/24' }] } : undefined,
    );
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(11, 'two failed');
    });
    await assert.rejects(engine.handle(req('ADD', 'half', chain)), (e: CniError) => e.code === 11);
    await engine.idle('half'); // the rollback runs after the answer
    const dels = plugins.callsOf('DEL');
    assert.deepEqual(
      dels.map((c) => [c.type, c.stdin.prevResult]),
      [
        ['two', { cniVersion: '1.0.0', ips: [{ address: '10.7.0.9/24' }] }],
        ['one', { cniVersion: '1.0.0', ips: [{ address: '10.7.0.9/24' }] }],
      ],
    );
  });

  test('a 0.3.x delegate gets no prevResult on DEL (libcni passes it from 0.4.0 on)', async () => {
    const { engine, plugins } = setup();
    const old = conf([{ type: 'one' }], '0.3.1');
    await engine.handle(req('ADD', 'old', old));
    await engine.handle(req('DEL', 'old', old));
    const [del] = plugins.callsOf('DEL');
    assert.equal(del!.stdin.cniVersion, '0.3.1');
    assert.equal('prevResult' in del!.stdin, false);
  });

  test('with emptyNetns (a reboot sweep) every DEL gets an empty CNI_NETNS', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'rb', chain));
    const a = store.currentAttachment({ containerId: 'rb', ...KEY })!;
    const outcome = await engine.runTeardown(a.id, Priority.Background, { force: true, emptyNetns: true });
    assert.deepEqual(outcome, { done: true });
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => c.netns),
      ['', ''],
    );
  });

  test('a stored netns that is no longer a namespace is passed as empty', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'ns', chain));
    const a = store.currentAttachment({ containerId: 'ns', ...KEY })!;
    // The namespace's bind mount is gone: the stored path no longer names one.
    const moved = store.atomic(() => {
      const b = store.createAttachment({ ...a, netns: '/nonexistent/netns' }, 'added');
      for (const s of store.stepsOf(a.id)) {
        const st = store.insertStep({ ...s, attachmentId: b.id });
        store.setStepAdded(st.id, s.result!);
      }
      return b;
    });
    await engine.runTeardown(moved.id, Priority.Background, { force: true });
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => c.netns),
      ['', ''],
    );
  });

  test('teardown of an unknown or already deleted attachment is done at once', async () => {
    const { engine, plugins, store } = setup();
    assert.deepEqual(await engine.runTeardown(9999, Priority.Background), { done: true });
    assert.deepEqual(await engine.reclaimUnfinished(9999), { done: true });
    // The row may be pruned while a run waits in its container's queue: the run itself finds none.
    assert.deepEqual(await engine.teardown.run(9999, Priority.Background), { done: true });
    await engine.handle(req('ADD', 'd', chain));
    await engine.handle(req('DEL', 'd', chain));
    const a = store.currentAttachment({ containerId: 'd', ...KEY })!;
    assert.deepEqual(await engine.runTeardown(a.id, Priority.Background, { force: true }), { done: true });
    assert.equal(plugins.of('DEL').length, 2);
  });
});

describe('teardown: failures, retries and bounds', () => {
  test('a failed DEL is journaled del_failed with backoff (base delay +-20%) and counted per plugin', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store, metrics } = setup({ now: () => clock.t });
    await engine.handle(req('ADD', 'f', chain));
    failDel(plugins, 'one', () => new CniError(11, 'one is busy'));
    assert.equal(await engine.handle(req('DEL', 'f', chain)), '', 'the default policy (defer) answers success');
    const a = store.currentAttachment({ containerId: 'f', ...KEY })!;
    assert.equal(a.state, 'deleting');
    const [two, one] = [store.stepsOf(a.id)[1]!, store.stepsOf(a.id)[0]!];
    assert.equal(two.state, 'deleted');
    assert.equal(one.state, 'del_failed');
    assert.equal(one.attempts, 1);
    assert.equal(one.error, 'one is busy');
    const delay = one.nextAttemptAt! - clock.t;
    assert.ok(delay >= 800 && delay <= 1200, `first retry after ~1 s, got ${delay}`);
    assert.equal(await counterValue(metrics.teardownFailures, { plugin: 'one' }), 1);
    assert.equal(await counterValue(metrics.teardownFailures, { plugin: 'two' }), 0);
  });

  test('a step not yet due is not run again without force: the outcome says teardown is pending (105)', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({ now: () => clock.t });
    await engine.handle(req('ADD', 'due', chain));
    failDel(plugins, 'one', () => new CniError(11, 'busy'));
    await engine.handle(req('DEL', 'due', chain));
    const a = store.currentAttachment({ containerId: 'due', ...KEY })!;
    const before = plugins.of('DEL').length;

    const waiting = await engine.runTeardown(a.id, Priority.Background);
    assert.equal(waiting.done, false);
    assert.equal(waiting.error!.code, 105);
    assert.match(waiting.error!.message, /teardown of one is waiting for its next retry/);
    assert.equal(plugins.of('DEL').length, before, 'nothing ran');
    // A repeated runtime DEL does not re-run the failing plugin either (the schedule owns it).
    assert.equal(await engine.handle(req('DEL', 'due', chain)), '');
    assert.equal(plugins.of('DEL').length, before);

    clock.t += 10_000;
    plugins.on('one', () => undefined);
    assert.deepEqual(await engine.runTeardown(a.id, Priority.Background), { done: true }, 'due now: it runs');
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });

  test('a confirmed step waiting for its retry holds back the steps before it; it runs when due to the millisecond', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({ now: () => clock.t });
    await engine.handle(req('ADD', 'hold', chain));
    failDel(plugins, 'two', () => new CniError(11, 'busy'));
    await engine.handle(req('DEL', 'hold', chain));
    const a = store.currentAttachment({ containerId: 'hold', ...KEY })!;
    const two = store.stepsOf(a.id)[1]!;
    assert.equal(two.state, 'del_failed');
    const waiting = await engine.runTeardown(a.id, Priority.Background);
    assert.equal(waiting.error!.code, 105);
    assert.deepEqual(plugins.of('DEL'), ['DEL two hold'], 'step one is not DELed while two waits');
    plugins.on('two', () => undefined);
    clock.t = two.nextAttemptAt! - 1;
    assert.equal((await engine.runTeardown(a.id, Priority.Background)).done, false, 'one millisecond early');
    assert.deepEqual(plugins.of('DEL'), ['DEL two hold']);
    clock.t = two.nextAttemptAt!;
    assert.deepEqual(await engine.runTeardown(a.id, Priority.Background), { done: true }, 'due exactly now');
    assert.deepEqual(plugins.of('DEL'), ['DEL two hold', 'DEL two hold', 'DEL one hold']);
  });

  test('a confirmed step that keeps failing is abandoned after maxAttempts; the steps before it then run', async () => {
    const { engine, plugins, store, metrics } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 2, maxAgeMs: 3_600_000 },
    });
    await engine.handle(req('ADD', 'ab', chain));
    failDel(plugins, 'two', () => new CniError(11, 'two is stuck'));
    await engine.handle(req('DEL', 'ab', chain));
    assert.deepEqual(plugins.of('DEL'), ['DEL two ab'], 'a confirmed step halts the steps before it');
    const a = store.currentAttachment({ containerId: 'ab', ...KEY })!;
    const outcome = await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.deepEqual(outcome, { done: true, abandoned: 1 }, 'finished, by abandoning one step');
    assert.deepEqual(plugins.of('DEL'), ['DEL two ab', 'DEL two ab', 'DEL one ab']);
    const [one, two] = store.stepsOf(a.id);
    assert.equal(two!.state, 'abandoned');
    assert.equal(two!.error, 'two is stuck');
    assert.equal(two!.nextAttemptAt, null);
    assert.equal(one!.state, 'deleted');
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
    assert.equal(await counterValue(metrics.abandonedSteps, { plugin: 'two' }), 1);
    assert.equal(store.abandonedSteps().length, 1);
  });

  test('a permanent failure (a bad-input code) is abandoned after 3 DELs even when maxAttempts is higher', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 10, maxAgeMs: 3_600_000 },
    });
    await engine.handle(req('ADD', 'perm', chain));
    failDel(plugins, 'two', () => new CniError(7, 'bad config'));
    await engine.handle(req('DEL', 'perm', chain));
    const a = store.currentAttachment({ containerId: 'perm', ...KEY })!;
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[1]!.state, 'del_failed', 'two attempts: not yet');
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[1]!.state, 'abandoned', 'the third attempt abandons it');
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });

  test('a transient failure is retried up to maxAttempts, not abandoned after 3', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 4, maxAgeMs: 3_600_000 },
    });
    await engine.handle(req('ADD', 'tr', chain));
    failDel(plugins, 'two', () => new CniError(11, 'busy'));
    await engine.handle(req('DEL', 'tr', chain));
    const a = store.currentAttachment({ containerId: 'tr', ...KEY })!;
    for (let i = 0; i < 2; i++) await engine.runTeardown(a.id, Priority.Background, { force: true });
    const two = store.stepsOf(a.id)[1]!;
    assert.equal(two.state, 'del_failed');
    assert.equal(two.attempts, 3);
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[1]!.state, 'abandoned');
  });

  test('a DEL failing with exactly the error its ADD failed with is permanent, unless that error is an 11', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 10, maxAgeMs: 3_600_000 },
    });
    // Seed 000's kube-ovn: a plain error, code 999 as skel prints it, to both ADD and DEL.
    plugins.on('two', () => {
      throw new CniError(999, 'server_socket is required');
    });
    await assert.rejects(engine.handle(req('ADD', 'same', chain)));
    const a = store.currentAttachment({ containerId: 'same', ...KEY })!;
    for (let i = 0; i < 2; i++) await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[1]!.state, 'abandoned', 'three DELs, then abandoned');
    // A backend down through the ADD and its DELs: the same words, but 11, so the whole budget.
    plugins.on('two', () => {
      throw new CniError(11, 'backend unavailable, try again later');
    });
    await assert.rejects(engine.handle(req('ADD', 'down', chain)));
    const b = store.currentAttachment({ containerId: 'down', ...KEY })!;
    for (let i = 0; i < 4; i++) await engine.runTeardown(b.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(b.id)[1]!.state, 'del_failed', 'five DELs, still retried');
  });

  test('a step whose ADD was refused for its cniVersion needs no DEL when its DEL is refused the same way (code 1)', async () => {
    const { engine, plugins, store, metrics } = setup();
    const refusal =
      'incompatible CNI versions; config is "1.1.0", plugin supports ["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0"]';
    plugins.on('two', () => {
      throw new CniError(1, refusal);
    });
    await assert.rejects(engine.handle(req('ADD', 'too-new', chain)), (e: CniError) => e.code === 1);
    await engine.idle('too-new'); // the rollback
    const a = store.currentAttachment({ containerId: 'too-new', ...KEY })!;
    assert.deepEqual(plugins.of('DEL'), ['DEL two too-new', 'DEL one too-new'], 'its DEL was still asked');
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
    assert.deepEqual(
      store.stepsOf(a.id).map((st) => [st.pluginType, st.state, st.attempts]),
      [
        ['one', 'deleted', 1],
        ['two', 'deleted', 1],
      ],
      'torn down at its one DEL, not del_failed and in time abandoned',
    );
    assert.equal(await counterValue(metrics.teardownFailures, { plugin: 'two' }), 0);

    // Code 1 with other words than the ADD's, or to a step whose ADD succeeded: a failure as before.
    for (const [id, addFails] of [
      ['other-words', true],
      ['was-added', false],
    ] as const) {
      plugins.on('two', (c) => {
        if (c.command === 'ADD' && addFails) throw new CniError(1, refusal);
        if (c.command === 'DEL') throw new CniError(1, 'incompatible CNI versions; config is "9.9.9"');
        return { cniVersion: '1.0.0' };
      });
      plugins.on('one', () => ({ cniVersion: '1.0.0' }));
      if (addFails) await assert.rejects(engine.handle(req('ADD', id, chain)));
      else {
        await engine.handle(req('ADD', id, chain));
        await engine.handle(req('DEL', id, chain));
      }
      await engine.idle(id);
      const b = store.currentAttachment({ containerId: id, ...KEY })!;
      assert.equal(store.stepsOf(b.id)[1]!.state, 'del_failed', id);
    }
  });

  test('a step whose teardown is older than maxAgeMs is abandoned at its next failure', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({
      now: () => clock.t,
      store: new Store(':memory:', () => clock.t),
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 50, maxAgeMs: 60_000 },
    });
    await engine.handle(req('ADD', 'age', chain));
    failDel(plugins, 'two', () => new CniError(11, 'busy'));
    await engine.handle(req('DEL', 'age', chain));
    const a = store.currentAttachment({ containerId: 'age', ...KEY })!;
    clock.t += 59_999;
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[1]!.state, 'del_failed');
    clock.t += 1;
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[1]!.state, 'abandoned');
  });

  test('each delegate is torn down on its own, last delegate first: a stuck one does not hold back another', async () => {
    const { engine, plugins, store } = setup();
    const two = conf([], '1.0.0', [
      { name: 'pod', plugins: [{ type: 'one' }, { type: 'two' }] },
      { name: 'side', plugins: [{ type: 'three' }, { type: 'four' }] },
    ]);
    await engine.handle(req('ADD', 'dd', two));
    failDel(plugins, 'four', () => new CniError(11, 'four is stuck'));
    await engine.handle(req('DEL', 'dd', two));
    assert.deepEqual(plugins.of('DEL'), ['DEL four dd', 'DEL two dd', 'DEL one dd']);
    const a = store.currentAttachment({ containerId: 'dd', ...KEY })!;
    assert.deepEqual(
      store.stepsOf(a.id).map((s) => s.state),
      ['deleted', 'deleted', 'added', 'del_failed'],
    );
    await engine.idle('same'); // the rollback runs after the answer
  });

  test('strict policy: an unfinished teardown fails the DEL with its code, never saying "not found"', async () => {
    const { engine, plugins } = setup({ delPolicy: 'strict' });
    await engine.handle(req('ADD', 's', chain));
    failDel(plugins, 'two', () => new CniError(11, 'device not found', 'No such file or directory here'));
    await assert.rejects(engine.handle(req('DEL', 's', chain)), (e: CniError) => {
      return e.code === 11 && e.message === 'device not-found' && e.details === 'ENOENT here';
    });
    // Retried DEL within the backoff: still failing, now as "waiting for its next retry".
    await assert.rejects(engine.handle(req('DEL', 's', chain)), (e: CniError) => e.code === 105);
  });

  test('a new ADD first finishes the old teardown; one still failing makes the ADD "try again later" (11)', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 're', chain));
    failDel(plugins, 'one', () => new CniError(11, 'still busy'));
    await engine.handle(req('DEL', 're', chain));
    await assert.rejects(engine.handle(req('ADD', 're', chain)), (e: CniError) => {
      return e.code === 11 && /still being torn down/.test(e.message) && e.details === 'still busy';
    });
    plugins.on('one', (c) => (c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined));
    await engine.handle(req('ADD', 're', chain));
    assert.equal(store.currentAttachment({ containerId: 're', ...KEY })!.state, 'added');
  });

  test('a new ADD abandons at once an old step that can only fail the same way, then proceeds', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'pa', chain));
    const old = store.currentAttachment({ containerId: 'pa', ...KEY })!;
    failDel(plugins, 'two', () => new CniError(4, 'invalid env'));
    await engine.handle(req('DEL', 'pa', chain));
    plugins.on('two', (c) => (c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined));
    failDel(plugins, 'two', () => new CniError(4, 'invalid env'));
    await engine.handle(req('ADD', 'pa', chain));
    assert.equal(store.stepsOf(old.id)[1]!.state, 'abandoned');
    assert.equal(store.getAttachment(old.id)!.state, 'deleted');
    const now = store.currentAttachment({ containerId: 'pa', ...KEY })!;
    assert.notEqual(now.id, old.id);
    assert.equal(now.state, 'added');
  });
});

describe('DEL: input, pass-through and tombstones', () => {
  test('a DEL whose netconf has no network name succeeds, runs and journals nothing, and is warned about once (an ADD without one is code 7)', async () => {
    const { engine, plugins, store } = setup();
    for (const config of [
      { cniVersion: '1.0.0', delegates: [{ name: 'pod', plugins: [{ type: 'one' }] }] },
      { name: '' },
      { name: 5 },
    ])
      assert.equal(await engine.handle(req('DEL', 'x', config)), '');
    assert.equal(plugins.calls.length, 0);
    assert.equal(store.listAttachments({}).length, 0);
    assert.equal(engine.configWarnings().filter((w) => /no network "name"/.test(w)).length, 1);
    await assert.rejects(
      engine.handle(req('ADD', 'x', { cniVersion: '1.0.0', delegates: [] })),
      (e: CniError) => e.code === 7,
    );
  });

  test('a DEL of an unknown attachment with an unusable netconf runs nothing and still writes a tombstone', async () => {
    const { engine, plugins, store } = setup();
    const broken = { name: 'net', cniVersion: 7, delegates: 'none' };
    assert.equal(await engine.handle(req('DEL', 'u', broken, { args: 'K8S_POD_NAMESPACE=n;K8S_POD_NAME=p' })), '');
    assert.equal(plugins.calls.length, 0);
    const t = store.currentAttachment({ containerId: 'u', ...KEY })!;
    assert.equal(t.state, 'deleted');
    assert.equal(t.cniVersion, '', 'a non-string cniVersion is stored empty');
    assert.deepEqual([t.podNamespace, t.podName], ['n', 'p']);
    assert.deepEqual(JSON.parse(t.config), broken);
  });

  test('a pass-through DEL runs delegates last first, each chain in reverse, with the request’s env', async () => {
    const { engine, plugins, store } = setup();
    const two = conf([], '1.0.0', [
      { name: 'pod', plugins: [{ type: 'one' }, { type: 'two' }] },
      { name: 'side', type: 'three' },
    ]);
    assert.equal(await engine.handle(req('DEL', 'pt', two, { args: 'A=1', path: '/req', netns: '' })), '');
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => [c.type, c.ifname, c.args, c.cniPath, c.netns]),
      [
        ['three', 'net1', 'A=1', '/req', ''],
        ['two', 'eth0', 'A=1', '/req', ''],
        ['one', 'eth0', 'A=1', '/req', ''],
      ],
    );
    await engine.idle('re'); // the rollback runs after the answer
    assert.equal(store.currentAttachment({ containerId: 'pt', ...KEY })!.cniVersion, '1.0.0');
  });

  test('no DEL is handed the host’s network namespace: a teardown’s stored one, nor a pass-through’s', async () => {
    // A stored /proc/<pid>/ns/net outlives its pod: once the pid is a host process's, a bridge DEL
    // there would remove the host's own eth0. The ADD was made while NETNS was a pod's (no host set).
    const store = new Store(':memory:');
    await setup({ store }).engine.handle(req('ADD', 'reused', chain));
    const { engine, plugins } = setup({ store, hostNetns: NETNS });
    assert.equal(await engine.handle(req('DEL', 'reused', chain)), '');
    assert.equal(await engine.handle(req('DEL', 'never-added', chain)), '');
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => [c.type, c.containerId, c.netns]),
      [
        ['two', 'reused', ''],
        ['one', 'reused', ''],
        ['two', 'never-added', ''],
        ['one', 'never-added', ''],
      ],
    );
    assert.equal(store.currentAttachment({ containerId: 'reused', ...KEY })!.state, 'deleted');
  });

  test('tombstones and joins are counted; an ADD queued for the key invalidates the tombstone', async () => {
    const { engine, plugins, metrics } = setup();
    await engine.handle(req('ADD', 't', chain));
    await engine.handle(req('DEL', 't', chain));
    await engine.handle(req('DEL', 't', chain));
    assert.equal(await counterValue(metrics.coalescedDels, { how: 'tombstone' }), 1);
    await engine.handle(req('ADD', 't', chain));
    await engine.handle(req('DEL', 't', chain));
    assert.equal(plugins.of('DEL').length, 4, 'the DEL after the new ADD ran every plugin again');
    const both = [engine.handle(req('DEL', 'j', chain)), engine.handle(req('DEL', 'j', chain))];
    await Promise.all(both);
    assert.equal(await counterValue(metrics.coalescedDels, { how: 'joined' }), 1);
  });

  test('a DEL of an attachment torn down by rollback is answered from the journal, then from memory', async () => {
    const { engine, plugins, metrics } = setup();
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(100, 'no');
    });
    await assert.rejects(engine.handle(req('ADD', 'rb', chain)));
    await engine.idle('rb'); // the rollback runs after the answer
    const dels = plugins.of('DEL').length;
    assert.equal(await engine.handle(req('DEL', 'rb', chain)), '');
    assert.equal(await engine.handle(req('DEL', 'rb', chain)), '');
    assert.equal(plugins.of('DEL').length, dels, 'nothing ran again');
    assert.equal(await counterValue(metrics.coalescedDels, { how: 'tombstone' }), 2);
  });
});

describe('operator re-arm of abandoned steps (stewardd retry --abandoned)', () => {
  test('every abandoned step is re-armed due now, its attachment reopened and its tombstone forgotten', async () => {
    const clock = { t: 5_000_000 };
    const { engine, plugins, store } = setup({
      now: () => clock.t,
      store: new Store(':memory:', () => clock.t),
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 1, maxAgeMs: 3_600_000 },
    });
    const one = conf([{ type: 'one' }]);
    failDel(plugins, 'one', () => new CniError(11, 'stuck'));
    for (const id of ['ra', 'rb']) {
      await engine.handle(req('ADD', id, one));
      assert.equal(await engine.handle(req('DEL', id, one)), '');
    }
    const [a, b] = ['ra', 'rb'].map((id) => store.currentAttachment({ containerId: id, ...KEY })!);
    assert.equal(store.getAttachment(a!.id)!.state, 'deleted', 'abandoned at its only attempt');
    assert.equal(engine.isTombstoned({ containerId: 'ra', ...KEY }), true);
    assert.equal(engine.isTombstoned({ containerId: 'nobody', ...KEY }), false);
    const before = plugins.of('DEL').length;
    assert.equal(await engine.handle(req('DEL', 'ra', one)), '');
    assert.equal(plugins.of('DEL').length, before, 'answered from the tombstone');

    assert.deepEqual(
      await engine.rearmAbandoned(),
      { rearmed: 2, skipped: 0 },
      'one step in each of the two attachments',
    );
    for (const x of [a!, b!]) {
      assert.equal(store.getAttachment(x.id)!.state, 'deleting');
      const [st] = store.stepsOf(x.id);
      assert.equal(st!.state, 'del_failed');
      assert.ok(st!.nextAttemptAt! <= clock.t, 'due now');
    }
    assert.equal(engine.isTombstoned({ containerId: 'ra', ...KEY }), false);

    // The runtime's next DEL reaches the journal and runs the re-armed step, which now succeeds.
    plugins.on('one', () => undefined);
    assert.equal(await engine.handle(req('DEL', 'ra', one)), '');
    assert.deepEqual(plugins.of('DEL').slice(before), ['DEL one ra']);
    assert.equal(store.getAttachment(a!.id)!.state, 'deleted');
    assert.deepEqual(await engine.rearmAbandoned(), { rearmed: 0, skipped: 0 }, 'nothing abandoned is left to re-arm');
  });

  test('an attachment pruned while the re-arm waits in an earlier container’s queue is skipped', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 1, maxAgeMs: 3_600_000 },
    });
    const one = conf([{ type: 'one' }]);
    failDel(plugins, 'one', () => new CniError(11, 'stuck'));
    for (const id of ['pa', 'pb']) {
      await engine.handle(req('ADD', id, one));
      await engine.handle(req('DEL', id, one));
    }
    assert.equal(store.abandonedAttachmentIds().length, 2);
    // An ADD of pa on another interface keeps pa's queue busy until `slow` is released.
    const slow = deferred();
    plugins.on('slow', async () => {
      await slow.promise;
      return { cniVersion: '1.0.0' };
    });
    const add = engine.handle(req('ADD', 'pa', conf([{ type: 'slow' }]), { ifname: 'eth1' }));
    while (!plugins.of('ADD').includes('ADD slow pa')) await new Promise((r) => setImmediate(r));
    const rearmed = engine.rearmAbandoned();
    // Meanwhile a scheduler tick prunes both tombstones, abandoned steps and all.
    assert.equal(store.pruneTombstones(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), 2);
    slow.resolve();
    await add;
    assert.deepEqual(
      await rearmed,
      { rearmed: 0, skipped: 0 },
      'nothing is left to re-arm, and pb, gone when its turn came, is skipped',
    );
  });
});

describe('operator re-arm when the container was added again', () => {
  test('an abandoned attachment whose container is added again on the same key is left abandoned until the newer one is deleted', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 1, maxAgeMs: 3_600_000 },
    });
    const one = conf([{ type: 'one' }]);
    let stuck = true;
    plugins.on('one', (c) => {
      if (c.command === 'ADD') return { cniVersion: '1.0.0' };
      if (stuck) throw new CniError(11, 'stuck');
      return undefined;
    });
    await engine.handle(req('ADD', 'again', one));
    assert.equal(await engine.handle(req('DEL', 'again', one)), '');
    const old = store.currentAttachment({ containerId: 'again', ...KEY })!;
    assert.deepEqual(
      store.stepsOf(old.id).map((st) => st.state),
      ['abandoned'],
    );
    // The runtime adds the same container id again (podman restart): a newer attachment, added.
    stuck = false;
    await engine.handle(req('ADD', 'again', one));
    const newer = store.currentAttachment({ containerId: 'again', ...KEY })!;
    assert.notEqual(newer.id, old.id);
    assert.equal(newer.state, 'added');
    const dels = plugins.of('DEL').length;

    assert.deepEqual(await engine.rearmAbandoned(), { rearmed: 0, skipped: 1 });
    assert.deepEqual(
      store.stepsOf(old.id).map((st) => st.state),
      ['abandoned'],
      'left abandoned',
    );
    assert.equal(plugins.of('DEL').length, dels, "no DEL ran with the container's id and interface");
    assert.equal(store.getAttachment(newer.id)!.state, 'added');

    // Once the newer attachment is deleted, the old steps can be retried.
    await engine.handle(req('DEL', 'again', one));
    assert.equal(store.getAttachment(newer.id)!.state, 'deleted');
    assert.deepEqual(await engine.rearmAbandoned(), { rearmed: 1, skipped: 0 });
    assert.deepEqual(
      store.stepsOf(old.id).map((st) => st.state),
      ['del_failed'],
    );
  });
});

describe('teardown: which failing steps hold the steps before them', () => {
  const HOLD = { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 10, maxAgeMs: 3_600_000, holdMaxAttempts: 2 };

  test('a confirmed step holding an earlier one is abandoned after holdMaxAttempts, then the earlier one runs', async () => {
    const { engine, plugins, store } = setup({ retry: HOLD });
    await engine.handle(req('ADD', 'h1', chain));
    failDel(plugins, 'two', () => new CniError(11, 'two is stuck'));
    await engine.handle(req('DEL', 'h1', chain));
    const a = store.currentAttachment({ containerId: 'h1', ...KEY })!;
    assert.deepEqual(await engine.runTeardown(a.id, Priority.Background, { force: true }), {
      done: true,
      abandoned: 1,
    });
    assert.deepEqual(plugins.of('DEL'), ['DEL two h1', 'DEL two h1', 'DEL one h1']);
    assert.deepEqual(
      store.stepsOf(a.id).map((st) => [st.state, st.attempts]),
      [
        ['deleted', 1],
        ['abandoned', 2],
      ],
    );
  });

  test('a failing step with nothing left before it holds nothing: it gets every attempt of maxAttempts', async () => {
    const { engine, plugins, store } = setup({ retry: HOLD });
    await engine.handle(req('ADD', 'h2', chain));
    failDel(plugins, 'one', () => new CniError(11, 'one is stuck'));
    await engine.handle(req('DEL', 'h2', chain));
    const a = store.currentAttachment({ containerId: 'h2', ...KEY })!;
    for (let i = 0; i < 2; i++) await engine.runTeardown(a.id, Priority.Background, { force: true });
    const [one, two] = store.stepsOf(a.id);
    assert.equal(two!.state, 'deleted');
    assert.deepEqual([one!.state, one!.attempts], ['del_failed', 3], 'past holdMaxAttempts, still retried');
  });

  test('a step whose ADD never succeeded holds nothing: the steps before it run, and it keeps every attempt', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({ retry: HOLD, now: () => clock.t });
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(222, 'two refuses');
      throw new CniError(11, 'two DEL busy');
    });
    let oneDels = 0;
    plugins.on('one', (c) => {
      if (c.command === 'DEL' && ++oneDels <= 3) throw new CniError(11, 'one DEL busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await assert.rejects(engine.handle(req('ADD', 'h3', chain)));
    await engine.idle('h3'); // the rollback: both DELs fail
    const a = store.currentAttachment({ containerId: 'h3', ...KEY })!;
    for (let i = 0; i < 2; i++) await engine.runTeardown(a.id, Priority.Background, { force: true });
    const [one, two] = store.stepsOf(a.id);
    assert.deepEqual(
      [two!.state, two!.attempts],
      ['del_failed', 3],
      'an unconfirmed step is not bound by holdMaxAttempts',
    );
    assert.deepEqual([one!.state, one!.attempts], ['del_failed', 3]);

    // Not yet due, the unconfirmed step is skipped and the step before it, due, still runs.
    store.setStepDelFailed(two!.id, 'two DEL busy', clock.t + 3_600_000);
    store.setStepDelFailed(one!.id, 'one DEL busy', clock.t);
    const before = plugins.of('DEL').length;
    const outcome = await engine.runTeardown(a.id, Priority.Background);
    assert.deepEqual(plugins.of('DEL').slice(before), ['DEL one h3']);
    assert.equal(outcome.done, false);
    assert.deepEqual(
      store.stepsOf(a.id).map((st) => st.state),
      ['deleted', 'del_failed'],
    );
  });

  test('an abandoned step is never DELed again while the attachment’s other delegate is still torn down', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({
      now: () => clock.t,
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 2, maxAgeMs: 3_600_000 },
    });
    const two = conf([], '1.0.0', [
      { name: 'pod', type: 'one' },
      { name: 'side', type: 'three' },
    ]);
    await engine.handle(req('ADD', 'ab2', two));
    failDel(plugins, 'three', () => new CniError(11, 'three is stuck'));
    failDel(plugins, 'one', () => new CniError(11, 'one is busy'));
    await engine.handle(req('DEL', 'ab2', two));
    const a = store.currentAttachment({ containerId: 'ab2', ...KEY })!;
    const [one] = store.stepsOf(a.id);
    store.setStepDelFailed(one!.id, 'one is busy', clock.t + 3_600_000);
    clock.t += 10_000; // three is due, one is not
    const second = await engine.runTeardown(a.id, Priority.Background);
    assert.equal(second.done, false);
    assert.deepEqual(
      store.stepsOf(a.id).map((st) => st.state),
      ['del_failed', 'abandoned'],
    );
    plugins.on('one', () => undefined);
    assert.deepEqual(await engine.runTeardown(a.id, Priority.Background, { force: true }), { done: true });
    assert.deepEqual(plugins.of('DEL'), ['DEL three ab2', 'DEL one ab2', 'DEL three ab2', 'DEL one ab2']);
  });
});

describe('teardown: what each failure journals', () => {
  test('the second failure of a step waits twice the base delay (+-20%)', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({ now: () => clock.t });
    await engine.handle(req('ADD', 'b2', chain));
    failDel(plugins, 'two', () => new CniError(11, 'busy'));
    await engine.handle(req('DEL', 'b2', chain));
    const a = store.currentAttachment({ containerId: 'b2', ...KEY })!;
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    const two = store.stepsOf(a.id)[1]!;
    assert.equal(two.attempts, 2);
    const delay = two.nextAttemptAt! - clock.t;
    assert.ok(delay >= 1600 && delay <= 2400, `second retry after ~2 s, got ${delay}`);
  });

  test('an uncoded plugin failure repeated byte for byte is permanent, silently: abandoned at the hold bound, not the third DEL', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 10, maxAgeMs: 3_600_000, holdMaxAttempts: 5 },
    });
    await engine.handle(req('ADD', 'unc', chain));
    failDel(plugins, 'one', () => new CniError(100, 'plugin one exited with status 1 without a CNI error'));
    await engine.handle(req('DEL', 'unc', chain));
    const a = store.currentAttachment({ containerId: 'unc', ...KEY })!;
    for (let i = 0; i < 3; i++) await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[0]!.state, 'del_failed', 'four DELs: still retried');
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(store.stepsOf(a.id)[0]!.state, 'abandoned');
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });

  test('each DEL’s plugin process is journaled on its step while it runs; the attachment is busy only meanwhile', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'pp', chain));
    const a = store.currentAttachment({ containerId: 'pp', ...KEY })!;
    const seen: Array<[string, number, boolean]> = [];
    plugins.on('two', (c) => {
      if (c.command !== 'DEL') return { cniVersion: '1.0.0' };
      c.onStart?.({ pid: 4242, startTime: 77, bootId: 'b', pidNamespace: 'pidns' });
      const running = store.runningStepProcesses();
      seen.push([running[0]!.pluginType, running[0]!.process.pid, engine.isBusy(a.id)]);
      return undefined;
    });
    await engine.handle(req('DEL', 'pp', chain));
    assert.deepEqual(seen, [['two', 4242, true]]);
    assert.equal(engine.isBusy(a.id), false, 'no longer busy once its teardown is over');
  });
});

describe('teardown: pending time and repeated failures', () => {
  test('a step first DELed long after the daemon started has been pending only since that DEL', async () => {
    const clock = { t: 1_000_000 };
    const { engine, plugins, store } = setup({
      now: () => clock.t,
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 10, maxAgeMs: 60_000 },
    });
    clock.t += 2 * 3_600_000; // the daemon has run two hours
    await engine.handle(req('ADD', 'late', chain));
    failDel(plugins, 'two', () => new CniError(11, 'busy'));
    await engine.handle(req('DEL', 'late', chain));
    const a = store.currentAttachment({ containerId: 'late', ...KEY })!;
    const two = store.stepsOf(a.id)[1]!;
    assert.equal(two.state, 'del_failed', 'not abandoned: it has been pending for no time, not two hours');
    assert.ok(two.pendingMs < 60_000);
  });

  test('a failing teardown marks its attachment deleting once: its age is not reset by each failure or retry', async () => {
    // The oldest pending teardown (status, metrics) is the oldest updated_at of a deleting attachment.
    const clock = { t: 1000 };
    const { engine, plugins, store } = setup({ now: () => clock.t, store: new Store(':memory:', () => clock.t) });
    const one = conf([{ type: 'one' }]);
    await engine.handle(req('ADD', 'age', one));
    plugins.on('one', () => {
      clock.t += 3000; // the DEL takes 3 s, then fails
      throw new CniError(11, 'busy');
    });
    clock.t = 2000;
    assert.equal(await engine.handle(req('DEL', 'age', one)), '');
    const a = store.currentAttachment({ containerId: 'age', ...KEY })!;
    const since = () => {
      const now = store.getAttachment(a.id)!;
      return [now.state, now.updatedAt, store.oldestPendingTeardownAt()];
    };
    assert.deepEqual(since(), ['deleting', 2000, 2000], 'pending since the teardown began, not since its DEL failed');
    clock.t = 20_000;
    assert.equal((await engine.runTeardown(a.id, Priority.Background, { force: true })).done, false);
    assert.equal(plugins.of('DEL').length, 2, 'retried');
    assert.deepEqual(since(), ['deleting', 2000, 2000], 'a retry keeps the age too');
  });

  test('a DEL cut off midway does not count as a repeat of the uncoded failure before it', async () => {
    const { engine, plugins, store } = setup({
      retry: { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 10, maxAgeMs: 3_600_000 },
    });
    const one = conf([{ type: 'one' }]);
    await engine.handle(req('ADD', 'cutdel', one));
    failDel(plugins, 'one', () => new CniError(100, 'plugin one exited with status 1 without a CNI error'));
    await engine.handle(req('DEL', 'cutdel', one));
    const a = store.currentAttachment({ containerId: 'cutdel', ...KEY })!;
    await engine.runTeardown(a.id, Priority.Background, { force: true });
    const [step] = store.stepsOf(a.id);
    assert.deepEqual([step!.state, step!.attempts], ['del_failed', 2]);
    // The next DEL was cut off (the daemon died): the step is left deleting, its last error kept.
    store.setStepDeleting(step!.id);
    await engine.reclaimUnfinished(a.id);
    const [after] = store.stepsOf(a.id);
    assert.deepEqual(
      [after!.state, after!.attempts],
      ['del_failed', 3],
      'the unknown outcome in between breaks the repeat',
    );
  });
});

describe('teardown: planned steps', () => {
  test('a planned step of an attachment from an earlier boot is DELed (its commit may have been lost); of this boot, skipped', async () => {
    const store = new Store(':memory:');
    const before = setup({ store, bootId: 'boot-0' });
    await before.engine.handle(req('ADD', 'pl', chain));
    const a = store.currentAttachment({ containerId: 'pl', ...KEY })!;
    const two = store.stepsOf(a.id)[1]!;
    store.setStepState(two.id, 'planned');
    store.setAttachmentState(a.id, 'adding');
    const same = setup({ store, bootId: 'boot-0' });
    const other = setup({ store, bootId: 'boot-1' });
    // A copy for the same boot: the same rows, a second attachment.
    const b = store.atomic(() => {
      const b = store.createAttachment({ ...a, containerId: 'pl2' }, 'adding');
      for (const st of store.stepsOf(a.id)) {
        const c = store.insertStep({ ...st, attachmentId: b.id }, st.state === 'planned' ? 'planned' : 'adding');
        if (st.state !== 'planned') store.setStepAdded(c.id, st.result!);
      }
      return b;
    });
    await same.engine.runTeardown(b.id, Priority.Background, { force: true });
    assert.deepEqual(same.plugins.of('DEL'), ['DEL one pl2'], 'this boot: the planned step never ran');
    await other.engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.deepEqual(other.plugins.of('DEL'), ['DEL two pl', 'DEL one pl'], 'another boot: DELed too');
  });
});

describe('foundTaken: a step whose ADD failed on an interface of its name that was there (its DEL runs without the netns)', () => {
  const step = (ifname: string, result: string | null = null) => ({ ifname, result }) as unknown as Step;
  test("the reference plugins' words for it, naming the step's interface, on a step whose ADD never succeeded", () => {
    for (const msg of [
      'container veth name provided (eth0) already exists',
      'failed to rename macvlan to "eth0": file exists',
      'failed to rename ipvlan to "eth0": file exists',
      'failed to rename vlan to "eth0": file exists',
      'failed to move link failed to rename device "ens5" to "eth0": file exists',
    ])
      assert.equal(foundTaken(step('eth0'), msg), true, msg);
  });
  test('not for another interface, a confirmed step, no error, or other words', () => {
    assert.equal(foundTaken(step('net1'), 'container veth name provided (eth0) already exists'), false);
    assert.equal(foundTaken(step('net1'), 'failed to rename macvlan to "eth0": file exists'), false);
    assert.equal(foundTaken(step('eth0', '{}'), 'container veth name provided (eth0) already exists'), false);
    assert.equal(foundTaken(step('eth0'), null), false);
    assert.equal(foundTaken(step('eth0'), 'failed to rename bond to "eth0": file exists'), false);
    assert.equal(foundTaken(step('eth0'), 'mkdir /var/lib/cni/networks/x: file exists'), false);
  });
});
