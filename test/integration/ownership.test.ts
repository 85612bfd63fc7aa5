// One daemon owns a state dir (and its database's dir); the daemon never changes permissions of a
// directory it did not create. Real stewardd processes, a real bridge + host-local + fixture chain.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, addressesIn, fixtureCalls, leases, linkExists } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('owner');
after(() => env.close());

const mode = (p: string) => statSync(p).mode & 0o7777;

describe('a second stewardd on the same state dir', () => {
  it("exits non-zero naming the owner, touches nothing, and the first daemon's in-flight ADD completes intact", async () => {
    const d1 = new Daemon(env, { name: 'd1' });
    await d1.start();
    const dataDir = join(env.dir, 'ipam-own');
    const fx = join(env.dir, 'fx-own');
    const netns = env.netns();
    const conf = stewardConf(d1.socket, '1.0.0', [
      delegate('ownnet', '1.0.0', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }),
        fixturePlugin(fx, { sleepAddMs: 6000 }),
      ]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'own-1', netns }, conf);
    await d1.waitFor('the fixture ADD to be running', () => fixtureCalls(fx, 'ADD').length === 1);

    // Another socket, same state dir: the case with no lock at all before.
    const d2 = new Daemon(env, { name: 'd2', stateDir: d1.stateDir });
    const r2 = await d2.startExpectingExit();
    assert.notEqual(r2.code, 0);
    assert.match(
      r2.log,
      new RegExp(`state dir ${d1.stateDir} is owned by another stewardd \\(pid ${d1.proc!.pid}, started `),
      r2.log,
    );
    assert.match(r2.log, new RegExp(`serving ${d1.socket}`));
    assert.equal(existsSync(d2.socket), false, 'the refused daemon created its socket');
    // The same socket too (the "already serving" path used to come after recovery).
    const d3 = new Daemon(env, { name: 'd3', stateDir: d1.stateDir, socket: d1.socket });
    const r3 = await d3.startExpectingExit();
    assert.notEqual(r3.code, 0);
    assert.match(r3.log, /is owned by another stewardd/);
    // Another state dir, but --db in the first one's dir: the database's dir is owned as well.
    const d4 = new Daemon(env, { name: 'd4', args: ['--db', join(d1.stateDir, 'steward.db')] });
    const r4 = await d4.startExpectingExit();
    assert.notEqual(r4.code, 0);
    assert.match(r4.log, new RegExp(`state dir ${d1.stateDir} is owned by another stewardd \\(pid ${d1.proc!.pid}`));
    assert.equal(existsSync(join(d4.stateDir, 'steward.db')), false);
    assert.equal(
      JSON.parse(readFileSync(join(d1.stateDir, 'stewardd.owner.json'), 'utf8')).pid,
      d1.proc!.pid,
      'a refused daemon rewrote the owner file',
    );

    const res = await add;
    assert.equal(res.code, 0, res.stdout);
    assert.equal(linkExists(netns, 'eth0'), true, 'the interface was torn down');
    const ip = res.json.ips[0].address as string;
    assert.deepEqual(addressesIn(netns, 'eth0'), [ip]);
    assert.deepEqual(leases(dataDir, 'ownnet'), [ip.split('/')[0]], 'the lease is gone');
    assert.deepEqual(fixtureCalls(fx, 'DEL'), [], 'someone ran a DEL');
    const atts = (await d1.get('/v1/attachments?containerId=own-1')).json;
    assert.equal(atts[0].state, 'added');

    // The lock is the kernel's: kill -9 of the owner frees the dir at once for the next daemon,
    // which names no stale owner and finds the attachment `added`.
    await d1.kill9();
    const d5 = new Daemon(env, { name: 'd5', stateDir: d1.stateDir });
    await d5.start();
    const owner = JSON.parse(readFileSync(join(d1.stateDir, 'stewardd.owner.json'), 'utf8'));
    assert.equal(owner.pid, d5.proc!.pid);
    const again = (await d5.get('/v1/attachments?containerId=own-1')).json;
    assert.equal(again[0].state, 'added');
    const del = await shim({ command: 'DEL', containerId: 'own-1', netns }, { ...conf, socket: d5.socket });
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(leases(dataDir, 'ownnet'), []);
    await d5.stop();
  });
});

describe('the socket directory', () => {
  it('an existing 0755 directory stays 0755 after start and exit', async () => {
    const dir = join(env.dir, 'sock755');
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    const d = new Daemon(env, { name: 's755', socket: join(dir, 'stewardd.sock') });
    await d.start();
    assert.equal(mode(dir).toString(8), '755');
    assert.equal(mode(d.socket).toString(8), '600');
    assert.equal(await d.stop(), 0);
    assert.equal(mode(dir).toString(8), '755');
  });

  it('a directory it creates is 0700', async () => {
    const dir = join(env.dir, 'fresh', 'run');
    const d = new Daemon(env, { name: 'sfresh', socket: join(dir, 'stewardd.sock') });
    await d.start();
    assert.equal(mode(dir).toString(8), '700');
    await d.stop();
  });

  for (const m of [0o1777, 0o775]) {
    it(`an existing directory that others can write to (${m.toString(8)}) is refused with the reason and left as it was`, async () => {
      const dir = join(env.dir, `sock${m.toString(8)}`);
      mkdirSync(dir);
      chmodSync(dir, m);
      const d = new Daemon(env, { name: `s${m.toString(8)}`, socket: join(dir, 'stewardd.sock') });
      const r = await d.startExpectingExit();
      assert.notEqual(r.code, 0);
      assert.match(
        r.log,
        new RegExp(
          `socket directory ${dir} is writable by group or others \\(mode ${m.toString(8).padStart(4, '0')}\\)`,
        ),
      );
      assert.equal(mode(dir), m);
      assert.equal(existsSync(d.socket), false);
      assert.equal(existsSync(join(d.stateDir, 'steward.db')), false, 'it opened the journal before refusing');
    });
  }
});
