// A corrupt journal (8 KiB of garbage written mid-file) is found by PRAGMA quick_check at start:
// the daemon serves but is not ready, says why in /readyz, /v1/status and the log, runs no
// recovery on it, answers ADD/CHECK with code 11 and spools DELs, which are ingested once the
// database is replaced. Real stewardd, real shim, real fixture plugin, real kill -9.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { HINT_HEADERS, PROTOCOL_HEADER, PROTOCOL_VERSION } from '@cni-steward/shared';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { corruptJournal } from '../helpers/sqlite.js';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, hintedWire, stewardConf } from '../helpers/netconf.js';
import { installInto, nodeTree, uninstallFrom, writeLoopbackPrimary, type NodeTree } from '../helpers/node-tree.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('corrupt');
after(() => env.close());

/**
 * Sends `text` on a raw connection to `socket`; resolves with what came back once the daemon
 * closes it, or with `error` set when the connection failed or was still open after 20 s.
 */
function untilClosed(socket: string, text: string): Promise<{ got: string; ms: number; error?: string }> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const sock = connect(socket);
    let got = '';
    let error: string | undefined;
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => (got += d));
    sock.on('error', (e) => (error ??= e.message));
    sock.on('close', () => resolve({ got, ms: performance.now() - t0, ...(error ? { error } : {}) }));
    // Not closed by the daemon in 20 s: it held the connection (node:http's own timeout is 300 s).
    setTimeout(() => {
      error ??= 'still open after 20 s';
      sock.destroy();
    }, 20_000).unref();
    sock.write(text);
  });
}

describe('a corrupt journal at start', () => {
  it('is not ready and says why, runs no recovery, answers ADD/CHECK 11 and spools DEL; a replaced database ingests the DEL', async () => {
    const daemon = new Daemon(env, { name: 'c1' });
    await daemon.start();
    const fx = join(env.dir, 'fx');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('cnet', '1.0.0', [fixturePlugin(fx, { sleepAddMs: 60_000 })]),
    ]);
    // An ADD cut off by kill -9: normal recovery would roll it back (a fixture DEL).
    const inFlight = shim({ command: 'ADD', containerId: 'cut', netns: env.netns() }, conf);
    await daemon.waitFor('the fixture ADD to run', () => fixtureCalls(fx, 'ADD').length === 1);
    await daemon.kill9();
    await inFlight;
    const dbPath = join(daemon.stateDir, 'steward.db');
    corruptJournal(dbPath);

    await daemon.start(30_000, '/healthz');
    // A client that stops halfway through its body is cut off at the body deadline, as by the
    // healthy daemon, not held until node:http's request timeout (checked at the end of this phase).
    const stalledWire = hintedWire('ADD', 'stalled', '/var/run/netns/steward-never-made', conf);
    const stalledHead = Object.entries(stalledWire.hints)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const stalled = untilClosed(
      daemon.socket,
      `POST /v1/cni HTTP/1.1\r\nHost: steward\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(stalledWire.body)}\r\n${stalledHead}\r\n` +
        stalledWire.body.slice(0, 40),
    );
    const ready = await daemon.get('/readyz');
    assert.equal(ready.status, 503);
    assert.equal(ready.json.ready, false);
    assert.match(
      ready.json.reason,
      new RegExp(`the journal database ${dbPath} (is corrupt \\(PRAGMA quick_check|cannot be opened)`),
    );
    const status = await daemon.get('/v1/status');
    assert.equal(status.json.ready, false);
    assert.equal(status.json.reason, ready.json.reason);
    assert.ok(status.json.journalProblems.length >= 1);
    // The same query keys as the healthy daemon's routes: a mistaken one is said, not served.
    const mistaken = await daemon.get('/v1/attachments?container=cut');
    assert.equal(mistaken.status, 400);
    assert.match(
      mistaken.json.error,
      /unknown query parameter "container": \/v1\/attachments takes containerId, state, pod, limit/,
    );
    assert.equal((await daemon.get('/v1/attachments?containerId=cut')).status, 503);
    assert.equal((await daemon.get('/healthz?verbose=1')).status, 400);
    // The CLI reads that shape too (it threw on the missing step counts), and --check does not
    // pass a journal it cannot read; the audit, which reads the journal, is refused with the reason.
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [join(REPO, 'bin/stewardd'), ...args, '--socket', daemon.socket], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    const shown = cli('status');
    assert.equal(shown.status, 0, shown.stderr);
    assert.match(shown.stdout, /NOT READY \(degraded: serving DELs to its spool only\)/);
    assert.ok(shown.stdout.includes(`not ready:    ${ready.json.reason}`), shown.stdout);
    const checked = cli('status', '--check');
    assert.equal(checked.status, 4, checked.stdout + checked.stderr);
    assert.match(checked.stderr, /degraded, abandoned teardown steps cannot be read: the journal database/);
    const audit = cli('audit');
    assert.equal(audit.status, 4, audit.stdout + audit.stderr);
    assert.match(audit.stderr, /503.*the journal database/s);
    await daemon.waitFor('the reason in the log', () =>
      readFileSync(daemon.logFile, 'utf8').includes('ran no recovery on it'),
    );
    const log = readFileSync(daemon.logFile, 'utf8');
    assert.equal(log.split('recovery finished').length - 1, 1, 'recovery ran on the corrupt journal');
    assert.deepEqual(fixtureCalls(fx, 'DEL'), [], 'recovery rolled back on a corrupt journal');

    const netns = env.netns();
    const add = await shim(
      { command: 'ADD', containerId: 'new', netns },
      { ...conf, delegates: [delegate('cnet', '1.0.0', [fixturePlugin(fx)])] },
    );
    assert.equal(add.code, 1);
    assert.equal(add.json.code, 11);
    assert.match(add.json.msg, /is corrupt|cannot be opened/);
    const check = await shim({ command: 'CHECK', containerId: 'cut', netns }, conf);
    assert.equal(check.json.code, 11);
    assert.equal(fixtureCalls(fx, 'ADD').length, 1, 'a plugin ran');

    const del = await shim({ command: 'DEL', containerId: 'cut', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    const spooled = readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json'));
    assert.equal(spooled.length, 1);
    const body = JSON.parse(readFileSync(join(daemon.spoolDir, spooled[0]!), 'utf8'));
    assert.equal(body.env.CNI_COMMAND, 'DEL');
    assert.equal(body.env.CNI_CONTAINERID, 'cut');
    assert.deepEqual(fixtureCalls(fx, 'DEL'), [], 'the DEL ran a plugin');
    assert.equal((await daemon.get('/v1/attachments')).status, 503);

    // A runtime repeating that DEL gets success each time, and it is spooled once; a shim of
    // another protocol version is refused with 108, and hints that disagree with the body with 4,
    // as the healthy daemon answers them (nothing spooled for either).
    for (let i = 0; i < 3; i++) assert.equal((await shim({ command: 'DEL', containerId: 'cut', netns }, conf)).code, 0);
    const wire = hintedWire('DEL', 'other', netns, conf);
    const skewed = await daemon.request('POST', '/v1/cni', wire.body, { ...wire.hints, [PROTOCOL_HEADER]: '99' });
    assert.equal(skewed.status, 409, skewed.text);
    assert.equal(skewed.json.code, 108);
    assert.match(
      skewed.json.msg,
      new RegExp(`^version skew: the shim speaks protocol 99, stewardd speaks protocol ${PROTOCOL_VERSION} `),
    );
    // A hinted request without the protocol header: a shim from before protocol versions, said so.
    const { [PROTOCOL_HEADER]: _protocol, ...unversionedHints } = wire.hints;
    const unversioned = await daemon.request('POST', '/v1/cni', wire.body, unversionedHints);
    assert.equal(unversioned.json?.code, 108, unversioned.text);
    assert.match(unversioned.json.msg, /the shim speaks protocol 1 \(a release before protocol versions\)/);
    const lying = await daemon.request('POST', '/v1/cni', wire.body, {
      ...wire.hints,
      [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
      [HINT_HEADERS.containerId]: 'someone-else',
    });
    assert.equal(lying.status, 400, lying.text);
    assert.equal(lying.json.code, 4);
    assert.equal(readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json')).length, 1);

    const cut = await stalled;
    assert.equal(cut.error, undefined, cut.got);
    assert.match(cut.got, /^HTTP\/1\.1 503 /, cut.got);
    assert.match(cut.got, /"code":11\b/, cut.got);
    assert.match(cut.got, /request body not received within 5000 ms/, cut.got);
    assert.ok(cut.ms >= 5000 - 20, `cut at ${cut.ms} ms, not before the deadline`);

    // The operator moves the database aside; the next start ingests the spooled DEL.
    await daemon.stop();
    for (const f of readdirSync(daemon.stateDir).filter((n) => n.startsWith('steward.db'))) {
      renameSync(join(daemon.stateDir, f), join(daemon.stateDir, `corrupt-${f}`));
    }
    await daemon.start(30_000);
    await daemon.waitFor(
      'the spool to drain (in the background)',
      () => readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json')).length === 0,
    );
    await daemon.waitFor('the spooled DEL to reach the fixture', () => fixtureCalls(fx, 'DEL').length === 1);
    await daemon.stop();
  });

  it("never keeps the node's config: a degraded daemon uninstalls on SIGTERM (always), and a manual uninstall goes on without the journal", async () => {
    // Seed 001: a dangling 00-steward.conflist stops every new pod. The journal being unreadable
    // must not stop the uninstall; only the teardowns it owed stay behind, in it.
    for (const how of ['sigterm', 'manual'] as const) {
      const confDir = join(env.dir, `un-${how}/etc/cni/net.d`);
      // A first run (which leaves the node as it is on SIGTERM) makes the journal to corrupt.
      const first = new Daemon(env, { name: `un-${how}-first`, args: ['--uninstall-on-delete', 'never'] });
      const daemon = new Daemon(env, {
        name: `un-${how}`,
        stateDir: first.stateDir,
        args: ['--cni-conf-dir', confDir, '--uninstall-on-delete', 'always'],
      });
      const tree: NodeTree = { ...nodeTree(join(env.dir, `un-${how}`)), stateDir: daemon.stateDir };
      writeLoopbackPrimary(tree.confDir);
      assert.equal((await installInto(tree, daemon.socket)).code, 0);
      await first.start();
      await first.stop();
      // Not even a database any more (garbage over its header): nothing can be read from it.
      writeFileSync(join(daemon.stateDir, 'steward.db'), randomBytes(8192));
      for (const f of ['steward.db-wal', 'steward.db-shm']) rmSync(join(daemon.stateDir, f), { force: true });
      if (how === 'sigterm') {
        await daemon.start(30_000, '/healthz'); // degraded
        await daemon.stop();
        assert.match(readFileSync(daemon.logFile, 'utf8'), /"msg":"uninstall done"/);
      } else {
        const r = await uninstallFrom(tree);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.match(r.stdout, /teardowns not drained: /);
      }
      assert.equal(existsSync(join(tree.confDir, '00-steward.conflist')), false, `${how}: the conflist is gone`);
      assert.equal(existsSync(join(tree.binDir, 'steward')), false, `${how}: the shim is gone`);
      assert.equal(existsSync(join(tree.confDir, '10-podnet.conflist')), true, `${how}: the primary stays`);
    }
  });
});
