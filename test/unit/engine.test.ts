// The engine's logic without root: a real Store on an in-memory SQLite database and a fake plugin
// runner that records every call and fails or waits on cue. /proc/self/ns/net is a network
// namespace any user can name, so ADD's netns check passes without creating one.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { Priority } from '../../daemon/src/engine/limiter.js';
import { recover } from '../../daemon/src/engine/recovery.js';
import { Store } from '../../daemon/src/store/store.js';
import { conf, deferred, NETNS, req, setup, silentLog as log } from '../helpers/engine-fakes.js';
import { captureLog } from '../helpers/log-capture.js';

const chain = conf([{ type: 'one' }, { type: 'two' }, { type: 'three' }]);

describe('engine: ADD and rollback', () => {
  test('runs the chain in order, each plugin given the previous result, and journals every step added', async () => {
    const { engine, plugins, store } = setup();
    const out = JSON.parse(await engine.handle(req('ADD', 'c1', chain)));
    assert.deepEqual(plugins.of('ADD'), ['ADD one c1', 'ADD two c1', 'ADD three c1']);
    assert.equal(plugins.stdins[0]!.prevResult, undefined);
    assert.equal((plugins.stdins[1]!.prevResult as { cniVersion: string }).cniVersion, '1.0.0');
    assert.equal(out.cniVersion, '1.0.0');
    const a = store.currentAttachment({ containerId: 'c1', network: 'net', ifname: 'eth0' })!;
    assert.equal(a.state, 'added');
    assert.deepEqual(
      store.stepsOf(a.id).map((s) => s.state),
      ['added', 'added', 'added'],
    );
  });

  test('a failing step rolls back every started step in reverse and returns the original error', async () => {
    const { engine, plugins, store } = setup();
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(222, 'two refuses');
    });
    await assert.rejects(
      engine.handle(req('ADD', 'c2', chain)),
      (e: CniError) => e.code === 222 && e.message === 'two refuses',
    );
    const failed = store.currentAttachment({ containerId: 'c2', network: 'net', ifname: 'eth0' })!;
    assert.deepEqual(
      store.stepsOf(failed.id).map((st) => [st.pluginType, st.state, st.error]),
      [
        ['one', 'added', null],
        ['two', 'add_failed', 'two refuses'],
        ['three', 'planned', null],
      ],
      'as journaled when the answer leaves, before the rollback',
    );
    await engine.idle('c2'); // the rollback runs after the answer
    assert.deepEqual(
      plugins.of('DEL'),
      ['DEL two c2', 'DEL one c2'],
      'the failed step and the one before it, in reverse; three never ran',
    );
    const a = store.currentAttachment({ containerId: 'c2', network: 'net', ifname: 'eth0' })!;
    assert.equal(a.state, 'deleted');
    assert.equal(a.error, 'two refuses');
  });

  test('a rollback DEL that fails on a confirmed step leaves a teardown the scheduler can retry', async () => {
    const { engine, plugins, store } = setup();
    let oneDels = 0;
    plugins.on('one', (c) => {
      if (c.command === 'DEL' && ++oneDels === 1) throw new CniError(11, 'one is busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0', ips: [] } : undefined;
    });
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(222, 'two refuses');
    });
    await assert.rejects(engine.handle(req('ADD', 'c3', chain)), (e: CniError) => e.code === 222);
    await engine.idle('c3'); // the rollback runs after the answer
    const a = store.currentAttachment({ containerId: 'c3', network: 'net', ifname: 'eth0' })!;
    assert.equal(a.state, 'deleting');
    const [failed] = store.pendingTeardownSteps();
    assert.equal(failed!.pluginType, 'one');
    assert.equal(failed!.state, 'del_failed');
    assert.ok((failed!.nextAttemptAt ?? 0) > Date.now(), 'scheduled with backoff');
    assert.deepEqual(store.dueAttachmentIds(Date.now() + 10_000), [a.id]);
    const outcome = await engine.runTeardown(a.id, Priority.Background, { force: true });
    assert.equal(outcome.done, true);
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });

  test('a step whose ADD failed and whose DEL fails does not hold back the DEL of the steps before it', async () => {
    const { engine, plugins, store } = setup();
    plugins.on('three', (c) => {
      throw new CniError(11, `three cannot ${c.command}`);
    });
    await assert.rejects(engine.handle(req('ADD', 'c4', chain)));
    await engine.idle('c4'); // the rollback runs after the answer
    assert.deepEqual(plugins.of('DEL'), ['DEL three c4', 'DEL two c4', 'DEL one c4']);
    const a = store.currentAttachment({ containerId: 'c4', network: 'net', ifname: 'eth0' })!;
    assert.deepEqual(
      store.stepsOf(a.id).map((s) => s.state),
      ['deleted', 'deleted', 'del_failed'],
    );
  });

  test('a repeated identical ADD is answered from the journal; a different one is a conflict (102)', async () => {
    const { engine, plugins } = setup();
    const first = await engine.handle(req('ADD', 'c5', chain));
    assert.equal(await engine.handle(req('ADD', 'c5', chain)), first);
    assert.equal(plugins.of('ADD').length, 3, 'no plugin ran the second time');
    await assert.rejects(engine.handle(req('ADD', 'c5', conf([{ type: 'one' }]))), (e: CniError) => e.code === 102);
  });
});

describe('engine: DEL coalescing and tombstones', () => {
  test('concurrent identical DELs run each plugin once; later ones are answered from the tombstone', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'd1', chain));
    const gate = deferred();
    plugins.on('three', async (c) => {
      if (c.command === 'DEL') await gate.promise;
    });
    const storm = Array.from({ length: 20 }, () => engine.handle(req('DEL', 'd1', chain)));
    await new Promise((r) => setImmediate(r));
    gate.resolve();
    assert.deepEqual(await Promise.all(storm), Array(20).fill(''));
    assert.deepEqual(plugins.of('DEL'), ['DEL three d1', 'DEL two d1', 'DEL one d1']);
    await engine.handle(req('DEL', 'd1', chain));
    assert.equal(plugins.of('DEL').length, 3, 'a tombstone answered without running anything');
  });

  test('a DEL that arrives while an ADD is queued waits for it and tears down what it added', async () => {
    const { engine, plugins, store } = setup();
    const gate = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'ADD') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0', ips: [] } : undefined;
    });
    const add = engine.handle(req('ADD', 'd2', chain));
    const del = engine.handle(req('DEL', 'd2', chain));
    gate.resolve();
    await add;
    assert.equal(await del, '');
    assert.deepEqual(
      plugins.calls.map((c) => c.split(' ')[0]),
      ['ADD', 'ADD', 'ADD', 'DEL', 'DEL', 'DEL'],
    );
    await engine.idle('c5'); // the rollback runs after the answer
    assert.equal(store.currentAttachment({ containerId: 'd2', network: 'net', ifname: 'eth0' })!.state, 'deleted');
  });

  test('a DEL of an attachment never added passes through once, errors ignored, then a tombstone', async () => {
    const { engine, plugins } = setup();
    plugins.on('two', () => {
      throw new CniError(7, 'server_socket is required');
    });
    assert.equal(await engine.handle(req('DEL', 'never', chain)), '');
    assert.equal(await engine.handle(req('DEL', 'never', chain)), '');
    assert.deepEqual(plugins.of('DEL'), ['DEL three never', 'DEL two never', 'DEL one never']);
  });
});

describe('engine: scheduling', () => {
  test('with one plugin slot, a queued ADD runs before queued background teardowns', async () => {
    const { engine, plugins, store } = setup({ maxParallel: 1 });
    const single = conf([{ type: 'one' }]);
    for (const id of ['bg1', 'bg2', 'bg3']) await engine.handle(req('ADD', id, single));
    const ids = ['bg1', 'bg2', 'bg3'].map(
      (id) => store.currentAttachment({ containerId: id, network: 'net', ifname: 'eth0' })!.id,
    );
    const hold = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'DEL' && c.containerId === 'bg1') await hold.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const background = ids.map((id) => engine.runTeardown(id, Priority.Background, { force: true }));
    await new Promise((r) => setImmediate(r));
    const add = engine.handle(req('ADD', 'urgent', single));
    await new Promise((r) => setImmediate(r));
    hold.resolve();
    await Promise.all([add, ...background]);
    const order = plugins.calls.slice(3).map((c) => c.split(' ').slice(0, 3).join(' '));
    assert.deepEqual(order.slice(0, 2), ['DEL one bg1', 'ADD one urgent'], 'the ADD took the first free slot');
  });
});

describe('recovery at start', () => {
  test("rolls back cut-off ADDs, resumes cut-off teardowns, sweeps an earlier boot with an empty netns, and leaves this boot's attachments alone", async () => {
    const store = new Store(':memory:');
    const before = setup({ store, bootId: 'boot-0' });
    await before.engine.handle(req('ADD', 'old-boot', chain));
    const now = setup({ store, bootId: 'boot-1' });
    await now.engine.handle(req('ADD', 'this-boot', chain));
    // Journal states a kill -9 leaves behind, written as the engine writes them.
    const cut = store.atomic(() => {
      const a = store.createAttachment({
        containerId: 'cut-add',
        network: 'net',
        ifname: 'eth0',
        netns: NETNS,
        cniArgs: '',
        cniPath: '/fake',
        cniVersion: '1.0.0',
        bootId: 'boot-1',
        config: JSON.stringify(chain),
      });
      store.insertStep({
        attachmentId: a.id,
        seq: 0,
        delegateIndex: 0,
        delegateName: 'pod',
        ifname: 'eth0',
        pluginIndex: 0,
        pluginType: 'one',
        config: JSON.stringify({ type: 'one', name: 'pod', cniVersion: '1.0.0' }),
      });
      return a;
    });
    await now.engine.handle(req('ADD', 'cut-del', chain));
    const cutDel = store.currentAttachment({ containerId: 'cut-del', network: 'net', ifname: 'eth0' })!;
    store.atomic(() => {
      store.setAttachmentState(cutDel.id, 'deleting');
      store.setStepDeleting(store.stepsOf(cutDel.id)[2]!.id);
    });

    const fresh = setup({ store, bootId: 'boot-1' });
    const report = await recover(fresh.engine, 'boot-1', log);
    assert.deepEqual(
      { stale: report.staleBoot, rolledBack: report.rolledBack, resumed: report.resumed },
      { stale: 1, rolledBack: 1, resumed: 1 },
    );
    assert.equal(store.getAttachment(cut.id)!.state, 'deleted');
    assert.equal(store.currentAttachment({ containerId: 'cut-del', network: 'net', ifname: 'eth0' })!.state, 'deleted');
    assert.equal(
      store.currentAttachment({ containerId: 'old-boot', network: 'net', ifname: 'eth0' })!.state,
      'deleted',
    );
    assert.equal(store.currentAttachment({ containerId: 'this-boot', network: 'net', ifname: 'eth0' })!.state, 'added');
    assert.equal(
      fresh.plugins.calls.some((c) => c.endsWith(' this-boot')),
      false,
      'nothing ran for the live attachment',
    );
    assert.deepEqual(
      fresh.plugins.of('DEL').filter((c) => c.endsWith(' old-boot')),
      ['DEL three old-boot', 'DEL two old-boot', 'DEL one old-boot'],
    );
  });
});

describe('cut-off journals while running', () => {
  test('an ADD whose journal write fails after a plugin succeeded answers 11, and reclaimUnfinished rolls it back once writes work', async () => {
    const store = new Store(':memory:');
    const { engine, plugins } = setup({ store });
    // The disk refuses exactly the write that records step two's result, and the rollback's first write.
    const realAdded = store.setStepAdded.bind(store);
    let failWrites = false;
    store.setStepAdded = (id, result) => {
      if (store.getStep(id)!.pluginType === 'two') failWrites = true;
      if (failWrites) throw new CniError(11, 'disk full');
      realAdded(id, result);
    };
    const realAttachmentState = store.setAttachmentState.bind(store);
    store.setAttachmentState = (id, state) => {
      if (failWrites) throw new CniError(11, 'disk full');
      realAttachmentState(id, state);
    };
    const realError = store.setAttachmentError.bind(store);
    store.setAttachmentError = (id, e) => {
      if (failWrites) throw new CniError(11, 'disk full');
      realError(id, e);
    };
    await assert.rejects(engine.handle(req('ADD', 'full', chain)), (e: CniError) => e.code === 11);
    const a = store.currentAttachment({ containerId: 'full', network: 'net', ifname: 'eth0' })!;
    assert.equal(a.state, 'adding', 'the journal still says what may be held');
    assert.equal(engine.isBusy(a.id), false);
    assert.deepEqual(store.unfinishedAttachmentIds(), [a.id]);
    await assert.rejects(
      engine.handle(req('ADD', 'full', chain)),
      (e: CniError) => e.code === 11,
      'a re-ADD meanwhile: 11, not 102',
    );
    await engine.idle('full'); // the rollback runs after the answer

    failWrites = false;
    assert.equal((await engine.reclaimUnfinished(a.id)).done, true);
    assert.deepEqual(plugins.of('DEL'), ['DEL two full', 'DEL one full']);
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
    assert.deepEqual(store.unfinishedAttachmentIds(), []);
  });

  test('reclaimUnfinished: a cut-off teardown keeps a failed step’s schedule, a cut-off ADD is rolled back in full', async () => {
    const clock = { t: 2_000_000 };
    const { engine, plugins, store } = setup({ now: () => clock.t });
    const two = conf([{ type: 'one' }, { type: 'two' }]);
    const KEY = { network: 'net', ifname: 'eth0' };
    await engine.handle(req('ADD', 'td', two));
    await engine.handle(req('ADD', 'ad', two));
    const td = store.currentAttachment({ containerId: 'td', ...KEY })!;
    const ad = store.currentAttachment({ containerId: 'ad', ...KEY })!;
    // Both: step one failed its DEL earlier and is due in a minute; step two's journal was cut off mid-DEL.
    for (const a of [td, ad]) {
      const [one, second] = store.stepsOf(a.id);
      store.setStepDelFailed(one!.id, 'busy', clock.t + 60_000);
      store.setStepDeleting(second!.id);
    }
    store.setAttachmentState(td.id, 'deleting');
    store.setAttachmentState(ad.id, 'adding');

    const resumed = await engine.reclaimUnfinished(td.id);
    assert.equal(resumed.done, false, 'the teardown resumes, and waits for step one’s retry');
    assert.equal(resumed.error!.code, 105);
    assert.deepEqual(plugins.of('DEL'), ['DEL two td']);
    assert.equal(store.stepsOf(td.id)[0]!.state, 'del_failed');

    assert.deepEqual(await engine.reclaimUnfinished(ad.id), { done: true }, 'a cut-off ADD is forced through');
    assert.deepEqual(plugins.of('DEL'), ['DEL two td', 'DEL two ad', 'DEL one ad']);
    assert.equal(store.getAttachment(ad.id)!.state, 'deleted');
  });

  test('reclaimUnfinished leaves a live ADD alone', async () => {
    const { engine, plugins, store } = setup();
    const gate = deferred();
    plugins.on('two', async (c) => {
      if (c.command === 'ADD') await gate.promise;
      return { cniVersion: '1.0.0' };
    });
    const add = engine.handle(req('ADD', 'live', chain));
    await new Promise((r) => setImmediate(r));
    const a = store.currentAttachment({ containerId: 'live', network: 'net', ifname: 'eth0' })!;
    assert.equal(engine.isBusy(a.id), true);
    const reclaim = engine.reclaimUnfinished(a.id);
    gate.resolve();
    await add;
    assert.equal((await reclaim).done, true);
    assert.equal(store.getAttachment(a.id)!.state, 'added', 'checked again inside the queue: not cut off');
    assert.equal(plugins.of('DEL').length, 0);
  });
});

describe('engine: an ADD nobody waits for', () => {
  test('one whose requester is already gone is not started: 11, nothing journaled or run', async () => {
    const { engine, plugins, store } = setup();
    await assert.rejects(
      engine.handle(req('ADD', 'gone', chain), () => true),
      (e: CniError) =>
        e.code === 11 &&
        e.message ===
          "the ADD's requester closed its connection before the answer (its bound passed while the ADD waited or ran); nothing was run",
    );
    assert.equal(plugins.calls.length, 0);
    assert.equal(store.currentAttachment({ containerId: 'gone', network: 'net', ifname: 'eth0' }), undefined);
  });

  test('one whose requester left while it ran is rolled back like a failed one', async () => {
    const { engine, plugins, store } = setup();
    let gone = false;
    plugins.on('three', (c) => {
      if (c.command === 'ADD') gone = true;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await assert.rejects(
      engine.handle(req('ADD', 'left', chain), () => gone),
      (e: CniError) => e.code === 11 && /; every started step is rolled back$/.test(e.message),
    );
    await engine.idle('left');
    assert.deepEqual(plugins.of('DEL'), ['DEL three left', 'DEL two left', 'DEL one left']);
    assert.equal(store.currentAttachment({ containerId: 'left', network: 'net', ifname: 'eth0' })!.state, 'deleted');
  });

  test('each plugin is given what is left of the answer budget (the netconf’s timeouts.add less the margin)', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'budget', { ...chain, timeouts: { add: 30_000 } }));
    const budgets = plugins.callsOf('ADD').map((c) => c.budgetMs!);
    assert.equal(budgets.length, 3);
    for (const b of budgets) assert.ok(b > 15_000 && b <= 25_000, `budget ${b} ms of 25000`);
    assert.ok(budgets[0]! >= budgets[2]!, 'later plugins get what is left');
  });

  test('while a failed ADD is rolled back, its attachment is busy (not mistaken for a cut-off one)', async () => {
    const { engine, plugins, store } = setup();
    const gate = deferred();
    plugins.on('two', async (c) => {
      if (c.command === 'ADD') throw new CniError(11, 'two refuses');
      await gate.promise;
      return undefined;
    });
    await assert.rejects(engine.handle(req('ADD', 'rbk', chain)));
    const a = store.currentAttachment({ containerId: 'rbk', network: 'net', ifname: 'eth0' })!;
    assert.equal(engine.isBusy(a.id), true, 'answered, its rollback not started yet: still busy');
    for (let i = 0; i < 50 && plugins.of('DEL').length === 0; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(plugins.of('DEL'), ['DEL two rbk'], 'the rollback is under way');
    assert.equal(engine.isBusy(a.id), true);
    gate.resolve();
    await engine.idle('rbk');
    assert.equal(engine.isBusy(a.id), false);
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });
});

describe('engine: ADDs and CHECKs in flight (admission)', () => {
  test('hasAddOrCheck holds while any ADD or CHECK of the container is queued or running', async () => {
    const { engine, plugins } = setup();
    const gate = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'ADD' && c.containerId === 'busy') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    assert.equal(engine.hasAddOrCheck('busy'), false);
    const add = engine.handle(req('ADD', 'busy', chain));
    const again = engine.handle(req('ADD', 'busy', chain));
    assert.equal(engine.hasAddOrCheck('busy'), true);
    assert.equal(engine.hasAddOrCheck('other'), false);
    gate.resolve();
    await add;
    assert.equal(engine.hasAddOrCheck('busy'), true, 'the repeated ADD is still queued');
    await again;
    await new Promise((r) => setImmediate(r));
    assert.equal(engine.hasAddOrCheck('busy'), false);
    const check = engine.handle(req('CHECK', 'busy', chain));
    assert.equal(engine.hasAddOrCheck('busy'), true);
    await check;
    await new Promise((r) => setImmediate(r));
    assert.equal(engine.hasAddOrCheck('busy'), false);
  });

  test('the wait in a container’s queue is measured in seconds', async () => {
    const { engine, plugins, metrics } = setup();
    const gate = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'ADD') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const first = engine.handle(req('ADD', 'q', chain));
    const second = engine.handle(req('DEL', 'q', chain));
    await new Promise((r) => setTimeout(r, 60));
    gate.resolve();
    await Promise.all([first, second]);
    const { values } = await metrics.queueWaitSeconds.get();
    const sum = values.find((v) => v.metricName === 'steward_queue_wait_seconds_sum')!.value;
    const count = values.find((v) => v.metricName === 'steward_queue_wait_seconds_count')!.value;
    assert.equal(count, 2);
    assert.ok(sum >= 0.05 && sum < 0.05 + performance.now() / 1000, `waited ~0.06 s in all, got ${sum}`);
  });
});

/** A logger whose rows (info and up) are kept, parsed; of() keeps each row's level. */
function capture() {
  const c = captureLog();
  return { log: c.log, rows: c.rows, of: c.withLevel };
}

describe('engine: what the log tells an operator', () => {
  test('a failed ADD’s rollback: "rolled back" when done, an error naming the failure when a DEL fails', async () => {
    const cap = capture();
    const { engine, plugins } = setup({ log: cap.log });
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(222, 'two refuses');
      if (c.containerId === 'stuck') throw new CniError(11, 'two DEL busy');
    });
    await assert.rejects(engine.handle(req('ADD', 'fine', chain)));
    await engine.idle('fine');
    assert.equal(cap.of('failed ADD rolled back').length, 1);
    assert.equal(cap.of('rollback incomplete; the failed step stays queued for retry').length, 0);
    await assert.rejects(engine.handle(req('ADD', 'stuck', chain)));
    await engine.idle('stuck');
    const [row] = cap.of('rollback incomplete; the failed step stays queued for retry');
    assert.equal(row?.err, 'two DEL busy');
    assert.equal(row?.level, 50);
    assert.equal(cap.of('failed ADD rolled back').length, 1, 'not said of the incomplete one');
  });

  test('a rollback whose journal write fails is logged as left to the scheduler', async () => {
    const cap = capture();
    const store = new Store(':memory:');
    const { engine, plugins } = setup({ log: cap.log, store });
    plugins.on('two', (c) => {
      if (c.command === 'ADD') throw new CniError(222, 'two refuses');
    });
    store.setAttachmentError = () => {
      throw new CniError(11, 'disk full');
    };
    await assert.rejects(engine.handle(req('ADD', 'full', chain)), (e: CniError) => e.code === 222);
    await engine.idle('full');
    assert.deepEqual(
      cap.of('rollback could not run; the retry scheduler reclaims it').map((r) => r.err),
      ['disk full'],
    );
  });

  test('a capability warning names network, delegate, plugin and capability', async () => {
    const cap = capture();
    const { engine } = setup({ log: cap.log });
    await engine.handle(req('ADD', 'cw', conf([{ type: 'one', capabilities: { bandwidth: true } }])));
    const rows = cap.rows.filter((r) => /declares capability "bandwidth"/.test(r.msg));
    assert.equal(rows.length, 1);
    const { network, delegate, plugin, capability } = rows[0]!;
    assert.deepEqual([network, delegate, plugin, capability], ['net', 'pod', 'one', 'bandwidth']);
  });

  test('a pass-through DEL: an unusable netconf and a failing plugin are warned about; no journal error is claimed', async () => {
    const cap = capture();
    const { engine, plugins } = setup({ log: cap.log });
    assert.equal(await engine.handle(req('DEL', 'u1', { name: 'net', cniVersion: '1.0.0' })), '');
    const [bad] = cap.of('DEL for an unknown attachment with an unusable netconf; nothing to run');
    assert.match(String(bad?.err), /invalid steward netconf/);
    plugins.on('two', () => {
      throw new CniError(11, 'two cannot');
    });
    assert.equal(await engine.handle(req('DEL', 'u2', chain)), '');
    assert.deepEqual(
      cap
        .of('pass-through DEL failed; ignored, since this attachment was never added through steward')
        .map((r) => [r.plugin, r.err]),
      [['two', 'two cannot']],
    );
    assert.deepEqual(plugins.of('DEL'), ['DEL three u2', 'DEL two u2', 'DEL one u2']);
    assert.equal(cap.rows.filter((r) => r.level >= 50).length, 0, 'nothing logged as an error');
  });

  test('GC names each attachment whose teardown it could not finish', async () => {
    const cap = capture();
    const { engine, plugins } = setup({ log: cap.log });
    const net = conf([{ type: 'one' }], '1.1.0');
    await engine.handle(req('ADD', 'gcf', net, { args: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web' }));
    await engine.handle(req('ADD', 'gcok', net));
    plugins.on('one', (c) => {
      if (c.command === 'DEL' && c.containerId === 'gcf') throw new CniError(11, 'one busy');
      return c.command === 'ADD' ? { cniVersion: '1.1.0' } : undefined;
    });
    assert.equal(await engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': [] })), '');
    assert.deepEqual(
      cap.of('GC teardown incomplete; queued for retry').map((r) => [r.containerId, r.err]),
      [['gcf', 'one busy']],
    );
  });
});
