// What the retry scheduler (engine/scheduler.ts) tells an operator, tick by tick: the log rows of
// spool ingestion, due retries, cut-off reclaims, pruning and the backoff-cap clamp, each only when
// there was something to say, and the errors of a tick or a start that could not check the
// schedule. Root-free: in-memory store, fake plugins, an injected clock and a capturing logger.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { RetryScheduler } from '../../daemon/src/engine/scheduler.js';
import { Store } from '../../daemon/src/store/store.js';
import { NETNS, conf, deferred, req, setup } from '../helpers/engine-fakes.js';
import { captureLog } from '../helpers/log-capture.js';

const root = mkdtempSync(join(tmpdir(), 'steward-scheduler-test-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;

const KEY = { network: 'net', ifname: 'eth0' };
const chain = conf([{ type: 'one' }, { type: 'two' }]);
/** Two chains of one plugin each: the side chain's step (three) is torn down before the pod's (one). */
const sides = conf([], '1.0.0', [
  { name: 'pod', plugins: [{ type: 'one' }] },
  { name: 'side', plugins: [{ type: 'three' }] },
]);
const HOUR = 3_600_000;

function world(opts: { spoolDir?: string; pollMs?: number; ownNow?: boolean } = {}) {
  const clock = { t: 1_000_000 };
  const store = new Store(':memory:', () => clock.t);
  const env = setup({ now: () => clock.t, store });
  const cap = captureLog();
  const s = new RetryScheduler({
    engine: env.engine,
    store,
    log: cap.log,
    // One tick per start unless told: the next would come an hour later.
    pollMs: opts.pollMs ?? HOUR,
    tombstoneTtlMs: HOUR,
    pruneEveryMs: 60_000,
    spoolDir: opts.spoolDir ?? join(root, 'no-spool'),
    // Without its own `now`, the scheduler prunes on the engine's retry clock's wall time.
    ...(opts.ownNow === false ? {} : { now: () => clock.t }),
  });
  /** Starts the scheduler, waits for its first tick to end (it always prunes) and stops it. */
  /** Resolves `pruned` at the scheduler's next prune (every tick ends with one); restore() unhooks. */
  const onPrune = () => {
    const pruned = deferred();
    const real = store.pruneTombstones.bind(store);
    store.pruneTombstones = (...a: Parameters<Store['pruneTombstones']>) => {
      const n = real(...a);
      pruned.resolve();
      return n;
    };
    return { pruned: pruned.promise, restore: () => (store.pruneTombstones = real) };
  };
  const oneTick = async () => {
    const { pruned, restore } = onPrune();
    s.start();
    await pruned;
    await s.stop();
    restore();
  };
  /** A teardown of `id` whose step of plugin `one` failed, due at the clock's now + 1 s (or `dueAt`). */
  const failing = async (id: string) => {
    let fail = true;
    env.plugins.on('one', (c) => {
      if (c.command === 'DEL' && fail) throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await env.engine.handle(req('ADD', id, chain));
    await env.engine.handle(req('DEL', id, chain));
    const a = store.currentAttachment({ containerId: id, ...KEY })!;
    assert.equal(a.state, 'deleting');
    return { id: a.id, heal: () => (fail = false) };
  };
  /** Like oneTick, but false when the tick has not ended within 2 s (it waits on something). */
  const tickEnds = async () => {
    const { pruned } = onPrune();
    s.start();
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      pruned.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 2000))),
    ]);
    clearTimeout(timer);
    return ended;
  };
  return { clock, store, env, cap, s, oneTick, tickEnds, failing };
}

function spoolWire(containerId: string) {
  return JSON.stringify({
    env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: containerId, CNI_NETNS: NETNS, CNI_IFNAME: 'eth0', CNI_PATH: '/fake' },
    config: chain,
  });
}

describe('retry scheduler: what a tick logs', () => {
  test('a tick with nothing to do logs nothing', async () => {
    const w = world();
    await w.oneTick();
    assert.deepEqual(w.cap.rows, []);
  });

  test('a tick reports the spool it ingested, the retries it ran and what it pruned', async () => {
    const spoolDir = join(root, `spool-${++dirs}`);
    mkdirSync(spoolDir);
    const w = world({ spoolDir });
    await w.env.engine.handle(req('ADD', 'old', chain));
    await w.env.engine.handle(req('DEL', 'old', chain));
    const due = await w.failing('due');
    due.heal();
    w.clock.t += 2 * HOUR;
    // One spooled DEL that runs, one entry that cannot be read: 1 + 1, never 1 - 1.
    writeFileSync(join(spoolDir, 'a.json'), spoolWire('gone'));
    writeFileSync(join(spoolDir, 'b.json'), '{not json');
    await w.oneTick();
    assert.deepEqual(w.cap.of('spooled DELs ingested'), [{ ingested: 1, rejected: 1 }]);
    const rejected = w.cap.of('spooled DEL rejected; moved to spool/rejected');
    assert.equal(rejected.length, 1);
    assert.equal(rejected[0]!.file, join(spoolDir, 'b.json'));
    assert.equal(rejected[0]!.movedTo, join(spoolDir, 'rejected', 'b.json'));
    assert.match(String(rejected[0]!.err), /JSON/);
    assert.deepEqual(readdirSync(join(spoolDir, 'rejected')), ['b.json']);
    assert.deepEqual(w.cap.of('teardown retries ran'), [
      { attempted: 1, done: 1, abandoned: 0, pending: 0, stepsAbandoned: 0 },
    ]);
    assert.equal(w.store.getAttachment(due.id)!.state, 'deleted');
    assert.deepEqual(w.cap.of('pruned finished attachments'), [{ pruned: 1 }]);
    assert.deepEqual(w.cap.of('cut-off attachments reclaimed'), [], 'nothing was cut off');
  });

  test('a spool pass that only rejected is reported too', async () => {
    const spoolDir = join(root, `spool-${++dirs}`);
    mkdirSync(spoolDir);
    writeFileSync(join(spoolDir, 'bad.json'), 'nope');
    const w = world({ spoolDir });
    await w.oneTick();
    assert.deepEqual(w.cap.of('spooled DELs ingested'), [{ ingested: 0, rejected: 1 }]);
  });

  test('a retry that fails again is reported as pending', async () => {
    const w = world();
    const due = await w.failing('still');
    w.clock.t += 10_000; // past the 5 s backoff cap, well within the hour before it is given up on
    await w.oneTick();
    assert.deepEqual(w.cap.of('teardown retries ran'), [
      { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 },
    ]);
    assert.equal(w.store.getAttachment(due.id)!.state, 'deleting');
  });

  test('a reclaimed cut-off journal is reported, whether it finished or is still pending', async () => {
    for (const finishes of [true, false]) {
      const w = world();
      await w.env.engine.handle(req('ADD', 'cut', chain));
      const a = w.store.currentAttachment({ containerId: 'cut', ...KEY })!;
      w.store.atomic(() => {
        w.store.setAttachmentState(a.id, 'deleting');
        w.store.setStepDeleting(w.store.stepsOf(a.id)[1]!.id);
      });
      if (!finishes)
        w.env.plugins.on('two', (c) => {
          if (c.command === 'DEL') throw new CniError(11, 'busy');
        });
      await w.oneTick();
      assert.deepEqual(
        w.cap.of('cut-off attachments reclaimed'),
        [
          finishes
            ? { attempted: 1, done: 1, abandoned: 0, pending: 0, stepsAbandoned: 0 }
            : { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 },
        ],
        finishes ? 'reclaimed' : 'still pending',
      );
      assert.equal(w.store.getAttachment(a.id)!.state, finishes ? 'deleted' : 'deleting');
    }
  });

  test('a tick that fails is logged with its error, and the scheduler keeps its state', async () => {
    const w = world();
    w.store.dueAttachmentIds = () => {
      throw new Error('database is locked');
    };
    w.s.start();
    await w.cap.waitFor('retry scheduler tick failed');
    await w.s.stop();
    assert.deepEqual(w.cap.of('retry scheduler tick failed'), [{ err: 'database is locked' }]);
  });

  test('a start whose schedule check fails logs why and says the next tick retries it', async () => {
    const w = world();
    let calls = 0;
    const real = w.store.clampNextAttempts.bind(w.store);
    w.store.clampNextAttempts = (latest) => {
      if (++calls === 1) throw new Error('disk I/O error');
      return real(latest);
    };
    await w.oneTick();
    assert.deepEqual(w.cap.of('retry schedule could not be checked; retried on the next tick'), [
      { err: 'disk I/O error' },
    ]);
    assert.equal(calls, 2, 'the tick checked it again');
  });

  test('a teardown that cannot run (journal write refused) is logged per attachment and left for the next tick', async () => {
    const w = world();
    const due = await w.failing('full');
    due.heal();
    w.store.setStepDeleting = () => {
      throw new Error('database or disk is full');
    };
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    assert.deepEqual(w.cap.of('teardown could not run; retried on the next tick'), [
      { attachment: due.id, err: 'stewardd journal write failed (error: database or disk is full)' },
    ]);
  });
});

describe('retry scheduler: the backoff-cap clamp', () => {
  test('a retry journaled beyond the cap is pulled in to now + the cap, and that is logged once', async () => {
    const w = world();
    const due = await w.failing('far');
    const step = w.store.stepsOf(due.id).find((st) => st.state === 'del_failed')!;
    w.store.setStepDelFailed(step.id, 'busy', w.clock.t + 10 * 24 * HOUR);
    assert.equal(w.s.clampSchedule(), 1);
    assert.equal(w.store.nextTeardownDueAt(), w.clock.t + 5000, 'at most the 5 s cap of the test policy from now');
    assert.deepEqual(
      w.cap.of(
        'teardown retries scheduled beyond the backoff cap (the wall clock stepped back?); pulled in to the cap',
      ),
      [{ steps: 1, maxDelayMs: 5000 }],
    );
    assert.equal(w.s.clampSchedule(), 0, 'within the cap now');
    assert.equal(w.cap.rows.length, 1, 'nothing more is logged when nothing was pulled in');
  });
});

describe('retry scheduler: what it runs, and what it never waits for', () => {
  test('without a `now` of its own it prunes on the engine retry clock’s wall time', async () => {
    const w = world({ ownNow: false });
    await w.env.engine.handle(req('ADD', 'old', chain));
    await w.env.engine.handle(req('DEL', 'old', chain));
    const old = w.store.currentAttachment({ containerId: 'old', ...KEY })!.id;
    w.clock.t += 2 * HOUR;
    const ended = await w.tickEnds();
    await w.s.stop();
    assert.equal(ended, true, 'the tick reached its prune');
    assert.equal(w.store.getAttachment(old), undefined, 'pruned past the TTL');
    assert.deepEqual(w.cap.of('pruned finished attachments'), [{ pruned: 1 }]);
    assert.deepEqual(w.cap.of('retry scheduler tick failed'), []);
  });

  test('a tick retries only the steps that are due, not every failed step of the attachment', async () => {
    const w = world();
    let failing = true;
    for (const type of ['one', 'three'])
      w.env.plugins.on(type, (c) => {
        if (c.command === 'DEL' && failing) throw new CniError(11, 'busy');
        return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
      });
    await w.env.engine.handle(req('ADD', 'm', sides));
    await w.env.engine.handle(req('DEL', 'm', sides));
    failing = false;
    const a = w.store.currentAttachment({ containerId: 'm', ...KEY })!;
    const failed = w.store.stepsOf(a.id).filter((st) => st.state === 'del_failed');
    assert.equal(failed.length, 2);
    const [early, late] = failed as [(typeof failed)[0], (typeof failed)[0]];
    w.store.setStepDelFailed(early.id, 'busy', w.clock.t + 1000);
    w.store.setStepDelFailed(late.id, 'busy', w.clock.t + 4000);
    w.clock.t += 2000;
    const before = w.env.plugins.of('DEL').length;
    await w.oneTick();
    assert.deepEqual(
      w.env.plugins.of('DEL').slice(before),
      [`DEL ${early.pluginType} m`],
      'only the due step was DELed; the other waits for its time',
    );
    assert.equal(w.store.getAttachment(a.id)!.state, 'deleting');
  });

  test('a tick does not wait for a live ADD whose rows look unfinished, nor reclaims it afterwards', async () => {
    const w = world();
    const gate = deferred();
    w.env.plugins.on('two', async (c) => {
      if (c.command === 'ADD') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const add = w.env.engine.handle(req('ADD', 'live', chain));
    while (w.env.plugins.of('ADD').length < 2) await new Promise((r) => setTimeout(r, 1));
    const a = w.store.currentAttachment({ containerId: 'live', ...KEY })!;
    assert.equal(a.state, 'adding');
    const ended = await w.tickEnds();
    gate.resolve();
    await add;
    await w.s.stop();
    assert.equal(ended, true, 'the tick ended while the ADD was still running');
    assert.equal(w.store.getAttachment(a.id)!.state, 'added');
    assert.deepEqual(w.cap.of('cut-off attachments reclaimed'), []);
    assert.deepEqual(w.env.plugins.of('DEL'), [], 'the live ADD was not torn down');
  });

  test('a tick does not wait for an attachment a retryNow is still tearing down', async () => {
    const w = world();
    let failing = true;
    const gate = deferred();
    for (const type of ['one', 'three'])
      w.env.plugins.on(type, async (c) => {
        if (c.command === 'DEL' && failing) throw new CniError(11, 'busy');
        if (c.command === 'DEL') await gate.promise;
        return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
      });
    await w.env.engine.handle(req('ADD', 'slow', sides));
    await w.env.engine.handle(req('DEL', 'slow', sides));
    failing = false;
    w.clock.t += 10_000; // both failed steps are due
    const dels = w.env.plugins.of('DEL').length;
    const retry = w.s.retryNow();
    while (w.env.plugins.of('DEL').length === dels) await new Promise((r) => setTimeout(r, 1));
    const ended = await w.tickEnds();
    gate.resolve();
    assert.deepEqual(await retry, { attempted: 1, done: 1, abandoned: 0, pending: 0, stepsAbandoned: 0 });
    await w.s.stop();
    assert.equal(ended, true, 'the tick ended while the retry was still running');
    assert.deepEqual(w.cap.of('teardown retries ran'), [], 'the tick left the attachment to the retry under way');
  });

  test('an attachment whose teardown could not run is retried by a later tick', async () => {
    const w = world();
    const due = await w.failing('again');
    due.heal();
    const real = w.store.setStepDeleting.bind(w.store);
    let full = true;
    w.store.setStepDeleting = (id) => {
      if (full) throw new Error('database or disk is full');
      real(id);
    };
    w.clock.t += 10_000;
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    full = false;
    await w.oneTick();
    assert.deepEqual(w.cap.of('teardown retries ran'), [
      { attempted: 1, done: 1, abandoned: 0, pending: 0, stepsAbandoned: 0 },
    ]);
    assert.equal(w.store.getAttachment(due.id)!.state, 'deleted');
  });

  test('a retry asked while a tick tears the attachment down waits for that run, then DELs no step it just tried', async () => {
    const w = world();
    const due = await w.failing('joined');
    const gate = deferred();
    const started = deferred();
    let dels = 0;
    w.env.plugins.on('one', async (c) => {
      if (c.command !== 'DEL') return undefined;
      dels++;
      started.resolve();
      await gate.promise;
      throw new CniError(11, 'busy');
    });
    w.clock.t += 10_000;
    w.s.start();
    await started.promise; // the tick is running the failing step
    const retry = w.s.retryNow();
    await new Promise((r) => setTimeout(r, 20));
    gate.resolve();
    assert.deepEqual(await retry, { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    await w.s.stop();
    assert.equal(dels, 1, 'one DEL: a second right after would spend one more of its attempts');
    assert.equal(w.store.stepsOf(due.id).find((st) => st.pluginType === 'one')!.attempts, 2);
  });

  test('a retry asked while a tick tears down a second chain does not DEL again the step the tick tried in the first', async () => {
    const w = world();
    let failing = true;
    const gate = deferred();
    const started = deferred();
    // three (the side chain, torn down first) keeps failing; one fails until healed, then waits on the gate.
    w.env.plugins.on('three', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
      return { cniVersion: '1.0.0' };
    });
    w.env.plugins.on('one', async (c) => {
      if (c.command === 'DEL' && failing) throw new CniError(11, 'busy');
      if (c.command === 'DEL') {
        started.resolve();
        await gate.promise;
      }
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await w.env.engine.handle(req('ADD', 'twice', sides));
    await w.env.engine.handle(req('DEL', 'twice', sides));
    failing = false;
    const a = w.store.currentAttachment({ containerId: 'twice', ...KEY })!;
    w.clock.t += 10_000; // both failed steps are due
    const before = w.env.plugins.of('DEL').length;
    w.s.start();
    await started.promise; // the tick DELed three (failed again) and is now DELing one
    const retry = w.s.retryNow();
    await new Promise((r) => setTimeout(r, 20));
    gate.resolve();
    // three was tried by the tick before the retry came: it waits for its next attempt.
    assert.deepEqual(await retry, { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    await w.s.stop();
    assert.deepEqual(w.env.plugins.of('DEL').slice(before).sort(), ['DEL one twice', 'DEL three twice']);
    const three = w.store.stepsOf(a.id).find((st) => st.pluginType === 'three')!;
    assert.deepEqual([three.state, three.attempts], ['del_failed', 2]);
  });

  test('a retry asked while a tick abandons the last failing step reports it abandoned, never torn down', async () => {
    const w = world();
    const gate = deferred();
    const started = deferred();
    let dels = 0;
    // Code 4 is bad input: abandoned at its third DEL (the runtime's, the first retry's, the tick's).
    w.env.plugins.on('one', async (c) => {
      if (c.command !== 'DEL') return { cniVersion: '1.0.0' };
      if (++dels === 3) {
        started.resolve();
        await gate.promise;
      }
      throw new CniError(4, 'bad field');
    });
    await w.env.engine.handle(req('ADD', 'gone', chain));
    await w.env.engine.handle(req('DEL', 'gone', chain));
    const a = w.store.currentAttachment({ containerId: 'gone', ...KEY })!;
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    w.clock.t += HOUR; // due, whatever its backoff
    w.s.start();
    await started.promise; // the tick runs the third DEL
    const retry = w.s.retryNow();
    await new Promise((r) => setTimeout(r, 20));
    gate.resolve();
    assert.deepEqual(await retry, { attempted: 1, done: 0, abandoned: 1, pending: 0, stepsAbandoned: 1 });
    await w.s.stop();
    assert.equal(dels, 3);
    assert.equal(w.store.getAttachment(a.id)!.state, 'deleted');
  });

  test('a retry that cannot run after the tick abandoned a step still counts that step', async () => {
    const w = world();
    const gate = deferred();
    const started = deferred();
    let threeDels = 0;
    // three's DEL is bad input (code 4: abandoned at its third DEL), one's keeps failing (code 11).
    w.env.plugins.on('three', async (c) => {
      if (c.command !== 'DEL') return { cniVersion: '1.0.0' };
      if (++threeDels === 3) {
        started.resolve();
        await gate.promise;
      }
      throw new CniError(4, 'no');
    });
    w.env.plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
      return { cniVersion: '1.0.0' };
    });
    await w.env.engine.handle(req('ADD', 'refused', sides));
    await w.env.engine.handle(req('DEL', 'refused', sides));
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    // From now on a forced teardown cannot run (its journal write refused: a full disk).
    const real = w.env.engine.runTeardown.bind(w.env.engine);
    w.env.engine.runTeardown = (id, priority, opts, turn) => {
      if (opts?.force) throw new Error('database or disk is full');
      return real(id, priority, opts, turn);
    };
    w.clock.t += 10_000; // both due (the backoff cap is 5 s), neither past its age bound
    w.s.start();
    await started.promise; // the tick runs three's third DEL, which abandons it
    const retry = w.s.retryNow();
    gate.resolve();
    assert.deepEqual(await retry, { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 1 });
    await w.s.stop();
    assert.deepEqual(w.cap.of('teardown could not run; retried on the next tick').length, 1);
  });

  test('a retry asked while a tick runs only the due steps still DELs the steps not yet due (it forces)', async () => {
    const w = world();
    let failing = true;
    const gate = deferred();
    const started = deferred();
    for (const type of ['one', 'three'])
      w.env.plugins.on(type, async (c) => {
        if (c.command === 'DEL' && failing) throw new CniError(11, 'busy');
        if (c.command === 'DEL' && type === 'three') {
          started.resolve();
          await gate.promise;
        }
        return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
      });
    await w.env.engine.handle(req('ADD', 'mixed', sides));
    await w.env.engine.handle(req('DEL', 'mixed', sides));
    failing = false;
    const a = w.store.currentAttachment({ containerId: 'mixed', ...KEY })!;
    const step = (type: string) => w.store.stepsOf(a.id).find((st) => st.pluginType === type)!;
    w.store.setStepDelFailed(step('three').id, 'busy', w.clock.t + 1000);
    w.store.setStepDelFailed(step('one').id, 'busy', w.clock.t + 4000);
    w.clock.t += 2000; // three is due, one is not
    const before = w.env.plugins.of('DEL').length;
    w.s.start();
    await started.promise; // the tick is DELing three, and will leave one for its time
    const retry = w.s.retryNow();
    await new Promise((r) => setTimeout(r, 20));
    gate.resolve();
    // The retry waited for the tick, then forced one, not yet due; three, just DELed, is not DELed again.
    assert.deepEqual(await retry, { attempted: 1, done: 1, abandoned: 0, pending: 0, stepsAbandoned: 0 });
    await w.s.stop();
    assert.deepEqual(w.env.plugins.of('DEL').slice(before).sort(), ['DEL one mixed', 'DEL three mixed']);
    assert.equal(w.store.getAttachment(a.id)!.state, 'deleted');
  });

  test('a retry counts the steps it abandoned in an attachment still pending too', async () => {
    const w = world();
    // three's DEL is bad input (code 4: abandoned at its third DEL), one's keeps failing (code 11).
    for (const [type, code] of [
      ['one', 11],
      ['three', 4],
    ] as const)
      w.env.plugins.on(type, (c) => {
        if (c.command === 'DEL') throw new CniError(code, 'no');
        return { cniVersion: '1.0.0' };
      });
    await w.env.engine.handle(req('ADD', 'half', sides));
    await w.env.engine.handle(req('DEL', 'half', sides));
    const a = w.store.currentAttachment({ containerId: 'half', ...KEY })!;
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 1 });
    assert.deepEqual(
      w.store
        .stepsOf(a.id)
        .map((st) => [st.pluginType, st.state])
        .sort(),
      [
        ['one', 'del_failed'],
        ['three', 'abandoned'],
      ],
    );
  });

  test('a retry that abandons a step reports it abandoned, never torn down', async () => {
    const w = world();
    w.env.plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(4, 'bad field');
      return { cniVersion: '1.0.0' };
    });
    await w.env.engine.handle(req('ADD', 'doomed', chain));
    await w.env.engine.handle(req('DEL', 'doomed', chain));
    const a = w.store.currentAttachment({ containerId: 'doomed', ...KEY })!;
    // Code 4 is bad input: abandoned at its third DEL (the runtime's was the first).
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    assert.deepEqual(await w.s.retryNow(), { attempted: 1, done: 0, abandoned: 1, pending: 0, stepsAbandoned: 1 });
    assert.equal(w.store.getAttachment(a.id)!.state, 'deleted');
    assert.deepEqual(
      w.store.stepsOf(a.id).map((st) => [st.pluginType, st.state]),
      [
        ['one', 'abandoned'],
        ['two', 'deleted'],
      ],
    );
  });

  test('stopped in the middle of a tick, the scheduler runs no further tick', async () => {
    const w = world({ pollMs: 5 });
    let ticks = 0;
    const realDue = w.store.dueAttachmentIds.bind(w.store);
    w.store.dueAttachmentIds = (now) => {
      ticks++;
      return realDue(now);
    };
    const due = await w.failing('mid');
    const gate = deferred();
    const started = deferred();
    w.env.plugins.on('one', async (c) => {
      if (c.command === 'DEL') {
        started.resolve();
        await gate.promise;
      }
      return undefined;
    });
    w.clock.t += 10_000;
    w.s.start();
    await started.promise; // the first tick is retrying
    const stopping = w.s.stop();
    gate.resolve();
    await stopping;
    assert.equal(w.store.getAttachment(due.id)!.state, 'deleted', 'the tick under way finished its work');
    const seen = ticks;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(ticks, seen, 'no tick after stop()');
  });
});
