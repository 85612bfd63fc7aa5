// What the engine tells the daemon's tracing (engine.ts EngineTrace): each request's wait in its
// container's queue, and each background teardown (retry, reclaim) run inside its own trace's scope.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import type { EngineTrace } from '../../daemon/src/engine/engine.js';
import { Priority } from '../../daemon/src/engine/limiter.js';
import type { Attachment } from '../../daemon/src/store/types.js';
import { deferred } from '../helpers/async.js';
import { conf, req, setup } from '../helpers/engine-fakes.js';

const chain = conf([{ type: 'one' }, { type: 'two' }]);
const KEY = { network: 'net', ifname: 'eth0' };

/** A trace that records what it was told, and which plugin calls ran inside a teardown's scope. */
function recording() {
  const waits: number[] = [];
  const teardowns: Array<{ id: number; containerId: string }> = [];
  let inside: number | undefined;
  const trace: EngineTrace = {
    queueWait: (s) => waits.push(s),
    teardown: async (a: Attachment, work) => {
      teardowns.push({ id: a.id, containerId: a.containerId });
      inside = a.id;
      try {
        return await work();
      } finally {
        inside = undefined;
      }
    },
  };
  return { trace, waits, teardowns, insideNow: () => inside };
}

describe('engine: what tracing is told', () => {
  test("each request's queue wait once, in seconds; the one queued behind a slow request waited for it", async () => {
    const r = recording();
    const { engine, plugins } = setup({ trace: r.trace });
    const slow = deferred();
    plugins.on('two', async (c) => {
      if (c.command === 'ADD') await slow.promise;
      return { cniVersion: '1.0.0' };
    });
    const add = engine.handle(req('ADD', 'q', chain));
    await new Promise((res) => setImmediate(res));
    const del = engine.handle(req('DEL', 'q', chain));
    await new Promise((res) => setTimeout(res, 30));
    slow.resolve();
    await add;
    await del;
    assert.equal(r.waits.length, 2, 'one wait per request');
    assert.ok(
      r.waits.every((s) => s >= 0 && s < 60),
      `seconds, not ms: ${r.waits.join(', ')}`,
    );
    assert.ok(r.waits[1]! >= 0.02, `the DEL waited behind the ADD: ${r.waits[1]}`);
    assert.deepEqual(r.teardowns, [], "a runtime's DEL is its request's, not a background teardown");
  });

  test('a retry runs inside its own teardown scope, given the attachment; an unknown one makes none', async () => {
    const r = recording();
    const { engine, plugins, store } = setup({ trace: r.trace });
    const seen: Array<number | undefined> = [];
    let fail = true;
    plugins.on('one', (c) => {
      if (c.command === 'DEL') {
        seen.push(r.insideNow());
        if (fail) throw new CniError(11, 'busy');
      }
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await engine.handle(req('ADD', 'r', chain));
    await engine.handle(req('DEL', 'r', chain)); // deferred: step one owes its DEL
    const a = store.currentAttachment({ containerId: 'r', ...KEY })!;
    assert.deepEqual(seen, [undefined], "the runtime's DEL ran in no teardown scope");
    fail = false;
    assert.equal((await engine.runTeardown(a.id, Priority.Background, { force: true })).done, true);
    assert.deepEqual(r.teardowns, [{ id: a.id, containerId: 'r' }]);
    assert.deepEqual(seen, [undefined, a.id], 'the retry ran inside it');
    assert.deepEqual(await engine.runTeardown(99_999, Priority.Background), { done: true });
    assert.equal(r.teardowns.length, 1);
  });

  test('a reclaim of a cut-off attachment runs in a teardown scope; one that is not cut off makes none', async () => {
    const r = recording();
    const { engine, plugins, store } = setup({ trace: r.trace });
    const seen: Array<number | undefined> = [];
    plugins.on('two', (c) => {
      if (c.command === 'DEL') seen.push(r.insideNow());
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await engine.handle(req('ADD', 'cut', chain));
    await engine.handle(req('ADD', 'fine', chain));
    const cut = store.currentAttachment({ containerId: 'cut', ...KEY })!;
    const fine = store.currentAttachment({ containerId: 'fine', ...KEY })!;
    store.setAttachmentState(cut.id, 'adding');
    assert.deepEqual(await engine.reclaimUnfinished(fine.id), { done: true });
    assert.deepEqual(r.teardowns, []);
    assert.deepEqual(await engine.reclaimUnfinished(cut.id), { done: true });
    assert.deepEqual(r.teardowns, [{ id: cut.id, containerId: 'cut' }]);
    assert.deepEqual(seen, [cut.id]);
    assert.equal(plugins.of('DEL').length, 2);
  });
});
