// Issue 21 item 3: readiness fails while the shim installed on the node is not the daemon's own
// build. Through `stewardd install` into a temp node tree and a real daemon with --cni-conf-dir:
// 200 with its own shim, 503 naming both sha256s once another build is installed (by an older
// release's install, or by a file written over it), 200 again after `stewardd install`.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { appendFileSync, copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { bridgePlugin } from '../helpers/netconf.js';
import { installInto, nodeTree, SHIM_EXE, writeJson, type NodeTree } from '../helpers/node-tree.js';

const digest = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');

describe('readiness and the installed shim', () => {
  const env = new TestEnv('skw');
  const daemon = new Daemon(env, { args: ['--cni-conf-dir', join(env.dir, 'node/etc/cni/net.d')] });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  const installed = join(tree.binDir, 'steward');
  const other = join(env.dir, 'steward-other-build');
  const own = digest(SHIM_EXE);
  let otherSha = '';

  const mismatchGauge = async () => {
    const m = /^steward_installed_shim_mismatch (\d+)$/m.exec((await daemon.get('/metrics')).text);
    return m ? Number(m[1]) : undefined;
  };
  const readyz = () => daemon.get('/readyz');

  before(async () => {
    writeJson(join(tree.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'ipam') })],
    });
    // Another build of the shim: this one's bytes with some appended (an ELF runs the same; its hash differs).
    copyFileSync(SHIM_EXE, other);
    appendFileSync(other, Buffer.from('\nanother build\n'));
    otherSha = digest(other);
    const r = await installInto(tree, daemon.socket);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    await daemon.start();
  });
  after(() => env.close());

  it('is ready with its own shim installed, and the gauge is 0', async () => {
    await daemon.waitFor('ready', async () => (await readyz()).status === 200, 5000);
    assert.equal(await mismatchGauge(), 0);
  });

  it('fails readiness naming both sha256s when an older release installed its shim, and recovers on stewardd install', async () => {
    const r = await installInto(tree, daemon.socket, ['--shim', other]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(digest(installed), otherSha);
    await daemon.waitFor('not ready', async () => (await readyz()).status === 503, 3000);
    const body = (await readyz()).json;
    assert.equal(body.ready, false);
    assert.deepEqual(body.problems, [
      `installed shim ${installed} sha256 ${otherSha} is not this stewardd's (${own}): run stewardd install / roll the DaemonSet`,
    ]);
    assert.equal(await mismatchGauge(), 1);
    const again = await installInto(tree, daemon.socket);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    await daemon.waitFor('ready again', async () => (await readyz()).status === 200, 3000);
    assert.equal(await mismatchGauge(), 0);
  });

  it('notices the installed file replaced in place by another build, and recovers on stewardd install --force', async () => {
    copyFileSync(other, installed);
    await daemon.waitFor('not ready', async () => (await readyz()).status === 503, 3000);
    const body = (await readyz()).json;
    assert.match(body.problems[0], new RegExp(`sha256 ${otherSha} is not this stewardd's \\(${own}\\)`));
    assert.equal(await mismatchGauge(), 1);
    // A file install did not write: install refuses it without --force.
    const refused = await installInto(tree, daemon.socket);
    assert.notEqual(refused.code, 0);
    const forced = await installInto(tree, daemon.socket, ['--force']);
    assert.equal(forced.code, 0, forced.stdout + forced.stderr);
    await daemon.waitFor('ready again', async () => (await readyz()).status === 200, 3000);
    assert.equal(await mismatchGauge(), 0);
  });
});
