import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, describe, test } from 'node:test';

import { openDatabase } from '../helpers/sqlite.js';
import { MIGRATIONS } from '../../daemon/src/store/migrations.js';
import { Store } from '../../daemon/src/store/store.js';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { attachmentLogFields, type AttachmentKey, type NewAttachment } from '../../daemon/src/store/types.js';

const root = mkdtempSync(join(tmpdir(), 'steward-store-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

let dbCount = 0;
const open: Store[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

/** A fresh DB path in the temp dir, in a subdirectory the Store has to create. */
function freshPath(): string {
  return join(root, `case-${++dbCount}`, 'steward.db');
}

/** A Store on a fresh file whose clock is `clock.t`. */
function openStore(path = freshPath()) {
  const clock = { t: 1_000 };
  const store = new Store(path, () => clock.t);
  open.push(store);
  return { store, clock, path };
}

function newAttachment(over: Partial<NewAttachment> = {}): NewAttachment {
  return {
    containerId: 'ctr-1',
    network: 'steward-net',
    ifname: 'eth0',
    netns: '/var/run/netns/cni-1',
    cniArgs: '',
    cniPath: '/opt/cni/bin',
    cniVersion: '1.0.0',
    bootId: 'boot-a',
    config: '{"cniVersion":"1.0.0"}',
    ...over,
  };
}

function addStep(store: Store, attachmentId: number, seq = 0) {
  return store.insertStep({
    attachmentId,
    seq,
    delegateIndex: 0,
    delegateName: 'podnet',
    ifname: 'eth0',
    pluginIndex: seq,
    pluginType: seq === 0 ? 'bridge' : 'portmap',
    config: '{"type":"bridge"}',
  });
}

describe('Store schema', () => {
  test('migrations bring a new database to schema version MIGRATIONS.length', () => {
    const { store } = openStore();
    assert.ok(MIGRATIONS.length >= 1);
    assert.equal(store.schemaVersion, MIGRATIONS.length);
  });

  test('reopening a migrated database is idempotent and keeps its rows', () => {
    const { store, path } = openStore();
    const a = store.createAttachment(newAttachment());
    store.close();

    const again = new Store(path);
    open.push(again);
    assert.equal(again.schemaVersion, MIGRATIONS.length);
    assert.equal(again.getAttachment(a.id)?.containerId, 'ctr-1');
  });

  test('a schema-1 database written by the first migration opens at the latest schema; its rows survive with no pod', () => {
    const path = join(root, 'schema-1.db');
    const db = openDatabase(path);
    db.exec(MIGRATIONS[0] as string);
    db.pragma('user_version = 1');
    db.prepare(
      `INSERT INTO attachments (container_id, network, ifname, netns, cni_args, cni_path, cni_version, boot_id,
      state, config, created_at, updated_at) VALUES ('old-ctr', 'net', 'eth0', '/ns', 'K8S_POD_NAME=p', '/bin', '1.0.0', 'b',
      'added', '{}', 1, 2)`,
    ).run();
    db.prepare(
      `INSERT INTO steps (attachment_id, seq, delegate_index, delegate_name, ifname, plugin_index, plugin_type,
      config, state, created_at, updated_at) VALUES (1, 0, 0, 'd', 'eth0', 0, 'bridge', '{}', 'added', 1, 2)`,
    ).run();
    db.close();

    const store = new Store(path);
    open.push(store);
    assert.equal(store.schemaVersion, MIGRATIONS.length);
    const [old] = store.listAttachments({});
    assert.equal(old?.containerId, 'old-ctr');
    assert.equal(old?.state, 'added');
    assert.deepEqual([old?.podNamespace, old?.podName, old?.podUid], [null, null, null]);
    assert.equal(store.stepsOf(old!.id).length, 1);
    // New rows on the migrated file carry their pod, and the pod filter skips the old row.
    store.createAttachment(newAttachment({ podNamespace: 'ns', podName: 'p', podUid: 'u-1' }));
    assert.deepEqual(
      store.listAttachments({ pod: { namespace: 'ns', name: 'p' } }).map((a) => a.podUid),
      ['u-1'],
    );
  });

  test('refuses a database whose schema version is newer than this build knows', () => {
    const path = join(root, 'future.db');
    const db = openDatabase(path);
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    assert.throws(() => new Store(path), /schema version .*newer/);
  });
});

describe('Store attachments', () => {
  test('createAttachment stores an `adding` attachment stamped with the injected clock', () => {
    const { store, clock } = openStore();
    clock.t = 4242;
    const a = store.createAttachment(newAttachment());
    assert.equal(a.state, 'adding');
    assert.equal(a.result, null);
    assert.equal(a.error, null);
    assert.equal(a.createdAt, 4242);
    assert.equal(a.updatedAt, 4242);
    assert.equal(a.netns, '/var/run/netns/cni-1');
    assert.equal(a.bootId, 'boot-a');
  });

  test('currentAttachment returns the newest attachment for a key, and nothing for an unknown key', () => {
    const { store } = openStore();
    const key: AttachmentKey = { containerId: 'ctr-1', network: 'steward-net', ifname: 'eth0' };
    const older = store.createAttachment(newAttachment());
    store.setAttachmentState(older.id, 'deleted');
    const newer = store.createAttachment(newAttachment());
    const otherIf = store.createAttachment(newAttachment({ ifname: 'net1' }));
    assert.ok(newer.id > older.id);

    assert.equal(store.currentAttachment(key)?.id, newer.id);
    assert.equal(store.currentAttachment({ ...key, ifname: 'net1' })?.id, otherIf.id);
    assert.equal(store.currentAttachment({ ...key, containerId: 'ctr-2' }), undefined);
    assert.equal(store.currentAttachment({ ...key, network: 'other' }), undefined);
  });
});

describe('Store steps', () => {
  test('insertStep journals a step as `adding` with no attempts and no teardown time', () => {
    const { store } = openStore();
    const a = store.createAttachment(newAttachment());
    const s = addStep(store, a.id);
    assert.equal(s.state, 'adding');
    assert.equal(s.attachmentId, a.id);
    assert.equal(s.attempts, 0);
    assert.equal(s.teardownAt, null);
    assert.equal(s.nextAttemptAt, null);
    assert.equal(s.result, null);
  });

  test('a step moves through added, deleting, del_failed and deleted, counting each DEL attempt', () => {
    const { store, clock } = openStore();
    const a = store.createAttachment(newAttachment());
    const { id } = addStep(store, a.id);

    clock.t = 2_000;
    store.setStepAdded(id, '{"cniVersion":"1.0.0"}');
    let s = store.getStep(id);
    assert.equal(s?.state, 'added');
    assert.equal(s?.result, '{"cniVersion":"1.0.0"}');
    assert.equal(s?.updatedAt, 2_000);

    clock.t = 3_000;
    store.setStepDeleting(id);
    s = store.getStep(id);
    assert.equal(s?.state, 'deleting');
    assert.equal(s?.attempts, 0);

    clock.t = 3_500;
    store.setStepDelFailed(id, 'bridge: device busy', 13_500);
    s = store.getStep(id);
    assert.equal(s?.state, 'del_failed');
    assert.equal(s?.error, 'bridge: device busy');
    assert.equal(s?.attempts, 1);
    assert.equal(s?.nextAttemptAt, 13_500);

    clock.t = 14_000;
    store.setStepDeleting(id);
    store.setStepDelFailed(id, 'still busy', 30_000);
    s = store.getStep(id);
    assert.equal(s?.attempts, 2);
    assert.equal(s?.error, 'still busy');

    clock.t = 31_000;
    store.setStepDeleting(id);
    store.setStepDeleted(id);
    s = store.getStep(id);
    assert.equal(s?.state, 'deleted');
    assert.equal(s?.attempts, 3);
    assert.equal(s?.nextAttemptAt, null);
    assert.equal(s?.updatedAt, 31_000);
  });

  test('teardownAt is set by the first setStepDeleting and not moved by later ones', () => {
    const { store, clock } = openStore();
    const a = store.createAttachment(newAttachment());
    const { id } = addStep(store, a.id);
    store.setStepAdded(id, '{}');

    clock.t = 5_000;
    store.setStepDeleting(id);
    assert.equal(store.getStep(id)?.teardownAt, 5_000);

    clock.t = 6_000;
    store.setStepDelFailed(id, 'boom', 7_000);
    clock.t = 9_000;
    store.setStepDeleting(id);
    const s = store.getStep(id);
    assert.equal(s?.teardownAt, 5_000);
    assert.equal(s?.updatedAt, 9_000);
  });

  test("stepsOf lists an attachment's steps in seq order", () => {
    const { store } = openStore();
    const a = store.createAttachment(newAttachment());
    addStep(store, a.id, 1);
    addStep(store, a.id, 0);
    assert.deepEqual(
      store.stepsOf(a.id).map((s) => s.seq),
      [0, 1],
    );
  });
});

describe('Store teardown queue', () => {
  test('dueAttachmentIds lists each attachment with a failed DEL whose next attempt is due, once', () => {
    const { store } = openStore();
    const a1 = store.createAttachment(newAttachment({ containerId: 'c1' }));
    const a2 = store.createAttachment(newAttachment({ containerId: 'c2' }));
    const a3 = store.createAttachment(newAttachment({ containerId: 'c3' }));

    const s10 = addStep(store, a1.id, 0);
    const s11 = addStep(store, a1.id, 1);
    store.setStepDelFailed(s10.id, 'x', 2_000);
    store.setStepDelFailed(s11.id, 'x', 1_500);
    const s2 = addStep(store, a2.id, 0);
    store.setStepDelFailed(s2.id, 'x', 5_000);
    const s3 = addStep(store, a3.id, 0);
    store.setStepDeleting(s3.id); // in progress, not a failed DEL

    assert.deepEqual(store.dueAttachmentIds(1_499), []);
    assert.deepEqual(store.dueAttachmentIds(1_500), [a1.id]);
    assert.deepEqual(store.dueAttachmentIds(4_999), [a1.id]);
    assert.deepEqual(store.dueAttachmentIds(5_000), [a1.id, a2.id]);
    assert.deepEqual(store.dueAttachmentIds(1e12), [a1.id, a2.id]);

    store.setStepDeleted(s2.id);
    assert.deepEqual(store.dueAttachmentIds(1e12), [a1.id]);
  });

  test('pruneTombstones deletes only `deleted` attachments last touched before the cutoff, with their steps', () => {
    const { store, clock } = openStore();
    clock.t = 1_000;
    const oldDeleted = store.createAttachment(newAttachment({ containerId: 'old' }));
    const oldStep = addStep(store, oldDeleted.id);
    store.setAttachmentState(oldDeleted.id, 'deleted');
    const oldLive = store.createAttachment(newAttachment({ containerId: 'live' }));
    const liveStep = addStep(store, oldLive.id);
    store.setAttachmentState(oldLive.id, 'added');
    const oldDeleting = store.createAttachment(newAttachment({ containerId: 'deleting' }));
    store.setAttachmentState(oldDeleting.id, 'deleting');

    clock.t = 5_000;
    const recentDeleted = store.createAttachment(newAttachment({ containerId: 'recent' }));
    const recentStep = addStep(store, recentDeleted.id);
    store.setAttachmentState(recentDeleted.id, 'deleted');

    assert.equal(store.pruneTombstones(5_000, 5_000), 1);
    assert.equal(store.getAttachment(oldDeleted.id), undefined);
    assert.equal(store.getStep(oldStep.id), undefined, "the pruned attachment's steps cascade away");
    assert.deepEqual(store.stepsOf(oldDeleted.id), []);

    assert.equal(store.getAttachment(oldLive.id)?.state, 'added');
    assert.ok(store.getStep(liveStep.id));
    assert.equal(store.getAttachment(oldDeleting.id)?.state, 'deleting');
    assert.equal(store.getAttachment(recentDeleted.id)?.state, 'deleted');
    assert.ok(store.getStep(recentStep.id));

    assert.equal(store.pruneTombstones(5_001, 5_001), 1);
    assert.equal(store.getAttachment(recentDeleted.id), undefined);
    assert.equal(store.pruneTombstones(1e12, 1e12), 0);
  });

  test('an attachment with an abandoned step outlives the tombstone TTL until its own, longer cutoff', () => {
    const { store, clock } = openStore();
    clock.t = 1_000;
    const a = store.createAttachment(newAttachment({ containerId: 'abandoned' }));
    const step = addStep(store, a.id);
    store.setStepAbandoned(step.id, 'kept failing');
    store.setAttachmentState(a.id, 'deleted');
    const tomb = store.createAttachment(newAttachment({ containerId: 'tomb' }), 'deleted');
    assert.equal(tomb.state, 'deleted', 'a tombstone is born deleted, in one commit');

    clock.t = 10_000;
    assert.equal(store.pruneTombstones(9_000, 500), 1, 'only the plain tombstone goes at the TTL');
    assert.equal(store.getAttachment(a.id)?.state, 'deleted');
    assert.equal(store.getStep(step.id)?.state, 'abandoned');
    assert.equal(store.pruneTombstones(9_000, 9_000), 1, 'the abandoned record goes at its own cutoff');
    assert.equal(store.getAttachment(a.id), undefined);
  });

  test('counts() groups attachments and steps by state', () => {
    const { store } = openStore();
    assert.deepEqual(store.counts(), { attachments: {}, steps: {} });

    const a = store.createAttachment(newAttachment({ containerId: 'a' }));
    const b = store.createAttachment(newAttachment({ containerId: 'b' }));
    const c = store.createAttachment(newAttachment({ containerId: 'c' }));
    store.createAttachment(newAttachment({ containerId: 'd' }));
    store.setAttachmentAdded(a.id, '{}');
    store.setAttachmentAdded(b.id, '{}');
    store.setAttachmentState(c.id, 'deleting');

    const s0 = addStep(store, a.id, 0);
    const s1 = addStep(store, a.id, 1);
    addStep(store, c.id, 0);
    store.setStepAdded(s0.id, '{}');
    store.setStepAdded(s1.id, '{}');

    assert.deepEqual(store.counts(), {
      attachments: { added: 2, deleting: 1, adding: 1 },
      steps: { added: 2, adding: 1 },
    });
  });
});

describe('Store pods', () => {
  test('attachments keep the pod they were added for; listAttachments filters by namespace and name', () => {
    const { store } = openStore();
    const a = store.createAttachment(
      newAttachment({ containerId: 'a', podNamespace: 'team-a', podName: 'web-0', podUid: 'uid-a' }),
    );
    store.createAttachment(
      newAttachment({ containerId: 'b', podNamespace: 'team-b', podName: 'web-0', podUid: 'uid-b' }),
    );
    store.createAttachment(newAttachment({ containerId: 'c', podNamespace: 'team-a', podName: 'web-1' }));
    const none = store.createAttachment(newAttachment({ containerId: 'd' }));
    assert.deepEqual([a.podNamespace, a.podName, a.podUid], ['team-a', 'web-0', 'uid-a']);
    assert.deepEqual([none.podNamespace, none.podName, none.podUid], [null, null, null]);
    assert.deepEqual(
      store.listAttachments({ pod: { namespace: 'team-a', name: 'web-0' } }).map((x) => x.containerId),
      ['a'],
    );
    assert.deepEqual(store.listAttachments({ pod: { namespace: 'team-a', name: 'nope' } }), []);
    assert.deepEqual(store.listAttachments({ pod: { namespace: 'team-a', name: 'web-1' }, state: 'added' }), []);
  });

  test('every log line about an attachment names its key, its pod when known, and its id', () => {
    const { store } = openStore();
    const a = store.createAttachment(
      newAttachment({ containerId: 'a', podNamespace: 'team-a', podName: 'web-0', podUid: 'uid-a' }),
    );
    const none = store.createAttachment(newAttachment({ containerId: 'd' }));
    assert.deepEqual(attachmentLogFields(a), {
      containerId: 'a',
      podNamespace: 'team-a',
      podName: 'web-0',
      podUid: 'uid-a',
      network: 'steward-net',
      ifname: 'eth0',
      attachment: a.id,
    });
    assert.deepEqual(attachmentLogFields(none), {
      containerId: 'd',
      network: 'steward-net',
      ifname: 'eth0',
      attachment: none.id,
    });
  });
});

describe('durability and write failures', () => {
  test('the journal is WAL with synchronous=FULL, read back from SQLite itself', () => {
    const { store } = openStore();
    assert.deepEqual(store.durability(), { journalMode: 'wal', synchronous: 2 });
  });

  test('a write the disk refuses (here: another writer holds the lock past busy_timeout) is code 11 and reported once', () => {
    const { path } = openStore();
    const errors: string[] = [];
    const store = new Store(path, { onWriteError: (e) => errors.push((e as Error & { code?: string }).code ?? '?') });
    open.push(store);
    const other = openDatabase(path);
    other.exec('BEGIN IMMEDIATE');
    try {
      assert.throws(
        () => store.atomic(() => store.createAttachment(newAttachment())),
        (e: { code?: number; message?: string }) =>
          e.code === 11 && /could not write its journal \(SQLITE_BUSY/.test(e.message ?? ''),
      );
      assert.deepEqual(errors, ['SQLITE_BUSY']);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    assert.equal(store.listAttachments({}).length, 0, 'nothing half-written');
  });

  test('a write that breaks a constraint is a bug (code 104), not "try again later"', () => {
    const { store } = openStore();
    assert.throws(
      () =>
        store.insertStep({
          attachmentId: 999,
          seq: 0,
          delegateIndex: 0,
          delegateName: 'd',
          ifname: 'eth0',
          pluginIndex: 0,
          pluginType: 'bridge',
          config: '{}',
        }),
      (e: { code?: number }) => e.code === 104,
    );
  });

  test('stored error texts are capped, so a 100 KB plugin message does not bloat every status page', () => {
    const { store } = openStore();
    const a = store.createAttachment(newAttachment());
    store.setAttachmentError(a.id, 'x'.repeat(100_000));
    const kept = store.getAttachment(a.id)?.error ?? '';
    assert.ok(kept.length < 2200, `kept ${kept.length} characters`);
    assert.match(kept, /more characters cut/);
  });
});

describe('Store plugin processes (schema 3)', () => {
  const proc = { pid: 4242, startTime: 987654, bootId: 'b-1', pidNamespace: 'pid:[4026531836]' };

  test('a step records the process its plugin runs as; only steps left `adding` or `deleting` are listed', () => {
    const { store } = openStore();
    const a = store.createAttachment(newAttachment());
    const s0 = addStep(store, a.id, 0);
    const s1 = addStep(store, a.id, 1);
    const s2 = addStep(store, a.id, 2);
    store.setStepProcess(s0.id, proc);
    store.setStepProcess(s1.id, { ...proc, pid: 4243 });
    store.setStepProcess(s2.id, { ...proc, pid: 4244 });
    store.setStepAdded(s1.id, '{}');
    store.setStepDeleting(s2.id);
    assert.deepEqual(store.runningStepProcesses(), [
      { stepId: s0.id, attachmentId: a.id, pluginType: 'bridge', state: 'adding', process: proc },
      { stepId: s2.id, attachmentId: a.id, pluginType: 'portmap', state: 'deleting', process: { ...proc, pid: 4244 } },
    ]);
    // A step whose plugin never started is not listed.
    addStep(store, a.id, 3);
    assert.equal(store.runningStepProcesses().length, 2);
  });

  test('recording a process (a commit without fsync) leaves the journal at synchronous=FULL', () => {
    const { store } = openStore();
    const s = addStep(store, store.createAttachment(newAttachment()).id);
    store.setStepProcess(s.id, proc);
    assert.deepEqual(store.durability(), { journalMode: 'wal', synchronous: 2 });
  });

  test('a schema-2 database migrates: its steps carry no process, and new ones can', () => {
    const path = join(root, 'schema-2.db');
    const db = openDatabase(path);
    db.exec(MIGRATIONS[0] as string);
    db.exec(MIGRATIONS[1] as string);
    db.pragma('user_version = 2');
    db.prepare(
      `INSERT INTO attachments (container_id, network, ifname, netns, cni_args, cni_path, cni_version, boot_id,
      state, config, created_at, updated_at) VALUES ('old-ctr', 'net', 'eth0', '/ns', '', '/bin', '1.0.0', 'b',
      'adding', '{}', 1, 2)`,
    ).run();
    db.prepare(
      `INSERT INTO steps (attachment_id, seq, delegate_index, delegate_name, ifname, plugin_index, plugin_type,
      config, state, created_at, updated_at) VALUES (1, 0, 0, 'd', 'eth0', 0, 'bridge', '{}', 'adding', 1, 2)`,
    ).run();
    db.close();
    const store = new Store(path);
    open.push(store);
    assert.equal(store.schemaVersion, MIGRATIONS.length);
    assert.deepEqual(store.runningStepProcesses(), []);
    store.setStepProcess(1, proc);
    assert.deepEqual(
      store.runningStepProcesses().map((r) => r.process),
      [proc],
    );
  });
});

describe('populateJournal (the one filler of a busy journal, for benchmarks and tests)', () => {
  test("writes N live attachments of the given boot, each one added step of the first delegate's plugin, and the file's pages are read back", () => {
    const path = join(root, 'populated.db');
    const conf = {
      cniVersion: '1.0.0',
      name: 'steward',
      type: 'steward',
      delegates: [{ name: 'podnet', cniVersion: '1.0.0', plugins: [{ type: 'bridge', bridge: 'cni0' }] }],
    };
    populateJournal(path, 25, 'boot-x', conf);
    const store = new Store(path);
    try {
      const live = store.attachmentsInState('added');
      assert.equal(live.length, 25);
      assert.ok(live.every((a) => a.bootId === 'boot-x' && a.result !== null));
      assert.equal(new Set(live.map((a) => a.containerId)).size, 25);
      const steps = store.stepsOf(live[0]!.id);
      assert.deepEqual(
        steps.map((s) => [s.pluginType, s.state, JSON.parse(s.config).name]),
        [['bridge', 'added', 'podnet']],
      );
      // Rows as the daemon writes them for a pod of a busy node: what status, GC and recovery read.
      const first = live.find((a) => a.podName === 'pod-0')!;
      const { id, createdAt, updatedAt, ...rest } = first;
      assert.deepEqual(rest, {
        containerId: '0'.repeat(64),
        network: 'steward',
        ifname: 'eth0',
        netns: '/var/run/netns/cni-00000000',
        netnsId: null,
        cniArgs: 'K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-0',
        cniPath: '/opt/cni/bin',
        cniVersion: '1.0.0',
        bootId: 'boot-x',
        state: 'added',
        config: JSON.stringify(conf),
        result: first.result,
        error: null,
        podNamespace: 'bench',
        podName: 'pod-0',
        podUid: null,
      });
      assert.ok(id > 0 && createdAt <= updatedAt);
      assert.equal(live.find((a) => a.podName === 'pod-17')!.containerId, `00000011${'0'.repeat(56)}`);
      const bridgeResult = {
        cniVersion: '1.0.0',
        interfaces: [
          { name: 'cni0', mac: '0a:58:0a:f4:01:01' },
          { name: 'veth1a2b3c4d', mac: '12:34:56:78:9a:bc' },
          { name: 'eth0', mac: '0a:58:0a:f4:01:05', sandbox: '/var/run/netns/cni-00000000' },
        ],
        ips: [{ address: '10.244.1.5/24', gateway: '10.244.1.1', interface: 2 }],
        routes: [{ dst: '0.0.0.0/0' }],
        dns: {},
      };
      assert.deepEqual(JSON.parse(first.result!), bridgeResult, "the attachment's result: a bridge + host-local ADD");
      const [step] = store.stepsOf(first.id);
      assert.deepEqual(
        [step!.delegateName, step!.ifname, step!.seq, JSON.parse(step!.config), JSON.parse(step!.result!)],
        ['podnet', 'eth0', 0, { type: 'bridge', bridge: 'cni0', name: 'podnet', cniVersion: '1.0.0' }, bridgeResult],
      );
      const pages = store.pageStats();
      assert.ok(pages.pageSize >= 512 && pages.pageCount > 1, JSON.stringify(pages));
      assert.deepEqual(store.integrityCheck(), []);
    } finally {
      store.close();
    }
  });

  test('leaves the journal closed and whole in its one file (a copy of the file alone has every row)', () => {
    const path = join(root, 'populated-copied.db');
    populateJournal(path, 3, 'boot-y', { delegates: [{ name: 'n', cniVersion: '1.0.0', plugins: [{ type: 'ptp' }] }] });
    assert.equal(existsSync(`${path}-wal`), false, 'no WAL left beside it: the journal was closed');
    const copy = join(root, 'populated-copy.db');
    copyFileSync(path, copy);
    const store = new Store(copy);
    try {
      assert.equal(store.attachmentsInState('added').length, 3);
    } finally {
      store.close();
    }
  });

  test('a netconf without delegates (or a delegate without a name) still fills it, under the delegate name "podnet"', () => {
    const bare = join(root, 'populated-bare.db');
    populateJournal(bare, 2, 'boot-z', { cniVersion: '1.0.0', name: 'steward', type: 'steward' });
    const unnamed = join(root, 'populated-unnamed.db');
    populateJournal(unnamed, 2, 'boot-z', { delegates: [{ cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] }] });
    for (const path of [bare, unnamed]) {
      const store = new Store(path);
      try {
        const live = store.attachmentsInState('added');
        assert.equal(live.length, 2);
        assert.deepEqual(
          live.flatMap((a) => store.stepsOf(a.id).map((s) => [s.delegateName, s.state])),
          [
            ['podnet', 'added'],
            ['podnet', 'added'],
          ],
        );
      } finally {
        store.close();
      }
    }
  });
});
