// The DEL spool and the retry scheduler without root: spool entries in a temp dir ingested as
// runtime DELs (unreadable ones moved to spool/rejected/), and the scheduler's retries, reclaims
// and pruning against the in-memory store with an injected clock.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { recover } from '../../daemon/src/engine/recovery.js';
import { RetryScheduler } from '../../daemon/src/engine/scheduler.js';
import { MAX_SPOOL_FILE_BYTES, SpoolDrain, ingestSpool } from '../../daemon/src/engine/spool.js';
import { Store } from '../../daemon/src/store/store.js';
import { NETNS, conf, deferred, req, setup, silentLog } from '../helpers/engine-fakes.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-test-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = join(root, `spool-${++n}`);
  mkdirSync(d);
  return d;
};

const KEY = { network: 'net', ifname: 'eth0' };
const chain = conf([{ type: 'one' }, { type: 'two' }]);

function wire(command: string, containerId: string, config: Record<string, unknown> = chain, ifname = 'eth0') {
  return JSON.stringify({
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: containerId,
      CNI_NETNS: NETNS,
      CNI_IFNAME: ifname,
      CNI_PATH: '/fake',
    },
    config,
  });
}

describe('spool', () => {
  test('a missing spool dir ingests nothing', async () => {
    const { engine } = setup();
    assert.deepEqual(await ingestSpool(engine, join(root, 'nope'), silentLog), { ingested: 0, rejected: 0 });
  });

  test('each spooled DEL is handled like a runtime DEL and its file removed', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'a', chain));
    const dir = freshDir();
    writeFileSync(join(dir, '2.json'), wire('DEL', 'b'));
    writeFileSync(join(dir, '1.json'), wire('DEL', 'a'));
    writeFileSync(join(dir, 'notes.txt'), 'not a spool entry');
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 2, rejected: 0 });
    const dels = plugins.of('DEL');
    assert.deepEqual(
      dels.filter((d) => d.endsWith(' a')),
      ['DEL two a', 'DEL one a'],
    );
    assert.deepEqual(
      dels.filter((d) => d.endsWith(' b')),
      ['DEL two b', 'DEL one b'],
    );
    assert.equal(dels.length, 4);
    assert.equal(store.currentAttachment({ containerId: 'a', ...KEY })!.state, 'deleted');
    assert.deepEqual(readdirSync(dir), ['notes.txt']);
  });

  test('a spooled file removed by someone else while its DEL ran is consumed all the same', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    const file = join(dir, 'gone.json');
    writeFileSync(file, wire('DEL', 'gone', conf([{ type: 'one' }])));
    plugins.on('one', () => rmSync(file)); // an operator cleaning the spool by hand
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 1, rejected: 0 });
    assert.deepEqual(plugins.of('DEL'), ['DEL one gone']);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('a spooled DEL that fails is still consumed: its teardown stays journaled', async () => {
    const { engine, plugins, store } = setup({ delPolicy: 'strict' });
    await engine.handle(req('ADD', 'f', chain));
    plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const dir = freshDir();
    writeFileSync(join(dir, 'x.json'), wire('DEL', 'f'));
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 1, rejected: 0 });
    assert.deepEqual(readdirSync(dir), []);
    assert.equal(store.currentAttachment({ containerId: 'f', ...KEY })!.state, 'deleting');
  });

  test('what cannot be read safely is moved to spool/rejected/, never lost and never run', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    writeFileSync(join(dir, 'add.json'), wire('ADD', 'x'));
    writeFileSync(join(dir, 'garbage.json'), '{not json');
    writeFileSync(join(dir, 'big.json'), Buffer.alloc(MAX_SPOOL_FILE_BYTES + 1, 0x20));
    writeFileSync(join(root, 'target.json'), wire('DEL', 'y'));
    symlinkSync(join(root, 'target.json'), join(dir, 'link.json'));
    mkdirSync(join(dir, 'dir.json'));
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 0, rejected: 5 });
    assert.equal(plugins.calls.length, 0);
    assert.deepEqual(readdirSync(dir), ['rejected']);
    assert.deepEqual(readdirSync(join(dir, 'rejected')).sort(), [
      'add.json',
      'big.json',
      'dir.json',
      'garbage.json',
      'link.json',
    ]);
    assert.ok(existsSync(join(root, 'target.json')), 'the link target is untouched');

    // A second rejected entry of the same name does not replace the first.
    writeFileSync(join(dir, 'add.json'), wire('ADD', 'x2'));
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 0, rejected: 1 });
    const names = readdirSync(join(dir, 'rejected'));
    assert.equal(names.length, 6);
    assert.ok(names.some((f) => /^add\.json\.\d+-[0-9a-f]{6}$/.test(f)));
  });

  test('a spooled file of exactly the size limit is read', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    const body = wire('DEL', 'exact');
    writeFileSync(join(dir, 'e.json'), body + ' '.repeat(MAX_SPOOL_FILE_BYTES - Buffer.byteLength(body)));
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 1, rejected: 0 });
    assert.equal(plugins.of('DEL').length, 2);
  });

  test('when rejected/ is not a directory nothing is moved into it, and the entry stays', async () => {
    const { engine } = setup();
    const dir = freshDir();
    writeFileSync(join(dir, 'rejected'), 'a file in the way');
    writeFileSync(join(dir, 'bad.json'), 'nope');
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 0, rejected: 0 });
    assert.ok(existsSync(join(dir, 'bad.json')));
  });
});

describe('recovery', () => {
  test('leaves the spool to the background drain and reports what it did', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    writeFileSync(join(dir, '1.json'), wire('DEL', 'sp'));
    const report = await recover(engine, 'boot-1', silentLog);
    assert.deepEqual(report, { staleBoot: 0, rolledBack: 0, resumed: 0, notStarted: 0, couldNotRun: 0 });
    assert.deepEqual(plugins.of('DEL'), []);
    assert.deepEqual(readdirSync(dir), ['1.json']);
  });
});

describe('the start-up spool drain', () => {
  const spoolName = (t: number, id: string, i: number) =>
    `${String(t).padStart(15, '0')}-${id}-${i.toString(16).padStart(8, '0')}.json`;

  test('a runtime DEL of a held container is not held, unless an ADD of it is waiting', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    const t = Date.now() - 1000;
    writeFileSync(join(dir, spoolName(t, 'h', 1)), wire('DEL', 'h'));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 1);
    // A repeat of the spooled DEL: served at once (pass-through), not held until the drain.
    await engine.handle(req('DEL', 'h', chain));
    assert.deepEqual(plugins.of('DEL'), ['DEL two h', 'DEL one h']);
    // An ADD is held; a DEL after it keeps its place behind it.
    const add = engine.handle(req('ADD', 'h', chain));
    const del = engine.handle(req('DEL', 'h', chain));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(plugins.of('ADD').length, 0, 'the ADD waits for the spooled DEL');
    assert.equal(plugins.of('DEL').length, 2, 'the DEL waits behind the held ADD');
    await drain.start();
    await add;
    await del;
    const last = plugins.calls.slice(-4);
    assert.deepEqual(last, ['ADD one h', 'ADD two h', 'DEL two h', 'DEL one h']);
  });

  test('entries not named by spoolRequest are counted and drained too, holding no container', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    writeFileSync(join(dir, 'by-hand.json'), wire('DEL', 'hand'));
    writeFileSync(join(dir, 'broken.json'), '{not json');
    writeFileSync(join(dir, spoolName(Date.now() - 1000, 'named', 1)), wire('DEL', 'named'));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 3);
    assert.equal(drain.pending, 3);
    assert.equal(engine.spoolHold?.('hand'), undefined, 'an unnamed entry holds nobody');
    assert.ok(engine.spoolHold?.('named'));
    assert.deepEqual(await drain.start(), { ingested: 2, rejected: 1 });
    assert.equal(drain.pending, 0);
    assert.equal(engine.spoolHold, undefined);
    assert.deepEqual(plugins.of('DEL').sort(), ['DEL one hand', 'DEL one named', 'DEL two hand', 'DEL two named']);
  });

  test('a container id longer than the 64 characters a spool name keeps is still held', async () => {
    const { engine, plugins } = setup();
    const long = 'c'.repeat(70);
    const dir = freshDir();
    writeFileSync(join(dir, spoolName(Date.now() - 1000, long.slice(0, 64), 1)), wire('DEL', long));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 1);
    assert.ok(engine.spoolHold?.(long), 'held by its first 64 characters');
    const add = engine.handle(req('ADD', long, chain));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(plugins.of('ADD').length, 0);
    await drain.start();
    await add;
    assert.equal(plugins.of('ADD').length, 2);
  });

  test('each held container is released as soon as its own spooled DELs are done, not at the end of the drain', async () => {
    const { engine, plugins } = setup();
    const gate = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'DEL' && c.containerId === 'slow') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const dir = freshDir();
    const t = Date.now() - 1000;
    writeFileSync(join(dir, spoolName(t, 'slow', 1)), wire('DEL', 'slow'));
    writeFileSync(join(dir, spoolName(t, 'fast', 2)), wire('DEL', 'fast'));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 2);
    const drained = drain.start();
    const add = engine.handle(req('ADD', 'fast', chain)).then(() => 'added');
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise((r) => (timer = setTimeout(() => r('still held'), 5000)));
    assert.equal(await Promise.race([add, waited]), 'added', 'served while the other container drains');
    clearTimeout(timer);
    assert.deepEqual(plugins.of('ADD'), ['ADD one fast', 'ADD two fast']);
    assert.equal(drain.pending, 1);
    gate.resolve();
    await drained;
    assert.equal(drain.pending, 0);
  });

  test('a container with two spooled DELs counts down one by one: the backlog says what is left', async () => {
    const { engine, plugins } = setup();
    const one = conf([{ type: 'one' }]);
    // Whichever file comes second (directory order) has its DEL blocked until the test says.
    const second = deferred();
    plugins.on('one', async () => {
      if (plugins.of('DEL').length === 2) await second.promise;
    });
    const dir = freshDir();
    const t = Date.now() - 1000;
    writeFileSync(join(dir, spoolName(t, 'two', 1)), wire('DEL', 'two', one, 'eth0'));
    writeFileSync(join(dir, spoolName(t, 'two', 2)), wire('DEL', 'two', one, 'eth1'));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 2);
    const drained = drain.start();
    while (plugins.of('DEL').length < 2 || readdirSync(dir).length > 1) await new Promise((r) => setImmediate(r));
    assert.equal(drain.pending, 1, 'the first file is done, the second not');
    assert.ok(engine.spoolHold?.('two'), 'the container is held until both are done');
    second.resolve();
    assert.deepEqual(await drained, { ingested: 2, rejected: 0 });
    assert.equal(drain.pending, 0);
  });

  test('start() twice runs one drain: both callers get its report', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    writeFileSync(join(dir, spoolName(Date.now() - 1000, 'twice', 1)), wire('DEL', 'twice'));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 1);
    const [a, b] = await Promise.all([drain.start(), drain.start()]);
    assert.deepEqual(a, { ingested: 1, rejected: 0 });
    assert.deepEqual(b, { ingested: 1, rejected: 0 });
    assert.deepEqual(plugins.of('DEL'), ['DEL two twice', 'DEL one twice']);
  });

  test('an empty or missing spool holds nothing and drains at once', async () => {
    const { engine } = setup();
    const empty = new SpoolDrain(engine, freshDir(), silentLog);
    assert.equal(empty.scan(), 0);
    assert.equal(engine.spoolHold, undefined);
    assert.deepEqual(await empty.start(), { ingested: 0, rejected: 0 });
    const missing = new SpoolDrain(engine, join(root, 'never-made'), silentLog);
    assert.equal(missing.scan(), 0);
    assert.deepEqual(await missing.start(), { ingested: 0, rejected: 0 });
  });

  test('a CHECK of a held container waits for its spooled DELs too', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'ck', chain));
    const dir = freshDir();
    writeFileSync(join(dir, spoolName(Date.now() - 1000, 'ck', 1)), wire('DEL', 'ck'));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 1);
    const check = engine.handle(req('CHECK', 'ck', chain)).then(
      () => 'healthy',
      (e: CniError) => e.code,
    );
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(plugins.of('CHECK').length, 0, 'the CHECK waits for the spooled DEL');
    await drain.start();
    assert.equal(await check, 106, 'after the spooled DEL the attachment is torn down (106), never checked as healthy');
    assert.deepEqual(plugins.of('DEL'), ['DEL two ck', 'DEL one ck']);
  });

  test('a scheduler tick holding the spool dir through the start-up drain: the holds last until every spooled DEL is done', async () => {
    // The engine faked: spooled DELs end when the test says. A tick's pass (ingestSpool) takes the
    // spool dir first and runs the held container's spooled DEL; the start-up drain must not
    // release the container before that DEL is done, however long the tick takes. (When that DEL
    // sits in a later batch of the tick's pass than a slow one, nothing else orders the ADD after it.)
    const dir = freshDir();
    const t = Date.now() - 1000;
    writeFileSync(join(dir, spoolName(t, 'reused', 1)), wire('DEL', 'reused'));
    const pending: Array<{ id: string; done: () => void }> = [];
    const fake = {
      spoolHold: undefined as ((id: string) => Promise<void> | undefined) | undefined,
      spooledDel: (r: { env: { containerId: string } }) =>
        new Promise<string>((resolve) => pending.push({ id: r.env.containerId, done: () => resolve('') })),
    };
    const engine = fake as unknown as Parameters<typeof ingestSpool>[0];
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 1);
    const hold = fake.spoolHold?.('reused');
    assert.ok(hold, 'the container is held');
    let released = false;
    void hold.then(() => (released = true));
    const tick = ingestSpool(engine, dir, silentLog);
    assert.deepEqual(
      pending.map((p) => p.id),
      ['reused'],
      "the tick's pass runs the spooled DEL",
    );
    let drained = false;
    const started = drain.start().then((r) => ((drained = true), r));
    // Longer than both of the old drain's tries and the 200 ms between them.
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(released, false, "the hold ended while the tick's pass still ran the container's spooled DEL");
    assert.equal(drained, false);
    assert.equal(fake.spoolHold === undefined, false);
    pending[0]!.done();
    assert.deepEqual(await tick, { ingested: 1, rejected: 0 });
    await started;
    assert.equal(released, true, 'released once the spooled DEL is done');
    assert.equal(fake.spoolHold, undefined);
    assert.equal(drain.pending, 0);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('one delegate DEL per attachment however many files name it; holds only the containers named', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'known', chain));
    const dir = freshDir();
    const t = Date.now() - 1000;
    for (let i = 0; i < 600; i++) writeFileSync(join(dir, spoolName(t, 'known', i)), wire('DEL', 'known'));
    for (let i = 0; i < 30; i++) writeFileSync(join(dir, spoolName(t, `gone${i}`, i)), wire('DEL', `gone${i}`));
    writeFileSync(join(dir, spoolName(t, 'bad', 1)), '{not json');
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 631);
    assert.equal(drain.pending, 631);
    assert.ok(engine.spoolHold?.('known'), 'a container with spooled DELs is held');
    assert.equal(engine.spoolHold?.('other'), undefined, 'another container is not');
    // An ADD for the held container waits for its spooled DELs (the runtime sent them first).
    const add = engine.handle(req('ADD', 'known', chain));
    const other = engine.handle(req('ADD', 'other', chain));
    await other;
    assert.equal(plugins.of('DEL').length, 0, 'nothing drained before start()');
    const report = await drain.start();
    await add;
    assert.deepEqual(report, { ingested: 630, rejected: 1 });
    assert.equal(drain.pending, 0);
    assert.equal(engine.spoolHold, undefined);
    const dels = plugins.of('DEL');
    assert.deepEqual(
      dels.filter((d) => d.endsWith(' known')),
      ['DEL two known', 'DEL one known'],
      'one DEL chain for 600 files',
    );
    for (let i = 0; i < 30; i++) assert.equal(dels.filter((d) => d.endsWith(` gone${i}`)).length, 2);
    const adds = plugins.of('ADD').filter((d) => d.endsWith(' known'));
    assert.equal(adds.length, 4, 'the held ADD ran, after the DEL');
    assert.ok(plugins.calls.findIndex((c) => c === 'DEL one known') < plugins.calls.lastIndexOf('ADD one known'));
    assert.deepEqual(readdirSync(dir), ['rejected']);
  });

  test('an attachment of an earlier boot is swept once with an empty netns, even when its teardown fails', async () => {
    const store = new Store(':memory:');
    const before = setup({ store, bootId: 'boot-0' });
    await before.engine.handle(req('ADD', 'old', chain));
    const now = setup({ store, bootId: 'boot-1' });
    now.plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
    });
    const report = await recover(now.engine, 'boot-1', silentLog);
    assert.deepEqual(
      [report.staleBoot, report.rolledBack, report.resumed],
      [1, 0, 0],
      'a failed sweep (now deleting) is not resumed again',
    );
    assert.deepEqual(
      now.plugins.callsOf('DEL').map((c) => [c.type, c.netns]),
      [
        ['two', ''],
        ['one', ''],
      ],
    );
  });
});

describe('recovery resumes cut-off teardowns at once', () => {
  test('a teardown whose failed step is not due for an hour is run at start, not left to its schedule', async () => {
    const clock = { t: 1_000_000 };
    const store = new Store(':memory:', () => clock.t);
    const before = setup({ store, now: () => clock.t });
    await before.engine.handle(req('ADD', 'later', chain));
    before.plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await before.engine.handle(req('DEL', 'later', chain));
    const a = store.currentAttachment({ containerId: 'later', ...KEY })!;
    assert.equal(a.state, 'deleting');
    const failed = store.stepsOf(a.id).find((st) => st.state === 'del_failed')!;
    store.setStepDelFailed(failed.id, 'busy', clock.t + 3_600_000);

    const now = setup({ store, now: () => clock.t });
    const report = await recover(now.engine, 'boot-1', silentLog);
    assert.equal(report.resumed, 1);
    assert.deepEqual(now.plugins.of('DEL'), ['DEL one later'], 'the failed step is DELed during recovery');
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });
});

describe('recovery sweeps an earlier boot at once', () => {
  test('a failed step of an earlier boot’s attachment not due for an hour is DELed by the sweep, with an empty netns', async () => {
    const clock = { t: 1_000_000 };
    const store = new Store(':memory:', () => clock.t);
    const before = setup({ store, now: () => clock.t, bootId: 'boot-0' });
    await before.engine.handle(req('ADD', 'prev', chain));
    before.plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await before.engine.handle(req('DEL', 'prev', chain));
    const a = store.currentAttachment({ containerId: 'prev', ...KEY })!;
    const failed = store.stepsOf(a.id).find((st) => st.state === 'del_failed')!;
    store.setStepDelFailed(failed.id, 'busy', clock.t + 3_600_000);

    const now = setup({ store, now: () => clock.t, bootId: 'boot-1' });
    const report = await recover(now.engine, 'boot-1', silentLog);
    assert.deepEqual(report, { staleBoot: 1, rolledBack: 0, resumed: 0, notStarted: 0, couldNotRun: 0 });
    assert.deepEqual(
      now.plugins.callsOf('DEL').map((c) => [c.type, c.netns]),
      [['one', '']],
    );
    assert.equal(store.getAttachment(a.id)!.state, 'deleted');
  });
});

describe('retry scheduler', () => {
  function scheduler(env: ReturnType<typeof setup>, clock: { t: number }, extra: Partial<{ ttl: number }> = {}) {
    return new RetryScheduler({
      engine: env.engine,
      store: env.store,
      log: silentLog,
      pollMs: 10,
      tombstoneTtlMs: extra.ttl ?? 3_600_000,
      pruneEveryMs: 60_000,
      spoolDir: join(root, 'no-spool'),
      now: () => clock.t,
    });
  }

  test('retryNow runs every failing teardown at once and reports attempted, done and pending', async () => {
    const clock = { t: 1_000_000 };
    const env = setup({ now: () => clock.t });
    for (const id of ['r1', 'r2']) await env.engine.handle(req('ADD', id, chain));
    let failing = true;
    env.plugins.on('one', (c) => {
      if (c.command === 'DEL' && (failing || c.containerId === 'r2')) throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    for (const id of ['r1', 'r2']) await env.engine.handle(req('DEL', id, chain));
    failing = false;
    const s = scheduler(env, clock);
    assert.deepEqual(await s.retryNow(), { attempted: 2, done: 1, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    assert.equal(env.store.currentAttachment({ containerId: 'r1', ...KEY })!.state, 'deleted');
    assert.equal(env.store.currentAttachment({ containerId: 'r2', ...KEY })!.state, 'deleting');
  });

  test('a tick retries what is due, ingests the spool and prunes old tombstones', async () => {
    const clock = { t: 1_000_000 };
    const store = new Store(':memory:', () => clock.t);
    const env = setup({ now: () => clock.t, store });
    await env.engine.handle(req('ADD', 'due', chain));
    await env.engine.handle(req('ADD', 'old', chain));
    await env.engine.handle(req('DEL', 'old', chain));
    const oldId = store.currentAttachment({ containerId: 'old', ...KEY })!.id;
    let fail = true;
    env.plugins.on('one', (c) => {
      if (c.command === 'DEL' && fail) throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await env.engine.handle(req('DEL', 'due', chain));
    const dueId = store.currentAttachment({ containerId: 'due', ...KEY })!.id;
    fail = false;
    clock.t += 2 * 3_600_000;
    const s = new RetryScheduler({
      engine: env.engine,
      store,
      log: silentLog,
      pollMs: 10,
      tombstoneTtlMs: 3_600_000,
      pruneEveryMs: 60_000,
      spoolDir: join(root, 'no-spool'),
      now: () => clock.t,
    });
    s.start();
    try {
      const deadline = Date.now() + 20_000;
      while (store.getAttachment(dueId)?.state !== 'deleted' || store.getAttachment(oldId) !== undefined) {
        assert.ok(Date.now() < deadline, 'the scheduler retried and pruned within 20 s');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await s.stop();
    }
    assert.equal(store.getAttachment(oldId), undefined, 'the tombstone older than the TTL was pruned');
    assert.equal(store.getAttachment(dueId)!.state, 'deleted', 'pruned only on a later pass');
  });

  test('a tick reclaims an attachment whose journal was cut off while the daemon ran', async () => {
    const clock = { t: 1_000_000 };
    const env = setup({ now: () => clock.t });
    await env.engine.handle(req('ADD', 'cut', chain));
    const a = env.store.currentAttachment({ containerId: 'cut', ...KEY })!;
    env.store.atomic(() => {
      env.store.setAttachmentState(a.id, 'deleting');
      env.store.setStepDeleting(env.store.stepsOf(a.id)[1]!.id);
    });
    const s = scheduler(env, clock);
    s.start();
    try {
      const deadline = Date.now() + 20_000;
      while (env.store.getAttachment(a.id)!.state !== 'deleted') {
        assert.ok(Date.now() < deadline, 'reclaimed within 20 s');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await s.stop();
    }
    assert.deepEqual(env.plugins.of('DEL'), ['DEL two cut', 'DEL one cut']);
  });

  test('retryNow counts an attachment once however many of its steps failed; one whose journal write fails is pending, then retried', async () => {
    const clock = { t: 1_000_000 };
    const env = setup({ now: () => clock.t });
    const sides = conf([], '1.0.0', [
      { name: 'pod', plugins: [{ type: 'one' }] },
      { name: 'side', plugins: [{ type: 'three' }] },
    ]);
    await env.engine.handle(req('ADD', 'm', sides));
    let failing = true;
    for (const type of ['one', 'three'])
      env.plugins.on(type, (c) => {
        if (c.command === 'DEL' && failing) throw new CniError(11, 'busy');
        return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
      });
    await env.engine.handle(req('DEL', 'm', sides));
    const a = env.store.currentAttachment({ containerId: 'm', ...KEY })!;
    assert.equal(env.store.pendingTeardownSteps().length, 2);
    failing = false;
    const realDeleting = env.store.setStepDeleting.bind(env.store);
    let full = true;
    env.store.setStepDeleting = (id) => {
      if (full) throw new CniError(11, 'disk full');
      realDeleting(id);
    };
    const s = scheduler(env, clock);
    const dels = env.plugins.of('DEL').length;
    assert.deepEqual(await s.retryNow(), { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0 });
    assert.equal(env.plugins.of('DEL').length, dels, 'nothing ran: the journal refused the write');
    full = false;
    assert.deepEqual(await s.retryNow(), { attempted: 1, done: 1, abandoned: 0, pending: 0, stepsAbandoned: 0 });
    assert.equal(env.store.getAttachment(a.id)!.state, 'deleted');
  });

  test('a start whose schedule check fails still ticks: due retries run', async () => {
    const clock = { t: 1_000_000 };
    const store = new Store(':memory:', () => clock.t);
    const env = setup({ now: () => clock.t, store });
    await env.engine.handle(req('ADD', 'st', chain));
    let fail = true;
    env.plugins.on('one', (c) => {
      if (c.command === 'DEL' && fail) throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await env.engine.handle(req('DEL', 'st', chain));
    const a = store.currentAttachment({ containerId: 'st', ...KEY })!;
    fail = false;
    clock.t += 60_000;
    const realClamp = store.clampNextAttempts.bind(store);
    let clampCalls = 0;
    store.clampNextAttempts = (latest) => {
      if (++clampCalls === 1) throw new Error('database is locked');
      return realClamp(latest);
    };
    const s = scheduler(env, clock);
    assert.doesNotThrow(() => s.start());
    try {
      const deadline = Date.now() + 20_000;
      while (store.getAttachment(a.id)!.state !== 'deleted') {
        assert.ok(Date.now() < deadline, 'retried within 20 s');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await s.stop();
    }
    assert.ok(clampCalls >= 2, 'each tick checks the schedule again');
  });

  test('a stopped scheduler runs no more ticks', async () => {
    const clock = { t: 1_000_000 };
    const env = setup({ now: () => clock.t });
    const s = scheduler(env, clock);
    s.start();
    await s.stop();
    await env.engine.handle(req('ADD', 'late', chain));
    env.plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    await env.engine.handle(req('DEL', 'late', chain));
    const dels = env.plugins.of('DEL').length;
    clock.t += 3_600_000;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(env.plugins.of('DEL').length, dels);
  });
});
