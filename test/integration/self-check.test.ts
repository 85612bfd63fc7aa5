// The daemon's periodic self-check (daemon/src/self-check.ts, issue 19 item 5), against a real stewardd:
// a journal replaced by rename while serving makes it unhealthy and not ready, naming the journal;
// a socket file deleted or replaced while serving is listened on again, and stays listened on.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, readFileSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, leases } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('selfchk');
after(() => env.close());

describe('self-check', () => {
  it('a journal replaced by rename while serving: /healthz and /readyz fail naming the journal', async () => {
    const daemon = new Daemon(env, { name: 'journal' });
    await daemon.start();
    const db = join(daemon.stateDir, 'steward.db');
    statSync(db);
    copyFileSync(db, `${db}.copy`);
    renameSync(`${db}.copy`, db);
    await daemon.waitFor('not ready', async () => (await daemon.get('/readyz')).status === 503, 10_000);
    const h = await daemon.get('/healthz');
    assert.notEqual(h.status, 200);
    assert.match(h.text, /journal .*steward\.db was replaced/);
    assert.match(
      await import('node:fs').then((f) => f.readFileSync(daemon.logFile, 'utf8')),
      /was replaced while stewardd served/,
    );
    await daemon.stop();
  });

  it('a socket file deleted, then replaced, while serving: /healthz answers on the path again within seconds, stays answering across checks, and the shim ADD works', async () => {
    const daemon = new Daemon(env, { name: 'sock' });
    await daemon.start();
    // A new connection each time (the global agent keeps connections alive, and a kept one still
    // reaches the old listener): what a shim, which always connects afresh, would get.
    const healthy = () =>
      new Promise<boolean>((resolve) => {
        const req = request({ socketPath: daemon.socket, path: '/healthz', agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        });
        req.on('error', () => resolve(false));
        req.end();
      });
    const relistens = async () => {
      const text = (await daemon.get('/metrics')).text;
      const rows = text.split('\n').filter((l) => l.startsWith('steward_socket_relistens_total{'));
      return rows.reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    };
    assert.equal(await relistens(), 0);

    unlinkSync(daemon.socket);
    assert.equal(await healthy(), false, 'a deleted socket answers nothing');
    const t0 = performance.now();
    await daemon.waitFor('/healthz on the socket path again', healthy, 5000);
    const reMs = performance.now() - t0;
    assert.equal((statSync(daemon.socket).mode & 0o777).toString(8), '600');
    // Several self-checks (1 s apart) later the path is still ours: not re-created again, still answering.
    const ino = statSync(daemon.socket).ino;
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      assert.ok(existsSync(daemon.socket), `the socket vanished again after ${i + 1} s`);
      assert.equal(statSync(daemon.socket).ino, ino, 'the socket was re-created again');
      assert.ok(await healthy(), `not answering ${i + 1} s after the repair`);
    }
    assert.equal(await relistens(), 1);

    // Replaced by a dead socket (something else bound the path and went away): listened on again too.
    unlinkSync(daemon.socket);
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen({ path: daemon.socket }, r));
    // Close without the unlink libuv does on close: the file stays, answering nothing.
    const deadIno = statSync(daemon.socket).ino;
    renameSync(daemon.socket, `${daemon.socket}.keep`);
    await new Promise<void>((r) => squatter.close(() => r()));
    renameSync(`${daemon.socket}.keep`, daemon.socket);
    assert.equal(statSync(daemon.socket).ino, deadIno);
    assert.equal(await healthy(), false, 'the dead socket answers nothing');
    await daemon.waitFor('the replaced socket listened on again', healthy, 5000);
    assert.equal(await relistens(), 2);

    // The shim's ADD (and DEL) go through the new socket.
    const dataDir = join(env.dir, 'ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('socknet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    const netns = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'sock1', netns }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(leases(dataDir, 'socknet').length, 1);
    assert.equal((await shim({ command: 'DEL', containerId: 'sock1', netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'socknet').length, 0);
    const log = readFileSync(daemon.logFile, 'utf8');
    assert.match(log, /socket .*stewardd\.sock was deleted while stewardd served; listening on it again/);
    assert.match(log, /socket .*stewardd\.sock was replaced while stewardd served/);
    console.log(`# self-check figure: socket answering again ${Math.round(reMs)} ms after deletion (checks every 1 s)`);
    await daemon.stop();
    // Shutting down unlinks the path (the server's close): not taken for a deletion to repair.
    assert.equal(existsSync(daemon.socket), false, 'a socket file left after stewardd stopped');
    assert.doesNotMatch(
      readFileSync(daemon.logFile, 'utf8').split('stewardd shutting down')[1] ?? '',
      /listening on it again/,
    );
  });
});
