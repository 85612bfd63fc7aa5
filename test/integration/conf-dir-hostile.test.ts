// What else lives in the CNI conf dir must never hang install or the running daemon: the primary is
// read without blocking (a FIFO named like a config held open(2), and with it install or the whole
// daemon's event loop, for good), a directory named like one is skipped as libcni skips it, and a
// huge file is refused instead of read every second. Real stewardd, real install, a real FIFO.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, sh } from '../helpers/env.js';
import {
  installInto,
  nodeTree,
  uninstallFrom,
  writeJson,
  writeLoopbackPrimary,
  type NodeTree,
} from '../helpers/node-tree.js';

const env = new TestEnv('confdir');
after(() => env.close());

describe('hostile entries in the CNI conf dir', () => {
  it('a directory named like a config is skipped: install wraps the config after it', async () => {
    const tree: NodeTree = nodeTree(join(env.dir, 'dir'));
    writeLoopbackPrimary(tree.confDir);
    mkdirSync(join(tree.confDir, '05-leftover.conflist'));
    const r = await installInto(tree, join(env.dir, 'dir.sock'));
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /wraps 10-podnet\.conflist/);
    assert.match(readFileSync(join(tree.confDir, '00-steward.conflist'), 'utf8'), /"podnet"/);
  });

  it('a FIFO named like the first config: install answers at once that it is not a regular file', async () => {
    const tree: NodeTree = nodeTree(join(env.dir, 'fifo'));
    writeLoopbackPrimary(tree.confDir);
    sh('mkfifo', [join(tree.confDir, '05-x.conflist')]);
    const t0 = performance.now();
    const r = await installInto(tree, join(env.dir, 'fifo.sock'));
    assert.ok(performance.now() - t0 < 15_000, 'install hung on the FIFO');
    assert.match(r.stdout + r.stderr, /05-x\.conflist.*not a regular file/s);
  });

  it('a config that sorts before 00-steward.conflist is named as the reason steward would be bypassed, not wrapped silently', async () => {
    // The runtime loads the first config by name: with 00-multus.conf there, ours would never be read.
    const tree: NodeTree = nodeTree(join(env.dir, 'first'));
    writeJson(join(tree.confDir, '00-multus.conf'), { cniVersion: '1.0.0', name: 'multus', type: 'loopback' });
    const r = await installInto(tree, join(env.dir, 'first.sock'));
    assert.match(
      r.stdout,
      /00-multus\.conf is not usable \(it sorts before 00-steward\.conflist, so the runtime loads it/,
    );
    assert.match(r.stdout, /rename it to sort after 00-steward\.conflist \(e\.g\. 10-multus\.conf\)/);
  });

  it('a running daemon watching an installed conf dir that gets a FIFO and a huge file keeps answering', async () => {
    const daemon = new Daemon(env, { name: 'watch', args: ['--cni-conf-dir', join(env.dir, 'watch/etc/cni/net.d')] });
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'watch')), stateDir: daemon.stateDir };
    writeLoopbackPrimary(tree.confDir);
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    // Each in turn sorts first, so the watcher (about once a second) reads it as the primary.
    writeFileSync(join(tree.confDir, '05-huge.conflist'), `{"pad":"${'x'.repeat(2 * 1024 * 1024)}"}`);
    await new Promise((r) => setTimeout(r, 1500));
    sh('mkfifo', [join(tree.confDir, '03-x.conflist')]);
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 500));
      const t0 = performance.now();
      const h = await daemon.get('/healthz');
      assert.ok(performance.now() - t0 < 2000, `/healthz took ${Math.round(performance.now() - t0)} ms`);
      assert.equal(h.status, 200);
    }
    await daemon.stop();
  });
});

describe("hostile files at stewardd's own paths", () => {
  it('install.json a FIFO: install and uninstall answer at once that it is no record; install --force sets it aside', async () => {
    const tree: NodeTree = nodeTree(join(env.dir, 'rec-fifo'));
    writeLoopbackPrimary(tree.confDir);
    const socket = join(env.dir, 'rec-fifo.sock');
    assert.equal((await installInto(tree, socket)).code, 0);
    const record = join(tree.stateDir, 'install.json');
    rmSync(record);
    sh('mkfifo', [record]);
    for (const run of [() => installInto(tree, socket), () => uninstallFrom(tree)]) {
      const t0 = performance.now();
      const r = await run();
      assert.ok(performance.now() - t0 < 15_000, 'hung on the FIFO');
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.match(r.stderr, /install\.json is not a readable install record \(.*is not a regular file\)/);
    }
    assert.equal(existsSync(join(tree.stateDir, 'install.lock')), false, 'no lock left behind');
    const forced = await installInto(tree, socket, ['--force']);
    assert.equal(forced.code, 0, forced.stdout + forced.stderr);
    assert.equal(JSON.parse(readFileSync(record, 'utf8')).state, 'installed');
    assert.equal(readdirSync(tree.stateDir).filter((n) => n.startsWith('install.json.unreadable-')).length, 1);
  });

  it('a running daemon whose record, install lock and STATUS note become FIFOs keeps answering /healthz and /v1/status', async () => {
    const daemon = new Daemon(env, {
      name: 'own-fifo',
      args: ['--cni-conf-dir', join(env.dir, 'own-fifo/etc/cni/net.d')],
    });
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'own-fifo')), stateDir: daemon.stateDir };
    writeLoopbackPrimary(tree.confDir);
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    // The watcher takes the lock and the spool dirs read the record about once a second; /v1/status
    // reads the shim's STATUS note.
    sh('mkfifo', [join(tree.stateDir, 'install.lock')]);
    sh('mkfifo', [`${daemon.socket}.status-not-ready`]);
    const record = join(tree.stateDir, 'install.json');
    rmSync(record);
    sh('mkfifo', [record]);
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 500));
      for (const path of ['/healthz', '/v1/status']) {
        const t0 = performance.now();
        const res = await daemon.get(path);
        assert.ok(performance.now() - t0 < 2000, `${path} took ${Math.round(performance.now() - t0)} ms`);
        assert.equal(res.status, 200, `${path}: ${res.text}`);
      }
    }
    const readyz = await daemon.get('/readyz');
    assert.equal(readyz.status, 503);
    assert.match(readyz.text, /not a readable install record/);
    await daemon.stop();
  });

  it('the installed shim removed under a running daemon: put back within a tick; where it cannot be, /readyz 503 naming it', async () => {
    const daemon = new Daemon(env, {
      name: 'no-shim',
      args: ['--cni-conf-dir', join(env.dir, 'no-shim/etc/cni/net.d')],
    });
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'no-shim')), stateDir: daemon.stateDir };
    writeLoopbackPrimary(tree.confDir);
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    const shimPath = join(tree.binDir, 'steward');
    const installed = readFileSync(shimPath);
    await daemon.start();
    rmSync(shimPath);
    await daemon.waitFor('the shim put back', async () => existsSync(shimPath));
    assert.ok(readFileSync(shimPath).equals(installed), "the daemon's own shim, byte for byte");
    assert.equal(statSync(shimPath).mode & 0o777, 0o755);
    assert.equal(JSON.parse(readFileSync(join(tree.stateDir, 'install.json'), 'utf8')).shim.path, shimPath);
    await daemon.waitFor('ready', async () => (await daemon.get('/readyz')).status === 200);
    assert.match(
      readFileSync(daemon.logFile, 'utf8'),
      /installed shim .*steward was missing; put this stewardd's own back/,
    );
    // The bin dir gone: nothing can be written there, and the node is said not ready.
    rmSync(tree.binDir, { recursive: true });
    await daemon.waitFor('not ready, naming the missing shim', async () =>
      /installed shim .*steward is missing/.test((await daemon.get('/readyz')).text),
    );
    assert.equal((await daemon.get('/healthz')).status, 200);
    mkdirSync(tree.binDir);
    await daemon.waitFor('put back and ready again', async () => (await daemon.get('/readyz')).status === 200);
    assert.ok(readFileSync(shimPath).equals(installed));
    const log = readFileSync(daemon.logFile, 'utf8');
    assert.equal(
      log.match(/is missing and could not be put back/g)?.length,
      1,
      'the failure said once, not every tick',
    );
    await daemon.stop();
  });

  it("a plugin chained after steward in 00-steward.conflist (as Istio's CNI chains itself into the first config): not ready, naming it and the way out", async () => {
    const daemon = new Daemon(env, {
      name: 'chained',
      args: ['--cni-conf-dir', join(env.dir, 'chained/etc/cni/net.d')],
    });
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'chained')), stateDir: daemon.stateDir };
    writeLoopbackPrimary(tree.confDir);
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    await daemon.waitFor('ready', async () => (await daemon.get('/readyz')).status === 200);
    const ours = join(tree.confDir, '00-steward.conflist');
    const conf = JSON.parse(readFileSync(ours, 'utf8'));
    conf.plugins.push({ type: 'istio-cni', kubernetes: {} });
    writeFileSync(ours, JSON.stringify(conf, null, 2));
    await daemon.waitFor('not ready, naming the chained plugin', async () =>
      /chained istio-cni after steward; leaving it alone: configure that plugin to chain itself into the primary/.test(
        (await daemon.get('/readyz')).text,
      ),
    );
    assert.deepEqual(JSON.parse(readFileSync(ours, 'utf8')).plugins.at(-1), { type: 'istio-cni', kubernetes: {} });
    // Any other edit is said as before.
    writeFileSync(ours, JSON.stringify({ ...conf, plugins: [{ type: 'bridge' }] }));
    await daemon.waitFor('not ready, rewritten', async () =>
      /00-steward.conflist was rewritten by someone else; leaving it alone/.test((await daemon.get('/readyz')).text),
    );
    assert.equal((await installInto(tree, daemon.socket, ['--force'])).code, 0);
    await daemon.waitFor('ready again', async () => (await daemon.get('/readyz')).status === 200);
    await daemon.stop();
  });
});
