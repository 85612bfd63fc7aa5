// A stop while the start-up drain runs loses no spooled DEL. The runtime was told each spooled DEL
// was done (the shim answered 0 when it spooled it), so a spool file removed before its teardown
// reached the journal is an attachment left `added`, its lease held, for good. The start-up drain
// runs unawaited (daemon.ts `void spool.start()`) and the journal closes at the end of the stop:
// here the stop comes while the drain's DELs hold every plugin slot and the rest of its batch
// waits for one, and every pod must still be torn down once a successor starts. (It passed when
// written: the process exits in the turn the journal closes, before a parked DEL could run into the
// closed journal and have its file removed; this holds that.)

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { fillDisk, mountTmpfs } from '../helpers/tmpfs.js';

const env = new TestEnv('spoolstop');
after(() => env.close());

/** The name spoolRequest (shared/src/spool.ts) gives a file. */
const spoolName = (t: number, cid: string, i: number) =>
  `${String(t).padStart(15, '0')}-${cid.slice(0, 64)}-${(i >>> 0).toString(16).padStart(8, '0')}.json`;

/**
 * The DELs of `pods` the shim would have spooled to `dir`, stamped `t`: each written to a temp name
 * and renamed, as the shim does, so a pass of a running stewardd never reads one half-written.
 */
function spoolDels(dir: string, t: number, pods: string[], netns: string, conf: unknown): void {
  mkdirSync(dir, { recursive: true });
  pods.forEach((cid, i) => {
    const name = spoolName(t, cid, i);
    const temp = join(dir, `.${name.replace(/\.json$/, '')}.tmp`);
    const env = {
      CNI_COMMAND: 'DEL',
      CNI_CONTAINERID: cid,
      CNI_NETNS: netns,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    };
    writeFileSync(temp, JSON.stringify({ env, config: conf }));
    renameSync(temp, join(dir, name));
  });
}

/** The spooled DELs in `dir` (not its rejected/ dir). */
const spooledIn = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.json'));

describe('a stop during the start-up drain', () => {
  it('keeps the file of every spooled DEL whose teardown did not reach the journal', async () => {
    const daemon = new Daemon(env, { name: 'd', args: ['--retry-base-ms', '100', '--retry-max-ms', '400'] });
    const fixState = join(env.dir, 'fixture');
    // Each attachment's DEL waits while `gate` exists: the drain's first DELs fill the plugin slots
    // and the rest of its batch waits for one when the stop comes.
    const gate = join(env.dir, 'hold-dels');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('fixnet', '1.0.0', [{ ...fixturePlugin(fixState), holdDelWhileFile: gate }]),
    ]);
    const netns = env.netns();
    const pods = Array.from({ length: 40 }, (_, i) => `stop${String(i).padStart(3, '0')}`);

    await daemon.start();
    for (const cid of pods) {
      const r = await shim({ command: 'ADD', containerId: cid, netns }, conf);
      assert.equal(r.code, 0, r.stdout);
    }
    await daemon.stop();

    // The DELs the shim would have spooled while stewardd was down.
    const t = Date.now() - 60_000;
    spoolDels(daemon.spoolDir, t, pods, netns, conf);
    writeFileSync(gate, '');
    // Should the test fail before it removes the gate, no fixture DEL waits on it after.
    env.defer(() => rmSync(gate, { force: true }));

    await daemon.start();
    await daemon.waitFor('the drain to hold DELs in the plugins', () => fixtureCalls(fixState, 'DEL').length >= 4);
    assert.ok((await daemon.status()).spool.draining > 0, 'the drain is still running');
    await daemon.stop();

    // Nothing may be lost: a pod's DEL either reached the journal (its teardown is retried from
    // there) or its file is still spooled.
    const spooled = spooledIn(daemon.spoolDir);
    assert.ok(spooled.length > 0, 'the stop came while DELs were waiting for a plugin slot');
    rmSync(gate);
    await daemon.start();
    await daemon.waitFor(
      'every spooled DEL to be run',
      async () => (await daemon.status()).spool.draining === 0 && spooledIn(daemon.spoolDir).length === 0,
      60_000,
    );
    for (const cid of pods)
      await daemon
        .waitFor(`${cid} to be torn down`, async () => (await daemon.attachment(cid))?.state === 'deleted', 30_000)
        .catch(async () => {
          assert.fail(`${cid}: ${JSON.stringify(await daemon.attachment(cid))} (its DEL was lost with the stop)`);
        });
    const done = new Set(
      fixtureCalls(fixState)
        .filter((l) => l.startsWith('DELDONE '))
        .map((l) => l.split(' ')[1]),
    );
    assert.deepEqual(
      pods.filter((cid) => !done.has(cid)),
      [],
      'every pod got a delegate DEL that completed',
    );
    await daemon.stop();
  });
});

describe('a full disk while spooled DELs are ingested', () => {
  it('keeps the file of a spooled DEL whose teardown could not be journaled, and runs it once there is space', async () => {
    // The spool dir off the full file system, as the shim's may be (stewardd install --spool-dir).
    const spoolDir = join(env.dir, 'full-spool');
    const daemon = new Daemon(env, {
      name: 'full',
      args: ['--retry-base-ms', '100', '--retry-max-ms', '400', '--spool-dir', spoolDir],
    });
    mountTmpfs(env, daemon.stateDir, '3m');
    const fixState = join(env.dir, 'fixture-full');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('fixnet', '1.0.0', [fixturePlugin(fixState)])]);
    const netns = env.netns();
    const pods = Array.from({ length: 5 }, (_, i) => `full${i}`);
    await daemon.start();
    for (const cid of pods) assert.equal((await shim({ command: 'ADD', containerId: cid, netns }, conf)).code, 0);

    const fill = fillDisk(daemon.stateDir);
    // DELs the shim spooled (stewardd slow to answer them), ingested by the next tick.
    const t = Date.now();
    spoolDels(spoolDir, t, pods, netns, conf);
    const logged = (msg: RegExp) =>
      readFileSync(daemon.logFile, 'utf8')
        .split('\n')
        .filter((l) => msg.test(l)).length;
    await daemon.waitFor('a pass to keep the files', () => logged(/failed before their teardown was journaled/) >= 2);
    assert.equal(spooledIn(spoolDir).length, pods.length, 'every file is still spooled');
    for (const cid of pods) assert.equal((await daemon.attachment(cid)).state, 'added');
    assert.equal(fixtureCalls(fixState, 'DEL').length, 0, 'no plugin ran a DEL it could not journal');
    // An ADD of one of those containers would come before its DEL: refused until the DEL has run.
    const early = await shim({ command: 'ADD', containerId: pods[0]!, netns }, conf);
    assert.equal(early.json?.code, 11, early.stdout);
    assert.match(early.json.msg, /spooled earlier could not be run yet/);

    rmSync(fill);
    for (const cid of pods)
      await daemon
        .waitFor(`${cid} to be torn down`, async () => (await daemon.attachment(cid))?.state === 'deleted', 30_000)
        .catch(async () =>
          assert.fail(`${cid}: ${JSON.stringify(await daemon.attachment(cid))} (its DEL was lost to the full disk)`),
        );
    await daemon.waitFor('the files to go', () => readdirSync(spoolDir).length === 0);
    assert.ok(!readdirSync(spoolDir).includes('rejected'), 'none set aside');
    assert.deepEqual(
      fixtureCalls(fixState, 'DEL')
        .map((l) => l.split(' ')[1])
        .sort(),
      pods,
      'one delegate DEL per pod once there was space',
    );
    await daemon.stop();
  });
});
