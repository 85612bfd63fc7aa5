// The retry scheduler's pruning (engine/scheduler.ts), with an injected clock and the in-memory store:
// finished attachments go once older than the tombstone TTL, at most once per prune interval, and one
// with an abandoned step stays for 7 days whatever the TTL, since an operator must still see it.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { RetryScheduler } from '../../daemon/src/engine/scheduler.js';
import { Store } from '../../daemon/src/store/store.js';
import { newAttachment, setup, silentLog } from '../helpers/engine-fakes.js';

const DAY = 24 * 3_600_000;
// A TTL shorter than the prune interval, so an attachment can outlive it within one interval.
const TTL = 10_000;
const PRUNE_EVERY = 60_000;

function world(ttl = TTL) {
  const clock = { t: 100 * DAY };
  const store = new Store(':memory:', () => clock.t);
  const env = setup({ now: () => clock.t, store });
  const s = new RetryScheduler({
    engine: env.engine,
    store,
    log: silentLog,
    pollMs: 5,
    tombstoneTtlMs: ttl,
    pruneEveryMs: PRUNE_EVERY,
    spoolDir: '/nonexistent/steward-spool',
    now: () => clock.t,
  });
  /** A torn-down attachment journaled now; with `abandoned`, one of its steps was given up on. */
  const finished = (containerId: string, abandoned = false): number => {
    const a = store.createAttachment(newAttachment({ containerId, bootId: 'boot-1' }), 'deleted');
    const st = store.insertStep({
      attachmentId: a.id,
      seq: 0,
      delegateIndex: 0,
      delegateName: 'd',
      ifname: 'eth0',
      pluginIndex: 0,
      pluginType: 'one',
      config: '{}',
    });
    if (abandoned) store.setStepAbandoned(st.id, 'gone for good');
    else store.setStepDeleted(st.id);
    return a.id;
  };
  // Every tick reads the due retries first: counting those reads counts ticks.
  let tickCount = 0;
  const due = store.dueAttachmentIds.bind(store);
  store.dueAttachmentIds = (now: number) => {
    tickCount++;
    return due(now);
  };
  /** Waits until the running scheduler has made three whole ticks at the current clock. */
  const ticks = async () => {
    const until = tickCount + 4; // the tick under way when called may have read the clock before
    const deadline = Date.now() + 20_000;
    while (tickCount < until) {
      assert.ok(Date.now() < deadline, 'the scheduler ticked within 20 s');
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  return { clock, store, s, finished, ticks };
}

describe('retry scheduler: pruning', () => {
  test('within a prune interval nothing is pruned, even past the TTL; at exactly the interval it is', async () => {
    const w = world();
    w.s.start();
    try {
      await w.ticks(); // the first tick prunes (nothing yet) and starts the interval
      const a = w.finished('a');
      w.clock.t += PRUNE_EVERY / 2; // a is older than the TTL, but the interval has not passed
      await w.ticks();
      assert.notEqual(w.store.getAttachment(a), undefined, 'kept until the interval has passed');
      w.clock.t += PRUNE_EVERY / 2; // exactly one interval since the last prune
      await w.ticks();
      assert.equal(w.store.getAttachment(a), undefined, 'pruned once the interval had passed');
    } finally {
      await w.s.stop();
    }
  });

  test('a torn-down attachment younger than the TTL stays', async () => {
    const w = world();
    const a = w.finished('young');
    w.clock.t += TTL - 1;
    w.s.start();
    try {
      await w.ticks();
      assert.notEqual(w.store.getAttachment(a), undefined);
    } finally {
      await w.s.stop();
    }
  });

  test('one with an abandoned step stays 7 days whatever the TTL, then goes', async () => {
    const w = world();
    const abandoned = w.finished('abandoned', true);
    const plain = w.finished('plain');
    w.clock.t += 2 * DAY;
    w.s.start();
    try {
      await w.ticks();
      assert.equal(w.store.getAttachment(plain), undefined, 'past the TTL: pruned');
      assert.notEqual(w.store.getAttachment(abandoned), undefined, 'an abandoned step is kept for the operator');
      w.clock.t += 5 * DAY - 2 * PRUNE_EVERY; // just under 7 days old
      await w.ticks();
      assert.notEqual(w.store.getAttachment(abandoned), undefined, 'still under 7 days');
      w.clock.t += 2 * PRUNE_EVERY + 1;
      await w.ticks();
      assert.equal(w.store.getAttachment(abandoned), undefined, 'past 7 days: pruned');
    } finally {
      await w.s.stop();
    }
  });
  test('with a TTL longer than 7 days, one with an abandoned step is kept for the TTL too', async () => {
    const w = world(10 * DAY);
    const abandoned = w.finished('abandoned', true);
    const plain = w.finished('plain');
    w.clock.t += 8 * DAY;
    w.s.start();
    try {
      await w.ticks();
      assert.notEqual(w.store.getAttachment(abandoned), undefined, '8 days old, under the 10-day TTL');
      assert.notEqual(w.store.getAttachment(plain), undefined);
      w.clock.t += 2 * DAY + 1;
      await w.ticks();
      assert.equal(w.store.getAttachment(abandoned), undefined, 'past the TTL: pruned');
      assert.equal(w.store.getAttachment(plain), undefined);
    } finally {
      await w.s.stop();
    }
  });
});
