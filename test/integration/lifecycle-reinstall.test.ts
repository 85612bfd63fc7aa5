// An install while the old daemon uninstalls on SIGTERM: what a DaemonSet deleted and applied again
// does on a node (`kubectl delete ds` then `apply`, `replace --force`, Helm `--force`): the new pod's
// init container runs `stewardd install` while the old pod still drains. The install reported success,
// so nothing it installed may be taken away after it: not by the uninstall that was draining, not by
// the purge of the state dir once the old daemon has stopped. Real daemon, real install, real files.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { installInto, nodeTree, writeJson, type NodeTree } from '../helpers/node-tree.js';
import { shim } from '../helpers/shim.js';

const envs: TestEnv[] = [];
after(async () => {
  for (const e of envs) await e.close();
});

/** A node with a primary, stewardd installed, and its daemon running with --uninstall-on-delete=always. */
async function installedNode(name: string): Promise<{ env: TestEnv; daemon: Daemon; tree: NodeTree }> {
  const env = new TestEnv(name);
  envs.push(env);
  const confDir = join(env.dir, 'node/etc/cni/net.d');
  const daemon = new Daemon(env, {
    args: ['--cni-conf-dir', confDir, '--uninstall-on-delete', 'always', '--drain-timeout', '3'],
  });
  const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
  writeJson(join(tree.confDir, '10-podnet.conflist'), {
    cniVersion: '1.0.0',
    name: 'podnet',
    plugins: [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'ipam') })],
  });
  const inst = await installInto(tree, daemon.socket);
  assert.equal(inst.code, 0, inst.stderr);
  await daemon.start();
  return { env, daemon, tree };
}

function installed(t: NodeTree): boolean {
  return (
    existsSync(join(t.confDir, '00-steward.conflist')) &&
    existsSync(join(t.binDir, 'steward')) &&
    existsSync(join(t.stateDir, 'install.json'))
  );
}

const logHas = (d: Daemon, text: string) => () => readFileSync(d.logFile, 'utf8').includes(text);

describe('stewardd installed again while the old daemon uninstalls on SIGTERM', () => {
  it('an install during the drain keeps what it installed: the uninstall then removes nothing', async () => {
    const { env, daemon, tree } = await installedNode('reinst-drain');
    // A teardown that keeps failing holds the drain for its whole --drain-timeout (3 s).
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('stuck', '1.0.0', [fixturePlugin(join(env.dir, 'fx'), { failDelAlways: true })]),
    ]);
    const call = { containerId: 'stuck-1', netns: env.netns() };
    assert.equal((await shim({ command: 'ADD', ...call }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', ...call }, conf)).code, 0);
    const stopped = daemon.stop();
    await daemon.waitFor('the uninstall decided', logHas(daemon, 'on SIGTERM: --uninstall-on-delete=always'), 5000);
    const again = await installInto(tree, daemon.socket);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    await stopped;
    const log = readFileSync(daemon.logFile, 'utf8');
    assert.ok(installed(tree), 'the conflist, shim and record the install reported stay');
    assert.match(log, /stewardd was installed again while it drained; left in place/);
    const rec = JSON.parse(readFileSync(join(tree.stateDir, 'install.json'), 'utf8'));
    assert.equal(rec.state, 'installed');
  });

  it("an operator's uninstall interrupted in its drain (Ctrl-C) takes its mark back: nothing removed, the daemon ready again", async () => {
    const { env, daemon, tree } = await installedNode('reinst-ctrl-c');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('stuck', '1.0.0', [fixturePlugin(join(env.dir, 'fx'), { failDelAlways: true })]),
    ]);
    const call = { containerId: 'stuck-1', netns: env.netns() };
    assert.equal((await shim({ command: 'ADD', ...call }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', ...call }, conf)).code, 0);
    const record = () => JSON.parse(readFileSync(join(tree.stateDir, 'install.json'), 'utf8')) as { state: string };
    const un = spawn(
      process.execPath,
      [
        join(REPO, 'bin/stewardd'),
        'uninstall',
        '--cni-bin-dir',
        tree.binDir,
        '--cni-conf-dir',
        tree.confDir,
        '--state-dir',
        tree.stateDir,
        '--drain-timeout',
        '30',
      ],
      { stdio: 'ignore' },
    );
    env.defer(() => void un.kill('SIGKILL'));
    const exited = new Promise<number | null>((r) => un.once('exit', (code) => r(code)));
    await daemon.waitFor('the drain under way', () => record().state === 'uninstalling', 10_000);
    await daemon.waitFor('not ready meanwhile', async () => (await daemon.get('/readyz')).status === 503, 5000);
    un.kill('SIGINT');
    assert.equal(await exited, 130);
    assert.equal(record().state, 'installed');
    assert.ok(installed(tree), 'nothing removed');
    await daemon.waitFor('ready again', async () => (await daemon.get('/readyz')).status === 200, 5000);
  });

  it('an install after the uninstall, before the old daemon stops, keeps its record: the state dir is not purged', async () => {
    const { env, daemon, tree } = await installedNode('reinst-purge');
    // An ADD in flight when SIGTERM comes: serving stops only once it is answered, 4 s later.
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('slow', '1.0.0', [fixturePlugin(join(env.dir, 'fx'), { sleepAddMs: 4000, trackAddPid: true })]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'slow-1', netns: env.netns() }, conf);
    const inDelegate = () =>
      existsSync(join(env.dir, 'fx')) && readdirSync(join(env.dir, 'fx')).some((f) => f.endsWith('.pid'));
    await daemon.waitFor('the ADD in its delegate', inDelegate, 5000);
    const stopped = daemon.stop();
    await daemon.waitFor('the uninstall done', logHas(daemon, 'uninstall done'), 10_000);
    assert.equal(existsSync(join(tree.confDir, '00-steward.conflist')), false, 'the uninstall ran');
    const again = await installInto(tree, daemon.socket);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    await add;
    await stopped;
    assert.ok(installed(tree), 'the second install is whole');
    assert.match(
      readFileSync(daemon.logFile, 'utf8'),
      /keeping the state dir: stewardd was installed again since the uninstall/,
    );
  });
});
