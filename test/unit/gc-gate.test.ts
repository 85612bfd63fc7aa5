// GC's preference at the gate (engine/gc-status.ts GC_GATE_PREFERENCE_MS): requests arriving while a
// GC waits for the gate queue behind it, so a GC arriving while a plugin hung inside a DEL held every
// pod start on the node until that plugin's --plugin-timeout (60 s by default). Now they queue for at
// most 2 s; the GC still runs, once nothing holds the gate (CRI-O runs its one GC at start-up only, so
// it is not refused). Root-free: in-memory store, fake plugins.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CniError } from '@cni-steward/shared';
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
  test('an ADD behind a GC that waits for a hanging DEL runs after the preference; the GC runs once the DEL ends', async () => {
    const s = setup();
    const held = hangingDel(s, 'hung');
    await s.engine.handle(req('ADD', 'stale', net));
    await s.engine.handle(req('ADD', 'hung', net));
    const del = s.engine.handle(req('DEL', 'hung', net));
    await until('the DEL to reach its plugin', () => s.plugins.of('DEL').length === 1);

    const started = performance.now();
    const gc = outcome(s.engine.handle(gcOf('new')));
    const add = outcome(s.engine.handle(req('ADD', 'new', net)));
    assert.equal(await pending(add), true, 'the ADD queues behind the waiting GC');
    assert.match(await add, /^answered /, 'the ADD ran');
    const waited = performance.now() - started;
    assert.ok(waited >= GC_GATE_PREFERENCE_MS - 50, `the ADD ran after ${waited} ms, before the preference ended`);
    assert.equal(s.store.currentAttachment(key('new'))!.state, 'added');
    assert.equal(await pending(gc), true, 'the GC still waits: the DEL holds the gate');
    assert.equal(await pending(del), true, 'and the DEL still hangs');
    assert.equal(s.store.currentAttachment(key('stale'))!.state, 'added', 'nothing collected yet');

    held.resolve();
    assert.equal(await del, '');
    assert.equal(await gc, 'answered ""', 'the GC ran once nothing held the gate');
    assert.equal(s.store.currentAttachment(key('stale'))!.state, 'deleted');
    assert.equal(s.store.currentAttachment(key('new'))!.state, 'added', 'the listed pod is kept');
  });

  test('a GC whose wait ends within its preference keeps requests behind it and runs first', async () => {
    const s = setup();
    const held = hangingDel(s, 'a');
    await s.engine.handle(req('ADD', 'a', net));
    await s.engine.handle(req('ADD', 'b', net));
    const del = s.engine.handle(req('DEL', 'a', net));
    await until('the DEL to reach its plugin', () => s.plugins.of('DEL').length === 1);
    const order: string[] = [];
    const gc = s.engine.handle(gcOf('b', 'c')).then(() => order.push('gc'));
    const add = s.engine.handle(req('ADD', 'c', net)).then(() => order.push('add'));
    setTimeout(() => held.resolve(), GC_GATE_PREFERENCE_MS / 4);
    await Promise.all([del, gc, add]);
    assert.deepEqual(order, ['gc', 'add'], 'the ADD waited for the GC that came first');
  });
});
