// One network added twice to one pod, at eth0 and then at eth1 (engine/interface-holders.ts), with the
// real bridge and host-local, a real daemon and the shim: the network's second delegate makes net1
// both times, so the second ADD is refused (102) before anything runs, and the runtime's DEL that
// follows that failure leaves the first attachment's net1 and its address alone. Before (2 Dec,
// checked against the code without the fix), the second ADD's bridge refused with 999 "container
// veth name provided (net1) already exists" and the DEL of its rollback removed the first one's net1;
// the runtime's DEL after it was passed through in the netns, where host-local frees by container
// and ifname: the first one's address.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { TestEnv, leases, linkExists, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { removePortmapChainsAtClose } from '../helpers/cri/leftovers.js';
import { portmapOwners } from '../helpers/portmap.js';

const env = new TestEnv('ihold');
after(() => env.close());

describe('one network added twice to a pod, at another CNI_IFNAME', () => {
  it("is refused (102) where its net1 is the first one's, and the DEL after that keeps the first one's net1 and address", async () => {
    const daemon = await startDaemon(env, 'twice');
    const dirA = join(env.dir, 'a-ipam');
    const dirB = join(env.dir, 'b-ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('ih-a', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: dirA })]),
      delegate('ih-b', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: dirB })]),
    ]);
    const netns = env.netns();
    const first = await shim({ command: 'ADD', containerId: 'twice-1', netns }, conf);
    assert.equal(first.code, 0, first.stdout);
    assert.ok(linkExists(netns, 'eth0') && linkExists(netns, 'net1'));
    const [leaseA, leaseB] = [leases(dirA, 'ih-a'), leases(dirB, 'ih-b')];
    assert.equal(leaseA.length + leaseB.length, 2);

    const second = await shim({ command: 'ADD', containerId: 'twice-1', netns, ifname: 'eth1' }, conf);
    assert.notEqual(second.code, 0);
    const err = JSON.parse(second.stdout) as { code: number; msg: string };
    assert.equal(err.code, 102, second.stdout);
    assert.match(err.msg, /already has interface net1 .* on network steward;/);
    assert.equal(linkExists(netns, 'eth1'), false, 'nothing ran');

    // containerd and Multus DEL what failed to ADD.
    const del = await shim({ command: 'DEL', containerId: 'twice-1', netns, ifname: 'eth1' }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.ok(linkExists(netns, 'eth0') && linkExists(netns, 'net1'), "the first attachment's interfaces stay");
    assert.deepEqual([leases(dirA, 'ih-a'), leases(dirB, 'ih-b')], [leaseA, leaseB], 'and their addresses');

    const last = await shim({ command: 'DEL', containerId: 'twice-1', netns }, conf);
    assert.equal(last.code, 0, last.stdout);
    assert.equal(linkExists(netns, 'net1'), false);
    assert.deepEqual([leases(dirA, 'ih-a'), leases(dirB, 'ih-b')], [[], []]);
    const status = await daemon.status();
    assert.equal(status.steps.abandoned ?? 0, 0);
    await daemon.stop();
  });
});

/** Where `bridgeNetwork(…, name)` keeps its leases. */
const leaseDir = (name: string) => join(env.dir, `${name}-ipam`);

/** Steward network `name` of one bridge + host-local delegate of the same name, its leases in leaseDir(name). */
function bridgeNetwork(socket: string, name: string) {
  const plugin = bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: leaseDir(name) });
  return stewardConf(socket, '1.0.0', [delegate(name, '1.0.0', [plugin])], { name });
}

// A hostile probe (3 Dec) found three ways past the refusal above: another container's ADD into the
// same namespace, an interface made by hand, and a second spelling of the namespace's path. And a
// namespace made again under the same path took a repeated ADD's answer from the journal.
describe("an interface of the ADD's name already in the namespace, not its own", () => {
  it("another container's ADD there fails as its plugin says, and neither its rollback nor the runtime's DEL removes the first one's eth0 or address; nor one made by hand", async () => {
    const daemon = await startDaemon(env, 'taken');
    const conf = bridgeNetwork(daemon.socket, 'ih-t');
    const dataDir = leaseDir('ih-t');
    const netns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'taken-a', netns }, conf)).code, 0);
    const leaseA = leases(dataDir, 'ih-t');
    const second = await shim({ command: 'ADD', containerId: 'taken-b', netns }, conf);
    assert.equal(second.json?.code, 999, second.stdout);
    assert.match(second.json.msg, /container veth name provided \(eth0\) already exists/);
    await daemon.waitFor('the rollback', async () => (await daemon.attachment('taken-b')).state === 'deleted');
    assert.equal((await shim({ command: 'DEL', containerId: 'taken-b', netns }, conf)).code, 0);
    assert.ok(linkExists(netns, 'eth0'), "the first container's eth0 stays");
    assert.deepEqual(leases(dataDir, 'ih-t'), leaseA, 'and its address');
    assert.equal((await shim({ command: 'CHECK', containerId: 'taken-a', netns }, conf)).code, 0);

    const byHand = env.netns();
    const ns = byHand.split('/').pop() as string;
    sh('ip', ['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'hand0']);
    const third = await shim({ command: 'ADD', containerId: 'taken-c', netns: byHand }, conf);
    assert.equal(third.json?.code, 999, third.stdout);
    await daemon.waitFor('the rollback', async () => (await daemon.attachment('taken-c')).state === 'deleted');
    assert.ok(linkExists(byHand, 'eth0') && linkExists(byHand, 'hand0'), 'the interface made by hand stays');
    assert.deepEqual((await daemon.get('/v1/teardowns')).json, { pending: [], abandoned: [] });
    assert.equal((await shim({ command: 'DEL', containerId: 'taken-a', netns }, conf)).code, 0);
    assert.deepEqual(leases(dataDir, 'ih-t'), []);
    await daemon.stop();
  });

  it("the namespace's path spelled another way (/run/netns//x) is the same namespace: a second network at its eth0 is refused (102), and a DEL passed through there keeps it", async () => {
    const daemon = await startDaemon(env, 'spelt');
    const net = (name: string) => bridgeNetwork(daemon.socket, name);
    const netns = env.netns();
    const other = netns.replace('/netns/', '/netns//');
    assert.equal((await shim({ command: 'ADD', containerId: 'spelt-1', netns }, net('ih-s1'))).code, 0);
    const second = await shim({ command: 'ADD', containerId: 'spelt-1', netns: other }, net('ih-s2'));
    assert.equal(second.json?.code, 102, second.stdout);
    assert.match(second.json.msg, /already has interface eth0 .* on network ih-s1;/);
    const passed = await shim({ command: 'DEL', containerId: 'spelt-never', netns: other }, net('ih-s1'));
    assert.equal(passed.code, 0, passed.stdout);
    assert.ok(linkExists(netns, 'eth0'), 'eth0 stays');
    assert.deepEqual(leases(leaseDir('ih-s1'), 'ih-s1').length, 1);
    assert.equal((await shim({ command: 'DEL', containerId: 'spelt-1', netns }, net('ih-s1'))).code, 0);
    await daemon.stop();
  });

  it("a process's /proc/<pid>/ns/net is the same namespace as the bind mount it was entered by: a second network at its eth0 is refused (102) either way round", async () => {
    const daemon = await startDaemon(env, 'procpath');
    const net = (name: string) => bridgeNetwork(daemon.socket, name);
    const netns = env.netns();
    const inside = spawn('ip', ['netns', 'exec', netns.split('/').pop() as string, 'sleep', '120'], {
      stdio: 'ignore',
    });
    env.defer(() => {
      inside.kill('SIGKILL');
    });
    await daemon.waitFor('the process in the namespace', () => {
      try {
        return statSync(`/proc/${inside.pid}/ns/net`).ino === statSync(netns).ino;
      } catch {
        return false;
      }
    });
    const proc = `/proc/${inside.pid}/ns/net`;
    assert.equal((await shim({ command: 'ADD', containerId: 'proc-1', netns }, net('ih-p1'))).code, 0);
    const viaProc = await shim({ command: 'ADD', containerId: 'proc-1', netns: proc }, net('ih-p2'));
    assert.equal(viaProc.json?.code, 102, viaProc.stdout);
    // The other way round: recorded by the /proc path (another container, at eth5).
    const add2 = await shim({ command: 'ADD', containerId: 'proc-2', netns: proc, ifname: 'eth5' }, net('ih-p1'));
    assert.equal(add2.code, 0, add2.stdout);
    const viaMount = await shim({ command: 'ADD', containerId: 'proc-2', netns, ifname: 'eth5' }, net('ih-p2'));
    assert.equal(viaMount.json?.code, 102, viaMount.stdout);
    assert.equal(leases(leaseDir('ih-p1'), 'ih-p1').length, 2);
    assert.equal((await shim({ command: 'DEL', containerId: 'proc-1', netns }, net('ih-p1'))).code, 0);
    const del2 = await shim({ command: 'DEL', containerId: 'proc-2', netns: proc, ifname: 'eth5' }, net('ih-p1'));
    assert.equal(del2.code, 0, del2.stdout);
    assert.deepEqual(leases(leaseDir('ih-p1'), 'ih-p1'), []);
    await daemon.stop();
  });

  it('the same ADD again after its namespace was made again under the same path is refused (102), not answered from the journal', async () => {
    const daemon = await startDaemon(env, 'again');
    const conf = bridgeNetwork(daemon.socket, 'ih-g');
    const dataDir = leaseDir('ih-g');
    const netns = env.netns();
    const ns = netns.split('/').pop() as string;
    assert.equal((await shim({ command: 'ADD', containerId: 'again-1', netns }, conf)).code, 0);
    const same = await shim({ command: 'ADD', containerId: 'again-1', netns }, conf);
    assert.equal(same.code, 0, 'repeated into the same namespace: the journal answers');
    sh('ip', ['netns', 'del', ns]);
    sh('ip', ['netns', 'add', ns]);
    const again = await shim({ command: 'ADD', containerId: 'again-1', netns }, conf);
    assert.equal(again.json?.code, 102, again.stdout);
    assert.match(again.json.msg, /that path names another namespace now; DEL it before adding again/);
    assert.equal((await shim({ command: 'DEL', containerId: 'again-1', netns }, conf)).code, 0);
    assert.deepEqual(leases(dataDir, 'ih-g'), []);
    await daemon.stop();
  });
});

describe('one network with portmap added to a pod twice, at eth0 and then eth1', () => {
  it("is refused (102) before anything runs: portmap keys its chain by container and network, and the second one's rollback removed the first one's port mappings", async () => {
    removePortmapChainsAtClose(env);
    const daemon = await startDaemon(env, 'keyed');
    const dataDir = join(env.dir, 'keyed-ipam');
    const portmap = { type: 'portmap', capabilities: { portMappings: true }, snat: false };
    const conf = stewardConf(
      daemon.socket,
      '1.0.0',
      [delegate('ih-pm', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }), portmap])],
      {
        capabilities: { portMappings: true },
        runtimeConfig: {
          portMappings: [{ hostPort: 31000 + (process.pid % 1000), containerPort: 80, protocol: 'tcp' }],
        },
      },
    );
    const netns = env.netns();
    env.defer(async () => {
      await shim({ command: 'DEL', containerId: '0ddba11', netns }, conf);
    });
    assert.equal((await shim({ command: 'ADD', containerId: '0ddba11', netns }, conf)).code, 0);
    const dnat = () => portmapOwners('ih-pm');
    assert.deepEqual(dnat(), ['0ddba11']);
    const second = await shim({ command: 'ADD', containerId: '0ddba11', netns, ifname: 'eth1' }, conf);
    assert.equal(second.json?.code, 102, second.stdout);
    assert.match(
      second.json.msg,
      /already has delegate network ih-pm with portmap \(network steward, interface eth0\)/,
    );
    assert.equal(linkExists(netns, 'eth1'), false, 'nothing ran');
    assert.equal((await shim({ command: 'DEL', containerId: '0ddba11', netns, ifname: 'eth1' }, conf)).code, 0);
    assert.deepEqual(dnat(), ['0ddba11'], "the first one's port mapping stays");
    assert.equal((await shim({ command: 'DEL', containerId: '0ddba11', netns }, conf)).code, 0);
    assert.deepEqual(dnat(), []);
    assert.deepEqual(leases(dataDir, 'ih-pm'), []);
    await daemon.stop();
  });
});
