// The install lock (daemon/src/lifecycle/lock.ts) on real files: exclusion between processes,
// waiting and giving up, taking over a lock its holder left behind (dead pid, reused pid, another
// boot, another PID namespace, a file never written), never removing someone else's lock, and the
// watcher skipping a round while the lock is held.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { install } from '../../daemon/src/lifecycle/install.js';
import { uninstall } from '../../daemon/src/lifecycle/uninstall.js';
import { lock, LOCK_FILE, LockTimeoutError, tryLock, type Holder, type Lock } from '../../daemon/src/lifecycle/lock.js';
import { readRecord } from '../../daemon/src/lifecycle/record.js';
import { PrimaryWatcher } from '../../daemon/src/lifecycle/watcher.js';
import { REPO } from '../helpers/env.js';
import { holdLockInChild, snapshot, writeJson } from '../helpers/node-tree.js';

const log = pino({ level: 'silent' });
const base = mkdtempSync(join(tmpdir(), 'stw-lock-'));
after(() => rmSync(base, { recursive: true, force: true }));
let dirs = 0;
const fresh = () => join(base, `d${dirs++}`);

function held(stateDir: string, purpose = 'test'): Lock {
  const r = tryLock(stateDir, purpose);
  assert.ok('held' in r, `lock busy: ${JSON.stringify(r)}`);
  return r.held;
}

function busy(stateDir: string): Holder | undefined {
  const r = tryLock(stateDir, 'test');
  if ('held' in r) {
    r.held.release();
    assert.fail('the lock was free');
  }
  return r.busy;
}

function holderIn(stateDir: string): Holder {
  return JSON.parse(readFileSync(join(stateDir, LOCK_FILE), 'utf8')) as Holder;
}

/** A lock file as a holder with these fields would have left it, `ageMs` old. */
function plant(stateDir: string, fields: Partial<Holder> | string, ageMs = 0): void {
  mkdirSync(stateDir, { recursive: true });
  const path = join(stateDir, LOCK_FILE);
  writeFileSync(path, typeof fields === 'string' ? fields : JSON.stringify({ ...holderIn0(), ...fields }));
  const t = (Date.now() - ageMs) / 1000;
  utimesSync(path, t, t);
}

/** Our own holder fields (boot, pid namespace, start time), read from a lock we take and drop. */
function holderIn0(): Holder {
  const d = fresh();
  const l = held(d);
  const h = holderIn(d);
  l.release();
  return h;
}

describe('the install lock', () => {
  it('is exclusive, names its holder, and is removed on release (twice is fine)', () => {
    const d = fresh();
    const l = held(d, 'install');
    const h = busy(d);
    assert.equal(h?.pid, process.pid);
    assert.equal(h?.purpose, 'install');
    l.release();
    assert.equal(existsSync(join(d, LOCK_FILE)), false);
    l.release();
    held(d).release();
  });

  it("keeps processes out of each other's read-modify-write (3 processes, 20 increments each, none lost)", async () => {
    const d = fresh();
    mkdirSync(d);
    const counter = join(d, 'counter');
    writeFileSync(counter, '0');
    const script = `
      import { readFileSync, writeFileSync } from 'node:fs';
      import { withLock } from ${JSON.stringify(join(REPO, 'daemon/src/lifecycle/lock.ts'))};
      for (let i = 0; i < 20; i++) {
        await withLock(${JSON.stringify(d)}, 'counter', { waitMs: 30000 }, async () => {
          const n = Number(readFileSync(${JSON.stringify(counter)}, 'utf8'));
          await new Promise((r) => setTimeout(r, 2));
          writeFileSync(${JSON.stringify(counter)}, String(n + 1));
        });
      }`;
    const runs = [0, 1, 2].map(
      () =>
        new Promise<number | null>((resolve, reject) => {
          const c = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
            stdio: 'inherit',
          });
          c.once('error', reject);
          c.once('exit', resolve);
        }),
    );
    assert.deepEqual(await Promise.all(runs), [0, 0, 0]);
    assert.equal(readFileSync(counter, 'utf8'), '60');
    assert.equal(existsSync(join(d, LOCK_FILE)), false);
  });

  it('lock() waits while it is held and proceeds once it is released', async () => {
    const d = fresh();
    const l = held(d);
    setTimeout(() => l.release(), 300);
    let waitedFor: Holder | undefined;
    const t0 = Date.now();
    const got = await lock(d, 'second', {
      waitMs: 5000,
      onWait: (h) => {
        waitedFor = h;
      },
    });
    assert.ok(Date.now() - t0 >= 250, `took ${Date.now() - t0} ms`);
    assert.equal(waitedFor?.pid, process.pid);
    assert.equal(holderIn(d).purpose, 'second');
    got.release();
  });

  it('lock() gives up after waitMs with an error naming the holder', async () => {
    const d = fresh();
    const l = held(d, 'watcher');
    const t0 = Date.now();
    await assert.rejects(lock(d, 'uninstall', { waitMs: 200 }), (e: unknown) => {
      assert.ok(e instanceof LockTimeoutError);
      assert.match(e.message, new RegExp(`held by stewardd watcher \\(pid ${process.pid},`));
      return true;
    });
    assert.ok(Date.now() - t0 >= 200);
    assert.equal(holderIn(d).purpose, 'watcher', 'the holder still holds it');
    l.release();
  });

  it('a lock left by a process killed with -9 is taken over', async () => {
    const d = fresh();
    const child = await holdLockInChild(d);
    assert.equal(busy(d)?.pid, child.pid);
    await child.kill9();
    assert.equal(holderIn(d).pid, child.pid, 'kill -9 left the lock file');
    const l = held(d, 'after');
    assert.equal(holderIn(d).purpose, 'after');
    l.release();
    assert.deepEqual(snapshot(d), {}, 'nothing left behind (no renamed-aside file)');
  });

  it('a live holder in another process keeps it; released, it is free', async () => {
    const d = fresh();
    const child = await holdLockInChild(d);
    assert.equal(busy(d)?.pid, child.pid);
    await child.release();
    held(d).release();
  });

  it('a pid now used by another process (another start time) does not hold it', () => {
    const d = fresh();
    plant(d, { pid: process.pid, start: '1', purpose: 'old', nonce: 'x' });
    held(d).release();
  });

  it('a lock from another boot is taken over, whatever its pid', () => {
    const d = fresh();
    plant(d, { pid: process.pid, boot: '00000000-0000-0000-0000-000000000000', purpose: 'old', nonce: 'x' });
    held(d).release();
  });

  it('from another PID namespace (the pid means nothing here): held while young, taken over when old', () => {
    const d = fresh();
    plant(d, { pid: 1, pidns: 'pid:[1]', purpose: 'install', nonce: 'x' });
    assert.equal(busy(d)?.pid, 1);
    plant(d, { pid: 1, pidns: 'pid:[1]', purpose: 'install', nonce: 'x' }, 61_000);
    held(d).release();
  });

  it('an empty lock file (its creator died before writing it): held for a few seconds, then taken over', () => {
    const d = fresh();
    plant(d, '');
    assert.equal(busy(d), undefined);
    plant(d, '', 6_000);
    held(d).release();
  });

  it('release never removes a lock someone else took after deciding ours was abandoned', () => {
    const d = fresh();
    const mine = held(d);
    rmSync(join(d, LOCK_FILE));
    const theirs = held(d, 'theirs');
    mine.release();
    assert.equal(holderIn(d).purpose, 'theirs');
    theirs.release();
  });
});

describe('install, uninstall and the watcher under the lock', () => {
  function node() {
    const root = fresh();
    const t = {
      confDir: join(root, 'net.d'),
      binDir: join(root, 'bin'),
      stateDir: join(root, 'state'),
      shim: join(root, 'steward-src'),
      socket: join(root, 'd.sock'),
    };
    mkdirSync(t.confDir, { recursive: true });
    writeJson(join(t.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [{ type: 'bridge', bridge: 'cni0' }],
    });
    writeFileSync(t.shim, '#!/bin/sh\n');
    return t;
  }
  const opts = (t: ReturnType<typeof node>) => ({
    cniBinDir: t.binDir,
    cniConfDir: t.confDir,
    stateDir: t.stateDir,
    shim: t.shim,
    socket: t.socket,
    spoolDir: join(t.stateDir, 'spool'),
    force: false,
    log,
  });

  it('install waits for the lock, or gives up having written nothing', async () => {
    const t = node();
    mkdirSync(t.stateDir, { recursive: true });
    const l = held(t.stateDir, 'uninstall');
    await assert.rejects(install({ ...opts(t), lockWaitMs: 100 }), LockTimeoutError);
    assert.equal(readRecord(t.stateDir), undefined);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    setTimeout(() => l.release(), 200);
    const r = await install({ ...opts(t), lockWaitMs: 5000 });
    assert.equal(r.conflist.status, 'written');
    assert.equal(existsSync(join(t.stateDir, LOCK_FILE)), false);
  });

  it('uninstall gives up without removing anything while the lock is held', async () => {
    const t = node();
    await install(opts(t));
    const l = held(t.stateDir, 'watcher');
    const before = snapshot(join(t.confDir, '..'));
    await assert.rejects(
      uninstall({
        stateDir: t.stateDir,
        dbPath: join(t.stateDir, 'absent.db'),
        drainTimeoutMs: 100,
        purge: true,
        log,
        lockWaitMs: 100,
      }),
      LockTimeoutError,
    );
    assert.deepEqual(snapshot(join(t.confDir, '..')), before);
    l.release();
    const u = await uninstall({
      stateDir: t.stateDir,
      dbPath: join(t.stateDir, 'absent.db'),
      drainTimeoutMs: 100,
      purge: true,
      log,
    });
    assert.equal(u.removed.length, 2);
    assert.equal(u.purged, true);
    assert.equal(existsSync(t.stateDir), false);
  });

  it('the watcher skips a round while the lock is held and catches up on the next one', async () => {
    const t = node();
    await install(opts(t));
    const w = new PrimaryWatcher({ confDir: t.confDir, stateDir: t.stateDir, socket: t.socket, log });
    w.scan();
    assert.equal(w.ready(), true);
    const ours = join(t.confDir, '00-steward.conflist');
    const before = readFileSync(ours, 'utf8');
    writeJson(join(t.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [{ type: 'bridge', bridge: 'cni0', mtu: 1400 }],
    });
    const l = held(t.stateDir, 'uninstall');
    w.scan();
    assert.equal(readFileSync(ours, 'utf8'), before, 'nothing written while the lock is held');
    assert.equal(holderIn(t.stateDir).purpose, 'uninstall', 'and the lock left alone');
    l.release();
    w.scan();
    assert.match(readFileSync(ours, 'utf8'), /"mtu": 1400/);
    assert.equal(existsSync(join(t.stateDir, LOCK_FILE)), false);
  });

  it('the watcher writes nothing once uninstall has run, even when the primary changes', async () => {
    const t = node();
    await install(opts(t));
    const w = new PrimaryWatcher({ confDir: t.confDir, stateDir: t.stateDir, socket: t.socket, log });
    w.scan();
    await uninstall({
      stateDir: t.stateDir,
      dbPath: join(t.stateDir, 'absent.db'),
      drainTimeoutMs: 100,
      purge: false,
      log,
    });
    writeJson(join(t.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [{ type: 'bridge', bridge: 'cni1' }],
    });
    w.scan();
    assert.equal(w.ready(), false);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.equal(existsSync(join(t.stateDir, LOCK_FILE)), false);
  });
});
