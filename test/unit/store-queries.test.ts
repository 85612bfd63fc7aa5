// The Store's queries the engine, the scheduler and the status API read (recovery's lists, the
// teardown queue, filters, counts) and its health probes, on a real SQLite file in a temp dir with an
// injected clock.

import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { Store, storedErrorText } from '../../daemon/src/store/store.js';
import { PAGE_CACHE_KIB } from '../../daemon/src/store/database.js';
import { newAttachment } from '../helpers/engine-fakes.js';

const root = mkdtempSync(join(tmpdir(), 'steward-store-queries-'));
after(() => rmSync(root, { recursive: true, force: true }));
const open: Store[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});
let n = 0;

function openStore() {
  const clock = { t: 1_000 };
  const store = new Store(join(root, `q-${++n}`, 'steward.db'), () => clock.t);
  open.push(store);
  return { store, clock };
}

const att = newAttachment;

function step(store: Store, attachmentId: number, seq: number, pluginType = `p${seq}`) {
  return store.insertStep({
    attachmentId,
    seq,
    delegateIndex: 0,
    delegateName: 'd',
    ifname: 'eth0',
    pluginIndex: seq,
    pluginType,
    config: '{}',
  });
}

describe('Store: what recovery and GC read', () => {
  test('attachmentsInState and attachmentsOfOtherBoot (live states only), in id order', () => {
    const { store } = openStore();
    const a = store.createAttachment(att({ containerId: 'a', bootId: 'b0' }));
    const b = store.createAttachment(att({ containerId: 'b', bootId: 'b0' }));
    const c = store.createAttachment(att({ containerId: 'c', bootId: 'b0' }));
    const d = store.createAttachment(att({ containerId: 'd', bootId: 'b0' }));
    const e = store.createAttachment(att({ containerId: 'e', bootId: 'b1' }));
    store.setAttachmentAdded(b.id, '{}');
    store.setAttachmentState(c.id, 'deleting');
    store.setAttachmentState(d.id, 'deleted');
    assert.deepEqual(
      store.attachmentsOfOtherBoot('b1').map((x) => x.containerId),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(
      store.attachmentsInState('adding').map((x) => x.id),
      [a.id, e.id],
    );
    assert.deepEqual(
      store.attachmentsInState('deleted').map((x) => x.id),
      [d.id],
    );
  });

  test('liveAttachmentsOfNetwork: adding and added of that network only', () => {
    const { store } = openStore();
    const a = store.createAttachment(att({ containerId: 'a' }));
    const b = store.createAttachment(att({ containerId: 'b' }));
    store.setAttachmentAdded(b.id, '{}');
    const c = store.createAttachment(att({ containerId: 'c' }));
    store.setAttachmentState(c.id, 'deleting');
    store.createAttachment(att({ containerId: 'x', network: 'other' }));
    assert.deepEqual(
      store.liveAttachmentsOfNetwork('net').map((x) => x.id),
      [a.id, b.id],
    );
  });

  test('setAttachmentAdded stores the result, marks it added and clears an earlier error', () => {
    const { store, clock } = openStore();
    const a = store.createAttachment(att());
    store.setAttachmentError(a.id, 'first try failed');
    clock.t = 5_000;
    store.setAttachmentAdded(a.id, '{"cniVersion":"1.0.0"}');
    const got = store.getAttachment(a.id)!;
    assert.deepEqual(
      [got.state, got.result, got.error, got.updatedAt],
      ['added', '{"cniVersion":"1.0.0"}', null, 5_000],
    );
    assert.equal(got.createdAt, 1_000);
  });

  test('listAttachments filters by container and state, newest first, with a limit', () => {
    const { store } = openStore();
    const ids = ['a', 'b', 'a', 'a'].map((c) => store.createAttachment(att({ containerId: c })).id);
    store.setAttachmentState(ids[0]!, 'deleted');
    assert.deepEqual(
      store.listAttachments({ containerId: 'a' }).map((x) => x.id),
      [ids[3], ids[2], ids[0]],
    );
    assert.deepEqual(
      store.listAttachments({ containerId: 'a', state: 'adding' }).map((x) => x.id),
      [ids[3], ids[2]],
    );
    assert.deepEqual(
      store.listAttachments({ state: 'deleted' }).map((x) => x.id),
      [ids[0]],
    );
    assert.deepEqual(
      store.listAttachments({ limit: 2 }).map((x) => x.id),
      [ids[3], ids[2]],
    );
    assert.equal(store.listAttachments({}).length, 4);
  });
});

describe('Store: the teardown queue', () => {
  test('pendingTeardownSteps: failing and deleting steps, soonest retry first, bounded by limit', () => {
    const { store } = openStore();
    const a = store.createAttachment(att());
    const s = [0, 1, 2, 3].map((i) => step(store, a.id, i));
    store.setStepDelFailed(s[0]!.id, 'e', 9_000);
    store.setStepDelFailed(s[1]!.id, 'e', 3_000);
    store.setStepDeleting(s[2]!.id);
    assert.deepEqual(
      store.pendingTeardownSteps().map((x) => x.id),
      [s[2]!.id, s[1]!.id, s[0]!.id],
      'a deleting step (no retry time) first, then by next attempt',
    );
    assert.deepEqual(
      store.pendingTeardownSteps(1).map((x) => x.id),
      [s[2]!.id],
    );
    assert.equal(store.countPendingTeardowns(), 3);
    assert.equal(store.nextTeardownDueAt(), 3_000);
  });

  test('clampNextAttempts pulls in only failed steps due later than the bound, and says how many', () => {
    const { store, clock } = openStore();
    const a = store.createAttachment(att());
    const [late, soon, deleting] = [0, 1, 2].map((i) => step(store, a.id, i));
    store.setStepDelFailed(late!.id, 'e', 90_000);
    store.setStepDelFailed(soon!.id, 'e', 3_000);
    store.setStepDeleting(deleting!.id);
    clock.t = 5_000;
    assert.equal(store.clampNextAttempts(10_000), 1);
    assert.deepEqual(
      [late, soon, deleting].map((s) => [store.getStep(s!.id)!.nextAttemptAt, store.getStep(s!.id)!.updatedAt]),
      [
        [10_000, 5_000],
        [3_000, 1_000],
        [null, 1_000],
      ],
    );
    assert.equal(store.clampNextAttempts(10_000), 0, 'nothing left to pull in');
  });

  test('nextTeardownDueAt and oldestPendingTeardownAt are undefined with nothing pending', () => {
    const { store, clock } = openStore();
    assert.equal(store.nextTeardownDueAt(), undefined);
    assert.equal(store.oldestPendingTeardownAt(), undefined);
    const a = store.createAttachment(att());
    clock.t = 2_000;
    store.setAttachmentState(a.id, 'deleting');
    clock.t = 3_000;
    const b = store.createAttachment(att({ containerId: 'b' }));
    store.setAttachmentState(b.id, 'deleting');
    assert.equal(store.oldestPendingTeardownAt(), 2_000);
  });

  test('unfinishedAttachmentIds: attachments left adding, or with a step left deleting', () => {
    const { store } = openStore();
    const adding = store.createAttachment(att({ containerId: 'a' }));
    const added = store.createAttachment(att({ containerId: 'b' }));
    store.setAttachmentAdded(added.id, '{}');
    const del = store.createAttachment(att({ containerId: 'c' }));
    store.setAttachmentState(del.id, 'deleting');
    store.setStepDeleting(step(store, del.id, 0).id);
    const failed = store.createAttachment(att({ containerId: 'd' }));
    store.setAttachmentState(failed.id, 'deleting');
    store.setStepDelFailed(step(store, failed.id, 0).id, 'x', 1);
    assert.deepEqual(store.unfinishedAttachmentIds(), [adding.id, del.id]);
  });

  test('abandoned steps: newest first, bounded, with their error; setStepState keeps an error unless given one', () => {
    const { store } = openStore();
    const a = store.createAttachment(att());
    const s = [0, 1, 2].map((i) => step(store, a.id, i));
    for (const x of s) store.setStepAbandoned(x.id, `gave up on ${x.pluginType}`);
    assert.deepEqual(
      store.abandonedSteps(2).map((x) => x.error),
      ['gave up on p2', 'gave up on p1'],
    );
    store.setStepState(s[0]!.id, 'add_failed');
    assert.equal(store.getStep(s[0]!.id)!.error, 'gave up on p0');
    store.setStepState(s[0]!.id, 'add_failed', 'y'.repeat(3000));
    assert.equal(store.getStep(s[0]!.id)!.error, storedErrorText('y'.repeat(3000)));
    assert.equal(store.getStep(s[0]!.id)!.state, 'add_failed');
    assert.equal(storedErrorText('z'.repeat(2048)), 'z'.repeat(2048));
    assert.match(storedErrorText('z'.repeat(2049)), /\[1 more characters cut\]$/);
  });
});

describe('Store: failed writes', () => {
  test('a CniError thrown inside atomic() passes through untouched; a constraint failure is code 104 naming it', () => {
    const { store } = openStore();
    const mine = new CniError(11, 'disk full');
    assert.throws(
      () =>
        store.atomic(() => {
          throw mine;
        }),
      (e: unknown) => e === mine,
    );
    const a = store.createAttachment(att());
    step(store, a.id, 0);
    assert.throws(
      () => store.atomic(() => step(store, a.id, 0)),
      (e: CniError) =>
        e.code === 104 &&
        /^stewardd journal write failed \(SQLITE_CONSTRAINT_UNIQUE: UNIQUE constraint failed/.test(e.message),
    );
    assert.equal(store.stepsOf(a.id).length, 1, 'nothing of the failed transaction was kept');
  });
  test('a failure without a driver code (a broken precondition) is code 104 saying "error", and nothing of it is kept', () => {
    const { store } = openStore();
    const a = store.createAttachment(att());
    const s = step(store, a.id, 0); // journaled `adding`, not `planned`
    assert.throws(
      () => store.startStep(s.id),
      (e: CniError) =>
        e instanceof CniError &&
        e.code === 104 &&
        e.message === `stewardd journal write failed (error: step ${s.id} is not planned; it cannot be started)`,
    );
    assert.equal(store.getStep(s.id)?.state, 'adding');
  });

  test('relaxed() (a commit without fsync) inside atomic() is refused with its reason, and records nothing', () => {
    const { store } = openStore();
    const s = step(store, store.createAttachment(att()).id, 0);
    const proc = { pid: 7, startTime: 8, bootId: 'b', pidNamespace: 'pid:[1]' };
    assert.throws(
      () => store.atomic(() => store.setStepProcess(s.id, proc)),
      (e: CniError) =>
        e.code === 104 && e.message === 'stewardd journal write failed (error: relaxed() inside another transaction)',
    );
    assert.deepEqual(store.runningStepProcesses(), []);
    store.setStepProcess(s.id, proc);
    assert.deepEqual(
      store.runningStepProcesses().map((r) => r.process),
      [proc],
      'outside atomic() it is recorded',
    );
  });
});

describe('Store: health probes', () => {
  test('writeProbe is healthy on a writable file with room, and names the shortfall otherwise', () => {
    const { store } = openStore();
    assert.equal(store.writeProbe(1), undefined);
    const why = store.writeProbe(Number.MAX_SAFE_INTEGER);
    assert.match(why!, /has \d+ bytes free, less than the 9007199254740991 the journal needs/);
    const mem = new Store(':memory:');
    open.push(mem);
    assert.equal(mem.writeProbe(Number.MAX_SAFE_INTEGER), undefined, 'an in-memory store has no filesystem to fill');
    store.close();
    assert.match(store.writeProbe(1)!, /cannot be written/);
  });

  test('quickCheck finds nothing wrong with a healthy database, and reports a closed one as its one problem', () => {
    const { store } = openStore();
    assert.deepEqual(store.quickCheck(), []);
    store.close();
    const problems = store.quickCheck();
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /not open/);
  });

  test("the connection's page cache is SQLite's 2 MiB, not better-sqlite3's 16, and stays so through a quick check", () => {
    /** A store that reads its connection's page cache size (cache_size: a connection's own setting). */
    class CacheSizeStore extends Store {
      cacheSize(): number {
        return this.db.pragma('cache_size', { simple: true }) as number;
      }
    }
    const store = new CacheSizeStore(join(root, `cache-${++n}`, 'steward.db'));
    open.push(store);
    assert.equal(PAGE_CACHE_KIB, 2048);
    assert.equal(store.cacheSize(), -PAGE_CACHE_KIB, 'negative: KiB, not pages');
    assert.deepEqual(store.quickCheck(), []);
    assert.equal(store.cacheSize(), -PAGE_CACHE_KIB);
  });

  test('writeProbe: a database directory moved away under the daemon is named, not taken for a healthy disk', () => {
    const dir = join(root, `moved-${++n}`);
    const path = join(dir, 'steward.db');
    const store = new Store(path);
    open.push(store);
    renameSync(dir, `${dir}.gone`);
    const why = store.writeProbe(1);
    assert.ok(
      why?.startsWith(`cannot tell how much room is left for ${path}: ENOENT`),
      `writeProbe said ${JSON.stringify(why)}`,
    );
  });

  test('quickCheck and integrityCheck report a page no table uses (a damaged file) as their one problem', () => {
    const path = join(root, `damaged-${++n}`, 'steward.db');
    new Store(path).close(); // the last close checkpoints the WAL into the file and removes it
    const header = readFileSync(path).subarray(0, 100);
    const pageSize = header.readUInt16BE(16);
    const orphan = header.readUInt32BE(28) + 1;
    // One more page, all zeros, counted in the header's database size but linked from nowhere.
    const fd = openSync(path, 'r+');
    try {
      writeSync(fd, Buffer.alloc(pageSize), 0, pageSize, (orphan - 1) * pageSize);
      const size = Buffer.alloc(4);
      size.writeUInt32BE(orphan);
      writeSync(fd, size, 0, 4, 28);
    } finally {
      closeSync(fd);
    }
    const store = new Store(path);
    open.push(store);
    const problem = `*** in database main ***\nPage ${orphan}: never used`;
    assert.deepEqual(store.quickCheck(), [problem]);
    assert.deepEqual(store.integrityCheck(), [problem]);
  });
});

describe('Store: re-arming abandoned steps (stewardd retry --abandoned)', () => {
  test('an abandoned step becomes a failed step due now with attempts reset; its torn-down attachment is deleting again', () => {
    const { store, clock } = openStore();
    const a = store.createAttachment(att()).id;
    const kept = step(store, a, 1).id;
    const lost = step(store, a, 2).id;
    store.setStepDeleted(kept);
    store.setStepDelFailed(lost, 'boom', 2_000);
    store.setStepDelFailed(lost, 'boom', 3_000);
    store.setStepAbandoned(lost, 'boom for good');
    store.setAttachmentState(a, 'deleted');
    const other = store.createAttachment(att({ containerId: 'other' })).id;
    store.setAttachmentState(other, 'deleted');
    assert.deepEqual(store.abandonedAttachmentIds(), [a]);

    clock.t = 9_000;
    assert.equal(store.rearmAbandoned(a), 1);
    const s = store.getStep(lost);
    assert.equal(s?.state, 'del_failed');
    assert.equal(s?.attempts, 0);
    assert.equal(s?.nextAttemptAt, 9_000);
    assert.equal(s?.error, 'boom for good', 'the last error stays readable');
    assert.equal(store.getStep(kept)?.state, 'deleted', 'a step already torn down is left alone');
    assert.equal(store.getAttachment(a)?.state, 'deleting');
    assert.deepEqual(store.dueAttachmentIds(9_000), [a]);
    assert.deepEqual(store.abandonedAttachmentIds(), []);

    assert.equal(store.rearmAbandoned(other), 0, 'nothing abandoned: nothing re-armed');
    assert.equal(store.getAttachment(other)?.state, 'deleted', 'and the attachment stays torn down');
  });
});

describe('Store: disk use', () => {
  test('after a burst of writes the WAL file shrinks back to 4 MiB (journal_size_limit), not kept at its largest', () => {
    const { store } = openStore();
    const big = 'q'.repeat(1_000_000);
    store.atomic(() => {
      for (let i = 0; i < 6; i++) store.createAttachment(att({ containerId: `burst-${i}`, config: big }));
    });
    const wal = `${store.path}-wal`;
    assert.ok(statSync(wal).size > 5_000_000, `the burst grew the WAL to ${statSync(wal).size} bytes`);
    store.createAttachment(att({ containerId: 'after' })); // the next commit restarts the WAL, truncated
    assert.ok(statSync(wal).size <= 4 * 1024 * 1024, `the WAL is ${statSync(wal).size} bytes after the burst`);
    assert.equal(store.listAttachments({}).length, 7);
  });
});

describe('Store: commit metrics (onCommit, onWriteError)', () => {
  test('each outermost commit is reported once with its duration and whether it was synced; a failed one is not', () => {
    const commits: Array<[number, boolean]> = [];
    const failures: string[] = [];
    const store = new Store(join(root, `metrics-${++n}`, 'steward.db'), {
      onCommit: (seconds, synced) => commits.push([seconds, synced]),
      onWriteError: (e) => failures.push((e as Error & { code?: string }).code ?? '?'),
    });
    open.push(store);

    const t0 = performance.now();
    const a = store.createAttachment(att());
    const elapsedMs = performance.now() - t0;
    assert.equal(commits.length, 1);
    const [seconds, synced] = commits[0]!;
    assert.equal(synced, true);
    assert.ok(seconds >= 0 && seconds * 1000 <= elapsedMs, `${seconds} s reported for a ${elapsedMs} ms call`);

    commits.length = 0;
    const first = store.atomic(() => {
      const s0 = step(store, a.id, 0);
      step(store, a.id, 1);
      return s0;
    });
    assert.deepEqual(
      commits.map(([, sy]) => sy),
      [true],
      'two writes in one atomic(): one commit',
    );

    commits.length = 0;
    store.setStepProcess(first.id, { pid: 1, startTime: 2, bootId: 'b', pidNamespace: 'p' });
    assert.deepEqual(
      commits.map(([, sy]) => sy),
      [false],
      'a relaxed commit is reported as not synced',
    );

    commits.length = 0;
    assert.throws(
      () => step(store, a.id, 0),
      (e: CniError) => e.code === 104,
    );
    assert.deepEqual(commits, [], 'a failed write commits nothing');
    assert.deepEqual(failures, ['SQLITE_CONSTRAINT_UNIQUE']);
  });
});
