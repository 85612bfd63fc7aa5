// Issue 28 item 3: the installed-shim readiness check reads only a regular file, without blocking,
// up to a bound. A FIFO, a link to /dev/zero, a 3 GiB sparse file and a directory at the installed
// shim's path each froze the loop, took gigabytes of RSS, or were reported as "no mismatch"; each
// must be a clear "not ready" reason while /healthz answers at once and RSS stays where it was.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, sh } from '../helpers/env.js';
import { installInto, nodeTree, SHIM_EXE, writeLoopbackPrimary, type NodeTree } from '../helpers/node-tree.js';

const rssKiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

describe('hostile files at the installed shim path', () => {
  const env = new TestEnv('shimhost');
  const daemon = new Daemon(env, { args: ['--cni-conf-dir', join(env.dir, 'node/etc/cni/net.d')] });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  const installed = join(tree.binDir, 'steward');
  const readyz = () => daemon.get('/readyz');

  before(async () => {
    writeLoopbackPrimary(tree.confDir);
    const r = await installInto(tree, daemon.socket);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    await daemon.start();
  });
  after(() => env.close());

  const cases: Array<{ name: string; make: () => void; reason: RegExp }> = [
    { name: 'a FIFO', make: () => sh('mkfifo', [installed]), reason: /is not a regular file/ },
    {
      name: 'a symlink to /dev/zero',
      make: () => symlinkSync('/dev/zero', installed),
      reason: /is not a regular file/,
    },
    {
      name: 'a 3 GiB sparse file',
      make: () => sh('truncate', ['-s', '3G', installed]),
      reason: /is 3221225472 bytes, more than the 268435456 read/,
    },
    { name: 'a directory', make: () => mkdirSync(installed), reason: /is not a regular file/ },
  ];

  for (const c of cases) {
    it(`${c.name}: /healthz answers within a second, /readyz and status say why not ready, RSS does not grow`, async () => {
      await daemon.waitFor('ready with its own shim', async () => (await readyz()).status === 200, 5000);
      const pid = daemon.proc!.pid!;
      const before = rssKiB(pid);
      rmSync(installed, { recursive: true, force: true });
      c.make();
      // The check runs every second: several rounds of it, each /healthz within a second.
      for (let i = 0; i < 6; i++) {
        await new Promise((r) => setTimeout(r, 400));
        const t0 = performance.now();
        const h = await daemon.get('/healthz');
        const ms = performance.now() - t0;
        assert.ok(ms < 1000, `/healthz took ${Math.round(ms)} ms`);
        assert.equal(h.status, 200);
      }
      const r = await readyz();
      assert.equal(r.status, 503);
      assert.equal(r.json.problems.length, 1, JSON.stringify(r.json));
      assert.match(r.json.problems[0], new RegExp(`^installed shim ${installed} cannot be checked: `));
      assert.match(r.json.problems[0], c.reason);
      assert.match(r.json.problems[0], /run stewardd install \/ roll the DaemonSet$/);
      const status = await daemon.status();
      assert.equal(status.ready, false);
      assert.deepEqual(status.problems, r.json.problems);
      assert.match((await daemon.get('/metrics')).text, /^steward_installed_shim_mismatch 1$/m);
      const grown = rssKiB(pid) - before;
      assert.ok(grown < 64 * 1024, `RSS grew by ${grown} KiB`);
      // Its own shim back: ready again.
      rmSync(installed, { recursive: true, force: true });
      copyFileSync(SHIM_EXE, installed);
      await daemon.waitFor('ready again', async () => (await readyz()).status === 200, 5000);
    });
  }
});
