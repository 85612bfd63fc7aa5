// The install lock with real processes: `stewardd install` / `uninstall` waiting for another
// holder (and giving up after 10 s), taking over a lock left by a process killed with -9, and the
// race the lock exists for (seed 001): `stewardd uninstall` while the running daemon's watcher
// keeps regenerating 00-steward.conflist from a primary that changes all the time. Without the
// lock the watcher can write the conflist back after uninstall removed it: a dangling config.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import {
  holdLockInChild,
  installInto,
  nodeTree,
  snapshot,
  uninstallFrom,
  writeJson,
  type NodeTree,
} from '../helpers/node-tree.js';
import { until } from '../helpers/processes.js';

const LOCK = 'install.lock';

describe('stewardd install / uninstall and the install lock', () => {
  const env = new TestEnv('lock');
  after(() => env.close());
  const socket = join(env.dir, 'absent.sock');
  let n = 0;

  function freshTree(): NodeTree {
    const name = `t${n++}`;
    const t = { ...nodeTree(join(env.dir, name, 'node')), stateDir: join(env.dir, name, 'state') };
    writeJson(join(t.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [{ type: 'bridge', bridge: 'cni0' }],
    });
    return t;
  }

  it('uninstall waits while another process holds the lock, then proceeds', async () => {
    const t = freshTree();
    const original = snapshot(t.root);
    assert.equal((await installInto(t, socket)).code, 0);
    const holder = await holdLockInChild(t.stateDir, 'watcher');
    const waiting = new RegExp(`waiting for the install lock, held by stewardd watcher \\(pid ${holder.pid},`);
    let stderr = '';
    let exited = false;
    const run = uninstallFrom(t, [], (text) => (stderr += text));
    void run.finally(() => (exited = true));
    // The line is only said if the lock is busy at uninstall's first attempt: release only once it was.
    await until('uninstall to say it waits for the lock', () => waiting.test(stderr), 20_000);
    // Still waiting well after it said so (the lock is polled every 25 ms): it neither took the lock nor went on without it.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(exited, false, 'uninstall ended while the lock was held');
    assert.ok(existsSync(join(t.confDir, '00-steward.conflist')), 'nothing removed while the lock is held');
    await holder.release();
    const r = await run;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /removed .*00-steward\.conflist/);
    assert.deepEqual(snapshot(t.root), original);
    assert.equal(existsSync(join(t.stateDir, LOCK)), false);
  });

  it('install gives up after 10 s with a clear error and exit 1, having written nothing', async () => {
    const t = freshTree();
    const original = snapshot(t.root);
    const holder = await holdLockInChild(t.stateDir, 'uninstall');
    try {
      const t0 = Date.now();
      const r = await installInto(t, socket);
      const took = Date.now() - t0;
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.ok(took >= 10_000 && took < 20_000, `took ${took} ms`);
      assert.match(
        r.stdout,
        new RegExp(
          `install gave up, nothing removed or written: timed out after 10 s waiting for the install lock .*install\\.lock, held by stewardd uninstall \\(pid ${holder.pid},`,
        ),
      );
      assert.deepEqual(snapshot(t.root), original);
      assert.equal(existsSync(join(t.stateDir, 'install.json')), false);
      assert.equal(
        JSON.parse(readFileSync(join(t.stateDir, LOCK), 'utf8')).pid,
        holder.pid,
        'the holder still holds it',
      );
    } finally {
      await holder.release();
    }
  });

  it('a lock left by a stewardd killed with -9 is taken over at once', async () => {
    const t = freshTree();
    const holder = await holdLockInChild(t.stateDir, 'install');
    await holder.kill9();
    assert.ok(existsSync(join(t.stateDir, LOCK)));
    const t0 = Date.now();
    const r = await installInto(t, socket);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
    assert.ok(existsSync(join(t.confDir, '00-steward.conflist')));
    assert.equal(existsSync(join(t.stateDir, LOCK)), false);
  });
});

describe("uninstall racing the daemon's watcher (seed 001)", () => {
  const env = new TestEnv('lock-race');
  after(() => env.close());
  const confDir = join(env.dir, 'node/etc/cni/net.d');
  const daemon = new Daemon(env, { args: ['--cni-conf-dir', confDir] });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  const primaryPath = join(tree.confDir, '10-podnet.conflist');
  const version = (mtu: number) =>
    `${JSON.stringify({ cniVersion: '1.0.0', name: 'podnet', plugins: [{ type: 'bridge', bridge: 'cni0', mtu }] }, null, 2)}\n`;

  /** Replaces the primary atomically (as a CNI would), so every version is usable and the watcher rewrites our conflist for each. */
  function writePrimary(text: string): void {
    const tmp = join(env.dir, 'primary.tmp');
    writeFileSync(tmp, text);
    renameSync(tmp, primaryPath);
  }

  it('uninstall while the primary keeps changing leaves no 00-steward.conflist, and the conf dir as before install', async () => {
    writePrimary(version(1500));
    const original = snapshot(tree.confDir);
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    for (let round = 0; round < 6; round++) {
      if (round > 0) {
        const i = await installInto(tree, daemon.socket);
        assert.equal(i.code, 0, i.stdout + i.stderr);
      }
      await daemon.waitFor('ready', async () => (await daemon.get('/readyz')).status === 200, 5000);
      let stop = false;
      let changes = 0;
      const churn = (async () => {
        while (!stop) {
          writePrimary(version(1400 + (changes++ % 50)));
          await new Promise((r) => setTimeout(r, 3));
        }
      })();
      const u = await uninstallFrom(tree);
      stop = true;
      await churn;
      assert.equal(u.code, 0, `round ${round}: ${u.stdout}${u.stderr}`);
      writePrimary(version(1500));
      // Give the watcher more than a rescan to undo the uninstall, if it still could.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(
        existsSync(join(tree.confDir, '00-steward.conflist')),
        false,
        `round ${round}: a dangling 00-steward.conflist (${changes} primary changes)`,
      );
      assert.deepEqual(snapshot(tree.confDir), original, `round ${round}`);
      assert.equal(existsSync(join(tree.binDir, 'steward')), false, `round ${round}`);
      assert.equal(existsSync(join(tree.stateDir, 'install.json')), false, `round ${round}: the record came back`);
      assert.equal(existsSync(join(tree.stateDir, LOCK)), false, `round ${round}: the lock was left behind`);
      assert.equal((await daemon.get('/readyz')).status, 503);
    }
    assert.equal(await daemon.stop(), 0);
  });
});
