// The spool as a hostile node sees it (a review's findings, 30 Nov): a spooled DEL names the plugins
// stewardd runs as root and the container it tears down, so a spool dir others can write to is not
// drained (not ready, with the reason); and a DEL spooled a moment before the runtime adds the same
// container again runs before that ADD even when the dir holds thousands of other names. Real
// stewardd, real shim spooling, real bridge + host-local.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, leases, linkExists } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('spooltr');
after(() => env.close());

const jsonIn = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.json'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A daemon with one bridge + host-local network, and the netconf the shim gets; `down` spools every DEL. */
async function node(name: string) {
  const daemon = new Daemon(env, { name });
  await daemon.start();
  const dataDir = join(env.dir, `ipam-${name}`);
  const conf = stewardConf(daemon.socket, '1.0.0', [
    delegate('trustnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
  ]);
  // The same netconf with a socket nobody serves: the shim spools the DEL into the daemon's spool dir.
  const down = { ...conf, socket: join(env.dir, `${name}-nobody.sock`) };
  return { daemon, dataDir, conf, down };
}

describe('spool dir trust', () => {
  it('a spool dir writable by others is not drained: /readyz 503 with the reason; made 0700, the DEL runs', async () => {
    const { daemon, dataDir, conf, down } = await node('open');
    after(() => daemon.stop());
    const netns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'tr1', netns }, conf)).code, 0);
    mkdirSync(daemon.spoolDir, { recursive: true, mode: 0o700 });
    chmodSync(daemon.spoolDir, 0o777);
    await daemon.waitFor('not ready', async () => (await daemon.request('GET', '/readyz')).status === 503);
    const ready = await daemon.request('GET', '/readyz');
    assert.match(ready.text, /spool dir .* cannot be drained: it is writable by others \(mode 0777\)/);
    assert.equal((await shim({ command: 'DEL', containerId: 'tr1', netns }, down)).code, 0, 'spooled');
    assert.equal(jsonIn(daemon.spoolDir).length, 1);
    await sleep(2500); // more than two drain passes
    assert.equal(jsonIn(daemon.spoolDir).length, 1, 'not drained');
    assert.equal(leases(dataDir, 'trustnet').length, 1, 'the lease is held');
    assert.equal(linkExists(netns, 'eth0'), true);

    chmodSync(daemon.spoolDir, 0o700);
    await daemon.waitFor('drained', () => jsonIn(daemon.spoolDir).length === 0);
    await daemon.waitFor('ready', async () => (await daemon.request('GET', '/readyz')).status === 200);
    await daemon.waitFor('the lease released', () => leases(dataDir, 'trustnet').length === 0);
    assert.equal(linkExists(netns, 'eth0'), false);
  });
});

describe('a DEL spooled just before the container is added again', () => {
  it('runs before that ADD although the spool dir holds 3,000 other names: the new attachment keeps its interface and lease', async () => {
    const { daemon, dataDir, conf, down } = await node('again');
    after(() => daemon.stop());
    const netns = env.netns();
    assert.equal((await shim({ command: 'ADD', containerId: 'tr2', netns }, conf)).code, 0);
    mkdirSync(daemon.spoolDir, { recursive: true, mode: 0o700 });
    for (let i = 0; i < 3000; i++) writeFileSync(join(daemon.spoolDir, `junk-${i}`), '');
    for (let round = 0; round < 3; round++) {
      // A CHECK lists the dir (and keeps the listing); then DEL (spooled) and ADD back to back,
      // as podman restart sends them.
      assert.equal((await shim({ command: 'CHECK', containerId: 'tr2', netns }, conf)).code, 0);
      assert.equal((await shim({ command: 'DEL', containerId: 'tr2', netns }, down)).code, 0);
      const add = await shim({ command: 'ADD', containerId: 'tr2', netns }, conf);
      assert.equal(add.code, 0, add.stdout);
      await sleep(1500); // past the next drain pass
      assert.equal(linkExists(netns, 'eth0'), true, `round ${round}: the new attachment's interface is there`);
      assert.equal(leases(dataDir, 'trustnet').length, 1, `round ${round}: one lease, the new attachment's`);
      assert.equal(jsonIn(daemon.spoolDir).length, 0);
    }
    assert.equal((await shim({ command: 'DEL', containerId: 'tr2', netns }, conf)).code, 0);
  });
});
