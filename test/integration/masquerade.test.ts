// bridge's masquerade chain when its DEL runs without the pod's netns (engine/masquerade.ts), with the
// real bridge (and ptp) and host-local, the host's iptables, a real daemon and the shim: the netns is gone when
// the runtime's DEL comes, the DEL was spooled while stewardd was down, or the DEL is for a container
// steward never added. Called directly, as a runtime does, bridge leaves its nat chain and the
// POSTROUTING jump to it every time: that baseline is what makes each case able to fail.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { masqueradeChain } from '../../daemon/src/engine/masquerade.js';
import { startDaemon } from '../helpers/daemon.js';
import { directAdd, directDel } from '../helpers/direct.js';
import { TestEnv, leases, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('masq');
after(() => env.close());

/** The nat table's lines that name the chain (its rules and the POSTROUTING jump), IPv4. */
function natLines(chain: string): string[] {
  return sh('iptables-save', ['-t', 'nat'])
    .split('\n')
    .filter((l) => l.includes(chain));
}

/** Removes a chain and the jumps to it by hand whatever happens, as docs/teardown.md says an operator would. */
function dropChain(chain: string): void {
  for (const line of natLines(chain).filter((l) => l.startsWith('-A POSTROUTING '))) {
    const words = line.replace(/^-A /, '-D ').match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? [];
    const args = words.map((w) => (w.startsWith('"') ? w.slice(1, -1).replace(/\\(.)/g, '$1') : w));
    execFileSync('iptables', ['-w', '-t', 'nat', ...args]);
  }
  for (const op of ['-F', '-X'])
    try {
      execFileSync('iptables', ['-w', '-t', 'nat', op, chain], { stdio: 'ignore' });
    } catch {
      /* not there */
    }
}

/** A bridge with ipMasq on its own bridge and subnet; every chain it may leave is removed at close. */
function masqNet(name: string, ids: string[]) {
  const dataDir = join(env.dir, `${name}-ipam`);
  const plugin = { ...bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }), ipMasq: true };
  for (const id of ids) env.defer(() => dropChain(masqueradeChain(name, id)));
  return { plugin, dataDir };
}

/** Removes a netns made by env.netns() now, as a runtime does once its sandbox is stopped. */
const removeNetns = (path: string) => sh('ip', ['netns', 'del', path.split('/').pop() as string]);

describe("bridge's masquerade chain after a DEL without the pod's netns", () => {
  it('without steward it is left; with steward the DEL after the runtime removed the netns removes it, lease and all', async () => {
    const bare = masqNet('masq-bare', ['bare-1']);
    const net = { name: 'masq-bare', cniVersion: '1.0.0', plugins: [bare.plugin] };
    const bareNs = env.netns();
    assert.equal((await directAdd(net, { containerId: 'bare-1', netns: bareNs })).ok, true);
    removeNetns(bareNs);
    assert.equal(await directDel(net, { containerId: 'bare-1', netns: '' }), true);
    const left = natLines(masqueradeChain('masq-bare', 'bare-1'));
    assert.equal(left.filter((l) => l.startsWith('-A POSTROUTING ')).length, 1, left.join('\n'));
    assert.deepEqual(leases(bare.dataDir, 'masq-bare'), [], 'the address itself is freed');

    const daemon = await startDaemon(env, 'gone');
    const { plugin, dataDir } = masqNet('masq-pod', ['pod-1']);
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('masq-pod', '1.0.0', [plugin])]);
    const chain = masqueradeChain('masq-pod', 'pod-1');
    const netns = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'pod-1', netns }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(natLines(chain).length, 4, 'the chain, its two rules and the jump to it');
    removeNetns(netns);
    const del = await shim({ command: 'DEL', containerId: 'pod-1', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(natLines(chain), []);
    assert.deepEqual(leases(dataDir, 'masq-pod'), []);
    const status = await daemon.status();
    assert.equal(status.steps.abandoned ?? 0, 0);
    await daemon.stop();
  });

  it('ptp leaves the same chain the same way, and steward removes it the same way', async () => {
    const daemon = await startDaemon(env, 'ptp');
    const dataDir = join(env.dir, 'masq-ptp-ipam');
    env.defer(() => dropChain(masqueradeChain('masq-ptp', 'ptp-1')));
    const ptp = { type: 'ptp', ipMasq: true, ipam: { type: 'host-local', subnet: env.subnet(), dataDir } };
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('masq-ptp', '1.0.0', [ptp])]);
    const chain = masqueradeChain('masq-ptp', 'ptp-1');
    const netns = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'ptp-1', netns }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(natLines(chain).length, 4);
    removeNetns(netns);
    assert.equal((await shim({ command: 'DEL', containerId: 'ptp-1', netns }, conf)).code, 0);
    assert.deepEqual(natLines(chain), []);
    assert.deepEqual(leases(dataDir, 'masq-ptp'), []);
    await daemon.stop();
  });

  it("a DEL retried after a failed one, the pod's interface gone with it, removes what bridge then leaves", async () => {
    // bridge's IPAM is a private copy of host-local under its own name, so that it can be missing for one DEL.
    const bin = join(env.dir, 'retry-bin');
    mkdirSync(bin);
    copyFileSync('/usr/lib/cni/host-local', join(bin, 'hl-retry'));
    const daemon = await startDaemon(env, 'retry');
    const { plugin, dataDir } = masqNet('masq-retry', ['retry-1']);
    const bridge = { ...plugin, ipam: { ...plugin.ipam, type: 'hl-retry' } };
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('masq-retry', '1.0.0', [bridge])]);
    const chain = masqueradeChain('masq-retry', 'retry-1');
    const netns = env.netns();
    const call = { containerId: 'retry-1', netns, path: `/usr/lib/cni:${bin}` };
    assert.equal((await shim({ command: 'ADD', ...call }, conf)).code, 0);
    // The first DEL fails (its IPAM missing); the pod's interface goes, its netns stays.
    renameSync(join(bin, 'hl-retry'), join(bin, 'away'));
    assert.equal((await shim({ command: 'DEL', ...call }, conf)).code, 0, 'deferred');
    const ns = netns.split('/').pop() as string;
    if (sh('ip', ['-n', ns, '-o', 'link']).includes(' eth0@')) sh('ip', ['-n', ns, 'link', 'del', 'eth0']);
    assert.equal(natLines(chain).length, 4);
    assert.equal(leases(dataDir, 'masq-retry').length, 1);
    renameSync(join(bin, 'away'), join(bin, 'hl-retry'));
    await daemon.waitFor('the retried DEL', async () => (await daemon.status()).teardownQueue.depth === 0, 30_000);
    assert.deepEqual(natLines(chain), []);
    assert.deepEqual(leases(dataDir, 'masq-retry'), []);
    await daemon.stop();
  });

  it('a DEL spooled while stewardd was down, drained after the netns went, removes it', async () => {
    const daemon = await startDaemon(env, 'spool');
    const { plugin, dataDir } = masqNet('masq-spool', ['spool-1']);
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('masq-spool', '1.0.0', [plugin])]);
    const chain = masqueradeChain('masq-spool', 'spool-1');
    const netns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'spool-1', netns }, conf)).code, 0);
    await daemon.stop();
    const del = await shim({ command: 'DEL', containerId: 'spool-1', netns }, conf);
    assert.equal(del.code, 0, 'spooled: the runtime is told it is done');
    removeNetns(netns);
    assert.equal(natLines(chain).length, 4);
    await daemon.start();
    await daemon.waitFor('the spooled DEL to drain', async () => natLines(chain).length === 0, 30_000);
    assert.deepEqual(leases(dataDir, 'masq-spool'), []);
    await daemon.stop();
  });

  it("sbr chained after bridge, the netns gone: sbr's DEL fails without one, every time; steward does not run it, and the bridge's lease and chain go with the runtime's DEL", async () => {
    const { plugin, dataDir } = masqNet('masq-sbr', ['sbr-1', 'sbr-bare']);
    const net = { name: 'masq-sbr', cniVersion: '1.0.0', plugins: [plugin, { type: 'sbr' }] };
    const bareNs = env.netns();
    assert.equal((await directAdd(net, { containerId: 'sbr-bare', netns: bareNs })).ok, true);
    removeNetns(bareNs);
    assert.equal(await directDel(net, { containerId: 'sbr-bare', netns: '' }), false, "the plain chain's DEL fails");
    assert.equal(await directDel({ ...net, plugins: [plugin] }, { containerId: 'sbr-bare', netns: '' }), true);

    const daemon = await startDaemon(env, 'sbr');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('masq-sbr', '1.0.0', net.plugins)]);
    const chain = masqueradeChain('masq-sbr', 'sbr-1');
    const netns = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'sbr-1', netns }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(leases(dataDir, 'masq-sbr').length, 1);
    removeNetns(netns);
    const del = await shim({ command: 'DEL', containerId: 'sbr-1', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(natLines(chain), []);
    assert.deepEqual(leases(dataDir, 'masq-sbr'), []);
    assert.equal((await daemon.attachment('sbr-1')).state, 'deleted');
    assert.deepEqual((await daemon.get('/v1/teardowns')).json, { pending: [], abandoned: [] });
    await daemon.stop();
  });

  it('a DEL for a container steward never added, its netns gone, removes the chain bridge made for it', async () => {
    const daemon = await startDaemon(env, 'pass');
    const { plugin, dataDir } = masqNet('masq-pass', ['pass-1']);
    const netns = env.netns();
    // Added before steward was installed: by the plain chain, as the runtime did then.
    const plain = { name: 'masq-pass', cniVersion: '1.0.0', plugins: [plugin] };
    assert.equal((await directAdd(plain, { containerId: 'pass-1', netns })).ok, true);
    const chain = masqueradeChain('masq-pass', 'pass-1');
    assert.equal(natLines(chain).length, 4);
    removeNetns(netns);
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('masq-pass', '1.0.0', [plugin])]);
    const del = await shim({ command: 'DEL', containerId: 'pass-1', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(natLines(chain), []);
    assert.deepEqual(leases(dataDir, 'masq-pass'), []);
    await daemon.stop();
  });
});
