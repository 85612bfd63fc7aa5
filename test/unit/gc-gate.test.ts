// GC next to other requests (engine/gc-status.ts). Its sweep of stale attachments runs in their
// containers' queues like DELs, so a stale pod whose plugin hangs holds nothing else; and only what was
// settled when the GC arrived is stale, so a pod added meanwhile is kept. Its delegates' GC holds the
// gate exclusively, and requests arriving while it waits queue behind it for at most
// GC_GATE_PREFERENCE_MS (a GC arriving while a plugin hung inside a DEL held every pod start on the
// node until that plugin's --plugin-timeout); the GC still runs, once nothing holds the gate (CRI-O
// runs its one GC at start-up only, so it is not refused). Root-free: in-memory store, fake plugins.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cni-steward/shared';
import { GC_GATE_PREFERENCE_MS } from '../../daemon/src/engine/gc-status.js';
import { conf, deferred, req, setup } from '../helpers/engine-fakes.js';

const net = conf([{ type: 'one' }], '1.1.0');
const key = (containerId: string) => ({ containerId, network: 'net', ifname: 'eth0' });
const gcOf = (...valid: string[]) =>
  req('GC', '', { ...net, 'cni.dev/valid-attachments': valid.map((containerID) => ({ containerID, ifname: 'eth0' })) });

/** The fake 'one' plugin, whose DELs of `hung` wait for the returned promise. */
function hangingDel(s: ReturnType<typeof setup>, hung: string) {
  const held = deferred();
  s.plugins.on('one', (call) => {
    if (call.command === 'ADD') return { cniVersion: call.stdin.cniVersion, interfaces: [{ name: call.ifname }] };
    return call.command === 'DEL' && call.containerId === hung ? held.promise : undefined;
  });
  return held;
}

const outcome = (p: Promise<string>) =>
  p.then(
    (text) => `answered ${JSON.stringify(text)}`,
    (e: CniError) => `code ${e.code}: ${e.message}`,
  );

/** Whether `p` is still pending after the current turn's callbacks. */
async function pending(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return !done;
}

async function until(what: string, cond: () => boolean) {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), what);
}

describe("GC's preference at the gate", () => {
  test('an ADD behind a GC that waits for a hanging DEL runs after the preference and is kept, though the GC does not list it; the GC runs once the DEL ends', async () => {
    const s = setup();
    const held = hangingDel(s, 'hung');
    await s.engine.handle(req('ADD', 'stale', net));
    await s.engine.handle(req('ADD', 'hung', net));
    const del = s.engine.handle(req('DEL', 'hung', net));
    await until('the DEL to reach its plugin', () => s.plugins.of('DEL').length === 1);

    // The runtime's list, made before it created 'new'; 'hung' is still listed while it is deleted.
    const gc = outcome(s.engine.handle(gcOf('hung')));
    await until(
      'the stale pod to be swept at once',
      () => s.store.currentAttachment(key('stale'))!.state === 'deleted',
    );
    const started = performance.now();
    const add = outcome(s.engine.handle(req('ADD', 'new', net)));
    assert.equal(await pending(add), true, 'the ADD queues behind the waiting GC');
    assert.match(await add, /^answered /, 'the ADD ran');
    const waited = performance.now() - started;
    assert.ok(waited >= GC_GATE_PREFERENCE_MS - 50, `the ADD ran after ${waited} ms, before the preference ended`);
    assert.equal(s.store.currentAttachment(key('new'))!.state, 'added');
    assert.equal(await pending(gc), true, 'the GC still waits: the DEL holds the gate');
    assert.equal(await pending(del), true, 'and the DEL still hangs');

    held.resolve();
    assert.equal(await del, '');
    assert.equal(await gc, 'answered ""', 'the GC ran once nothing held the gate');
    assert.equal(
      s.store.currentAttachment(key('new'))!.state,
      'added',
      'the pod added after the GC arrived is kept (it was torn down a moment after its ADD)',
    );
    assert.deepEqual(
      s.plugins.of('DEL').map((c) => c.split(' ')[2]),
      ['hung', 'stale'],
    );
  });

  test('a GC whose wait ends within its preference keeps requests behind it and runs first', async () => {
    const s = setup();
    const held = hangingDel(s, 'a');
    await s.engine.handle(req('ADD', 'a', net));
    await s.engine.handle(req('ADD', 'b', net));
    const del = s.engine.handle(req('DEL', 'a', net));
    await until('the DEL to reach its plugin', () => s.plugins.of('DEL').length === 1);
    const order: string[] = [];
    const gc = s.engine.handle(gcOf('a', 'b')).then(() => order.push('gc'));
    const add = s.engine.handle(req('ADD', 'c', net)).then(() => order.push('add'));
    setTimeout(() => held.resolve(), GC_GATE_PREFERENCE_MS / 4);
    await Promise.all([del, gc, add]);
    assert.deepEqual(order, ['gc', 'add'], 'the ADD waited for the GC that came first');
  });

  test('a stale pod whose DEL hangs holds no other request: the GC sweeps it in its own container, and pods start meanwhile', async () => {
    const s = setup();
    const held = hangingDel(s, 'stuck');
    await s.engine.handle(req('ADD', 'stuck', net));
    await s.engine.handle(req('ADD', 'gone', net));
    await s.engine.handle(req('ADD', 'kept', net));
    const gc = outcome(s.engine.handle(gcOf('kept')));
    await until("the sweep to reach the stuck pod's plugin", () => s.plugins.of('DEL').includes('DEL one stuck'));

    const started = performance.now();
    let answer: string | undefined;
    void outcome(s.engine.handle(req('ADD', 'next', net))).then((a) => (answer = a));
    await until('the ADD of another pod to be answered while the sweep hangs', () => answer !== undefined);
    assert.match(answer!, /^answered /);
    const waited = performance.now() - started;
    assert.ok(waited < GC_GATE_PREFERENCE_MS / 2, `the ADD waited ${waited} ms behind a GC sweeping another pod`);
    assert.equal(s.store.currentAttachment(key('gone'))!.state, 'deleted', 'the other stale pod went at once');
    assert.equal(await pending(gc), true, "the GC waits for the stuck pod's teardown");

    held.resolve();
    assert.equal(await gc, 'answered ""');
    assert.equal(s.store.currentAttachment(key('stuck'))!.state, 'deleted');
    for (const id of ['kept', 'next']) assert.equal(s.store.currentAttachment(key(id))!.state, 'added', id);
  });

  test('a pod whose ADD was still running when the GC arrived is kept, though the GC does not list it', async () => {
    const s = setup();
    const adding = deferred();
    s.plugins.on('one', (call) => {
      if (call.command !== 'ADD') return undefined;
      const result = { cniVersion: call.stdin.cniVersion, interfaces: [{ name: call.ifname }] };
      return call.containerId === 'late' ? adding.promise.then(() => result) : result;
    });
    await s.engine.handle(req('ADD', 'stale', net));
    const add = outcome(s.engine.handle(req('ADD', 'late', net)));
    await until('the ADD to reach its plugin', () => s.plugins.of('ADD').length === 2);
    const gc = outcome(s.engine.handle(gcOf()));
    adding.resolve();
    assert.match(await add, /^answered /);
    assert.equal(await gc, 'answered ""');
    assert.equal(s.store.currentAttachment(key('stale'))!.state, 'deleted');
    assert.equal(s.store.currentAttachment(key('late'))!.state, 'added', 'the pod being added is not swept');
  });

  test('a stale pod whose DEL, queued ahead of the sweep, failed is left to its retries: not DELed again at once', async () => {
    const s = setup();
    const adding = deferred();
    s.plugins.on('one', (call) => {
      if (call.command === 'DEL' && call.containerId === 'p') throw new CniError(11, 'busy');
      if (call.command !== 'ADD') return undefined;
      const result = { cniVersion: call.stdin.cniVersion, interfaces: [{ name: call.ifname }] };
      return call.ifname === 'eth1' ? adding.promise.then(() => result) : result;
    });
    await s.engine.handle(req('ADD', 'p', net));
    // The container's queue is busy (its second interface being added): its DEL waits behind that.
    const second = outcome(s.engine.handle(req('ADD', 'p', net, { ifname: 'eth1' })));
    const del = outcome(s.engine.handle(req('DEL', 'p', net)));
    const gc = outcome(s.engine.handle(gcOf()));
    adding.resolve();
    assert.match(await second, /^answered /);
    assert.equal(await del, 'answered ""', 'the DEL failed and was answered as the defer policy says');
    assert.equal(await gc, 'answered ""');
    assert.equal(s.store.currentAttachment(key('p'))!.state, 'deleting', 'left to the retry schedule');
    assert.deepEqual(s.plugins.of('DEL'), ['DEL one p'], 'the failing plugin was run once');
  });
});
