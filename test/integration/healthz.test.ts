// A journal that cannot be written (a full tmpfs under the state dir) makes the daemon not ready
// (/readyz 503 with the reason) but not unhealthy: a restart frees no disk. /healthz fails (503,
// with the reason) when the plugin spawner is dead and cannot be restarted (its code gone, so every
// fork dies at once). Each recovers when the cause goes away. A spawner killed with -9 is simply
// restarted. Real stewardd, a real tmpfs mount, real kill -9.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  closeSync,
  copyFileSync,
  cpSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, fixtureCalls, sh } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { childrenOf } from '../helpers/children.js';

const env = new TestEnv('healthz');
after(() => env.close());

describe('journal cannot be written', () => {
  it('a full tmpfs under the state dir makes /readyz 503 with the reason, /healthz stays 200; freeing it makes the daemon ready again', async () => {
    const mnt = join(env.dir, 'tmpfs');
    mkdirSync(mnt);
    sh('mount', ['-t', 'tmpfs', '-o', 'size=6m,mode=0700', 'steward-test', mnt]);
    env.defer(() => {
      try {
        sh('umount', ['-l', mnt]);
      } catch {
        /* not mounted */
      }
    });
    const daemon = new Daemon(env, { name: 'full', stateDir: join(mnt, 'state') });
    await daemon.start();
    assert.equal((await daemon.get('/healthz')).status, 200);

    // Fill the filesystem to the last block.
    const filler = join(mnt, 'filler');
    const fd = openSync(filler, 'w');
    const chunk = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) writeSync(fd, chunk);
    } catch (e) {
      assert.equal((e as NodeJS.ErrnoException).code, 'ENOSPC');
    }
    try {
      for (;;) writeSync(fd, chunk, 0, 512);
    } catch {
      /* full to the byte */
    }
    closeSync(fd);

    // Looked at every 5 s.
    await daemon.waitFor('not ready', async () => (await daemon.get('/readyz')).status === 503, 10_000);
    const sick = await daemon.get('/readyz');
    assert.equal(sick.json.ready, false);
    assert.match(
      sick.json.problems.join('\n'),
      /steward\.db (has \d+ bytes free, less than the \d+ the journal needs|cannot be written)/,
    );
    const alive = await daemon.get('/healthz');
    assert.equal(alive.status, 200, `a restart frees no disk: ${alive.text}`);
    await daemon.waitFor('the log line', () =>
      readFileSync(daemon.logFile, 'utf8').includes('the journal cannot be written: not ready until it can'),
    );

    unlinkSync(filler);
    await daemon.waitFor('ready again', async () => (await daemon.get('/readyz')).status === 200, 10_000);
    assert.equal((await daemon.get('/healthz')).status, 200);
    await daemon.stop();
  });
});

describe('journal locked by another process at start', () => {
  it('the start-up line says it serves NOT ready and why, never "stewardd ready"; ready once the lock goes', async () => {
    const daemon = new Daemon(env, { name: 'locked' });
    await daemon.start();
    await daemon.stop();
    // Another process holds the journal's write lock (an operator's sqlite3 in a transaction).
    const holder = spawn(
      'python3',
      [
        '-c',
        'import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute("BEGIN EXCLUSIVE")\nprint("locked", flush=True)\nsys.stdin.read()',
        join(daemon.stateDir, 'steward.db'),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    env.defer(() => void holder.kill());
    await once(holder.stdout, 'data');
    await daemon.start(20_000, '/healthz');
    await daemon.waitFor('the start-up line', () =>
      /stewardd serves, but is NOT ready/.test(readFileSync(daemon.logFile, 'utf8')),
    );
    const lines = readFileSync(daemon.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'));
    const since = lines
      .map((l) => JSON.parse(l))
      .slice(lines.findLastIndex((l) => l.includes('the journal cannot be written')));
    const serving = since.find((l) => /stewardd serves, but is NOT ready/.test(l.msg));
    assert.match(serving.problems.join('\n'), /cannot be written/);
    assert.ok(!since.some((l) => l.msg === 'stewardd ready'), 'no "ready" line while not ready');
    assert.equal((await daemon.get('/readyz')).status, 503);
    holder.stdin.end();
    await daemon.waitFor('ready once the lock goes', async () => (await daemon.get('/readyz')).status === 200, 15_000);
    await daemon.stop();
  });
});

describe('plugin spawner', () => {
  it('killed with -9: /healthz restarts it and stays 200, and plugins still run', async () => {
    const daemon = new Daemon(env, { name: 'kill' });
    await daemon.start();
    assert.equal((await daemon.get('/healthz')).status, 200);
    const [spawner] = childrenOf(daemon.proc!.pid!, 'spawner-child');
    assert.ok(spawner, 'no spawner process');
    process.kill(spawner, 'SIGKILL');
    await daemon.waitFor('the spawner to die', () => !childrenOf(daemon.proc!.pid!, 'spawner-child').includes(spawner));
    const res = await daemon.get('/healthz');
    assert.equal(res.status, 200, res.text);
    const again = childrenOf(daemon.proc!.pid!, 'spawner-child');
    assert.equal(again.length, 1);
    assert.notEqual(again[0], spawner);
    const fx = join(env.dir, 'fx-kill');
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('knet', '1.0.0', [fixturePlugin(fx)])]);
    const add = await shim({ command: 'ADD', containerId: 'after-kill', netns: env.netns() }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(fixtureCalls(fx, 'ADD').length, 1);
    await daemon.stop();
  });

  it('dead and impossible to restart (every new spawner dies at once): /healthz is 503 with the reason, 200 once it can start again', async () => {
    // A copy of the daemon's built tree, so the spawner's code can be taken away from this daemon only.
    const tree = join(env.dir, 'tree');
    mkdirSync(join(tree, 'bin'), { recursive: true });
    copyFileSync(join(REPO, 'bin/stewardd'), join(tree, 'bin/stewardd'));
    copyFileSync(join(REPO, 'package.json'), join(tree, 'package.json'));
    mkdirSync(join(tree, 'daemon'));
    copyFileSync(join(REPO, 'daemon/package.json'), join(tree, 'daemon/package.json'));
    cpSync(join(REPO, 'daemon/dist'), join(tree, 'daemon/dist'), { recursive: true });
    symlinkSync(join(REPO, 'node_modules'), join(tree, 'node_modules'));
    const daemon = new Daemon(env, { name: 'dead', exe: join(tree, 'bin/stewardd') });
    await daemon.start();
    assert.equal((await daemon.get('/healthz')).status, 200);

    const child = join(tree, 'daemon/dist/plugins/spawner-child.js');
    const saved = readFileSync(child);
    rmSync(child);
    const [spawner] = childrenOf(daemon.proc!.pid!, 'spawner-child');
    assert.ok(spawner);
    process.kill(spawner, 'SIGKILL');
    const sick = await daemon.get('/healthz');
    assert.equal(sick.status, 503, sick.text);
    assert.match(
      sick.json.problems.join('\n'),
      /the plugin spawner is dead and could not be restarted: (.*exited|cannot reach the plugin spawner)/,
    );
    // The probe command kubelet runs says the same.
    const probe = sh('sh', [
      '-c',
      `node ${join(REPO, 'bin/stewardd')} probe --socket ${daemon.socket} /healthz; echo "exit=$?"`,
    ]);
    assert.match(probe, /exit=[1-9]/);

    copyFileSync(join(REPO, 'daemon/dist/plugins/spawner-child.js'), child);
    assert.deepEqual(readFileSync(child), saved);
    const well = await daemon.get('/healthz');
    assert.equal(well.status, 200, well.text);
    await daemon.stop();
  });
});
