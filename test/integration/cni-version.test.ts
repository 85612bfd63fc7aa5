// Issue 30: steward's conflist is written at the CNI version the node's runtime can use, asked from
// the runtime itself (CRI Version, through a fake CRI runtime on a Unix socket answering as each real
// one would): 1.1.0 exactly for containerd 2.0.1 and CRI-O 1.32.0 (they accept it and call STATUS),
// the primary's version for containerd 1.7.24, CRI-O 1.30.0, an unknown runtime, one that never
// answers and none at all. A runtime downgraded since install gets the primary's version back at the
// daemon's first start, before it serves; `stewardd status` and the metric say why.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { fakeRuntime } from '../helpers/fake-cri.js';
import { installInto, nodeTree, stewardd, writeLoopbackPrimary, type NodeTree } from '../helpers/node-tree.js';
import { STEWARD_CONFLIST } from '../../daemon/src/lifecycle/conflist.js';

const env = new TestEnv('cniver');
after(() => env.close());

const conflistVersion = (t: NodeTree) =>
  (JSON.parse(readFileSync(join(t.confDir, STEWARD_CONFLIST), 'utf8')) as { cniVersion: string }).cniVersion;

let n = 0;
async function installWith(
  version: NonNullable<Parameters<typeof fakeRuntime>[3]>['version'] | 'none',
  extra: string[] = [],
) {
  const t = nodeTree(join(env.dir, `node${n++}`));
  writeLoopbackPrimary(t.confDir); // cniVersion 1.0.0
  const sock = join(env.dir, `cri${n}.sock`);
  if (version !== 'none') await fakeRuntime(env, sock, [], version ? { version } : {});
  const r = await installInto(t, join(env.dir, 'stewardd.sock'), ['--runtime-endpoint', `unix://${sock}`, ...extra]);
  return { t, r };
}

describe('what the runtime says about itself reaches the operator bounded and escaped (issue 38)', () => {
  it('install --cni-version auto against a runtime whose version holds ANSI escapes, a forged line and 1 MB: stdout and the record stay small and printable', async () => {
    const version = `v2.0.1\u001b[31m\nsetup: forged line${'v'.repeat(1024 * 1024)}`;
    const { t, r } = await installWith({ runtimeName: 'containerd\u001b]0;owned\u0007', runtimeVersion: version });
    assert.equal(r.code, 0, r.stderr.slice(0, 2000));
    // eslint-disable-next-line no-control-regex -- the point: no control character reaches the terminal
    assert.doesNotMatch(r.stdout + r.stderr, /[\u0000-\u0008\u000b-\u001f\u007f]/);
    assert.doesNotMatch(r.stdout, /^setup: forged line/m);
    assert.match(r.stdout, /containerd\\x1b\]0;owned\\x07/);
    const record = readFileSync(join(t.stateDir, 'install.json'), 'utf8');
    assert.ok(record.length < 8 * 1024, `install record ${record.length} bytes`);
    assert.ok(r.stdout.length < 8 * 1024, `stdout ${r.stdout.length} bytes`);
  });
});

describe('stewardd install --cni-version auto asks the runtime', () => {
  const cases: Array<[string, NonNullable<Parameters<typeof fakeRuntime>[3]>['version'] | 'none', string, RegExp]> = [
    [
      'containerd 2.0.1',
      { runtimeName: 'containerd', runtimeVersion: 'v2.0.1' },
      '1.1.0',
      /STATUS: asked by this runtime/,
    ],
    [
      'containerd 1.7.24',
      { runtimeName: 'containerd', runtimeVersion: 'v1.7.24' },
      '1.0.0',
      /containerd v1.7.24 does not ask STATUS/,
    ],
    ['CRI-O 1.32.0', { runtimeName: 'cri-o', runtimeVersion: '1.32.0' }, '1.1.0', /STATUS: asked by this runtime/],
    ['CRI-O 1.30.0', { runtimeName: 'cri-o', runtimeVersion: '1.30.0' }, '1.0.0', /cri-o 1.30.0 does not ask STATUS/],
    [
      'containerd 2.0.0 (libcni 1.2.3, but no STATUS calls)',
      { runtimeName: 'containerd', runtimeVersion: '2.0.0' },
      '1.0.0',
      /does not ask STATUS/,
    ],
    ['something unknown', { runtimeName: 'rkt-ish', runtimeVersion: '9.9.9' }, '1.0.0', /not a runtime steward knows/],
    [
      'a version it cannot read',
      { runtimeName: 'containerd', runtimeVersion: 'main-abcdef' },
      '1.0.0',
      /cannot read its version/,
    ],
    [
      'a runtime that never answers Version',
      'hang',
      '1.0.0',
      /did not say what it is \(Version failed: .*(DEADLINE|Deadline)/,
    ],
    ['nothing at all on the socket', 'none', '1.0.0', /did not say what it is \(Version failed/],
  ];
  for (const [what, version, want, says] of cases) {
    it(`${what}: conflist ${want}`, async () => {
      const { t, r } = await installWith(version);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal(conflistVersion(t), want);
      assert.match(r.stdout, says);
      assert.match(r.stdout, new RegExp(`cniVersion ${want.replace(/\./g, '\\.')}\\)`));
      const rec = JSON.parse(readFileSync(join(t.stateDir, 'install.json'), 'utf8')) as {
        cniVersion: { mode: string; version: string | null };
        conflist: { cniVersion: string };
      };
      assert.equal(rec.cniVersion.mode, 'auto');
      assert.equal(rec.conflist.cniVersion, want);
    });
  }

  it('primary and a fixed version are written whatever the runtime says; a bad value is a usage error', async () => {
    const c2 = { runtimeName: 'containerd', runtimeVersion: 'v2.0.1' };
    const primary = await installWith(c2, ['--cni-version', 'primary']);
    assert.equal(primary.r.code, 0, primary.r.stderr);
    assert.equal(conflistVersion(primary.t), '1.0.0');
    const fixed = await installWith({ runtimeName: 'containerd', runtimeVersion: 'v1.6.20' }, [
      '--cni-version',
      '0.4.0',
    ]);
    assert.equal(conflistVersion(fixed.t), '0.4.0');
    const bad = await installWith(c2, ['--cni-version', '2.0.0']);
    assert.notEqual(bad.r.code, 0);
    assert.match(
      bad.r.stderr + bad.r.stdout,
      /--cni-version must be one of auto, primary, 0\.3\.1, 0\.4\.0, 1\.0\.0, 1\.1\.0/,
    );
  });
});

/** A runtime's Version answer this late: longer than a successor may take to serve (issue 37: a second). */
const SLOW_VERSION_MS = 3000;

describe('the daemon decides again at every start, once it serves', () => {
  it('a runtime downgraded below a 1.1.0 conflist: the first start rewrites it at the primary version once it serves; status and the metric say why', async () => {
    const t = nodeTree(join(env.dir, 'downgrade'));
    writeLoopbackPrimary(t.confDir);
    const newer = join(env.dir, 'newer.sock');
    const stopNewer = await fakeRuntime(env, newer, [], {
      version: { runtimeName: 'containerd', runtimeVersion: 'v2.1.4' },
    });
    const daemon = new Daemon(env, {
      name: 'dg',
      args: ['--cni-conf-dir', t.confDir, '--runtime-endpoint', `unix://${join(env.dir, 'older.sock')}`],
    });
    const tree = { ...t, stateDir: daemon.stateDir };
    const r = await installInto(tree, daemon.socket, ['--runtime-endpoint', `unix://${newer}`]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(conflistVersion(tree), '1.1.0');
    await stopNewer.stop();
    // The runtime is now containerd 1.7: the daemon starts against it.
    await fakeRuntime(env, join(env.dir, 'older.sock'), [], {
      version: { runtimeName: 'containerd', runtimeVersion: 'v1.7.24' },
    });
    await daemon.start();
    // Decided once the daemon serves (a runtime slow to answer never delays readiness).
    await daemon.waitFor('the conflist at the primary version', () => conflistVersion(tree) === '1.0.0');
    const status = await stewardd(['status', '--socket', daemon.socket]);
    assert.match(
      status.stdout,
      /conflist: +STATUS: not asked by this runtime \(conflist 1\.0\.0, containerd v1\.7\.24; --cni-version auto: containerd v1\.7\.24 does not ask STATUS\)/,
    );
    const metrics = (await daemon.get('/metrics')).text;
    assert.match(
      metrics,
      /steward_conflist_info\{cni_version="1\.0\.0",mode="auto",runtime="containerd v1\.7\.24",status_asked="false"\} 1/,
    );
    assert.match(readFileSync(daemon.logFile, 'utf8'), /conflist version changes/);
    await daemon.stop();
  });

  it('a runtime upgraded to containerd 2.x: the next start writes 1.1.0', async () => {
    const t = nodeTree(join(env.dir, 'upgrade'));
    writeLoopbackPrimary(t.confDir);
    const sock = join(env.dir, 'up.sock');
    const old = await fakeRuntime(env, sock, [], { version: { runtimeName: 'containerd', runtimeVersion: 'v1.7.24' } });
    const daemon = new Daemon(env, {
      name: 'up',
      args: ['--cni-conf-dir', t.confDir, '--runtime-endpoint', `unix://${sock}`],
    });
    const tree = { ...t, stateDir: daemon.stateDir };
    assert.equal((await installInto(tree, daemon.socket, ['--runtime-endpoint', `unix://${sock}`])).code, 0);
    assert.equal(conflistVersion(tree), '1.0.0');
    await old.stop();
    await fakeRuntime(env, sock, [], { version: { runtimeName: 'containerd', runtimeVersion: 'v2.0.1' } });
    await daemon.start();
    await daemon.waitFor('the conflist at 1.1.0', () => conflistVersion(tree) === '1.1.0');
    const s = (await daemon.get('/v1/status')).json as { conflist: { cniVersion: string; summary: string } };
    assert.equal(s.conflist.cniVersion, '1.1.0');
    assert.match(s.conflist.summary, /^STATUS: asked by this runtime \(conflist 1\.1\.0, containerd v2\.0\.1/);
    await daemon.stop();
  });

  it('a runtime slow to answer its Version (3 s) never delays readiness: the daemon serves at once, the conflist follows the answer', async () => {
    const t = nodeTree(join(env.dir, 'slow'));
    writeLoopbackPrimary(t.confDir);
    const sock = join(env.dir, 'slow.sock');
    const old = await fakeRuntime(env, sock, [], { version: { runtimeName: 'containerd', runtimeVersion: 'v1.7.24' } });
    const daemon = new Daemon(env, {
      name: 'slow',
      args: ['--cni-conf-dir', t.confDir, '--runtime-endpoint', `unix://${sock}`],
    });
    const tree = { ...t, stateDir: daemon.stateDir };
    assert.equal((await installInto(tree, daemon.socket, ['--runtime-endpoint', `unix://${sock}`])).code, 0);
    await old.stop();
    await fakeRuntime(env, sock, [], {
      version: { runtimeName: 'containerd', runtimeVersion: 'v2.0.1' },
      versionDelayMs: SLOW_VERSION_MS,
    });
    await daemon.start();
    // Serving, and ready, while the runtime has not answered yet: the record's version stands.
    assert.equal((await daemon.get('/readyz')).status, 200);
    assert.equal(conflistVersion(tree), '1.0.0');
    await daemon.waitFor('the conflist at 1.1.0 once the runtime answered', () => conflistVersion(tree) === '1.1.0');
    await daemon.stop();
  });

  it("an operator's explicit stewardd install --cni-version stands against the daemon's auto (the way out when auto picks what a runtime refuses)", async () => {
    const t = nodeTree(join(env.dir, 'explicit'));
    writeLoopbackPrimary(t.confDir);
    const sock = join(env.dir, 'explicit.sock');
    await fakeRuntime(env, sock, [], { version: { runtimeName: 'containerd', runtimeVersion: 'v2.0.1' } });
    const daemon = new Daemon(env, {
      name: 'ex',
      args: ['--cni-conf-dir', t.confDir, '--runtime-endpoint', `unix://${sock}`],
    });
    const tree = { ...t, stateDir: daemon.stateDir };
    assert.equal((await installInto(tree, daemon.socket, ['--runtime-endpoint', `unix://${sock}`])).code, 0);
    await daemon.start();
    assert.equal(conflistVersion(tree), '1.1.0');
    const pinned = await installInto(tree, daemon.socket, ['--cni-version', '1.0.0']);
    assert.equal(pinned.code, 0, pinned.stdout + pinned.stderr);
    assert.equal(conflistVersion(tree), '1.0.0');
    await new Promise((r) => setTimeout(r, 2500)); // two watcher rescans
    assert.equal(conflistVersion(tree), '1.0.0', "the daemon's auto did not undo it");
    const s = (await daemon.get('/v1/status')).json as { conflist: { summary: string } };
    assert.match(s.conflist.summary, /--cni-version 1\.0\.0/);
    await daemon.stop();
  });
});
