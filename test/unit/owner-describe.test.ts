// What the state-dir owner file says and how a busy error names the owner (daemon/src/store/owner.ts):
// the recorded process identity, a stale owner file told from a live one, another PID namespace,
// deduplicated dirs, and release. No root: temp dirs and this process's own /proc entries.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import {
  OWNER_INFO_FILE,
  OWNER_LOCK_FILE,
  describeOwner,
  takeOwnership,
  type Owner,
} from '../../daemon/src/store/owner.js';
import { podOf } from '../../daemon/src/store/types.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-owner-describe-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const ownStart = (): string => {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
};

function owner(over: Partial<Owner> = {}): Owner {
  return {
    pid: process.pid,
    procStart: ownStart(),
    startedAt: '2026-01-01T00:00:00.000Z',
    since: '2026-01-01T00:00:01.000Z',
    socket: '/run/s.sock',
    stateDir: '/var/lib/x',
    pidns: readlinkSync('/proc/self/ns/pid'),
    ...over,
  };
}

describe('describeOwner', () => {
  test('a live owner is named by pid, start, since and socket, with no stale note', () => {
    assert.equal(
      describeOwner(owner()),
      `pid ${process.pid}, started 2026-01-01T00:00:00.000Z, owner since 2026-01-01T00:00:01.000Z, serving /run/s.sock`,
    );
    // An owner file of an older stewardd, with no start tick and no PID namespace: named the same.
    assert.equal(
      describeOwner(owner({ procStart: undefined, pidns: undefined })),
      `pid ${process.pid}, started 2026-01-01T00:00:00.000Z, owner since 2026-01-01T00:00:01.000Z, serving /run/s.sock`,
    );
  });

  test('an owner file whose pid is now another process, or no process, is called stale', () => {
    assert.match(
      describeOwner(owner({ procStart: '1' })),
      /; that pid is no longer that process, so the owner file is stale/,
    );
    assert.match(describeOwner(owner({ pid: 2 ** 30 })), /owner file is stale/);
    // An older stewardd's owner file (no start tick) whose pid no longer exists: stale too.
    assert.match(describeOwner(owner({ pid: 2 ** 30, procStart: undefined })), /owner file is stale/);
  });

  test('an owner in another PID namespace is said to be so; no owner yet is said too', () => {
    assert.equal(
      describeOwner(owner({ pidns: 'pid:[1]' })),
      `pid ${process.pid} in another PID namespace (another container?), started 2026-01-01T00:00:00.000Z, owner since 2026-01-01T00:00:01.000Z, serving /run/s.sock`,
    );
    assert.equal(describeOwner(undefined), 'a process that has not written its name yet');
  });
});

describe('takeOwnership records who owns the dir', () => {
  test('the owner file: this process, its start tick, start time, pid namespace and the first dir; private modes', () => {
    const a = join(dir, 'a');
    const b = join(dir, 'b');
    const before = Date.now();
    const upBefore = process.uptime() * 1000;
    const lock = takeOwnership([a, b, a], '/run/a.sock');
    const upAfter = process.uptime() * 1000;
    try {
      assert.deepEqual(lock.dirs, [a, b], 'deduplicated, in order');
      for (const d of [a, b]) {
        const info = JSON.parse(readFileSync(join(d, OWNER_INFO_FILE), 'utf8')) as Owner;
        assert.equal(info.pid, process.pid);
        assert.equal(info.procStart, ownStart());
        assert.equal(info.pidns, readlinkSync('/proc/self/ns/pid'));
        assert.equal(info.stateDir, a);
        assert.equal(info.socket, '/run/a.sock');
        const started = Date.parse(info.startedAt);
        const expected = before - process.uptime() * 1000;
        assert.ok(Math.abs(started - expected) < 60_000, `startedAt ${info.startedAt} is this process's start`);
        assert.ok(Date.parse(info.since) >= before - 1000);
        // startedAt is `since` less this process's uptime (ISO strings: whole milliseconds).
        const age = Date.parse(info.since) - started;
        assert.ok(
          age >= Math.floor(upBefore) - 1 && age <= Math.ceil(upAfter) + 1,
          `startedAt is ${age} ms before since; uptime was ${Math.round(upBefore)}..${Math.round(upAfter)} ms`,
        );
        assert.equal(statSync(join(d, OWNER_INFO_FILE)).mode & 0o777, 0o600);
        assert.equal(statSync(d).mode & 0o777, 0o700);
        assert.ok(statSync(join(d, OWNER_LOCK_FILE)).isFile());
      }
    } finally {
      lock.release();
    }
    lock.release(); // twice is harmless
    takeOwnership([a, b], '/run/again.sock').release();
  });
});

test('podOf reads the recorded pod of an attachment', () => {
  assert.deepEqual(podOf({ podNamespace: 'ns', podName: 'p', podUid: 'u' }), { namespace: 'ns', name: 'p', uid: 'u' });
});
