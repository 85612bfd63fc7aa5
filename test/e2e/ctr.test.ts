// containerd 1.6's `ctr run --cni`, through go-cni: the lexically first conflist in /etc/cni/net.d,
// the shim in /opt/cni/bin (under a name of this suite's, beside any real install), CNI_CONTAINERID
// "<namespace>-<name>", an empty CNI_NETNS on DEL and no VERSION call. containerd runs as a child with a temp root/state/socket (test/helpers/runtimes/).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { baseSkipReason, skipOrFail } from '../helpers/runtimes/skip.js';
import { RuntimeHost, defaultGatewayOf, ipv4Of, type BridgeNet } from '../helpers/runtimes/host.js';
import { Podman } from '../helpers/runtimes/podman.js';
import { Containerd, installShimInOptCniBin, lexicallyFirstConf } from '../helpers/runtimes/containerd.js';
import { CNI_CONF_DIR } from '../helpers/runtimes/machine.js';

const env = new TestEnv('e2e-ctr');
const daemon = new Daemon(env);
const IMAGE = 'localhost/steward-e2e-busybox:latest';

let host: RuntimeHost | undefined;
let containerd: Containerd | undefined;
let net: BridgeNet | undefined;
let shimType = 'steward';
let reason = baseSkipReason([
  'containerd',
  'ctr',
  'containerd-shim-runc-v2',
  'runc',
  'podman',
  'conmon',
  'ip',
  'iptables',
  'tar',
]);
try {
  if (reason === undefined) {
    host = await RuntimeHost.create(env);
    const installed = installShimInOptCniBin(host);
    if ('reason' in installed) reason = installed.reason;
    else shimType = installed.type;
  }
  if (reason === undefined) {
    const h = host!;
    // The image: podman import of the busybox tree, saved as an OCI archive (runtimes.md), imported by ctr.
    const podman = await Podman.setup(h);
    reason = await podman.probe();
    if (reason === undefined) {
      const archive = await podman.ociArchive(IMAGE);
      containerd = await Containerd.start(h).catch((e: Error) => {
        reason = `containerd does not start here: ${e.message}`;
        return undefined;
      });
      if (containerd) {
        const imp = await containerd.ctr(['image', 'import', archive]);
        if (imp.code !== 0) throw new Error(`ctr image import failed: ${imp.stderr}`);
      }
    }
  }
  // A node's own steward install would wrap this suite's conflist (its shim's type is not `steward`)
  // as the node's primary, and record it: not beside one. Checked before the conflist is written.
  if (reason === undefined && existsSync(join(CNI_CONF_DIR, '00-steward.conflist')))
    reason = `${CNI_CONF_DIR}/00-steward.conflist is there: a steward install on this machine would wrap this suite's conflist`;
  if (reason === undefined) {
    // "0-" sorts before "00-…" and "87-podman-bridge.conflist", the usual first files.
    net = host!.bridgeNetwork('ctr', '1.0.0', {
      steward: { socket: daemon.socket, spoolDir: daemon.spoolDir, type: shimType },
      filePrefix: '0-',
    });
    const first = lexicallyFirstConf();
    if (first !== net.file.split('/').pop())
      reason = `${first} sorts before this suite's conflist in /etc/cni/net.d, so ctr would not use it`;
  }
} catch (e) {
  await (host ? host.finish() : env.close()); // nothing of a failed setup stays on the machine
  throw e;
}
const skip = skipOrFail('containerd (ctr run --cni) end-to-end case', reason);

after(async () => {
  if (!host) return env.close();
  assert.deepEqual(await host.finish(), [], 'the suite left the machine as it found it');
});

describe('ctr run --cni with the steward conflist first in /etc/cni/net.d', { skip }, () => {
  before(() => daemon.start());

  it('the container has its address and default route inside, and after exit the lease is gone and the attachment torn down', async () => {
    const h = host!;
    const n = net!;
    const name = `${n.name}-c1`;
    const out = join(env.dir, 'ctr-out');
    mkdirSync(out);
    const r = await containerd!.ctr([
      'run',
      '--rm',
      '--cni',
      '--mount',
      `type=bind,src=${out},dst=/out,options=rbind:rw`,
      IMAGE,
      name,
      '/bin/sh',
      '-c',
      'ip -o -4 addr show eth0 > /out/seen; ip route >> /out/seen',
    ]);
    assert.equal(r.code, 0, `ctr run: ${r.stderr}`);
    const seen = readFileSync(join(out, 'seen'), 'utf8');
    const inet = ipv4Of(seen);
    assert.ok(inet, `no IPv4 address on eth0 inside the container: ${seen}`);
    assert.ok(inet.address.startsWith(n.subnet.replace(/0\/24$/, '')), `${inet.address} not in ${n.subnet}`);
    assert.equal(inet.prefix, 24);
    assert.equal(defaultGatewayOf(seen), n.gateway, `no default route via ${n.gateway}: ${seen}`);
    // go-cni's container id is "<namespace>-<name>".
    const cid = `default-${name}`;
    await daemon.waitFor('the lease to be released and the attachment torn down', async () => {
      const atts = (await daemon.get(`/v1/attachments?containerId=${cid}`)).json as any[];
      return h.leases(n).length === 0 && atts.length === 1 && atts[0].state === 'deleted';
    });
    const [att] = (await daemon.get(`/v1/attachments?containerId=${cid}`)).json as any[];
    assert.equal(att.network, n.name);
    assert.match(att.netns, /^\/proc\/\d+\/ns\/net$/, "ADD came with the task's /proc netns");
    assert.deepEqual(
      att.steps.map((s: { plugin: string; state: string }) => `${s.plugin}:${s.state}`),
      ['bridge:deleted'],
    );
  });
});
