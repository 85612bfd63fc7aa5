// Retry timing against wall-clock steps (issue 19 item 4; engine/clock.ts, teardown.ts, scheduler.ts):
// the wall and monotonic clocks are injected separately, and stepped as NTP or a VM restore would.
// A step back by a day must not stall a pending retry; a step forward by two days must not abandon a
// step whose 24 h max age counts the time it was pending while a daemon ran (monotonic), not the wall.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { RetryClock, clockFromNow, systemClock, type Clock } from '../../daemon/src/engine/clock.js';
import { Priority } from '../../daemon/src/engine/limiter.js';
import { RetryScheduler } from '../../daemon/src/engine/scheduler.js';
import type { RetryPolicy } from '../../daemon/src/engine/teardown.js';
import { Store } from '../../daemon/src/store/store.js';
import type { Step } from '../../daemon/src/store/types.js';
import { TEST_RETRY, conf, req, setup, silentLog } from '../helpers/engine-fakes.js';

const DAY = 24 * 3_600_000;
const KEY = { network: 'net', ifname: 'eth0' };
const chain = conf([{ type: 'one' }, { type: 'two' }]);
/** The numbers: 50 attempts, 24 h max age, backoff 1 s doubling to a 5 s cap (small for the test). */
const POLICY: RetryPolicy = { baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 50, maxAgeMs: DAY };

/** Wall and monotonic time, each settable: `step` moves the wall only, `pass` moves both. */
function machine(wall = 1_700_000_000_000) {
  const t = { wall, mono: 5_000 };
  const clock: Clock = { wall: () => t.wall, mono: () => t.mono };
  return {
    t,
    clock,
    step: (ms: number) => (t.wall += ms),
    pass: (ms: number) => {
      t.wall += ms;
      t.mono += ms;
    },
  };
}

/** One daemon run over `store`: its own retry clock, engine and (not started) scheduler. */
function run(m: ReturnType<typeof machine>, store: Store, retry: RetryPolicy = POLICY) {
  const env = setup({ store, clock: new RetryClock(m.clock), retry });
  // 'two' is the last step: DELed first, and (confirmed) it halts 'one' while it fails.
  let failing = true;
  env.plugins.on('two', (c) => {
    if (c.command === 'DEL' && failing) throw new CniError(11, 'two is busy');
    return c.command === 'ADD' ? { cniVersion: '1.0.0', ips: [{ address: '10.9.0.1/24' }] } : undefined;
  });
  const scheduler = new RetryScheduler({
    engine: env.engine,
    store,
    log: silentLog,
    pollMs: 60_000,
    tombstoneTtlMs: DAY,
    pruneEveryMs: DAY,
    spoolDir: '/nonexistent/steward-spool',
  });
  return { ...env, scheduler, heal: () => (failing = false) };
}

function two(store: Store, containerId: string): Step {
  const a = store.currentAttachment({ containerId, ...KEY })!;
  return store.stepsOf(a.id)[1]!;
}

/** A retry as the scheduler runs it: not forced, so only a due step's DEL runs. */
async function retryDue(r: ReturnType<typeof run>, containerId: string) {
  const a = r.store.currentAttachment({ containerId, ...KEY })!;
  return r.engine.runTeardown(a.id, Priority.Background);
}

describe('retry schedule: the wall clock steps back', () => {
  test('a day back while running: the pending retry still runs ~1 s after the failure, on the monotonic clock', async () => {
    const m = machine();
    const store = new Store(':memory:', m.clock.wall);
    const r = run(m, store);
    await r.engine.handle(req('ADD', 'back', chain));
    await r.engine.handle(req('DEL', 'back', chain));
    const failed = two(store, 'back');
    assert.equal(failed.state, 'del_failed');
    r.heal();

    m.step(-DAY);
    assert.equal((await retryDue(r, 'back')).error?.code, 105, 'not due yet: nothing monotonic has passed');
    assert.deepEqual(r.plugins.of('DEL'), ['DEL two back']);
    m.pass(1_200); // past the first backoff (1 s +-20%) on the monotonic clock; the wall is still a day back
    assert.deepEqual(store.dueAttachmentIds(r.engine.teardown.clock.now()), [failed.attachmentId]);
    assert.deepEqual(await retryDue(r, 'back'), { done: true }, 'the retry ran on schedule');
    assert.deepEqual(r.plugins.of('DEL'), ['DEL two back', 'DEL two back', 'DEL one back']);
    assert.equal(store.getAttachment(failed.attachmentId)!.state, 'deleted');
  });

  test('a day back between two runs: the journaled schedule is pulled in to the backoff cap at start', async () => {
    const m = machine();
    const store = new Store(':memory:', m.clock.wall);
    const before = run(m, store);
    await before.engine.handle(req('ADD', 'restart', chain));
    await before.engine.handle(req('DEL', 'restart', chain));
    const journaled = two(store, 'restart').nextAttemptAt!;

    m.step(-DAY); // the daemon is down; the node's clock is stepped back a day; a new daemon starts
    const after = run(m, store);
    after.heal();
    after.scheduler.start();
    await after.scheduler.stop();
    const clamped = two(store, 'restart').nextAttemptAt!;
    assert.ok(journaled - clamped > DAY - 10_000, 'the day-late attempt was pulled in');
    assert.ok(clamped <= after.engine.teardown.clock.now() + POLICY.maxDelayMs, 'no later than the cap from now');
    m.pass(POLICY.maxDelayMs);
    assert.deepEqual(await retryDue(after, 'restart'), { done: true }, 'it runs within the cap, not a day later');
    assert.equal(store.getAttachment(two(store, 'restart').attachmentId)!.state, 'deleted');
  });

  test('the scheduler clamps on every tick: a next attempt written beyond the cap is pulled in, others kept', async () => {
    const m = machine();
    const store = new Store(':memory:', m.clock.wall);
    const r = run(m, store);
    for (const id of ['far', 'near']) {
      await r.engine.handle(req('ADD', id, chain));
      await r.engine.handle(req('DEL', id, chain));
    }
    const now = r.engine.teardown.clock.now();
    store.setStepDelFailed(two(store, 'far').id, 'busy', now + DAY);
    const near = two(store, 'near').nextAttemptAt!;
    assert.equal(r.scheduler.clampSchedule(), 1);
    assert.equal(two(store, 'far').nextAttemptAt, now + POLICY.maxDelayMs);
    assert.equal(two(store, 'near').nextAttemptAt, near, 'an attempt within the cap is left alone');
    assert.equal(r.scheduler.clampSchedule(), 0);
  });
});

describe('retry schedule: the wall clock steps forward', () => {
  test('two days forward while running: attempts continue on the backoff, nothing is abandoned at attempt 3 of 50', async () => {
    const m = machine();
    const store = new Store(':memory:', m.clock.wall);
    const r = run(m, store);
    await r.engine.handle(req('ADD', 'fwd', chain));
    await r.engine.handle(req('DEL', 'fwd', chain));
    m.step(2 * DAY);
    for (let attempt = 2; attempt <= 6; attempt++) {
      m.pass(POLICY.maxDelayMs);
      const out = await retryDue(r, 'fwd');
      assert.equal(out.done, false);
      const st = two(store, 'fwd');
      assert.equal(st.state, 'del_failed', `attempt ${attempt}: still retried, not abandoned`);
      assert.equal(st.attempts, attempt);
      assert.ok(
        st.pendingMs <= (attempt - 1) * POLICY.maxDelayMs,
        `pending ${st.pendingMs} ms counts monotonic time only`,
      );
    }
    r.heal();
    m.pass(POLICY.maxDelayMs);
    assert.deepEqual(await retryDue(r, 'fwd'), { done: true });
  });

  test('two days forward between runs: the step is due at once and retried, not abandoned', async () => {
    const m = machine();
    const store = new Store(':memory:', m.clock.wall);
    const before = run(m, store);
    await before.engine.handle(req('ADD', 'gap', chain));
    await before.engine.handle(req('DEL', 'gap', chain));
    m.pass(10_000); // the first daemon ran 10 s more, then stopped
    m.step(2 * DAY);
    const after = run(m, store);
    assert.equal((await retryDue(after, 'gap')).error?.message, 'two is busy', 'due at once: it ran and failed');
    const st = two(store, 'gap');
    assert.equal(st.state, 'del_failed');
    assert.equal(st.attempts, 2);
    assert.ok(st.pendingMs < 60_000, `pending ${st.pendingMs} ms: the two days the clock jumped are not counted`);
  });
});

describe('retry schedule: the max age counts time pending while a daemon ran', () => {
  test('monotonic time pending is journaled across runs and abandons the step once past the max age', async () => {
    const m = machine();
    const store = new Store(':memory:', m.clock.wall);
    const policy: RetryPolicy = { ...TEST_RETRY, maxAttempts: 50, maxAgeMs: 60_000 };
    const first = run(m, store, policy);
    await first.engine.handle(req('ADD', 'old', chain));
    await first.engine.handle(req('DEL', 'old', chain));
    m.pass(40_000);
    m.step(-DAY); // a step back does not make it younger either
    await retryDue(first, 'old');
    assert.equal(two(store, 'old').pendingMs, 40_000);
    assert.equal(two(store, 'old').state, 'del_failed');

    m.step(3 * DAY); // down for a while (not counted), then a new daemon
    const second = run(m, store, policy);
    m.pass(19_999);
    await retryDue(second, 'old');
    assert.equal(two(store, 'old').pendingMs, 59_999, 'this run counts from its own start');
    assert.equal(two(store, 'old').state, 'del_failed');
    m.pass(1);
    await second.engine.runTeardown(two(store, 'old').attachmentId, Priority.Background, { force: true });
    assert.equal(two(store, 'old').state, 'abandoned', 'a minute pending in all: abandoned');
  });
});

describe('the clocks themselves', () => {
  test('the system clock: the wall shifted by the test offset (STEWARD_TEST_CLOCK_OFFSET_MS), the monotonic one unshifted', () => {
    const c = systemClock(DAY);
    const wall = c.wall() - Date.now();
    assert.ok(wall >= DAY - 1000 && wall <= DAY + 1000, `wall offset ${wall}`);
    assert.ok(Math.abs(c.mono() - performance.now()) < 1000);
    assert.ok(Math.abs(systemClock().wall() - Date.now()) < 1000);
  });

  test('the retry clock starts at the wall and then follows the monotonic clock only', () => {
    const m = machine(1_700_000_000_000);
    const rc = new RetryClock(m.clock);
    assert.equal(rc.now(), 1_700_000_000_000);
    assert.equal(rc.startedMono, 5_000);
    m.pass(1500);
    m.step(-DAY);
    assert.equal(rc.now(), 1_700_000_001_500, 'a wall step back moves nothing');
    assert.equal(rc.mono(), 6_500);
    assert.equal(rc.wall(), 1_700_000_001_500 - DAY, 'the wall clock itself is read as it is');
    const one = clockFromNow(() => 42);
    assert.deepEqual([one.wall(), one.mono()], [42, 42]);
  });
});
