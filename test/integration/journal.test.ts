// The write-ahead journal's promises, pinned with real kill -9 and a real full disk: a step's row is
// on disk before its plugin runs (so a plugin cut off mid-ADD, first or later in the chain, gets its
// DEL after a restart), a same-boot restart leaves live attachments alone, and a journal write that
// fails after a plugin succeeded answers 11 and leaves work the retry scheduler finishes.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, fixtureCalls, leases, linkExists } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { mountTmpfs } from '../helpers/tmpfs.js';

const env = new TestEnv('journal');
after(() => env.close());

async function startDaemon(d: Daemon): Promise<Daemon> {
  await d.start();
  return d;
}

const newDaemon = (name: string) =>
  new Daemon(env, { name, args: ['--retry-base-ms', '200', '--retry-max-ms', '400'] });

describe('kill -9 mid-ADD', () => {
  it('during the first plugin, which holds a resource: after restart that plugin gets its DEL', async () => {
    const daemon = await startDaemon(newDaemon('crash-first'));
    const fx = join(env.dir, 'crash-first-fx');
    const dataDir = join(env.dir, 'crash-first-ipam');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('firstnet', '1.0.0', [
        fixturePlugin(fx, { sleepAddMs: 4000 }),
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
      ]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'cut-first', netns }, conf);
    await daemon.waitFor('the first plugin to start', () => fixtureCalls(fx, 'ADD').length === 1);
    await daemon.kill9();
    assert.equal((await add).code, 1);
    assert.equal(fixtureCalls(fx, 'DEL').length, 0);

    await daemon.start();
    assert.deepEqual(
      fixtureCalls(fx, 'DEL').map((l) => l.split(' ')[1]),
      ['cut-first'],
      'the interrupted plugin was DELed',
    );
    assert.equal((await daemon.attachment('cut-first')).state, 'deleted');
    assert.deepEqual(leases(dataDir, 'firstnet'), []);
    await daemon.stop();
  });

  it('during a later plugin, which holds a resource: after restart it and the plugin before it get their DELs', async () => {
    const daemon = await startDaemon(newDaemon('crash-later'));
    const fx = join(env.dir, 'crash-later-fx');
    const dataDir = join(env.dir, 'crash-later-ipam');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('laternet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { sleepAddMs: 4000 }),
      ]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'cut-later', netns }, conf);
    await daemon.waitFor('the second plugin to start', () => fixtureCalls(fx, 'ADD').length === 1);
    assert.equal(leases(dataDir, 'laternet').length, 1);
    await daemon.kill9();
    assert.equal((await add).code, 1);

    await daemon.start();
    // Were the second step journaled only after its plugin ran, nothing would know to DEL it.
    assert.deepEqual(
      fixtureCalls(fx, 'DEL').map((l) => l.split(' ')[1]),
      ['cut-later'],
      'the interrupted plugin was DELed',
    );
    assert.deepEqual(leases(dataDir, 'laternet'), []);
    assert.equal(linkExists(netns, 'eth0'), false);
    await daemon.stop();
  });
});

describe('restart in the same boot', () => {
  it('leaves added attachments alone: no DEL runs, the interface and the lease stay', async () => {
    const daemon = await startDaemon(newDaemon('sameboot'));
    const fx = join(env.dir, 'sameboot-fx');
    const dataDir = join(env.dir, 'sameboot-ipam');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('samenet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'stays', netns }, conf)).code, 0);
    await daemon.restart();
    await daemon.kill9();
    await daemon.start();
    assert.equal(fixtureCalls(fx, 'DEL').length, 0);
    assert.equal(leases(dataDir, 'samenet').length, 1);
    assert.equal(linkExists(netns, 'eth0'), true);
    assert.equal((await daemon.attachment('stays')).state, 'added');
    assert.equal((await shim({ command: 'CHECK', containerId: 'stays', netns }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'stays', netns }, conf)).code, 0);
    assert.deepEqual(leases(dataDir, 'samenet'), []);
    await daemon.stop();
  });
});

describe('disk full', () => {
  it('a journal write that fails after a plugin succeeded answers 11; once space is back the scheduler rolls the ADD back and a re-ADD works', async () => {
    const daemon = newDaemon('diskfull');
    mountTmpfs(env, daemon.stateDir, '3m');
    await startDaemon(daemon);
    const fx = join(env.dir, 'diskfull-fx');
    const dataDir = join(env.dir, 'diskfull-ipam');
    const netns = env.netns();
    const bridge = bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir });
    const filling = stewardConf(daemon.socket, '1.0.0', [
      delegate('fullnet', '1.0.0', [bridge, fixturePlugin(fx, { fillDisk: daemon.stateDir })]),
    ]);
    const add = await shim({ command: 'ADD', containerId: 'full', netns }, filling);
    assert.equal(add.code, 1);
    assert.equal(add.json.code, 11, add.stdout);
    assert.match(add.json.msg, /could not write its journal/);
    assert.equal(leases(dataDir, 'fullnet').length, 1, 'bridge + host-local ran before the failed write');

    // While the disk stays full a re-ADD is told to try later, not that the attachment exists.
    const again = await shim({ command: 'ADD', containerId: 'full', netns }, filling);
    assert.equal(again.json.code, 11, again.stdout);

    rmSync(join(daemon.stateDir, 'fill'));
    await daemon.waitFor(
      'the scheduler to roll the cut-off ADD back',
      () => leases(dataDir, 'fullnet').length === 0,
      20_000,
    );
    assert.equal(linkExists(netns, 'eth0'), false);
    assert.ok(
      fixtureCalls(fx, 'DEL').some((l) => l.startsWith('DEL full ')),
      'the plugin that filled the disk got its DEL',
    );
    await daemon.waitFor(
      'the attachment to be deleted',
      async () => (await daemon.attachment('full')).state === 'deleted',
    );

    const plain = stewardConf(daemon.socket, '1.0.0', [delegate('fullnet', '1.0.0', [bridge, fixturePlugin(fx)])]);
    const readd = await shim({ command: 'ADD', containerId: 'full', netns }, plain);
    assert.equal(readd.code, 0, readd.stdout);
    assert.equal(leases(dataDir, 'fullnet').length, 1);
    assert.equal((await shim({ command: 'DEL', containerId: 'full', netns }, plain)).code, 0);
    assert.deepEqual(leases(dataDir, 'fullnet'), []);
    assert.equal(existsSync(join(daemon.stateDir, 'fill')), false);
    await daemon.stop();
  });
});

describe('another process holding the journal locked', () => {
  it("answers an ADD 11 while the lock is held, instead of blocking stewardd's loop 5 s a write; once released the ADD works", async () => {
    const daemon = await startDaemon(newDaemon('locked'));
    const fx = join(env.dir, 'locked-fx');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('locknet', '1.0.0', [fixturePlugin(fx)])]);
    // An operator's sqlite3 in a write transaction, here for 3 s at most.
    const locker = spawn(
      process.execPath,
      [
        '-e',
        `const db = new (require('better-sqlite3'))(process.argv[1]); db.exec('BEGIN EXCLUSIVE');
         console.log('locked'); setTimeout(() => { db.exec('COMMIT'); console.log('released'); }, 3000);`,
        join(daemon.stateDir, 'steward.db'),
      ],
      { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    env.defer(() => void locker.kill('SIGKILL'));
    let said = '';
    locker.stdout.on('data', (d) => (said += String(d)));
    await daemon.waitFor('the lock to be taken', () => said.includes('locked'));
    const add = await shim({ command: 'ADD', containerId: 'while-locked', netns: env.netns() }, conf);
    assert.equal(said.includes('released'), false, 'answered while the lock was still held');
    assert.equal(add.json.code, 11, add.stdout);
    assert.equal((await daemon.get('/healthz')).status, 200);
    await daemon.waitFor('the lock to be released', () => said.includes('released'));
    const again = await shim({ command: 'ADD', containerId: 'after-lock', netns: env.netns() }, conf);
    assert.equal(again.code, 0, again.stdout);
    await daemon.stop();
  });
});
