// Delegates in the node's mount namespace (stewardd run --plugin-mount-ns): stewardd runs in a mount
// namespace of its own, as in a DaemonSet pod, where a directory the node has (a primary's state,
// flannel's subnet.env) is hidden under an empty tmpfs. A plugin started with the flag reads the
// node's file; without it, the pod's empty one. A bad value is refused at start. Real stewardd in
// a real mount namespace (unshare), a real tmpfs, a real plugin process through nsenter.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv } from '../helpers/env.js';
import { delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('mountns');
after(() => env.close());

const nodeDir = join(env.dir, 'node-only');
const pluginDir = join(env.dir, 'plugins');
mkdirSync(nodeDir, { recursive: true });
mkdirSync(pluginDir, { recursive: true });
writeFileSync(join(nodeDir, 'subnet.env'), 'FLANNEL_SUBNET=10.244.7.1/24\n');
// A plugin that answers ADD with what it reads from the node's file (as flannel's reads subnet.env).
writeFileSync(
  join(pluginDir, 'reads-node'),
  `#!/bin/sh
cat >/dev/null
case "$CNI_COMMAND" in
ADD) v=$(cat ${nodeDir}/subnet.env 2>/dev/null || echo unseen)
     printf '{"cniVersion":"1.0.0","dns":{"domain":"%s"}}' "$v" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}' ;;
esac
`,
);
chmodSync(join(pluginDir, 'reads-node'), 0o755);

/**
 * stewardd in a mount namespace of its own, the node's dir covered by an empty tmpfs there; mounts
 * the node makes later reach it (slave), as /run/netns reaches a pod through HostToContainer.
 */
function podLike(name: string, args: string[]): Daemon {
  return new Daemon(env, {
    name,
    args: ['--bin-dir', pluginDir, ...args],
    launcher: [
      'unshare',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount -t tmpfs steward-pod "$0" && exec "$@"',
      nodeDir,
    ],
  });
}

async function addReads(daemon: Daemon, cid: string, netns: string): Promise<string> {
  const conf = stewardConf(daemon.socket, '1.0.0', [delegate('nodenet', '1.0.0', [{ type: 'reads-node' }])]);
  const r = await shim({ command: 'ADD', containerId: cid, netns }, conf);
  assert.equal(r.code, 0, r.stdout);
  const domain = (JSON.parse(r.stdout) as { dns?: { domain?: string } }).dns?.domain ?? '';
  assert.equal((await shim({ command: 'DEL', containerId: cid, netns: '' }, conf)).code, 0);
  return domain;
}

describe('--plugin-mount-ns', () => {
  it("with it a delegate reads the node's file; without it, the pod's empty dir", async () => {
    // This test process's mount namespace stands for the node's.
    const node = `/proc/${process.pid}/ns/mnt`;
    assert.match(readlinkSync(node), /^mnt:/);
    const [ns1, ns2] = [env.netns(), env.netns()];
    const inNode = podLike('with', ['--plugin-mount-ns', node]);
    await inNode.start();
    after(() => inNode.stop());
    assert.equal(await addReads(inNode, 'mns-1', ns1!), 'FLANNEL_SUBNET=10.244.7.1/24');

    const inPod = podLike('without', []);
    await inPod.start();
    after(() => inPod.stop());
    assert.equal(await addReads(inPod, 'mns-2', ns2!), 'unseen', "the pod's own view: the file is not there");
  });

  it('a path that is not a mount namespace is refused at start, naming what it is', async () => {
    for (const [bad, is] of [
      [join(env.dir, 'nothing'), /ENOENT/],
      [`/proc/${process.pid}/ns/net`, /is net:\[\d+\]/],
    ] as const) {
      const daemon = new Daemon(env, { name: `bad-${bad.length}`, args: ['--plugin-mount-ns', bad] });
      await assert.rejects(daemon.start(5000));
      const log = readFileSync(daemon.logFile, 'utf8');
      assert.match(log, /--plugin-mount-ns must name a mount namespace, such as \/proc\/1\/ns\/mnt/);
      assert.match(log, is);
      await daemon.stop();
    }
    const r = spawnSync(process.execPath, [join(REPO, 'bin/stewardd'), 'run', '--plugin-mount-ns', 'relative/mnt'], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 1, 'invalid options');
    assert.match(r.stderr, /--plugin-mount-ns must be an absolute path/);
  });
});
