// The Store's queries the engine, the scheduler and the status API read (recovery's lists, the
// teardown queue, filters, counts) and its health probes, on a real SQLite file in a temp dir with an
// injected clock.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { Store, storedErrorText } from '../../daemon/src/store/store.js';
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
