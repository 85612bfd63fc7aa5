// `stewardd uninstall --purge` run by an operator deletes the journal, so it must never run under a live
// daemon: it takes the daemon's ownership lock (store/owner.ts) first and refuses while a daemon holds it.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { installInto, nodeTree, uninstallFrom, writeJson, type NodeTree } from '../helpers/node-tree.js';

describe('uninstall --purge and a running daemon', () => {
  const env = new TestEnv('purge');
  after(() => env.close());

  it('refuses while the daemon owns the state dir, removing nothing; purges once it has stopped', async () => {
    const daemon = new Daemon(env);
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
    writeJson(join(tree.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [{ type: 'loopback' }],
    });
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    const before = readdirSync(daemon.stateDir).sort();
    assert.ok(
      before.some((f) => f.startsWith('steward.db')),
      before.join(', '),
    );

    const refused = await uninstallFrom(tree, ['--purge']);
    assert.equal(refused.code, 1, refused.stdout + refused.stderr);
    assert.match(
      refused.stdout,
      /uninstall --purge refused, nothing removed: state dir .* is owned by another stewardd \(pid \d+/,
    );
    assert.equal(existsSync(join(tree.confDir, '00-steward.conflist')), true, 'the conflist stays');
    assert.equal(existsSync(join(tree.binDir, 'steward')), true, 'the shim stays');
    assert.deepEqual(readdirSync(daemon.stateDir).sort(), before, 'the state dir is untouched');
    assert.equal((await daemon.get('/readyz')).status, 200, 'the daemon still serves');

    await daemon.stop();
    const purged = await uninstallFrom(tree, ['--purge']);
    assert.equal(purged.code, 0, purged.stdout + purged.stderr);
    assert.match(purged.stdout, /purged /);
    assert.equal(existsSync(join(tree.confDir, '00-steward.conflist')), false);
    assert.equal(existsSync(daemon.stateDir), false);
  });
});
