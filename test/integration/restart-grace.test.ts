// A planned restart of stewardd never turns the node NotReady (issue 37), with real processes: the
// shim executed as the runtime executes it, stewardd stopped with SIGTERM (as a DaemonSet's rolling
// update does) and started again on the same state dir, or killed with kill -9. containerd 2.x turns
// every failed CNI STATUS into NetworkReady=false at once; here STATUS runs every 200 ms.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { RESTART_RECORD_SUFFIX } from '@cni-steward/shared';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';
import { stewardd } from '../helpers/node-tree.js';

const env = new TestEnv('restart-grace');
after(() => env.close());

const STATUS_ENV = { CNI_COMMAND: 'STATUS', CNI_PATH: '/usr/lib/cni' };
// The STATUS tests' delegates are at 1.0.0, so stewardd answers STATUS itself (a delegate STATUS
// runs only at 1.1.0): what they time is the restart, not how fast a Node fixture starts (its
// first STATUS after a start could miss the shim's 750 ms bound on a loaded machine).
const STATUS_PERIOD_MS = 200;
/** design.md: a death is told within a second. */
const DEATH_TOLD_MS = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface StatusSample {
  at: number;
  code: number | null;
  msg?: string;
}

/** STATUS through the shim every STATUS_PERIOD_MS until stopped, as containerd 2.x's loop runs it. */
function statusLoop(conf: unknown): { stop(): Promise<StatusSample[]> } {
  const samples: StatusSample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = performance.now();
      const r = await shim({ command: 'STATUS', env: STATUS_ENV }, conf);
      samples.push({ at, code: r.code, msg: r.json?.msg });
      await sleep(Math.max(0, STATUS_PERIOD_MS - (performance.now() - at)));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return samples;
    },
  };
}

const notReady = (s: StatusSample[]) => s.filter((x) => x.code !== 0);

describe('a planned restart keeps the node Ready; a death is still told within a second', () => {
  it('SIGTERM and a successor 2 s later on the same state dir: STATUS never reads not ready, and the record is gone once it serves', async () => {
    const daemon = new Daemon(env, { name: 'rolling' });
    await daemon.start();
    const conf = stewardConf(daemon.socket, '1.1.0', [
      delegate('rnet', '1.0.0', [fixturePlugin(join(env.dir, 'rolling-fx'))]),
    ]);
    const loop = statusLoop(conf);
    await sleep(600);
    await daemon.stop();
    assert.ok(existsSync(daemon.socket + RESTART_RECORD_SUFFIX), 'the restart record is written');
    await sleep(2000);
    await daemon.start();
    await sleep(600);
    const samples = await loop.stop();
    assert.ok(samples.length >= 10, `${samples.length} STATUS calls`);
    assert.deepEqual(notReady(samples), [], 'STATUS read not ready during a planned restart');
    assert.equal(existsSync(daemon.socket + RESTART_RECORD_SUFFIX), false, 'the successor removed the record');
    await daemon.stop();
  });

  it('kill -9 and no successor: STATUS reads not ready within 1 s, and stewardd status says so once it is back', async () => {
    const daemon = new Daemon(env, { name: 'killed' });
    await daemon.start();
    const conf = stewardConf(daemon.socket, '1.1.0', [
      delegate('knet', '1.0.0', [fixturePlugin(join(env.dir, 'killed-fx'))]),
    ]);
    assert.equal((await shim({ command: 'STATUS', env: STATUS_ENV }, conf)).code, 0);
    const loop = statusLoop(conf);
    await sleep(400);
    const killedAt = performance.now();
    await daemon.kill9();
    await sleep(DEATH_TOLD_MS + STATUS_PERIOD_MS);
    const samples = await loop.stop();
    const first = samples.find((s) => s.code !== 0 && s.at >= killedAt);
    assert.ok(first, 'no STATUS read not ready after kill -9');
    assert.ok(first.at - killedAt < DEATH_TOLD_MS, `told after ${Math.round(first.at - killedAt)} ms`);
    assert.match(first.msg ?? '', /unreachable/);

    await daemon.start();
    const s = await stewardd(['status', '--socket', daemon.socket]);
    assert.match(s.stdout, /STATUS: +last not ready .*, unreachable \(answered by shim: stewardd is unreachable at /);
    const metrics = (await daemon.get('/metrics')).text;
    assert.match(metrics, /steward_status_last_not_ready_timestamp_seconds\{why="unreachable",from="shim"\} \d/);
    await daemon.stop();
  });

  it('SIGTERM whose successor never starts: ready for the grace, then not ready within the grace plus 1 s, said to be a grace expired', async () => {
    const graceS = 2;
    const daemon = new Daemon(env, { name: 'orphan', args: ['--restart-grace', String(graceS)] });
    await daemon.start();
    const conf = stewardConf(daemon.socket, '1.1.0', [
      delegate('onet', '1.0.0', [fixturePlugin(join(env.dir, 'orphan-fx'))]),
    ]);
    const loop = statusLoop(conf);
    await sleep(400);
    await daemon.stop();
    const stoppedAt = performance.now();
    await sleep(graceS * 1000 + DEATH_TOLD_MS + STATUS_PERIOD_MS);
    const samples = await loop.stop();
    const within = samples.filter((s) => s.at < stoppedAt + graceS * 1000 - STATUS_PERIOD_MS);
    assert.deepEqual(notReady(within), [], 'not ready inside the grace');
    const first = samples.find((s) => s.code !== 0);
    assert.ok(first, 'never told not ready after the grace');
    assert.ok(
      first.at - stoppedAt <= graceS * 1000 + DEATH_TOLD_MS,
      `told ${Math.round(first.at - stoppedAt)} ms after the stop`,
    );
    await daemon.start();
    const s = (await daemon.status()) as { statusNotReady?: { why: string; from: string } };
    assert.deepEqual([s.statusNotReady?.why, s.statusNotReady?.from], ['grace expired', 'shim']);
    await daemon.stop();
  });

  it('two planned restarts during 200 ADD/DEL pairs through the shim: no ADD fails, nothing is left', async () => {
    const daemon = new Daemon(env, { name: 'pairs' });
    await daemon.start();
    const fx = join(env.dir, 'pairs-fx');
    const conf = stewardConf(daemon.socket, '1.1.0', [delegate('pnet', '1.1.0', [fixturePlugin(fx)])]);
    const pairs = 200;
    const failed: string[] = [];
    // One namespace for all: the fixture delegate creates no interface, it records its calls.
    const netns = env.netns();
    const restarts: Promise<void>[] = [];
    for (let i = 0; i < pairs; i++) {
      if (i === 60 || i === 140)
        restarts.push(
          (async () => {
            await daemon.stop();
            await sleep(500);
            await daemon.start();
          })(),
        );
      const id = `pair${i}`;
      const add = await shim({ command: 'ADD', containerId: id, netns }, conf);
      if (add.code !== 0) failed.push(`ADD ${id}: ${add.stdout}`);
      const del = await shim({ command: 'DEL', containerId: id, netns }, conf);
      if (del.code !== 0) failed.push(`DEL ${id}: ${del.stdout}`);
    }
    await Promise.all(restarts);
    assert.deepEqual(failed, []);
    await daemon.waitFor(
      'the spool to drain',
      () => !existsSync(daemon.spoolDir) || readdirSync(daemon.spoolDir).length === 0,
    );
    await daemon.waitFor('every attachment torn down', async () => {
      const s = (await daemon.status()) as { attachments: Record<string, number> };
      return (
        (s.attachments.added ?? 0) === 0 && (s.attachments.adding ?? 0) === 0 && (s.attachments.deleting ?? 0) === 0
      );
    });
    // Every ADD the fixture ran was undone by one DEL.
    const added = new Set(fixtureCalls(fx, 'ADD').map((l) => l.split(' ')[1]));
    const deleted = new Set(fixtureCalls(fx, 'DEL').map((l) => l.split(' ')[1]));
    assert.equal(added.size, pairs);
    assert.deepEqual(
      [...added].filter((id) => !deleted.has(id)),
      [],
    );
    await daemon.stop();
  });
});
