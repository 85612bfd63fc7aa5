import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Limiter, Priority, type PriorityValue } from '../../daemon/src/engine/limiter.js';
import { deferred, settle } from '../helpers/async.js';

describe('Limiter', () => {
  test('refuses to be built with fewer than one slot', () => {
    assert.throws(() => new Limiter(0), /at least one slot/);
    assert.throws(() => new Limiter(1.5), /at least one slot/);
  });

  test('never has more than `slots` tasks in flight, and does fill every slot', async () => {
    const limiter = new Limiter(3);
    let inFlight = 0;
    let peak = 0;
    const tasks = Array.from({ length: 12 }, (_, i) =>
      limiter.run((i % 3) as PriorityValue, async () => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        assert.ok(limiter.inUse <= 3, `inUse ${limiter.inUse} exceeds 3 slots`);
        for (let k = 0; k <= i % 4; k++) await settle();
        inFlight--;
        return i;
      }),
    );
    await settle();
    assert.equal(limiter.inUse, 3);
    assert.equal(limiter.queued, 9);
    assert.deepEqual(
      await Promise.all(tasks),
      Array.from({ length: 12 }, (_, i) => i),
    );
    assert.equal(peak, 3);
    assert.equal(limiter.inUse, 0);
    assert.equal(limiter.queued, 0);
  });

  test('background work never holds the last two slots (one with 2 or 3 slots; all of a single one), so an Add starts while every retry hangs', async () => {
    assert.deepEqual(
      [1, 2, 3, 4, 8].map((n) => new Limiter(n).backgroundSlots),
      [1, 1, 1, 2, 6],
    );
    const limiter = new Limiter(4);
    const hang = deferred();
    let running = 0;
    const retries = Array.from({ length: 5 }, () =>
      limiter.run(Priority.Background, async () => {
        running++;
        await hang.promise;
        running--;
      }),
    );
    await settle();
    assert.equal(running, 2, 'two of four slots for background work');
    assert.equal(limiter.queued, 3);
    const order: string[] = [];
    await limiter.run(Priority.Add, async () => void order.push('add'));
    await limiter.run(Priority.Del, async () => void order.push('del'));
    assert.deepEqual(order, ['add', 'del'], 'foreground work ran while the retries hang');
    // A foreground slot freed does not go to background work past its share.
    assert.equal(running, 2);
    hang.resolve();
    await Promise.all(retries);
    assert.equal(limiter.inUse, 0);
    assert.equal(limiter.queued, 0);
  });

  test('when the slots are full, a waiting Add task starts before Del and Background tasks queued earlier', async () => {
    const limiter = new Limiter(1);
    const blocker = deferred();
    const started: string[] = [];
    const holding = limiter.run(Priority.Add, () => blocker.promise);
    await settle();

    const queue = (label: string, p: PriorityValue) =>
      limiter.run(p, async () => {
        started.push(label);
      });
    const all = [queue('bg1', Priority.Background), queue('del1', Priority.Del), queue('add1', Priority.Add)];
    await settle();
    assert.deepEqual(started, [], 'nothing may start while the only slot is held');
    assert.equal(limiter.queued, 3);

    blocker.resolve();
    await holding;
    await Promise.all(all);
    assert.deepEqual(started, ['add1', 'del1', 'bg1']);
  });

  test('a Del task is served before a Background task queued earlier', async () => {
    const limiter = new Limiter(1);
    const blocker = deferred();
    const started: string[] = [];
    const holding = limiter.run(Priority.Background, () => blocker.promise);
    await settle();
    const all = [
      limiter.run(Priority.Background, async () => {
        started.push('bg');
      }),
      limiter.run(Priority.Del, async () => {
        started.push('del');
      }),
    ];
    blocker.resolve();
    await Promise.all([holding, ...all]);
    assert.deepEqual(started, ['del', 'bg']);
  });

  test('tasks of the same priority start in the order they were queued', async () => {
    const limiter = new Limiter(1);
    const blocker = deferred();
    const started: string[] = [];
    const holding = limiter.run(Priority.Add, () => blocker.promise);
    await settle();
    const labels = ['b1', 'd1', 'a1', 'b2', 'd2', 'a2', 'b3', 'd3', 'a3'];
    const prio: Record<string, PriorityValue> = { a: Priority.Add, d: Priority.Del, b: Priority.Background };
    const all = labels.map((l) =>
      limiter.run(prio[l[0] as string] as PriorityValue, async () => {
        started.push(l);
      }),
    );
    blocker.resolve();
    await Promise.all([holding, ...all]);
    assert.deepEqual(started, ['a1', 'a2', 'a3', 'd1', 'd2', 'd3', 'b1', 'b2', 'b3']);
  });

  test('a task that throws releases its slot to the next waiter and the error reaches the caller', async () => {
    const limiter = new Limiter(1);
    const gate = deferred();
    const failing = limiter.run(Priority.Add, async () => {
      await gate.promise;
      throw new Error('plugin exploded');
    });
    const next = limiter.run(Priority.Del, async () => 'ran');
    await settle();
    assert.equal(limiter.queued, 1);

    gate.resolve();
    await assert.rejects(failing, /plugin exploded/);
    assert.equal(await next, 'ran');
    assert.equal(limiter.inUse, 0);
    assert.equal(limiter.queued, 0);

    // The freed slot is usable again.
    assert.equal(await limiter.run(Priority.Background, async () => 42), 42);
    assert.equal(limiter.inUse, 0);
  });

  test('a task that throws synchronously still releases its slot', async () => {
    const limiter = new Limiter(1);
    await assert.rejects(
      limiter.run(Priority.Add, () => {
        throw new Error('sync boom');
      }),
      /sync boom/,
    );
    assert.equal(limiter.inUse, 0);
    assert.equal(await limiter.run(Priority.Add, async () => 'ok'), 'ok');
  });
});
