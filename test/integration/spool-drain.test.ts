// A spool backlog never keeps stewardd off its socket (issue 19, item 1): 5,000 spooled DELs for
// 100 containers (a kubelet retrying DEL while the daemon was down; 10 of them were ADDed through
// steward) and 300 for distinct containers steward never saw. The real daemon answers /healthz
// within 5 s of start, an ADD for another container (real bridge + host-local) succeeds while the
// spool is still draining, each container gets exactly one delegate DEL (the fixture plugin counts
// them), an ADD for a container with spooled DELs waits for them, and the drain finishes. The scale
// case (100,000 and 3,000) is a bench row (bench/rows/spool-drain.ts).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('spooldrain');
after(() => env.close());

/** The name spoolRequest (shared/src/spool.ts) gives a file. */
const spoolName = (t: number, cid: string, i: number) =>
  `${String(t).padStart(15, '0')}-${cid.slice(0, 64)}-${(i >>> 0).toString(16).padStart(8, '0')}.json`;

describe('a spool backlog at start', () => {
  it('is drained in the background: /healthz at once, other ADDs served, one delegate DEL per container', async () => {
    const daemon = new Daemon(env, { name: 'd' });
    const fixState = join(env.dir, 'fixture');
    const fixConf = stewardConf(daemon.socket, '1.0.0', [delegate('fixnet', '1.0.0', [fixturePlugin(fixState)])]);
    const netns = env.netns();
    const known = Array.from({ length: 100 }, (_, i) => `storm${String(i).padStart(3, '0')}`);
    const unknown = Array.from({ length: 300 }, (_, i) => `gone${String(i).padStart(3, '0')}`);

    await daemon.start();
    for (const cid of known.slice(0, 10)) {
      const r = await shim({ command: 'ADD', containerId: cid, netns }, fixConf);
      assert.equal(r.code, 0, r.stdout);
    }
    await daemon.stop();

    // What the shim would have written while the daemon was down (written directly: 5,300 fsyncs
    // through spoolRequest would only measure the disk).
    mkdirSync(daemon.spoolDir, { recursive: true });
    const t = Date.now() - 60_000;
    const body = (cid: string) =>
      JSON.stringify({
        env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: cid, CNI_NETNS: '', CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' },
        config: fixConf,
      });
    let n = 0;
    for (let round = 0; round < 50; round++)
      for (const cid of known) writeFileSync(join(daemon.spoolDir, spoolName(t + round, cid, n++)), body(cid));
    for (const cid of unknown) writeFileSync(join(daemon.spoolDir, spoolName(t, cid, n++)), body(cid));
    // The container the held ADD below is for. Its delegate DEL waits while `gate` exists, so its
    // spooled DELs cannot all have settled before the test says so, wherever the drain's listing
    // puts them (directory order: hashed on ext4, newest first on tmpfs; a first version of this test
    // assumed the newest came last and failed when one came early).
    const last = 'zlast';
    const gate = join(env.dir, 'hold-zlast-del');
    writeFileSync(gate, '');
    const heldConf = stewardConf(daemon.socket, '1.0.0', [
      delegate('fixnet', '1.0.0', [{ ...fixturePlugin(fixState), holdDelWhileFile: gate }]),
    ]);
    const heldBody = JSON.stringify({ ...(JSON.parse(body(last)) as object), config: heldConf });
    for (let i = 0; i < 5; i++) writeFileSync(join(daemon.spoolDir, spoolName(t + 100 + i, last, n++)), heldBody);
    assert.equal(n, 5305);

    const t0 = Date.now();
    await daemon.start(5_000, '/healthz');
    const toSocket = Date.now() - t0;
    assert.ok(toSocket < 5_000, `/healthz answered after ${toSocket} ms`);
    const ready = await daemon.get('/readyz');
    assert.equal(ready.status, 200, 'ready while draining: the daemon serves');
    const status = await daemon.status();
    assert.ok(status.spool.draining > 0, 'the drain has not finished yet (it is in the background)');
    assert.match(status.message, /^draining \d+ spooled DELs$/);

    // An ADD for another container, through the real bridge and host-local, while the spool drains.
    const dataDir = join(env.dir, 'ipam');
    const realConf = stewardConf(daemon.socket, '1.0.0', [
      delegate('hostnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    const otherNs = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'newpod', netns: otherNs }, realConf);
    assert.equal(add.code, 0, add.stdout);
    assert.ok((await daemon.status()).spool.draining > 0, 'the ADD was answered before the drain finished');

    // An ADD for a container that still has spooled DELs waits for them: it is answered after they ran.
    const callsOfLast = () => fixtureCalls(fixState).filter((l) => l.split(' ')[1] === last);
    const heldAdd = shim({ command: 'ADD', containerId: last, netns }, fixConf);
    const waitsLogged = () =>
      readFileSync(daemon.logFile, 'utf8')
        .split('\n')
        .some((line) => {
          try {
            const row = JSON.parse(line) as { msg?: string; containerId?: string };
            return row.msg === "a request waits for its container's spooled DELs" && row.containerId === last;
          } catch {
            return false;
          }
        });
    await daemon.waitFor('the ADD to wait for its spooled DELs', waitsLogged);
    assert.ok((await daemon.status()).spool.draining > 0);
    assert.ok(!callsOfLast().some((l) => l.startsWith('ADD ')), 'the ADD has not run while its spooled DELs wait');
    rmSync(gate);
    const held = await heldAdd;
    assert.equal(held.code, 0, held.stdout);
    assert.deepEqual(
      callsOfLast().map((l) => l.split(' ')[0]),
      ['DEL', 'DELDONE', 'ADD'],
      'the spooled DEL ran, and was done, before the ADD that came after it',
    );

    await daemon.waitFor('the drain to finish', async () => (await daemon.status()).spool.draining === 0, 120_000);
    assert.deepEqual(
      readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json')),
      [],
      'every spool file is removed',
    );
    const dels = fixtureCalls(fixState, 'DEL').map((l) => l.split(' ')[1]);
    const perContainer = new Map<string, number>();
    for (const cid of dels) perContainer.set(cid!, (perContainer.get(cid!) ?? 0) + 1);
    for (const cid of [...known, ...unknown, last]) assert.equal(perContainer.get(cid), 1, `delegate DELs for ${cid}`);
    const readyAfter = await daemon.get('/readyz');
    assert.equal(readyAfter.status, 200);
    assert.equal((await daemon.status()).message, undefined);

    const del = await shim({ command: 'DEL', containerId: 'newpod', netns: otherNs }, realConf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(leases(dataDir, 'hostnet'), []);
    await shim({ command: 'DEL', containerId: last, netns }, fixConf);
    await daemon.stop();
  });
});
