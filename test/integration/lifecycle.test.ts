// Node lifecycle with real parts: `stewardd install` into a temp tree laid out like a node, the
// installed single-executable shim running a real ADD/DEL through the daemon with the Debian
// bridge + host-local plugins in a netns, the daemon following the primary config, and
// uninstall leaving the tree byte-for-byte as it was.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, leases, linkExists, sh } from '../helpers/env.js';
import { bridgePlugin } from '../helpers/netconf.js';
import {
  installInto,
  nodeTree,
  SHIM_EXE,
  snapshot,
  uninstallFrom,
  writeJson,
  type NodeTree,
} from '../helpers/node-tree.js';
import { cniEnv, execPlugin, shim } from '../helpers/shim.js';
import { fillDisk, mountTmpfs } from '../helpers/tmpfs.js';

function readJson(path: string): any {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/** What a runtime puts on the plugin's stdin for a one-plugin conflist: the entry plus name and cniVersion. */
function runtimeStdin(conflist: any): string {
  return JSON.stringify({ ...conflist.plugins[0], name: conflist.name, cniVersion: conflist.cniVersion });
}

describe('installed on a node, with the daemon running', () => {
  const env = new TestEnv('life');
  const daemon = new Daemon(env, { args: ['--cni-conf-dir', join(env.dir, 'node/etc/cni/net.d')] });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  const dataDir = join(env.dir, 'ipam');
  const primaryPath = join(tree.confDir, '10-podnet.conflist');
  const ours = join(tree.confDir, '00-steward.conflist');
  const primary = {
    cniVersion: '1.0.0',
    name: 'podnet',
    plugins: [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })],
  };

  before(async () => {
    writeJson(primaryPath, primary);
    writeJson(join(tree.confDir, '99-other.conf'), { cniVersion: '0.4.0', name: 'other', type: 'loopback' });
    const r = await installInto(tree, daemon.socket);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    await daemon.start();
  });
  after(() => env.close());

  it('writes 00-steward.conflist wrapping the first config by name, with its cniVersion', () => {
    const c = readJson(ours);
    assert.equal(c.cniVersion, '1.0.0');
    assert.equal(c.plugins.length, 1);
    assert.equal(c.plugins[0].type, 'steward');
    assert.equal(c.plugins[0].socket, daemon.socket);
    assert.deepEqual(c.plugins[0].delegates, [primary]);
  });

  it('copies the single-executable shim into the bin dir, mode 0755', () => {
    const st = statSync(join(tree.binDir, 'steward'));
    assert.equal(st.mode & 0o777, 0o755);
    // Compared by digest: a byte diff of two 100 MB buffers would not fit in the test's heap.
    const digest = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
    assert.equal(digest(join(tree.binDir, 'steward')), digest(SHIM_EXE));
  });

  it('ADD and DEL through the installed shim put and take away eth0 and the lease', async () => {
    const netns = env.netns();
    const stdin = runtimeStdin(readJson(ours));
    const call = { containerId: 'life-1', netns, path: tree.binDir };
    const add = await execPlugin(join(tree.binDir, 'steward'), cniEnv({ command: 'ADD', ...call }), stdin);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(add.json.cniVersion, '1.0.0');
    assert.equal(linkExists(netns, 'eth0'), true);
    assert.deepEqual(leases(dataDir, 'podnet'), [add.json.ips[0].address.split('/')[0]]);
    const del = await execPlugin(join(tree.binDir, 'steward'), cniEnv({ command: 'DEL', ...call }), stdin);
    assert.equal(del.code, 0, del.stdout);
    assert.equal(linkExists(netns, 'eth0'), false);
    assert.deepEqual(leases(dataDir, 'podnet'), []);
  });

  it('reports ready while a primary exists', async () => {
    assert.equal((await daemon.get('/readyz')).status, 200);
  });

  it('follows a change of the primary config within a second', async () => {
    const changed = { ...primary, plugins: [{ ...primary.plugins[0], mtu: 1400 }] };
    const t0 = Date.now();
    writeJson(primaryPath, changed);
    await daemon.waitFor(
      'the conflist to follow',
      () => readJson(ours).plugins[0].delegates[0].plugins[0].mtu === 1400,
      3000,
    );
    const took = Date.now() - t0;
    assert.ok(took < 1000, `took ${took} ms`);
    // The record follows too, or uninstall would refuse the regenerated file.
    const rec = readJson(join(tree.stateDir, 'install.json'));
    assert.equal(rec.conflist.sha256.length, 64);
  });

  it('with no primary it writes nothing and is not ready; a primary appearing late is picked up', async () => {
    const before = readFileSync(ours, 'utf8');
    renameSync(primaryPath, join(env.dir, 'stashed.conflist'));
    renameSync(join(tree.confDir, '99-other.conf'), join(env.dir, 'stashed.conf'));
    await daemon.waitFor('not ready', async () => (await daemon.get('/readyz')).status === 503, 3000);
    assert.equal(readFileSync(ours, 'utf8'), before);
    // A CNI that writes its config late (Calico, Cilium): a .conf this time.
    const late = {
      cniVersion: '0.4.0',
      name: 'late',
      type: 'bridge',
      bridge: env.bridge(),
      ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: env.subnet() }]] },
    };
    writeJson(join(tree.confDir, '20-late.conf'), late);
    await daemon.waitFor('ready again', async () => (await daemon.get('/readyz')).status === 200, 3000);
    const c = readJson(ours);
    assert.equal(c.cniVersion, '0.4.0');
    assert.deepEqual(c.plugins[0].delegates, [late]);
  });

  it('SIGTERM outside a cluster (no service-account token) leaves everything in place', async () => {
    assert.equal(await daemon.stop(), 0);
    assert.ok(existsSync(ours));
    assert.ok(existsSync(join(tree.binDir, 'steward')));
    assert.ok(existsSync(join(tree.stateDir, 'install.json')));
  });
});

describe('the state dir fills up while the daemon runs', () => {
  const env = new TestEnv('life-full');
  const daemon = new Daemon(env, { args: ['--cni-conf-dir', join(env.dir, 'node/etc/cni/net.d')] });
  after(() => env.close());

  it('/readyz names the full disk (it said "regenerating the conflist failed"); freed, it is ready again and follows the primary', async () => {
    mountTmpfs(env, daemon.stateDir, '8m');
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
    const primaryPath = join(tree.confDir, '10-podnet.conflist');
    const primary = { cniVersion: '1.0.0', name: 'podnet', plugins: [{ type: 'loopback' }] };
    writeJson(primaryPath, primary);
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    assert.equal((await daemon.get('/readyz')).status, 200);

    const fill = fillDisk(daemon.stateDir);
    writeJson(primaryPath, { ...primary, plugins: [{ type: 'loopback', comment: 'changed' }] });
    await daemon.waitFor('not ready', async () => (await daemon.get('/readyz')).status === 503, 5000);
    const text = (await daemon.get('/readyz')).text;
    assert.match(text, new RegExp(`no space left on the disk of ${daemon.stateDir} \\(ENOSPC\\)`));
    assert.doesNotMatch(text, /regenerating the conflist failed/);

    rmSync(fill);
    await daemon.waitFor('ready again', async () => (await daemon.get('/readyz')).status === 200, 5000);
    const conflist = readJson(join(tree.confDir, '00-steward.conflist'));
    assert.equal(conflist.plugins[0].delegates[0].plugins[0].comment, 'changed');
  });
});

describe('install and uninstall leave the node exactly as it was', () => {
  const env = new TestEnv('life-un');
  after(() => env.close());
  const socket = join(env.dir, 'absent.sock');

  function freshTree(name: string): NodeTree {
    const t = { ...nodeTree(join(env.dir, name, 'node')), stateDir: join(env.dir, name, 'state') };
    writeJson(join(t.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [bridgePlugin({ bridge: 'cni-x', subnet: '10.99.0.0/24', dataDir: '/tmp/x' })],
    });
    writeFileSync(join(t.confDir, 'README'), 'not a network config\n');
    return t;
  }

  it('installing twice changes nothing the second time', async () => {
    const t = freshTree('twice');
    assert.equal((await installInto(t, socket)).code, 0);
    const once = { node: snapshot(t.root), state: snapshot(t.stateDir) };
    const again = await installInto(t, socket);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /shim: unchanged/);
    assert.match(again.stdout, /conflist: unchanged/);
    assert.deepEqual({ node: snapshot(t.root), state: snapshot(t.stateDir) }, once);
  });

  it('uninstall restores the tree byte for byte, and --purge removes the state dir', async () => {
    const t = freshTree('restore');
    const original = snapshot(t.root);
    assert.equal((await installInto(t, socket)).code, 0);
    assert.notDeepEqual(snapshot(t.root), original);
    const r = await uninstallFrom(t, ['--purge']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /removed .*00-steward\.conflist/);
    assert.match(r.stdout, /0 teardowns pending/);
    assert.deepEqual(snapshot(t.root), original);
    assert.equal(existsSync(t.stateDir), false);
    // Again: nothing recorded, nothing to do, still success.
    const twice = await uninstallFrom(t);
    assert.equal(twice.code, 0);
    assert.match(twice.stdout, /nothing recorded as installed/);
  });

  it('uninstall moves aside a conflist someone rewrote that still names the shim (left, it would fail every pod), and removes the shim', async () => {
    const t = freshTree('refuse');
    assert.equal((await installInto(t, socket)).code, 0);
    const conflist = join(t.confDir, '00-steward.conflist');
    const ours = readJson(conflist);
    const theirs = `${JSON.stringify({ ...ours, name: 'hand-edited' })}\n`;
    writeFileSync(conflist, theirs);
    chmodSync(conflist, 0o640);
    const r = await uninstallFrom(t);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const moved = /MOVED ASIDE: (\S+) -> (\S+): changed since install, and it still names the shim/.exec(r.stdout);
    assert.ok(moved, r.stdout);
    assert.equal(moved[1], conflist);
    assert.equal(existsSync(conflist), false, 'no config naming a shim whose daemon is gone');
    assert.equal(readFileSync(moved[2]!, 'utf8'), theirs, 'the edit is kept');
    assert.equal(statSync(moved[2]!).mode & 0o777, 0o640, 'with its mode');
    assert.match(moved[2]!, /\.edited-\d{8}T\d{6}Z$/, 'under a name no runtime loads (not .conf, .conflist or .json)');
    assert.equal(existsSync(join(t.binDir, 'steward')), false, 'nothing left names the shim');
    assert.equal(existsSync(join(t.stateDir, 'install.json')), false);
    assert.ok(existsSync(join(t.confDir, '10-podnet.conflist')), 'the primary is untouched');
  });

  it('uninstall moves aside a link put in place of our conflist to an edited copy naming the shim: the link, not its target', async () => {
    const t = freshTree('aside-link');
    assert.equal((await installInto(t, socket)).code, 0);
    const conflist = join(t.confDir, '00-steward.conflist');
    const elsewhere = join(t.root, 'edited.json');
    writeFileSync(elsewhere, `${JSON.stringify({ ...readJson(conflist), name: 'linked' })}\n`);
    rmSync(conflist);
    symlinkSync(elsewhere, conflist);
    const r = await uninstallFrom(t);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const moved = /MOVED ASIDE: \S+ -> (\S+):/.exec(r.stdout);
    assert.ok(moved, r.stdout);
    assert.equal(existsSync(conflist), false);
    assert.equal(readlinkSync(moved[1]!), elsewhere, 'the link itself was moved');
    assert.ok(existsSync(elsewhere), 'its target is not touched');
    assert.equal(existsSync(join(t.binDir, 'steward')), false);
  });

  it('uninstall leaves a conflist of ours rewritten to name no shim, says so, and still removes the shim', async () => {
    const t = freshTree('refuse-other');
    assert.equal((await installInto(t, socket)).code, 0);
    const theirs = '{"cniVersion":"1.0.0","name":"theirs","plugins":[{"type":"bridge"}]}\n';
    writeFileSync(join(t.confDir, '00-steward.conflist'), theirs);
    const r = await uninstallFrom(t);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /REFUSED: .*00-steward\.conflist was rewritten since install/);
    assert.match(r.stderr, /uninstall left files/);
    assert.equal(readFileSync(join(t.confDir, '00-steward.conflist'), 'utf8'), theirs);
    assert.equal(existsSync(join(t.binDir, 'steward')), false);
    // The operator sees to their config; uninstall again finishes.
    rmSync(join(t.confDir, '00-steward.conflist'));
    const again = await uninstallFrom(t);
    assert.equal(again.code, 0, again.stdout);
    assert.equal(existsSync(join(t.stateDir, 'install.json')), false);
  });

  it('uninstall removes its own conflist even when the shim was replaced (a config left would stop every pod)', async () => {
    const t = freshTree('refuse-shim');
    assert.equal((await installInto(t, socket)).code, 0);
    writeFileSync(join(t.binDir, 'steward'), '#!/bin/sh\necho a hotfix\n', { mode: 0o755 });
    const r = await uninstallFrom(t);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /removed .*00-steward\.conflist/);
    assert.match(r.stdout, /REFUSED: .*\/steward was rewritten since install/);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.equal(readFileSync(join(t.binDir, 'steward'), 'utf8'), '#!/bin/sh\necho a hotfix\n');
    assert.ok(existsSync(join(t.confDir, '10-podnet.conflist')), 'the primary is untouched');
  });

  it('install refuses a 00-steward.conflist no record knows before it writes anything', async () => {
    const t = freshTree('refuse-first');
    const theirs = '{"cniVersion":"1.0.0","name":"someone","plugins":[{"type":"bridge"}]}\n';
    writeFileSync(join(t.confDir, '00-steward.conflist'), theirs);
    const before = snapshot(t.root);
    const r = await installInto(t, socket);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /install refused: .*00-steward\.conflist exists and is not the one stewardd wrote/);
    assert.deepEqual(snapshot(t.root), before, 'no shim written');
    assert.equal(existsSync(join(t.stateDir, 'install.json')), false, 'no record written');
  });

  it('install refuses a 00-steward.conflist no record knows with no usable primary too', async () => {
    const t = freshTree('refuse-no-primary');
    rmSync(join(t.confDir, '10-podnet.conflist'));
    writeFileSync(join(t.confDir, '00-steward.conflist'), '{"cniVersion":"1.0.0","name":"steward","plugins":[]}\n');
    const before = snapshot(t.root);
    const r = await installInto(t, socket);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stdout, /install refused: .*00-steward\.conflist exists and is not the one stewardd wrote/);
    assert.deepEqual(snapshot(t.root), before);
  });

  it('uninstall with the shim already gone and an edited conflist naming it: the conflist is moved aside, nothing refused', async () => {
    const t = freshTree('gone-shim');
    assert.equal((await installInto(t, socket)).code, 0);
    const conflist = join(t.confDir, '00-steward.conflist');
    writeJson(conflist, { ...readJson(conflist), name: 'edited' });
    rmSync(join(t.binDir, 'steward'));
    const r = await uninstallFrom(t);
    assert.equal(r.code, 0, r.stdout);
    assert.match(r.stdout, /MOVED ASIDE: .*00-steward\.conflist -> /);
    assert.doesNotMatch(r.stdout, /REFUSED/);
    assert.equal(existsSync(conflist), false);
  });

  it('uninstall on a full state dir (no room for the lock file) still removes our conflist and shim', async () => {
    const t = freshTree('full-state');
    mountTmpfs(env, t.stateDir, '64k');
    assert.equal((await installInto(t, socket)).code, 0);
    fillDisk(t.stateDir);
    const r = await uninstallFrom(t);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /the install lock could not be written in .* \(ENOSPC\): removed without it/);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.equal(existsSync(join(t.binDir, 'steward')), false);
    assert.equal(existsSync(join(t.stateDir, 'install.json')), false);
  });

  it('uninstall with one free block in the state dir (the lock file takes it, the mark finds none) still removes our files', async () => {
    const t = freshTree('one-block');
    mountTmpfs(env, t.stateDir, '64k');
    assert.equal((await installInto(t, socket)).code, 0);
    const fill = fillDisk(t.stateDir);
    truncateSync(fill, Math.max(0, statSync(fill).size - 4096));
    const r = await uninstallFrom(t);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.equal(existsSync(join(t.binDir, 'steward')), false);
  });

  it('a primary at a cniVersion stewardd cannot run its plugins at (0.2.0) is not wrapped: the runtime keeps running it alone', async () => {
    const t = freshTree('old-version');
    rmSync(join(t.confDir, '10-podnet.conflist'));
    writeJson(join(t.confDir, '10-old.conf'), { cniVersion: '0.2.0', name: 'old', type: 'bridge', bridge: 'cni-y' });
    const r = await installInto(t, socket);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /conflist: not written yet: 10-old\.conf is not usable \(has cniVersion "0\.2\.0", which stewardd cannot run its plugins at/,
    );
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
  });

  it('a corrupt install.json is named by install and uninstall; install --force sets it aside and the node installs again', async () => {
    const t = freshTree('corrupt-record');
    assert.equal((await installInto(t, socket)).code, 0);
    const record = join(t.stateDir, 'install.json');
    writeFileSync(record, '{"version": 1, "state": "inst');
    for (const r of [await installInto(t, socket), await uninstallFrom(t)]) {
      assert.equal(r.code, 1);
      assert.match(
        r.stderr,
        /install\.json is not a readable install record \(.*\); `stewardd install --force` sets it aside/,
      );
    }
    const forced = await installInto(t, socket, ['--force']);
    assert.equal(forced.code, 0, forced.stdout + forced.stderr);
    assert.equal(JSON.parse(readFileSync(record, 'utf8')).state, 'installed');
    assert.equal(readdirSync(t.stateDir).filter((n) => n.startsWith('install.json.unreadable-')).length, 1);
    const un = await uninstallFrom(t, ['--purge']);
    assert.equal(un.code, 0, un.stdout + un.stderr);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.equal(existsSync(t.stateDir), false, 'the set-aside record goes with --purge');
  });

  it('a second state dir over the same node is refused and records nothing, so its uninstall removes nothing', async () => {
    const t = freshTree('two-states');
    assert.equal((await installInto(t, socket)).code, 0);
    const installed = snapshot(t.root);
    const other = { ...t, stateDir: join(env.dir, 'two-states', 'state2') };
    const r = await installInto(other, socket, ['--spool-dir', join(env.dir, 'two-states', 'spool2')]);
    assert.equal(r.code, 1, r.stdout);
    assert.equal(existsSync(join(other.stateDir, 'install.json')), false);
    const u = await uninstallFrom(other);
    assert.equal(u.code, 0, u.stdout);
    assert.match(u.stdout, /nothing recorded as installed/);
    assert.deepEqual(snapshot(t.root), installed, 'the first install is whole: conflist and shim');
  });

  it('install again over a conflist edited since: the new shim goes in, the edit stays, exit 0 (the daemon says not ready)', async () => {
    const t = freshTree('edited');
    assert.equal((await installInto(t, socket)).code, 0);
    const conflist = join(t.confDir, '00-steward.conflist');
    const edited = readJson(conflist);
    edited.plugins[0].logLevel = 'debug';
    writeJson(conflist, edited);
    const editedText = readFileSync(conflist, 'utf8');
    const newShim = join(env.dir, 'edited', 'steward-next');
    writeFileSync(newShim, `${readFileSync(SHIM_EXE, 'latin1')}#`, 'latin1');
    const r = await installInto(t, socket, ['--shim', newShim]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /shim: copied/);
    assert.match(r.stdout, /conflist: left as it is: .*00-steward\.conflist was edited since stewardd wrote it/);
    assert.equal(readFileSync(conflist, 'utf8'), editedText);
    const digest = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
    assert.equal(digest(join(t.binDir, 'steward')), digest(newShim));
  });

  it('uninstall refuses when a directory is where its conflist was, and says it is no file (not a sha256)', async () => {
    const t = freshTree('refuse-dir');
    assert.equal((await installInto(t, socket)).code, 0);
    const conflist = join(t.confDir, '00-steward.conflist');
    rmSync(conflist);
    mkdirSync(conflist);
    const r = await uninstallFrom(t);
    assert.equal(r.code, 1);
    assert.match(
      r.stdout,
      /REFUSED: .*00-steward\.conflist is no longer a regular file \(a directory, FIFO, device or socket is there now\)/,
    );
    assert.doesNotMatch(r.stdout, /sha256 now/);
    assert.ok(statSync(conflist).isDirectory());
    assert.ok(existsSync(join(t.stateDir, 'install.json')));
  });

  it('install refuses to overwrite a steward binary it did not put there', async () => {
    const t = freshTree('foreign');
    writeFileSync(join(t.binDir, 'steward'), '#!/bin/sh\necho someone else\n', { mode: 0o755 });
    const r = await installInto(t, socket);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /install refused: .*steward exists and was not installed by stewardd/);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
  });

  it('after --cni-conf-dir and then --cni-bin-dir change, install removes the old files and uninstall leaves no orphan', async () => {
    const t = freshTree('moved');
    const otherConf = join(t.root, 'etc/cni/net2.d');
    const otherBin = join(t.root, 'opt/cni/bin2');
    mkdirSync(otherConf, { recursive: true });
    mkdirSync(otherBin, { recursive: true });
    writeJson(join(otherConf, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [bridgePlugin({ bridge: 'cni-y', subnet: '10.98.0.0/24', dataDir: '/tmp/y' })],
    });
    const original = snapshot(t.root);
    assert.equal((await installInto(t, socket)).code, 0);
    const t2 = { ...t, confDir: otherConf };
    const moved = await installInto(t2, socket);
    assert.equal(moved.code, 0, moved.stdout + moved.stderr);
    assert.match(
      moved.stdout,
      /removed .*etc\/cni\/net\.d\/00-steward\.conflist \(installed earlier at a path no longer used\)/,
    );
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.ok(existsSync(join(otherConf, '00-steward.conflist')));
    const t3 = { ...t2, binDir: otherBin };
    const movedBin = await installInto(t3, socket);
    assert.equal(movedBin.code, 0, movedBin.stdout + movedBin.stderr);
    assert.match(movedBin.stdout, /removed .*opt\/cni\/bin\/steward \(installed earlier/);
    assert.equal(existsSync(join(t.binDir, 'steward')), false);
    const r = await uninstallFrom(t3);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(snapshot(t.root), original);
  });

  it('the bin and conf dirs named again through links to them: install keeps the files it installed, uninstall removes them', async () => {
    const t = freshTree('linked');
    const original = snapshot(t.root);
    assert.equal((await installInto(t, socket)).code, 0);
    const binLink = join(t.root, 'binlink');
    const confLink = join(t.root, 'conflink');
    symlinkSync(t.binDir, binLink);
    symlinkSync(t.confDir, confLink);
    const again = await installInto({ ...t, binDir: binLink, confDir: confLink }, socket);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.doesNotMatch(again.stdout, /removed /);
    assert.ok(existsSync(join(t.binDir, 'steward')), 'the shim it installed is still there');
    assert.ok(existsSync(join(t.confDir, '00-steward.conflist')), 'the conflist it installed is still there');
    const r = await uninstallFrom({ ...t, binDir: binLink, confDir: confLink });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    rmSync(binLink);
    rmSync(confLink);
    assert.deepEqual(snapshot(t.root), original);
  });

  it('uninstall on a read-only conf dir that no longer holds our conflist: exit 0, the shim and record removed', async () => {
    const t = freshTree('ro-conf');
    assert.equal((await installInto(t, socket)).code, 0);
    rmSync(join(t.confDir, '00-steward.conflist'));
    sh('mount', ['--bind', t.confDir, t.confDir]);
    env.defer(() => {
      try {
        sh('umount', ['-l', t.confDir]);
      } catch {
        /* not mounted */
      }
    });
    sh('mount', ['-o', 'remount,bind,ro', t.confDir]);
    const r = await uninstallFrom(t);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(existsSync(join(t.binDir, 'steward')), false);
    assert.equal(existsSync(join(t.stateDir, 'install.json')), false);
    sh('umount', [t.confDir]);
  });

  it('uninstall --purge with a DEL spooled while no daemon ran: the DEL is named and the state dir kept, exit 1', async () => {
    const t = freshTree('purge-spooled');
    assert.equal((await installInto(t, join(env.dir, 'purge-spooled', 'gone.sock'))).code, 0);
    // The shim spools a DEL it cannot deliver (no daemon on the socket), as during a crash.
    const conf = JSON.parse(readFileSync(join(t.confDir, '00-steward.conflist'), 'utf8'));
    const del = await shim(
      { command: 'DEL', containerId: 'purge-spooled', netns: '' },
      { cniVersion: conf.cniVersion, name: conf.name, ...conf.plugins[0] },
    );
    assert.equal(del.code, 0, del.stdout);
    const spool = join(t.stateDir, 'spool');
    const [spooled] = readdirSync(spool).filter((n) => n.endsWith('.json'));
    assert.ok(spooled, 'the DEL was spooled');
    const r = await uninstallFrom(t, ['--purge']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /1 spooled DEL\(s\) not run yet .*purge-spooled/);
    assert.match(r.stdout, /kept .* \(not purged\): start stewardd with --state-dir/);
    assert.ok(existsSync(join(spool, spooled)), 'the spooled DEL is still there');
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false, 'the config goes all the same');
    rmSync(join(spool, spooled));
    const again = await uninstallFrom(t, ['--purge']);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.match(again.stdout, /purged /);
    assert.equal(existsSync(t.stateDir), false);
  });

  it('install with no primary yet copies the shim and waits for the daemon to write the conflist', async () => {
    const t = { ...nodeTree(join(env.dir, 'empty', 'node')), stateDir: join(env.dir, 'empty', 'state') };
    const r = await installInto(t, socket);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /conflist: not written yet: no primary/);
    assert.equal(existsSync(join(t.confDir, '00-steward.conflist')), false);
    assert.ok(existsSync(join(t.binDir, 'steward')));
  });
});
