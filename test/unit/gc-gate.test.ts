// GC's wait for the gate (engine/gc-status.ts GC_GATE_WAIT_MS): every request arriving while a GC
// waits for the gate waits behind it, so a GC arriving while a plugin hangs inside a DEL held every
// pod start on the node until that plugin's --plugin-timeout (60 s by default). It now gives up
// after its wait, answered 11, and what queued behind it runs. Root-free: in-memory store, fake plugins.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CniError } from '@cni-steward/shared';
import { GC_GATE_WAIT_MS } from '../../daemon/src/engine/gc-status.js';
import { conf, deferred, req, setup } from '../helpers/engine-fakes.js';

const net = conf([{ type: 'one' }], '1.1.0');
const gcOf = (valid: unknown[]) => req('GC', '', { ...net, 'cni.dev/valid-attachments': valid });

/** The fake 'one' plugin, whose DELs wait for the returned promise. */
function hangingDels(s: ReturnType<typeof setup>) {
  const held = deferred();
  s.plugins.on('one', (call) => {
    if (call.command === 'ADD') return { cniVersion: call.stdin.cniVersion, interfaces: [{ name: call.ifname }] };
    return call.command === 'DEL' ? held.promise : undefined;
  });
  return held;
}

const outcome = (p: Promise<string>) =>
  p.then(
    (text) => `answered ${JSON.stringify(text)}`,
    (e: CniError) => `code ${e.code}: ${e.message}`,
  );

describe("GC's wait for the gate", () => {
  test('a GC arriving while a DEL hangs is answered 11 after its wait, and the ADD queued behind it runs while the DEL still hangs', async () => {
    const s = setup();
    const held = hangingDels(s);
    await s.engine.handle(req('ADD', 'stale', net));
    await s.engine.handle(req('ADD', 'hung', net));
    const del = s.engine.handle(req('DEL', 'hung', net));
    await new Promise((r) => setTimeout(r, 20)); // its DEL running, inside the gate
    assert.equal(s.plugins.of('DEL').length, 1);

    const started = performance.now();
    const gc = outcome(s.engine.handle(gcOf([])));
    const add = outcome(s.engine.handle(req('ADD', 'new', net)));
    const gcAnswer = await gc;
    const waited = performance.now() - started;
    assert.match(gcAnswer, /^code 11: GC not run: .*a plugin may be hanging.*nothing was collected/);
    assert.ok(waited >= GC_GATE_WAIT_MS - 50, `answered after ${waited} ms, before its wait ended`);
    assert.match(await add, /^answered /, 'the ADD behind the GC ran once it gave up');
    assert.equal(s.store.currentAttachment({ containerId: 'new', network: 'net', ifname: 'eth0' })!.state, 'added');
    assert.equal(
      s.store.currentAttachment({ containerId: 'stale', network: 'net', ifname: 'eth0' })!.state,
      'added',
      'the GC that gave up collected nothing',
    );
    assert.deepEqual(s.plugins.callsOf('GC'), [], 'nor passed GC on to the delegates');

    held.resolve();
    assert.equal(await del, '');
    // With nothing running, the next GC takes the gate and collects.
    assert.equal(await s.engine.handle(gcOf([{ containerID: 'new', ifname: 'eth0' }])), '');
    assert.equal(s.store.currentAttachment({ containerId: 'stale', network: 'net', ifname: 'eth0' })!.state, 'deleted');
  });

  test('a GC whose wait ends while a shorter DEL finishes is not refused: it runs once the gate is free', async () => {
    const s = setup();
    const held = hangingDels(s);
    await s.engine.handle(req('ADD', 'a', net));
    const del = s.engine.handle(req('DEL', 'a', net));
    await new Promise((r) => setTimeout(r, 20));
    const gc = outcome(s.engine.handle(gcOf([])));
    setTimeout(() => held.resolve(), GC_GATE_WAIT_MS / 4);
    assert.equal(await gc, 'answered ""');
    assert.equal(await del, '');
  });
});
