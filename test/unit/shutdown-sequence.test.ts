// stewardd's close() (lifecycle/shutdown.ts) always resolves and always releases what the daemon
// holds, whatever stopping the server does: fails, or never ends (bounded by the shutdown grace).
// The bounded wait itself is settle-within.ts.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { shutdownSequence, type ShutdownSteps } from '../../daemon/src/lifecycle/shutdown.js';
import { settleWithin } from '../../daemon/src/settle-within.js';
import { REPO } from '../helpers/env.js';
import { captureLog } from '../helpers/log-capture.js';

function steps(stopServing: () => Promise<unknown>, shutdownGraceMs: number) {
  const done: string[] = [];
  const { log, of } = captureLog();
  const s: ShutdownSteps = {
    cfg: {
      uninstallOnDelete: 'never',
      api: undefined,
      stateDir: '/nonexistent',
      dbPath: '/nonexistent/steward.db',
      socket: '/nonexistent/s.sock',
      drainTimeoutMs: 0,
      shutdownGraceMs,
      restartGraceMs: undefined,
    } as ShutdownSteps['cfg'],
    log,
    owner: { dirs: [], release: () => done.push('owner released') },
    quiesce: () => done.push('quiesced'),
    stopServing: () => {
      done.push('stop serving');
      return stopServing();
    },
    release: async () => {
      done.push('released');
    },
  };
  return { s, done, of };
}

describe('close() when stopping the server goes wrong', () => {
  test('stopping the server fails: close() resolves, logs why, and still releases everything', async () => {
    const { s, done, of } = steps(() => Promise.reject(new Error('server would not close')), 60_000);
    const d = shutdownSequence(s);
    await d.close('test');
    await d.closed;
    assert.deepEqual(done, ['quiesced', 'stop serving', 'released', 'owner released']);
    assert.deepEqual(of('stopping the server failed; stopping goes on'), [{ err: 'server would not close' }]);
  });

  test('stopping the server never ends: close() goes on after the shutdown grace', async () => {
    const { s, done } = steps(() => new Promise(() => undefined), 20);
    await shutdownSequence(s).close('test');
    assert.deepEqual(done, ['quiesced', 'stop serving', 'released', 'owner released']);
  });

  test('close() runs once: a second call gets the same promise', async () => {
    const { s, done } = steps(async () => undefined, 1000);
    const d = shutdownSequence(s);
    const first = d.close('test');
    assert.equal(d.close('again'), first);
    await first;
    assert.equal(done.filter((x) => x === 'released').length, 1);
  });
});

describe('the restart record on SIGTERM', () => {
  test('is written again as serving stops, so the shim (which believes it a grace after it was written) still does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'steward-shutdown-'));
    try {
      const { s } = steps(async () => undefined, 1000);
      const socket = join(dir, 's.sock');
      // The first record (at SIGTERM, before the kubectl-delete decision) also covers the API's
      // timeout: 30 s here, so the one written as serving stops is told apart by its deadline.
      const api = {
        server: 'https://x',
        tokenFile: '/t',
        caFile: '/c',
        namespace: 'n',
        daemonSet: 'd',
        timeoutMs: 30_000,
      };
      s.cfg = { ...s.cfg, socket, stateDir: dir, restartGraceMs: 5000, api };
      const record = () => JSON.parse(readFileSync(`${socket}.restarting`, 'utf8')) as { until: number };
      const ahead: number[] = [];
      s.stopServing = async () => {
        ahead.push(record().until - Date.now());
      };
      await shutdownSequence(s).close('SIGTERM');
      assert.equal(ahead.length, 1);
      // The shutdown grace (1 s) and the restart grace (5 s) ahead, not the API's 30 s as well.
      assert.ok(ahead[0]! > 5000 && ahead[0]! <= 6000, `the record as serving stopped: ${ahead[0]} ms ahead`);
      assert.ok(record().until <= Date.now() + 5000, 'and once more when serving has stopped');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the state dir after an uninstall on SIGTERM', () => {
  /** A SIGTERM close with --uninstall-on-delete=always over a state dir holding a journal file. */
  const closeOver = async (unfinished: (() => string | undefined) | undefined) => {
    const dir = mkdtempSync(join(tmpdir(), 'steward-shutdown-'));
    writeFileSync(join(dir, 'steward.db'), 'a journal');
    const { s, of } = steps(async () => undefined, 1000);
    s.cfg = {
      ...s.cfg,
      uninstallOnDelete: 'always',
      stateDir: dir,
      dbPath: join(dir, 'steward.db'),
      socket: join(dir, 's.sock'),
    };
    if (unfinished) s.unfinished = unfinished;
    await shutdownSequence(s).close('SIGTERM');
    return { dir, kept: existsSync(dir), of };
  };

  test('is purged when nothing is owed; kept when start-up recovery stopped before it was done', async () => {
    const purged = await closeOver(undefined);
    assert.equal(purged.kept, false, 'purged');
    const owed = await closeOver(() => 'start-up recovery did not finish');
    try {
      assert.equal(owed.kept, true, 'kept: a reinstall finishes the sweep');
      assert.ok(existsSync(join(owed.dir, 'steward.db')));
      assert.deepEqual(owed.of('keeping the state dir: the journal still owes teardowns'), [
        { stateDir: owed.dir, why: 'start-up recovery did not finish' },
      ]);
    } finally {
      rmSync(owed.dir, { recursive: true, force: true });
    }
  });
});

describe('settleWithin', () => {
  test('true once the work settles, resolved or rejected; false when the bound passes first', async () => {
    assert.equal(await settleWithin(Promise.resolve('x'), 1000), true);
    assert.equal(await settleWithin(Promise.reject(new Error('no')), 1000), true);
    assert.equal(await settleWithin(new Promise(() => undefined), 10), false);
  });

  test('a wait still pending does not keep the process up', () => {
    // A process whose only work is a 60 s wait on something that never settles exits at once: the
    // bound's timer is unref'd (stewardd's exit is never held by a bounded wait). Killed at 20 s if not.
    const module = pathToFileURL(join(REPO, 'daemon/src/settle-within.ts')).href;
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `import(${JSON.stringify(module)}).then((m) => m.settleWithin(new Promise(() => {}), 60000))`,
      ],
      { cwd: REPO, timeout: 20_000, encoding: 'utf8' },
    );
    assert.equal(r.signal, null, 'exited by itself, not killed at the bound');
    assert.equal(r.status, 0, r.stderr);
  });
});
