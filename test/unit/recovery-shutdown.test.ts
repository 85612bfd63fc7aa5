// Start-up recovery stopped by shutdown while a teardown it started is still waiting for its
// container (engine/recovery.ts queue): a container's second attachment waits behind its first, and
// its start was granted before the stop. It must not run its plugins after shutdown began (it did, and
// the report said nothing was left); it is counted not started and stays in the journal. Root-free:
// in-memory store, fake plugins.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { recover } from '../../daemon/src/engine/recovery.js';
import { Store } from '../../daemon/src/store/store.js';
import { conf, deferred, req, setup } from '../helpers/engine-fakes.js';
import { captureLog } from '../helpers/log-capture.js';

const chain = conf([{ type: 'one' }]);

/** Container a with two attachments (eth0, eth1) journaled by a daemon of an earlier boot. */
async function twoAttachmentsOfA(): Promise<Store> {
  const store = new Store(':memory:');
  const before = setup({ store, bootId: 'boot-0' });
  await before.engine.handle(req('ADD', 'a', chain));
  await before.engine.handle(req('ADD', 'a', chain, { ifname: 'eth1' }));
  return store;
}

describe('recovery stopped while a started teardown waits for its container', () => {
  test('the waiting one does not run after the stop: counted not started, left in the journal', async () => {
    const store = await twoAttachmentsOfA();
    // --max-parallel 4: two background slots, so both of a's teardowns are started at once.
    const now = setup({ store, bootId: 'boot-1', maxParallel: 4 });
    const held = deferred();
    now.plugins.on('one', (call) => (call.command === 'DEL' ? held.promise : undefined));
    let stopping = false;
    const cap = captureLog();
    const recovery = recover(now.engine, 'boot-1', cap.log, () => stopping);
    while (now.plugins.of('DEL').length === 0) await new Promise((r) => setImmediate(r));
    stopping = true;
    held.resolve();
    const report = await recovery;
    assert.equal(now.plugins.of('DEL').length, 1, "a's second attachment ran no plugin after the stop");
    assert.equal(report.notStarted, 1);
    assert.deepEqual(cap.of('recovery finished'), [], 'the log says it stopped, not that it finished');
    const states = store
      .listAttachments({ containerId: 'a' })
      .map((x) => `${x.ifname}:${x.state}`)
      .sort();
    assert.deepEqual(states, ['eth0:deleted', 'eth1:added'], 'eth1 waits in the journal for the next start');
  });

  test('nor one whose turn came before the stop but that then waited for the gate behind a GC', async () => {
    const store = await twoAttachmentsOfA();
    const now = setup({ store, bootId: 'boot-1', maxParallel: 4 });
    const held = deferred();
    now.plugins.on('one', (call) => (call.command === 'DEL' && call.ifname === 'eth0' ? held.promise : undefined));
    let stopping = false;
    const recovery = recover(now.engine, 'boot-1', captureLog().log, () => stopping);
    while (now.plugins.of('DEL').length === 0) await new Promise((r) => setImmediate(r));
    // A GC waits for the gate behind eth0's DEL; once eth0 is done it takes the gate, while eth1 (its
    // turn asked, not stopped yet) waits for it.
    const gcHeld = deferred();
    const gc = now.engine.gate.exclusive(() => gcHeld.promise);
    held.resolve();
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    stopping = true;
    gcHeld.resolve();
    await gc;
    const report = await recovery;
    assert.deepEqual(
      now.plugins.callsOf('DEL').map((c) => c.ifname),
      ['eth0'],
      'eth1 ran no plugin after the stop',
    );
    assert.equal(report.notStarted, 1);
  });
});
