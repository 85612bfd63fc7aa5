// Spool ingest reads only regular files, opened without following links, never blocking, never
// more than the size cap: a symlink to /dev/zero, a FIFO, an oversized file and a directory, all
// named *.json, go to spool/rejected/ with a log line, and a valid spooled DEL beside them is still
// ingested. Real stewardd, real shim spooling, real bridge + host-local.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { MAX_NETCONF_BYTES } from '@cni-steward/shared';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, leases, linkExists, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('spoolx');
after(() => env.close());

const jsonIn = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.json'));

/** Plants the four hostile entries; returns their names. */
function plant(spool: string, tag: string): string[] {
  mkdirSync(spool, { recursive: true });
  const names = [`000-${tag}-zero.json`, `000-${tag}-fifo.json`, `000-${tag}-huge.json`, `000-${tag}-dir.json`];
  symlinkSync('/dev/zero', join(spool, names[0]!));
  sh('mkfifo', [join(spool, names[1]!)]);
  // Valid JSON, so only the size can reject it.
  writeFileSync(join(spool, names[2]!), `{"pad":"${'x'.repeat(MAX_NETCONF_BYTES + 64 * 1024)}"}`);
  mkdirSync(join(spool, names[3]!));
  return names;
}

describe('hostile spool entries', () => {
  it('at start: the daemon becomes ready, the hostile entries are moved aside with a log line, the valid DEL is ingested', async () => {
    const daemon = new Daemon(env, { name: 'start' });
    await daemon.start();
    const dataDir = join(env.dir, 'ipam-start');
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('hostnet', '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'spx', netns }, conf)).code, 0);
    await daemon.stop();
    const del = await shim({ command: 'DEL', containerId: 'spx', netns }, conf);
    assert.equal(del.code, 0, del.stdout);
    const names = plant(daemon.spoolDir, 'start');
    assert.equal(jsonIn(daemon.spoolDir).length, 5);

    await daemon.start(60_000);
    // Drained in the background once the socket is open.
    await daemon.waitFor('the spool to drain', () => jsonIn(daemon.spoolDir).length === 0);
    assert.deepEqual(jsonIn(daemon.spoolDir), []);
    assert.deepEqual(leases(dataDir, 'hostnet'), [], 'the valid spooled DEL was not ingested');
    assert.equal(linkExists(netns, 'eth0'), false);
    const rejected = join(daemon.spoolDir, 'rejected');
    assert.deepEqual(readdirSync(rejected).sort(), [...names].sort());
    assert.ok(lstatSync(join(rejected, names[0]!)).isSymbolicLink());
    assert.ok(lstatSync(join(rejected, names[1]!)).isFIFO());
    assert.ok(lstatSync(join(rejected, names[3]!)).isDirectory());
    // pino may write asynchronously: wait for the lines rather than reading once.
    await daemon.waitFor(
      'the rejection log lines',
      () => (readFileSync(daemon.logFile, 'utf8').match(/spooled DEL rejected/g) ?? []).length >= 4,
    );
    const log = readFileSync(daemon.logFile, 'utf8');
    for (const why of [
      'is a symbolic link',
      'is a FIFO',
      `more than the ${MAX_NETCONF_BYTES + 64 * 1024}`,
      'is a directory',
    ]) {
      assert.ok(log.includes(why), `no log line saying "${why}"`);
    }
    assert.equal((await daemon.get('/healthz')).status, 200);
    await daemon.stop();
  });

  it('while running: a FIFO (with a writer holding it open and silent) never stalls /healthz, and is moved aside', async () => {
    const daemon = new Daemon(env, { name: 'live' });
    await daemon.start();
    const spool = daemon.spoolDir;
    mkdirSync(spool, { recursive: true });
    const fifo = join(spool, '000-held-fifo.json');
    sh('mkfifo', [fifo]);
    // A writer that opens the FIFO and never writes nor closes it (a blocking read would hang forever).
    const { spawn } = await import('node:child_process');
    const writer = spawn('sh', ['-c', `exec 3>"${fifo}"; sleep 120`], { stdio: 'ignore' });
    env.defer(() => {
      writer.kill('SIGKILL');
    });
    const planted = plant(spool, 'live');
    const rejected = join(spool, 'rejected');
    const deadline = Date.now() + 30_000;
    let healthy = 0;
    while (Date.now() < deadline && !(existsSync(rejected) && readdirSync(rejected).length === 5)) {
      const h = await daemon.get('/healthz');
      assert.equal(h.status, 200);
      healthy++;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(readdirSync(rejected).sort(), ['000-held-fifo.json', ...planted].sort());
    assert.ok(healthy > 0);
    // Still serving after ingest.
    assert.equal((await daemon.get('/healthz')).status, 200);
    assert.deepEqual(jsonIn(spool), []);
    await daemon.stop();
  });

  it('a DEL spooled onto a nearly full disk is written whole or not at all: a short write is never a spool file', async () => {
    // write(2) on a nearly full filesystem takes part of the bytes and answers with the count, no
    // error: a spool file cut there is a DEL the daemon rejects at ingest (an IP leaked), while the
    // shim had answered the runtime success.
    const spool = join(env.dir, 'full-spool');
    mkdirSync(spool, { recursive: true });
    sh('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', spool]);
    env.defer(() => {
      try {
        sh('umount', ['-l', spool]);
      } catch {
        /* not mounted */
      }
    });
    const conf = {
      ...stewardConf(join(env.dir, 'nobody', 'run', 's.sock'), '1.0.0', [
        delegate('fullnet', '1.0.0', [{ type: 'loopback' }]),
      ]),
      spoolDir: spool,
      // ~40 KB: one fits the 64 KiB disk, the second finds ~24 KB free.
      pad: 'y'.repeat(40_000),
    };
    const answers = [];
    for (const id of ['full-a', 'full-b', 'full-c'])
      answers.push(await shim({ command: 'DEL', containerId: id }, conf));
    assert.equal(answers[0]!.code, 0, answers[0]!.stdout);
    for (const a of answers.slice(1)) {
      // No room: the runtime hears "try again later" (it retries the DEL), not a success.
      assert.equal(a.json?.code, 11, a.stdout);
      assert.match(a.json.msg, /could not be spooled/);
    }
    // Whatever is in the spool parses whole, and no temp file is left for nobody to remove.
    const files = readdirSync(spool);
    assert.deepEqual(
      files.filter((f) => !f.endsWith('.json')),
      [],
      files.join(' '),
    );
    assert.equal(jsonIn(spool).length, 1);
    for (const f of jsonIn(spool)) {
      const body = JSON.parse(readFileSync(join(spool, f), 'utf8'));
      assert.equal(body.config.pad.length, 40_000);
      assert.equal(body.env.CNI_CONTAINERID, 'full-a');
    }
  });
});

describe('a spool dir that is the state dir or the CNI conf dir', () => {
  it('run and install refuse it as an invalid option (exit 1), naming what it is; nothing is written', async () => {
    const daemon = new Daemon(env, { name: 'shared-run' });
    const confDir = join(env.dir, 'shared-run-conf');
    mkdirSync(confDir, { recursive: true });
    for (const spoolDir of [daemon.stateDir, confDir]) {
      const d = new Daemon(env, { name: 'shared-run', args: ['--spool-dir', spoolDir, '--cni-conf-dir', confDir] });
      const r = await d.startExpectingExit();
      assert.equal(r.code, 1, r.log);
      assert.match(r.log, /--spool-dir .* cannot be a spool dir: it is the (state dir|CNI conf dir) /);
    }
    const stateDir = join(env.dir, 'shared-install-state');
    const bin = join(env.dir, 'shared-install-bin');
    const install = spawnSync(
      process.execPath,
      [
        join(REPO, 'bin/stewardd'),
        'install',
        '--state-dir',
        stateDir,
        '--spool-dir',
        stateDir,
        '--cni-conf-dir',
        confDir,
        '--cni-bin-dir',
        bin,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(install.status, 1, install.stdout + install.stderr);
    assert.match(install.stderr, /--spool-dir .* cannot be a spool dir: it is the state dir /);
    assert.equal(existsSync(join(stateDir, 'install.json')), false);
    assert.deepEqual(readdirSync(confDir), []);
  });

  it('an install record naming the state dir as the spool dir: not ready, saying so; install.json stays where it is', async () => {
    const daemon = new Daemon(env, { name: 'shared-record' });
    mkdirSync(daemon.stateDir, { recursive: true });
    const record = join(daemon.stateDir, 'install.json');
    const text = JSON.stringify({
      version: 1,
      state: 'installed',
      cniBinDir: join(env.dir, 'shared-record-bin'),
      cniConfDir: join(env.dir, 'shared-record-conf'),
      socket: daemon.socket,
      spoolDir: daemon.stateDir,
      shim: { path: join(env.dir, 'shared-record-bin', 'steward'), sha256: '0'.repeat(64) },
    });
    writeFileSync(record, text);
    await daemon.start(20_000, '/healthz');
    await daemon.waitFor('not ready, naming the state dir', async () =>
      /cannot be drained: it is the state dir/.test((await daemon.get('/readyz')).text),
    );
    await new Promise((r) => setTimeout(r, 2500)); // two of the dirs' rounds
    assert.equal(readFileSync(record, 'utf8'), text, 'install.json untouched');
    assert.equal(existsSync(join(daemon.stateDir, 'rejected')), false);
    await daemon.stop();
  });
});
