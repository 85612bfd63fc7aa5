// SIGTERM while stewardd starts: after a reboot its recovery tears down every attachment of the boot
// before, before the socket opens (for up to --recovery-wait, 60 s). A `kubectl delete` of the
// DaemonSet then must still uninstall (else 00-steward.conflist dangles and every new pod fails,
// seed 001): the signal is kept and carried out as soon as the daemon serves. Real daemon, install,
// a delegate whose DEL takes 3 s, the reboot played by a new boot id.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { installInto, nodeTree, writeJson, type NodeTree } from '../helpers/node-tree.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('term-start');
after(() => env.close());

describe('SIGTERM while stewardd recovers at start', () => {
  it('is carried out once it serves: the uninstall of --uninstall-on-delete=always runs, exit 0', async () => {
    const confDir = join(env.dir, 'node/etc/cni/net.d');
    const daemon = new Daemon(env, { args: ['--cni-conf-dir', confDir, '--uninstall-on-delete', 'always'] });
    const tree: NodeTree = { ...nodeTree(join(env.dir, 'node')), stateDir: daemon.stateDir };
    writeJson(join(tree.confDir, '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'ipam') })],
    });
    assert.equal((await installInto(tree, daemon.socket)).code, 0);
    await daemon.start();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('slowdel', '1.0.0', [fixturePlugin(join(env.dir, 'fx'), { sleepDelMs: 3000 })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'before-reboot', netns: env.netns() }, conf)).code, 0);
    await daemon.kill9(); // the node goes down; its next boot finds the attachment stale
    daemon.setBootId('boot-2');

    const exited = daemon.startExpectingExit(60_000);
    // The log file is appended to: this start's line is the second.
    const recovering = () => readFileSync(daemon.logFile, 'utf8').split('recovering journal').length > 2;
    await daemon.waitFor('recovery under way', recovering, 20_000);
    daemon.send('SIGTERM');
    const { code, log } = await exited;
    assert.equal(code, 0, log.slice(-2000));
    assert.match(log, /SIGTERM while starting: stewardd stops as soon as it serves/);
    assert.match(log, /uninstall done/);
    assert.equal(existsSync(join(tree.confDir, '00-steward.conflist')), false, 'no config left to stop every new pod');
    assert.equal(existsSync(join(tree.binDir, 'steward')), false);
  });
});
