// No plugin outlives its daemon, and nothing a plugin leaves behind outlives the plugin: real
// stewardd processes, the shim executed as a process, the fixture plugin delegating its IPAM to
// Debian's host-local (a real lease), and /proc read for what is still running.
//  - A grandchild a plugin leaves holding stdout is killed when the plugin exits (its process group).
//  - kill -9 of stewardd during a slow ADD: the spawner kills the plugin's group; kill -9 of stewardd
//    and its spawner together: the plugin runs on as an orphan, and the next stewardd's recovery kills
//    it (from the process the journal recorded for the step) before it rolls the attachment back.
//    Either way the rollback's DEL never runs while the ADD does, and no lease is left.
// PLUGIN_KILL9_ROUNDS sets the number of rounds (default 20, alternating the two kinds of kill).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../helpers/sqlite.js';
import { Daemon } from '../helpers/daemon.js';
import { FIXTURE_BIN, TestEnv, fixtureCalls, leases } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { alive, pidWritten, readPid, until } from '../helpers/processes.js';
import { spawn } from 'node:child_process';
import { runProcess } from '../../daemon/src/plugins/process.js';
import { describeProcess, stopGroups } from '../../daemon/src/plugins/process-group.js';

const env = new TestEnv('plugin-life');
after(() => env.close());

const ROUNDS = Number(process.env.PLUGIN_KILL9_ROUNDS ?? 20);
const PER_ROUND = 3;
/** How long the fixture's ADD sleeps before it takes its host-local lease (the test kills it meanwhile). */
const SLEEP_ADD_MS = 3000;
/** The kill -9 rounds' ADD sleep: longer than any restart, so only a kill can stop it. */
const ORPHAN_SLEEP_MS = 30_000;

/** The pids of a process's live children whose command line contains `needle`. */
function childrenOf(ppid: number, needle: string): number[] {
  const out: number[] = [];
  for (const n of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(n)) continue;
    try {
      const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[1]) !== ppid || f[0] === 'Z') continue;
      if (readFileSync(`/proc/${n}/cmdline`, 'utf8').includes(needle)) out.push(Number(n));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Kills (at cleanup) every process group a test's fixture recorded, should an assertion fail first. */
function killRecorded(dir: string): void {
  if (!existsSync(dir)) return;
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.pid'))) {
    try {
      process.kill(-readPid(join(dir, f)), 'SIGKILL');
    } catch {
      /* gone */
    }
    try {
      process.kill(readPid(join(dir, f)), 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

describe('plugin process lifetime', () => {
  it('a grandchild a plugin leaves holding stdout is killed when the plugin exits (process.ts)', async () => {
    const fx = join(env.dir, 'gc-direct');
    env.defer(() => killRecorded(fx));
    const o = await runProcess({
      file: join(FIXTURE_BIN, 'steward-fixture'),
      env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'gc-direct', CNI_IFNAME: 'eth0', PATH: process.env.PATH ?? '' },
      stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'n', stateDir: fx, leaveGrandchild: true }),
      timeoutMs: 20_000,
      maxOutputBytes: 1 << 20,
    });
    assert.equal(o.code, 0, o.stderr);
    assert.equal(JSON.parse(o.stdout).cniVersion, '1.0.0');
    const grandchild = readPid(join(fx, 'grandchild-gc-direct.pid'));
    await until(`grandchild ${grandchild} to die with its plugin`, () => !alive(grandchild), 2000);
  });

  it('a grandchild left holding stdout by a delegate is killed, through the daemon', async () => {
    const daemon = new Daemon(env, { name: 'grandchild' });
    await daemon.start();
    const fx = join(env.dir, 'gc-daemon');
    env.defer(() => killRecorded(fx));
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('gcnet', '1.0.0', [fixturePlugin(fx, { leaveGrandchild: true })]),
    ]);
    const r = await shim({ command: 'ADD', containerId: 'gc-d', netns: env.netns() }, conf);
    assert.equal(r.code, 0, r.stdout);
    const grandchild = readPid(join(fx, 'grandchild-gc-d.pid'));
    await until(`grandchild ${grandchild} to die with its plugin`, () => !alive(grandchild), 2000);
    await daemon.stop();
  });

  it('a journaled process group is killed only when pid, start time, boot id and PID namespace all match', async () => {
    // A group leader that exits at once, leaving a member (the case of a plugin killed mid-way
    // whose helper lives on): the group is still found by its leader's name.
    const sh = spawn('sh', ['-c', 'sleep 300 & echo $!'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const name = describeProcess(sh.pid as number);
    assert.ok(name, '/proc names the process');
    const member = await new Promise<number>((r) => sh.stdout.once('data', (b: Buffer) => r(Number(String(b).trim()))));
    env.defer(() => {
      try {
        process.kill(member, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    await until('the leader to exit', () => !alive(sh.pid as number));
    assert.ok(alive(member));
    // A gone leader's group is matched by members started at or after its recorded start: another
    // incarnation of that pid started after the member. (Leader + 1 tick raced: the member itself
    // may start a tick after its leader.)
    const memberStart = describeProcess(member)?.startTime;
    assert.ok(memberStart !== undefined, '/proc names the member');
    for (const other of [
      { ...name, startTime: memberStart + 1 },
      { ...name, bootId: 'another-boot' },
      { ...name, pidNamespace: 'pid:[1]' },
    ]) {
      const out = await stopGroups([other], { timeoutMs: 500 });
      assert.deepEqual(out, { killed: [], survivors: [] });
      assert.ok(alive(member), `left alone for ${JSON.stringify(other)}`);
    }
    const out = await stopGroups([name], { timeoutMs: 5000 });
    assert.deepEqual(out, { killed: [name], survivors: [] });
    assert.equal(alive(member), false);
  });

  /** How many of these containers' steps have their plugin's process journalled (schema 3). */
  const journalledPlugins = (daemon: Daemon, ids: string[]): number => {
    const db = openDatabase(join(daemon.stateDir, 'steward.db'), { readonly: true, fileMustExist: true });
    try {
      const q = db.prepare(
        `SELECT count(*) AS n FROM steps s JOIN attachments a ON a.id = s.attachment_id
          WHERE a.container_id = ? AND s.plugin_pid IS NOT NULL`,
      );
      return ids.reduce((n, id) => n + (q.get(id) as { n: number }).n, 0);
    } finally {
      db.close();
    }
  };

  it('a spawner killed during ADD: stewardd kills its plugin, then fails and rolls back the ADD', async () => {
    const daemon = new Daemon(env, { name: 'spawner' });
    await daemon.start();
    const fx = join(env.dir, 'sp-fx');
    env.defer(() => killRecorded(fx));
    const dataDir = join(env.dir, 'sp-ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('splife', '1.0.0', [
        fixturePlugin(fx, {
          sleepAddMs: SLEEP_ADD_MS,
          delegateIpam: true,
          trackAddPid: true,
          ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: env.subnet() }]] },
        }),
      ]),
    ]);
    const startedAt = Date.now();
    const add = shim({ command: 'ADD', containerId: 'sp-1', netns: env.netns() }, conf);
    const pidFile = join(fx, 'add-sp-1-eth0.pid');
    await until('the ADD to be running', () => pidWritten(pidFile));
    // stewardd kills only the plugins whose start the spawner reported over IPC (it journals them
    // as it learns of them), and that report can lag the pid file on a loaded machine.
    await until('the running plugin to be journalled', () => journalledPlugins(daemon, ['sp-1']) === 1);
    const plugin = readPid(pidFile);
    assert.ok(alive(plugin), 'the ADD is running when its spawner is killed');
    const spawners = childrenOf(daemon.proc?.pid as number, 'spawner-child');
    assert.equal(spawners.length, 1);
    process.kill(spawners[0] as number, 'SIGKILL');
    const r = await add;
    assert.equal(r.json?.code, 100, r.stdout);
    assert.match(r.json.msg, /spawner exited/);
    assert.equal(alive(plugin), false, 'the plugin died with its spawner');
    // The rollback runs right after the answer (issue 19).
    await daemon.waitFor(
      'the rollback after the answer',
      async () => (await daemon.attachment('sp-1')).state === 'deleted',
    );
    assert.equal((await daemon.attachment('sp-1')).state, 'deleted');
    assert.equal(existsSync(join(fx, 'del-while-add-running-sp-1')), false, 'rolled back while the ADD ran');
    await new Promise((r) => setTimeout(r, Math.max(0, startedAt + SLEEP_ADD_MS + 300 - Date.now())));
    assert.equal(existsSync(join(fx, 'added-sp-1-eth0')), false, 'the ADD ran to its end');
    assert.deepEqual(leases(dataDir, 'splife'), []);
    // A new spawner serves the next ADD.
    const again = await shim({ command: 'ADD', containerId: 'sp-2', netns: env.netns() }, conf);
    assert.equal(again.code, 0, again.stdout);
    await daemon.stop();
  });

  it('SIGTERM: a plugin still running when --shutdown-grace is over is killed, and rolled back at the next start', async () => {
    const daemon = new Daemon(env, { name: 'term', args: ['--shutdown-grace', '1', '--uninstall-on-delete', 'never'] });
    await daemon.start();
    const fx = join(env.dir, 'term-fx');
    env.defer(() => killRecorded(fx));
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('termnet', '1.0.0', [fixturePlugin(fx, { sleepAddMs: 60_000, trackAddPid: true })]),
    ]);
    const add = shim({ command: 'ADD', containerId: 'term-1', netns: env.netns() }, conf);
    const pidFile = join(fx, 'add-term-1-eth0.pid');
    await until('the ADD to be running', () => pidWritten(pidFile));
    const plugin = readPid(pidFile);
    await daemon.stop();
    await add;
    await until(`plugin ${plugin} to be killed with its daemon`, () => !alive(plugin), 5000);
    await daemon.start();
    assert.equal((await daemon.attachment('term-1')).state, 'deleted');
    assert.equal(existsSync(join(fx, 'del-while-add-running-term-1')), false);
    await daemon.stop();
  });

  it(`kill -9 of stewardd during ADD (${ROUNDS} rounds): no plugin survives, rollback only after it is gone, no lease left`, async () => {
    const daemon = new Daemon(env, { name: 'k9', args: ['--retry-base-ms', '200', '--retry-max-ms', '1000'] });
    await daemon.start();
    const fx = join(env.dir, 'k9-fx');
    env.defer(() => killRecorded(fx));
    const dataDir = join(env.dir, 'k9-ipam');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('k9life', '1.0.0', [
        fixturePlugin(fx, {
          sleepAddMs: ORPHAN_SLEEP_MS,
          delegateIpam: true,
          trackAddPid: true,
          ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: env.subnet() }]] },
        }),
      ]),
    ]);
    const netns = env.netns();
    const counts = { spawnerKilled: 0, recoveryKilled: 0 };

    for (let round = 0; round < ROUNDS; round++) {
      // Odd rounds kill the spawner with stewardd: only the journal can name the plugins then.
      const withSpawner = round % 2 === 1;
      const ids = Array.from({ length: PER_ROUND }, (_, k) => `r${round}-${k}`);
      const adds = ids.map((id) => shim({ command: 'ADD', containerId: id, netns }, conf));
      const pidFiles = ids.map((id) => join(fx, `add-${id}-eth0.pid`));
      await until('every ADD to be running', () => pidFiles.every(pidWritten));
      // The spawner reports each start over IPC and stewardd journals it; on a loaded machine that
      // can lag the plugin's own pid file, so wait for the journal to name every plugin (a plugin
      // killed with both before it is journalled is the window docs/teardown.md names).
      await until('every running plugin to be journalled', () => journalledPlugins(daemon, ids) === ids.length);
      const plugins = pidFiles.map(readPid);
      assert.ok(plugins.every(alive), 'the ADDs are running when stewardd is killed');

      const daemonPid = daemon.proc?.pid as number;
      const spawners = childrenOf(daemonPid, 'spawner-child');
      assert.equal(spawners.length, 1, `one spawner under stewardd ${daemonPid}`);
      // kill(2) of SIGKILL returns only once stewardd can run no more code, so it cannot react to
      // its spawner's death. The spawner is stopped first: on a loaded machine this process can be
      // descheduled between two kill(2)s, and a spawner left running in between sees its daemon gone
      // and kills its plugins (the other rounds' path), which is not what these rounds are about.
      if (withSpawner) process.kill(spawners[0] as number, 'SIGSTOP');
      const killed = daemon.kill9();
      if (withSpawner) process.kill(spawners[0] as number, 'SIGKILL');
      await killed;
      for (const r of await Promise.all(adds)) assert.notEqual(r.code, 0, 'an ADD cut off by kill -9 fails');

      if (withSpawner) {
        // Orphaned: nothing but the next stewardd's recovery will stop them.
        assert.ok(plugins.every(alive), 'with the spawner killed too, the plugins run on as orphans');
        await daemon.start();
        counts.recoveryKilled += plugins.length;
      } else {
        // The spawner notices its daemon is gone, kills every plugin group it started, and exits.
        await until(
          'the spawner to kill its plugins and exit',
          () => !plugins.some(alive) && !alive(spawners[0] as number),
        );
        counts.spawnerKilled += plugins.length;
        await daemon.start();
      }
      // Ready means recovered: every plugin is gone, and every cut-off ADD rolled back.
      for (const pid of plugins) assert.equal(alive(pid), false, `plugin ${pid} survived stewardd's restart`);
      for (const id of ids) {
        const a = await daemon.attachment(id);
        assert.equal(a.state, 'deleted', `${id} rolled back: ${JSON.stringify(a)}`);
        assert.equal(fixtureCalls(fx, 'DEL').filter((l) => l.startsWith(`DEL ${id} `)).length >= 1, true);
        assert.equal(
          existsSync(join(fx, `del-while-add-running-${id}`)),
          false,
          `${id} was rolled back while its ADD ran`,
        );
      }
      // Each plugin would sleep far longer than a restart takes (so a slow restart on a loaded
      // machine cannot let it finish first); it is dead now, so it can never write its marker
      // later. None did, and no lease is left.
      for (const id of ids)
        assert.equal(existsSync(join(fx, `added-${id}-eth0`)), false, `the ADD of ${id} ran to its end`);
      assert.deepEqual(leases(dataDir, 'k9life'), [], `round ${round}: no lease left`);
    }
    const status = await daemon.status();
    const liveRows =
      (status.attachments.adding ?? 0) + (status.attachments.added ?? 0) + (status.attachments.deleting ?? 0);
    process.stdout.write(
      `# plugin kill -9 rounds: ${ROUNDS}, plugins killed by the spawner ${counts.spawnerKilled}, by recovery ${counts.recoveryKilled}, leases left ${leases(dataDir, 'k9life').length}, live rows ${liveRows}\n`,
    );
    assert.equal(liveRows, 0);
    assert.equal(status.steps.abandoned ?? 0, 0);
    await daemon.stop();
  });
});
