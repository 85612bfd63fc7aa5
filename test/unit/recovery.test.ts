// Start-up recovery (engine/recovery.ts) as an operator reads it in the log: one "recovery finished"
// row with what was swept, rolled back and resumed, and an error row for each teardown that could
// not even run (its journal refused the write), left for the retry scheduler; start-up never stops
// on one. Root-free: in-memory store, fake plugins, a capturing logger.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { recover } from '../../daemon/src/engine/recovery.js';
import { Store } from '../../daemon/src/store/store.js';
import { conf, deferred, req, setup } from '../helpers/engine-fakes.js';
import { captureLog } from '../helpers/log-capture.js';

const KEY = { network: 'net', ifname: 'eth0' };
const chain = conf([{ type: 'one' }, { type: 'two' }]);

/** An attachment of boot-0, one left `adding` and one left `deleting`, all journaled by an earlier run. */
async function earlierRun(store: Store) {
  const before = setup({ store, bootId: 'boot-0' });
  await before.engine.handle(req('ADD', 'stale', chain));
  const now = setup({ store, bootId: 'boot-1' });
  await now.engine.handle(req('ADD', 'adding', chain));
  await now.engine.handle(req('ADD', 'deleting', chain));
  const adding = store.currentAttachment({ containerId: 'adding', ...KEY })!;
  const deleting = store.currentAttachment({ containerId: 'deleting', ...KEY })!;
  store.setAttachmentState(adding.id, 'adding');
  store.setAttachmentState(deleting.id, 'deleting');
  return {
    stale: store.currentAttachment({ containerId: 'stale', ...KEY })!.id,
    adding: adding.id,
    deleting: deleting.id,
  };
}

describe('recovery: what it logs', () => {
  test('one row says what was swept, rolled back and resumed; nothing is logged as an error when every teardown ran', async () => {
    const store = new Store(':memory:');
    const ids = await earlierRun(store);
    const now = setup({ store, bootId: 'boot-1' });
    const cap = captureLog();
    const report = await recover(now.engine, 'boot-1', cap.log);
    assert.deepEqual(report, { staleBoot: 1, rolledBack: 1, resumed: 1, notStarted: 0, couldNotRun: 0 });
    assert.deepEqual(cap.of('recovery finished'), [
      { staleBoot: 1, rolledBack: 1, resumed: 1, notStarted: 0, couldNotRun: 0 },
    ]);
    assert.deepEqual(
      cap.rows.filter((r) => r.level >= 50),
      [],
    );
    for (const id of Object.values(ids)) assert.equal(store.getAttachment(id)!.state, 'deleted');
  });

  test('a teardown whose journal refuses the write is logged and left journaled; recovery still finishes', async () => {
    const store = new Store(':memory:');
    const ids = await earlierRun(store);
    const now = setup({ store, bootId: 'boot-1' });
    store.setStepDeleting = () => {
      throw new Error('database or disk is full');
    };
    const cap = captureLog();
    const report = await recover(now.engine, 'boot-1', cap.log);
    assert.deepEqual(report, { staleBoot: 1, rolledBack: 1, resumed: 1, notStarted: 0, couldNotRun: 3 });
    const errors = cap.of('recovery teardown could not run; left for the retry scheduler');
    assert.equal(errors.length, 3, 'one per attachment');
    for (const e of errors) assert.match(String(e.err), /database or disk is full/);
    assert.equal(now.plugins.of('DEL').length, 0, 'no plugin ran without its journal row');
    assert.notEqual(store.getAttachment(ids.stale)!.state, 'deleted');
    assert.equal(store.getAttachment(ids.adding)!.state, 'adding');
    assert.equal(store.getAttachment(ids.deleting)!.state, 'deleting');
    assert.deepEqual(cap.of('recovery finished'), [
      { staleBoot: 1, rolledBack: 1, resumed: 1, notStarted: 0, couldNotRun: 3 },
    ]);
  });
});

describe('recovery: stopped (shutdown)', () => {
  test('stopped before its teardowns start: none runs, each is counted not started and stays journaled, and their containers are served', async () => {
    const store = new Store(':memory:');
    const ids = await earlierRun(store);
    const now = setup({ store, bootId: 'boot-1' });
    const cap = captureLog();
    const report = await recover(now.engine, 'boot-1', cap.log, () => true);
    assert.deepEqual(report, { staleBoot: 1, rolledBack: 1, resumed: 1, notStarted: 3, couldNotRun: 0 });
    assert.deepEqual(cap.of('recovery stopped before it finished; the rest runs at the next start'), [report]);
    assert.deepEqual(cap.of('recovery finished'), []);
    assert.equal(now.plugins.of('DEL').length, 0);
    assert.equal(store.getAttachment(ids.adding)!.state, 'adding');
    assert.equal(store.getAttachment(ids.deleting)!.state, 'deleting');
    // Queued and let go: the container's queue is not held by a teardown that will never start.
    await now.engine.handle(req('DEL', 'stale', chain));
    assert.equal(store.getAttachment(ids.stale)!.state, 'deleted');
  });

  test('stopped once the first teardown is done: that one counts as run, the rest as not started', async () => {
    const store = new Store(':memory:');
    await earlierRun(store);
    // --max-parallel 3: one slot for background work, so the pool starts one teardown at a time.
    const now = setup({ store, bootId: 'boot-1', maxParallel: 3 });
    const report = await recover(now.engine, 'boot-1', captureLog().log, () => now.plugins.of('DEL').length > 0);
    assert.equal(report.notStarted, 2);
    assert.equal(now.plugins.of('DEL').length, 2, "the first attachment's two steps, nothing of the others");
  });
});

describe('recovery: queued teardowns and GC', () => {
  test('teardowns waiting for their start hold only their containers: a GC that comes meanwhile runs, and so does every request after it', async () => {
    // The sweep's pool is one wide (--max-parallel 3); container a has two attachments, so its second
    // waits behind its first. Waiting inside the GC gate, b's and c's teardowns held it shared while
    // they waited for their start, the GC waited for them, a's second waited for the GC: no one moved.
    const store = new Store(':memory:');
    const gcConf = conf([{ type: 'one' }], '1.1.0');
    const before = setup({ store, bootId: 'boot-0' });
    await before.engine.handle(req('ADD', 'a', gcConf));
    await before.engine.handle(req('ADD', 'a', gcConf, { ifname: 'eth1' }));
    await before.engine.handle(req('ADD', 'b', gcConf));
    await before.engine.handle(req('ADD', 'c', gcConf));
    const now = setup({ store, bootId: 'boot-1', maxParallel: 3 });
    const held = deferred();
    now.plugins.on('one', (call) => {
      if (call.command === 'ADD') return { cniVersion: call.stdin.cniVersion, interfaces: [{ name: call.ifname }] };
      return call.command === 'DEL' && now.plugins.of('DEL').length === 1 ? held.promise : undefined;
    });
    const recovery = recover(now.engine, 'boot-1', captureLog().log);
    while (now.plugins.of('DEL').length === 0) await new Promise((r) => setImmediate(r));

    const valid = ['a', 'b', 'c'].map((containerID) => ({ containerID, ifname: 'eth0' }));
    valid.push({ containerID: 'a', ifname: 'eth1' });
    const gc = now.engine.handle(req('GC', '', { ...gcConf, 'cni.dev/valid-attachments': valid }));
    const add = now.engine.handle(req('ADD', 'fresh', gcConf));
    held.resolve();
    const settled = await Promise.race([
      Promise.all([recovery, gc, add]).then(() => 'all settled'),
      new Promise((r) => setTimeout(() => r('stuck'), 2000)),
    ]);
    assert.equal(settled, 'all settled');
    assert.equal(now.plugins.of('DEL').length, 4, 'every attachment of the old boot torn down');
    assert.equal(store.currentAttachment({ containerId: 'fresh', ...KEY })!.state, 'added');
  });
});
