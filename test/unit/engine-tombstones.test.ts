// The DEL path's tombstone set (engine/del.ts RecentKeys) is bounded: repeated DELs of torn-down
// keys are answered from memory, at most 20,000 keys of them, the oldest forgotten first (the journal
// answers it again). Its own file: 20,001 DELs take a second or two, which the other engine test
// files, re-run for every engine mutant, should not pay. Root-free: Dels over a stub context.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { EngineContext } from '../../daemon/src/engine/context.js';
import { Dels } from '../../daemon/src/engine/del.js';
import { conf, silentLog } from '../helpers/engine-fakes.js';

describe('DEL: the tombstone set is bounded', () => {
  test('it keeps the last 20,000 torn-down keys; the oldest is then answered by the journal again', async () => {
    // Dels over a stub context: every DEL is of an unknown attachment, so it passes through once
    // (the stub slots run nothing) and writes its tombstone to a store that keeps nothing.
    let journalReads = 0;
    const ctx = {
      store: {
        currentAttachment: () => {
          journalReads++;
          return undefined;
        },
        relaxed: () => undefined,
      },
      slots: { run: async () => undefined },
      log: silentLog,
      metrics: { coalescedDels: { inc: () => undefined } },
      bootId: 'b',
      serialize: (_c: string, work: (hold: () => void) => Promise<unknown>) => work(() => undefined),
    } as unknown as EngineContext;
    const dels = new Dels(ctx);
    const env = (containerId: string) =>
      ({ command: 'DEL', containerId, netns: '', ifname: 'eth0', args: '', path: '/x' }) as never;
    const one = conf([{ type: 'one' }]);
    const key = (containerId: string) => ({ containerId, network: 'net', ifname: 'eth0' });
    for (let i = 0; i < 20_000; i++) await dels.del(env(`k${i}`), one);
    assert.equal(journalReads, 20_000);
    assert.equal(dels.isTombstoned(key('k0')), true, '20,000 keys: the first is still remembered');
    await dels.del(env('k0'), one);
    assert.equal(journalReads, 20_000, 'a repeat is answered from memory');
    await dels.del(env('k20000'), one);
    assert.equal(dels.isTombstoned(key('k0')), false, 'the 20,001st key evicts the oldest one');
    assert.equal(dels.isTombstoned(key('k1')), true);
    assert.equal(dels.isTombstoned(key('k20000')), true);
    await dels.del(env('k0'), one);
    assert.equal(journalReads, 20_002, 'the evicted key goes to the journal');
  });
});
