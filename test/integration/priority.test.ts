// stewardd's own priority (`stewardd run --nice`, daemon/src/priority.ts): its threads above the work
// it starts (default -10), while its spawner, and so every delegate plugin, keeps the priority
// stewardd was started with, also a spawner started again whose first job was queued before it
// loaded; a --nice above the starting value without CAP_SYS_NICE (the spawner cannot go back down)
// still runs every plugin and says why in the log; `--nice off` leaves it as started; a bad value is
// refused.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { spawnerPid } from '../helpers/cri/residue.js';
import { REPO, TestEnv } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { skipOrFail } from '../helpers/runtimes/skip.js';
import { cniEnv, execPlugin } from '../helpers/shim.js';

const DIST_SHIM = join(REPO, 'dist/steward');
const env = new TestEnv('priority');
after(() => env.close());

const skip = skipOrFail(
  'the priority test',
  existsSync(DIST_SHIM) ? undefined : `${DIST_SHIM} is missing: npm run build`,
);

/** The nice value of each thread of `pid` (/proc/<pid>/task/<tid>/stat, field 19). */
function threadNices(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // After "pid (comm) ", fields start at 3 (state): the nice value, field 19, is the 17th.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}

/** The plugin spawner of stewardd `pid` (test/helpers/cri/residue.ts finds it by parent pid and cmdline). */
function spawner(pid: number): number {
  const p = spawnerPid(pid);
  assert.ok(p, `no spawner among stewardd's (${pid}) children`);
  return p;
}

/** One ADD + DEL through the shipped shim with the recording fixture; the nice value the fixture ran at. */
async function delegateNice(d: Daemon, name: string): Promise<number[]> {
  const dir = join(env.dir, `${name}-fixture`);
  const conf = stewardConf(d.socket, '1.0.0', [delegate('prio', '1.0.0', [fixturePlugin(dir, { recordEnv: true })])]);
  const netns = env.netns();
  for (const command of ['ADD', 'DEL']) {
    const r = await execPlugin(
      DIST_SHIM,
      cniEnv({ command, containerId: `prio-${name}`, netns }),
      JSON.stringify(conf),
    );
    assert.equal(r.code, 0, `${command}: ${r.stdout}`);
  }
  return readFileSync(join(dir, 'env.log'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { nice: number }).nice);
}

describe('stewardd --nice', { skip }, () => {
  // What the daemon is started with: this test's own priority.
  const base = getPriority();

  it('by default runs every thread of stewardd at -10, its spawner and the delegates at the priority it was started with', async () => {
    assert.notEqual(base, -10, 'the test must not itself run at the default');
    const d = new Daemon(env, { name: 'default' });
    await d.start();
    const pid = d.proc!.pid!;
    assert.deepEqual([...new Set(threadNices(pid))], [-10]);
    assert.deepEqual(await delegateNice(d, 'default'), [base, base]);
    // Read after the spawner has served a job: it is forked at stewardd's -10 and puts itself back
    // first thing (restoreBasePriority, before it takes a job), which a loaded machine can delay
    // past /readyz (it read -10 once, beside a spinning core).
    assert.deepEqual([...new Set(threadNices(spawner(pid)))], [base]);
    // Threads stewardd makes later (a request's work) take the main thread's priority.
    assert.deepEqual([...new Set(threadNices(pid))], [-10]);
    await d.stop();
  });

  it('--nice 5 lowers it instead, the delegates still at the priority stewardd was started with', async () => {
    const d = new Daemon(env, { name: 'five', args: ['--nice', '5'] });
    await d.start();
    const pid = d.proc!.pid!;
    assert.deepEqual([...new Set(threadNices(pid))], [5]);
    assert.deepEqual(await delegateNice(d, 'five'), [base, base]);
    await d.stop();
  });

  it('a spawner started again takes its first job at the priority stewardd was started with', async () => {
    const d = new Daemon(env, { name: 'respawn' });
    await d.start();
    const pid = d.proc!.pid!;
    assert.deepEqual(await delegateNice(d, 'respawn-1'), [base, base]);
    // The spawner killed: the next ADD forks a new one (at stewardd's -10) and queues its job before
    // the new process has loaded, so the job is the first thing it can take. This pins "restored
    // before its first job" (a restore deferred past a turn of its event loop fails it), not where
    // in the module's load the restore runs: Node delivers the job only once the module has run.
    const old = spawner(pid);
    process.kill(old, 'SIGKILL');
    await d.waitFor('stewardd to reap its killed spawner', async () => !existsSync(`/proc/${old}`), 10_000);
    assert.deepEqual(await delegateNice(d, 'respawn-2'), [base, base]);
    assert.notEqual(spawner(pid), old);
    await d.stop();
  });

  it('--nice above the starting value without CAP_SYS_NICE: plugins still run (at that value), and the log says why', async () => {
    // Root without CAP_SYS_NICE may raise a nice value but not lower it again: the spawner cannot go
    // back to the base priority, and must still serve.
    const above = base + 5;
    assert.ok(above <= 19, `the test runs at nice ${base}: no room above it`);
    const d = new Daemon(env, {
      name: 'nocap',
      args: ['--nice', String(above)],
      // Out of the inheritable set too: root regains at exec what that set holds.
      launcher: ['setpriv', '--inh-caps', '-sys_nice', '--bounding-set', '-sys_nice', '--'],
    });
    await d.start();
    const pid = d.proc!.pid!;
    assert.deepEqual([...new Set(threadNices(pid))], [above]);
    assert.deepEqual(await delegateNice(d, 'nocap'), [above, above], "no CAP_SYS_NICE: the delegates keep stewardd's");
    // Said from what the spawner found, not guessed from stewardd's capabilities.
    await d.waitFor("the spawner's report in the log", () =>
      readFileSync(d.logFile, 'utf8').includes(`the plugin spawner cannot go back to nice ${base}`),
    );
    await d.stop();
  });

  it('--nice off leaves stewardd as it was started', async () => {
    const d = new Daemon(env, { name: 'off', args: ['--nice', 'off'] });
    await d.start();
    assert.deepEqual([...new Set(threadNices(d.proc!.pid!))], [base]);
    await d.stop();
  });

  it('refuses a value outside -20..19, naming the flag', async () => {
    for (const bad of ['-21', '20', '1.5', 'high', '']) {
      const d = new Daemon(env, { name: `bad${bad.replace(/\W/g, '_')}`, args: [`--nice=${bad}`] });
      const { code, log } = await d.startExpectingExit();
      assert.notEqual(code, 0);
      assert.match(log, /--nice must be an integer from -20 to 19, or off/);
    }
  });
});
