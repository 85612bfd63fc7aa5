// `stewardd uninstall --purge` run by an operator deletes the journal, so it must never run under a live
// daemon: it takes the daemon's ownership lock (store/owner.ts) first and refuses while a daemon holds it.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { installInto, nodeTree, uninstallFrom, writeLoopbackPrimary, type NodeTree } from '../helpers/node-tree.js';

describe('uninstall --purge and a running daemon', () => {
  const env = new TestEnv('purge');
  after(() => env.close());

  it('refuses while the daemon owns the state dir, removing nothing; purges once it has stopped', async () => {
    const daemon = new Daemon(env);
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
    writeLoopbackPrimary(tree.confDir);
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

  it('--purge removes only what stewardd writes in a state dir: a --state-dir naming some other directory keeps its files', async () => {
    // A typo (--state-dir /var/lib) or an unset variable (--state-dir "" is the working directory)
    // must not wipe a directory that was never a state dir.
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'victim-node')), stateDir: join(env.dir, 'victim') };
    mkdirSync(join(tree.stateDir, 'important'), { recursive: true });
    writeFileSync(join(tree.stateDir, 'important', 'a'), 'precious');
    writeFileSync(join(tree.stateDir, 'notes.txt'), 'mine');
    const r = await uninstallFrom(tree, ['--purge']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /kept .*victim: it holds files that are not stewardd's/);
    assert.equal(readFileSync(join(tree.stateDir, 'important', 'a'), 'utf8'), 'precious');
    assert.equal(readFileSync(join(tree.stateDir, 'notes.txt'), 'utf8'), 'mine');
    // A real state dir with a stranger's file beside: stewardd's own entries go, the stranger's stays.
    const daemon = new Daemon(env, { name: 'mixed' });
    await daemon.start();
    await daemon.stop();
    writeFileSync(join(daemon.stateDir, 'operator-notes.txt'), 'keep me');
    const mixed = await uninstallFrom({ ...tree, stateDir: daemon.stateDir }, ['--purge']);
    assert.equal(mixed.code, 0, mixed.stdout + mixed.stderr);
    assert.deepEqual(readdirSync(daemon.stateDir), ['operator-notes.txt']);
  });
});
