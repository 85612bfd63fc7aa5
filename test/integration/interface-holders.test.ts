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
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { TestEnv, leases, linkExists } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

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
