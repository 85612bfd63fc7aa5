// A DEL is never spooled where no daemon drains (issue "spool hygiene"): `stewardd install
// --spool-dir X` writes X into the node's conflist, so the shim spools there while stewardd is down,
// and stewardd run (whose own --spool-dir is <state-dir>/spool) drains X too, because its install
// record names it. A record naming a spool dir that cannot be drained makes /readyz 503 with the
// reason. Real stewardd install, the installed Go shim, a real daemon with --cni-conf-dir, the
// fixture plugin as the delegate.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Daemon, FAST_RETRY } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls } from '../helpers/env.js';
import { fixturePlugin } from '../helpers/netconf.js';
import { installInto, nodeTree, writeJson, type NodeTree } from '../helpers/node-tree.js';
import { cniEnv, execPlugin } from '../helpers/shim.js';

const readJson = (path: string): any => JSON.parse(readFileSync(path, 'utf8'));
const entries = (dir: string) => (existsSync(dir) ? readdirSync(dir) : []);

describe('the spool dir stewardd install wrote into the conflist', () => {
  const env = new TestEnv('spoolinst');
  const confDir = join(env.dir, 'node/etc/cni/net.d');
  const daemon = new Daemon(env, {
    args: ['--cni-conf-dir', confDir, '--uninstall-on-delete', 'never', ...FAST_RETRY],
  });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  // Not the daemon's own --spool-dir (<state-dir>/spool): only the install record names it.
  const spoolX = join(env.dir, 'node/var/spool/steward');
  const fixState = join(env.dir, 'fixture');
  const conflist = join(confDir, '00-steward.conflist');
  /** What a runtime puts on the shim's stdin for the installed one-plugin conflist. */
  const runtimeStdin = () => {
    const c = readJson(conflist);
    return JSON.stringify({ ...c.plugins[0], name: c.name, cniVersion: c.cniVersion });
  };
  const installedShim = (command: string, containerId: string, netns?: string) =>
    execPlugin(
      join(tree.binDir, 'steward'),
      cniEnv({ command, containerId, path: tree.binDir, ...(netns === undefined ? {} : { netns }) }),
      runtimeStdin(),
    );

  before(async () => {
    writeJson(join(confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [fixturePlugin(fixState)],
    });
    const r = await installInto(tree, daemon.socket, ['--spool-dir', spoolX]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(readJson(conflist).plugins[0].spoolDir, spoolX);
    assert.notEqual(daemon.spoolDir, spoolX);
  });
  after(() => env.close());

  it('a DEL the shim spooled there while stewardd was down is run once it starts: the attachment torn down, the file consumed', async () => {
    await daemon.start();
    const add = await installedShim('ADD', 'inst-1', env.netns());
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.equal((await daemon.attachment('inst-1')).state, 'added');
    await daemon.stop();

    const del = await installedShim('DEL', 'inst-1');
    assert.equal(del.code, 0, del.stdout + del.stderr);
    const spooled = entries(spoolX).filter((f) => f.endsWith('.json'));
    assert.equal(spooled.length, 1, `spooled to the conflist's spool dir: ${entries(spoolX).join(' ')}`);
    assert.deepEqual(entries(daemon.spoolDir), [], "nothing in the daemon's own spool dir");
    assert.deepEqual(fixtureCalls(fixState, 'DEL'), []);

    await daemon.start();
    await daemon.waitFor(
      'the spooled DEL in the install dir to be consumed',
      () => entries(spoolX).length === 0,
      10_000,
    );
    await daemon.waitFor(
      'the attachment to be torn down',
      async () => (await daemon.attachment('inst-1')).state === 'deleted',
    );
    assert.deepEqual(
      fixtureCalls(fixState, 'DEL').map((l) => l.split(' ').slice(0, 2).join(' ')),
      ['DEL inst-1'],
    );
    assert.equal((await daemon.get('/readyz')).status, 200);
  });

  it('a DEL spooled there while stewardd runs (it did not answer in time) is run within seconds', async () => {
    const add = await installedShim('ADD', 'inst-2', env.netns());
    assert.equal(add.code, 0, add.stdout + add.stderr);
    // What the shim writes when the daemon is unreachable: the same file, put there by hand while it runs.
    const c = readJson(conflist);
    const body = {
      env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'inst-2', CNI_NETNS: '', CNI_IFNAME: 'eth0', CNI_PATH: tree.binDir },
      config: { ...c.plugins[0], name: c.name, cniVersion: c.cniVersion },
    };
    writeFileSync(join(spoolX, `${String(Date.now()).padStart(15, '0')}-inst-2-0000abcd.json`), JSON.stringify(body));
    await daemon.waitFor(
      'the attachment to be torn down',
      async () => (await daemon.attachment('inst-2')).state === 'deleted',
      10_000,
    );
    assert.deepEqual(entries(spoolX), []);
  });

  it('an install record naming a spool dir that cannot be drained makes /readyz 503 with the reason, and a fixing install makes it ready again', async () => {
    const notADir = join(env.dir, 'node/var/spool-file');
    mkdirSync(dirname(notADir), { recursive: true });
    writeFileSync(notADir, '');
    const bad = await installInto(tree, daemon.socket, ['--spool-dir', notADir]);
    assert.equal(bad.code, 0, bad.stdout + bad.stderr);
    await daemon.waitFor('not ready', async () => (await daemon.get('/readyz')).status === 503, 5000);
    const readyz = (await daemon.get('/readyz')).json;
    const why = `spool dir ${notADir} (named by install record ${join(tree.stateDir, 'install.json')}) cannot be drained: it is not a directory; a DEL the shim spools there would never run`;
    assert.deepEqual(readyz.problems, [why]);
    assert.deepEqual((await daemon.status()).problems, [why]);
    assert.match((await daemon.get('/metrics')).text, /^steward_ready 0$/m);

    const good = await installInto(tree, daemon.socket, ['--spool-dir', spoolX]);
    assert.equal(good.code, 0, good.stdout + good.stderr);
    await daemon.waitFor('ready again', async () => (await daemon.get('/readyz')).status === 200, 5000);
    await daemon.stop();
  });
});
