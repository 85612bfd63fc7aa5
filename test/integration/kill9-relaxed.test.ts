// The journal's unsynced (relaxed) commits, killed right after them (docs/architecture.md, "Journal
// durability"). An ADD journals its whole chain in one synced commit (the first step `adding`, the
// rest `planned`); every later write of it (a step's result with the next step's `adding`, the
// plugin's process, the attachment's result) and of a DEL is committed without an fsync.
//  - kill -9 of stewardd right after such a commit (the second plugin of three has started, so the
//    first one's result and the second's `adding` were just written): the commits survive the
//    process, and recovery in the same boot rolls back exactly the two plugins that ran (the first
//    one's DEL gets the result the relaxed commit stored), never the third, which never ran.
//  - power loss right after it, simulated: the journal files are copied while the first plugin runs
//    (only the synced commit, maybe a relaxed one after it, is in the copy), the chain goes on to the
//    second plugin, then stewardd and the plugin are killed, the copy is put back and the boot id
//    changes. The reboot sweep DELs every step of the old boot, `planned` ones too: the lease the
//    first plugin took is released, nothing is left, and no ADD runs again.
// Real stewardd processes, the shim executed as a process, the fixture plugin delegating its IPAM to
// Debian's host-local (a real lease).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { alive, pidWritten, readPid, until } from '../helpers/processes.js';
import { openDatabase } from '../helpers/sqlite.js';

const env = new TestEnv('k9relax');
after(() => env.close());

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/** A chain of three fixture plugins: one takes a host-local lease, two sleeps long, three is plain. */
function chain(tag: string, daemon: Daemon) {
  const fx = [1, 2, 3].map((i) => join(env.dir, `${tag}-fx${i}`));
  const dataDir = join(env.dir, `${tag}-ipam`);
  const network = `${tag}net`;
  const conf = stewardConf(daemon.socket, '1.0.0', [
    delegate(network, '1.0.0', [
      fixturePlugin(fx[0] as string, {
        sleepAddMs: 300,
        trackAddPid: true,
        recordStdin: true,
        delegateIpam: true,
        ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: env.subnet() }]] },
      }),
      fixturePlugin(fx[1] as string, { sleepAddMs: 30_000, trackAddPid: true }),
      fixturePlugin(fx[2] as string),
    ]),
  ]);
  const pidFiles = (cid: string) => fx.map((d) => join(d, `add-${cid}-eth0.pid`));
  env.defer(() => {
    for (const f of pidFiles(`${tag}-1`)) if (pidWritten(f)) killGroup(readPid(f));
  });
  return { fx, dataDir, network, conf, pidFiles };
}

/** Each step's plugin type directory (by state dir) and state, read from the stopped daemon's journal. */
function stepStates(daemon: Daemon, containerId: string): string[] {
  const db = openDatabase(join(daemon.stateDir, 'steward.db'), { readonly: true });
  try {
    return (
      db
        .prepare(
          `SELECT s.state FROM steps s JOIN attachments a ON a.id = s.attachment_id
           WHERE a.container_id = ? ORDER BY a.id DESC, s.seq`,
        )
        .all(containerId) as Array<{ state: string }>
    ).map((r) => r.state);
  } finally {
    db.close();
  }
}

describe('kill -9 right after an unsynced journal commit', () => {
  it('same boot: the relaxed commits survive; exactly the plugins that ran are rolled back, the planned one is not', async () => {
    const daemon = new Daemon(env, { name: 'same' });
    await daemon.start();
    const c = chain('same', daemon);
    const cid = 'same-1';
    const netns = env.netns();
    const add = shim({ command: 'ADD', containerId: cid, netns }, c.conf);
    const [, second] = c.pidFiles(cid) as [string, string, string];
    // The second plugin has started: the first one's result and the second's `adding` were committed
    // (relaxed) just before it, and its process (relaxed) as it started.
    await until('the second plugin to start', () => pidWritten(second), 15_000, 5);
    await daemon.kill9();
    const answer = await add;
    assert.notEqual(answer.code, 0, 'the ADD cut off by the kill is not answered as added');
    assert.equal(leases(c.dataDir, c.network).length, 1, 'the first plugin holds its lease');

    await daemon.start();
    await daemon.waitFor(
      'recovery to roll the ADD back',
      async () => (await daemon.attachment(cid)).state === 'deleted',
    );
    assert.equal(alive(readPid(second)), false, 'the second plugin was killed');
    assert.deepEqual(leases(c.dataDir, c.network), [], 'the lease is released');
    // The runtime DELs the failed ADD: answered from the tombstone, nothing runs again.
    const del = await shim({ command: 'DEL', containerId: cid, netns }, c.conf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(
      c.fx.map((d) => fixtureCalls(d).map((l) => l.split(' ')[0])),
      [['ADD', 'DEL'], ['ADD', 'DEL'], []],
      'each plugin that ran is DELed once; the third, never started, is neither ADDed nor DELed',
    );
    // The first plugin's DEL got the result its relaxed commit stored (prevResult: the lease).
    const delStdin = JSON.parse(readFileSync(join(c.fx[0] as string, `stdin-DEL-${cid}.json`), 'utf8'));
    assert.equal(delStdin.prevResult?.ips?.length, 1, JSON.stringify(delStdin));
    await daemon.stop();
    assert.deepEqual(stepStates(daemon, cid), ['deleted', 'deleted', 'planned']);
  });

  it('power loss (simulated): unsynced commits lost; the reboot sweep DELs every step of the old boot, planned ones too', async () => {
    const daemon = new Daemon(env, { name: 'power' });
    await daemon.start();
    const c = chain('power', daemon);
    const cid = 'power-1';
    const netns = env.netns();
    const db = join(daemon.stateDir, 'steward.db');
    const image = join(env.dir, 'power-image');
    const add = shim({ command: 'ADD', containerId: cid, netns }, c.conf);
    const [first, second] = c.pidFiles(cid) as [string, string, string];
    // The first plugin runs: the chain's synced commit is on disk, nothing of the ADD after it but
    // possibly the (relaxed) record of this plugin's process.
    await until('the first plugin to start', () => pidWritten(first), 15_000, 5);
    copyFileSync(db, `${image}.db`);
    if (existsSync(`${db}-wal`)) copyFileSync(`${db}-wal`, `${image}.db-wal`);
    await until('the second plugin to start', () => pidWritten(second), 15_000, 5);
    assert.equal(leases(c.dataDir, c.network).length, 1, 'the first plugin holds its lease');
    // The power goes: the daemon, its spawner and the plugin die, and the page cache with them.
    await daemon.kill9();
    killGroup(readPid(second));
    await until('the second plugin to die', () => !alive(readPid(second)), 15_000, 5);
    await add;
    rmSync(`${db}-shm`, { force: true });
    rmSync(`${db}-wal`, { force: true });
    copyFileSync(`${image}.db`, db);
    if (existsSync(`${image}.db-wal`)) copyFileSync(`${image}.db-wal`, `${db}-wal`);
    daemon.setBootId('boot-2');

    await daemon.start();
    await daemon.waitFor('the reboot sweep', async () => (await daemon.attachment(cid)).state === 'deleted');
    assert.deepEqual(leases(c.dataDir, c.network), [], 'the lease the first plugin took is released');
    const del = await shim({ command: 'DEL', containerId: cid, netns }, c.conf);
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(
      c.fx.map((d) => fixtureCalls(d).map((l) => l.split(' ')[0])),
      [['ADD', 'DEL'], ['ADD', 'DEL'], ['DEL']],
      'every step DELed once (the third too: after another boot a planned step may have run); no ADD again',
    );
    assert.equal(existsSync(join(c.fx[1] as string, `del-while-add-running-${cid}`)), false);
    await daemon.stop();
    assert.deepEqual(stepStates(daemon, cid), ['deleted', 'deleted', 'deleted']);
  });
});
