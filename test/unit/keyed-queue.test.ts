import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { KeyedQueue } from '../../daemon/src/engine/keyed-queue.js';
import { deferred, settle } from '../helpers/async.js';

describe('KeyedQueue', () => {
  test('runs work for one key strictly one at a time, in arrival order, even when an earlier task rejects', async () => {
    const q = new KeyedQueue();
    const events: string[] = [];
    let active = 0;
    let peak = 0;
    const task = (label: string, outcome: 'ok' | 'fail') => async () => {
      active++;
      peak = Math.max(peak, active);
      events.push(`start ${label}`);
      await settle();
      await settle();
      events.push(`end ${label}`);
      active--;
      if (outcome === 'fail') throw new Error(`${label} failed`);
      return label;
    };

    const first = q.run('ctr-1', task('1', 'fail'));
    const second = q.run('ctr-1', task('2', 'ok'));
    const third = q.run('ctr-1', task('3', 'fail'));
    const fourth = q.run('ctr-1', task('4', 'ok'));

    await assert.rejects(first, /1 failed/);
    assert.equal(await second, '2');
    await assert.rejects(third, /3 failed/);
    assert.equal(await fourth, '4');
    assert.equal(peak, 1);
    assert.deepEqual(events, ['start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3', 'start 4', 'end 4']);
  });

  test('a later task for a key does not start until the earlier one has settled', async () => {
    const q = new KeyedQueue();
    const hold = deferred();
    let secondStarted = false;
    const first = q.run('k', () => hold.promise);
    const second = q.run('k', async () => {
      secondStarted = true;
    });
    await settle();
    await settle();
    assert.equal(secondStarted, false);
    hold.reject(new Error('first rejected'));
    await assert.rejects(first, /first rejected/);
    await second;
    assert.equal(secondStarted, true);
  });

  test('work for different keys runs concurrently', async () => {
    const q = new KeyedQueue();
    const holdA = deferred();
    const started: string[] = [];
    const a = q.run('a', async () => {
      started.push('a');
      await holdA.promise;
      return 'a';
    });
    const b = q.run('b', async () => {
      started.push('b');
      return 'b';
    });

    // b completes while a is still blocked.
    assert.equal(await b, 'b');
    assert.deepEqual(started, ['a', 'b']);
    holdA.resolve();
    assert.equal(await a, 'a');
  });

  test('the per-key map drains to size 0 once all work has completed, including failed work', async () => {
    const q = new KeyedQueue();
    const hold = deferred();
    const a1 = q.run('a', () => hold.promise);
    const a2 = q.run('a', async () => {
      throw new Error('nope');
    });
    const b1 = q.run('b', async () => 'b');
    assert.equal(q.size, 2);

    await b1;
    await settle();
    assert.equal(q.size, 1, 'key b is dropped once it drains while a is still busy');

    hold.resolve();
    await a1;
    await assert.rejects(a2, /nope/);
    await settle();
    assert.equal(q.size, 0);

    // A key can be reused after draining.
    assert.equal(await q.run('a', async () => 'again'), 'again');
    await settle();
    assert.equal(q.size, 0);
  });
  test('a task queued after an earlier one settled still waits for the one still running', async () => {
    const q = new KeyedQueue();
    const hold1 = deferred();
    const hold2 = deferred();
    const events: string[] = [];
    const first = q.run('k', async () => {
      await hold1.promise;
      events.push('end 1');
    });
    const second = q.run('k', async () => {
      events.push('start 2');
      await hold2.promise;
      events.push('end 2');
    });
    hold1.resolve();
    await first;
    await settle();
    await settle();
    assert.deepEqual(events, ['end 1', 'start 2']);
    const third = q.run('k', async () => {
      events.push('start 3');
    });
    await settle();
    await settle();
    assert.deepEqual(events, ['end 1', 'start 2'], 'the third task waits for the second');
    assert.equal(q.size, 1);
    hold2.resolve();
    await second;
    await third;
    assert.deepEqual(events, ['end 1', 'start 2', 'end 2', 'start 3']);
  });
});
