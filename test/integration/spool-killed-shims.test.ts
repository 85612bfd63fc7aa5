// Shims killed mid-spool leave nothing behind for good (issue "spool hygiene"): 200 real shim
// processes each spool a DEL with stewardd unreachable and are killed with SIGKILL at a random
// moment of their few milliseconds; a killed one can leave its `.<name>.tmp` (nothing else removes
// it: the ingest reads only *.json). Once those temp files are older than the grace (their mtimes
// set back here, as 10 minutes would), the real daemon's drain removes every one, counts them in
// steward_spool_temp_files_removed_total and logs it, leaves a fresh temp file alone, and runs the
// DEL of every complete spool file (the fixture plugin records one DEL per container).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { STALE_TEMP_GRACE_MS } from '../../daemon/src/spool-temps.js';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { SHIM, cniEnv } from '../helpers/shim.js';

const env = new TestEnv('spoolkill');
after(() => env.close());

const SHIMS = 200;
const AT_ONCE = 4;

/** Runs the shim's DEL; kills it `killAfterMs` after it started (undefined: never). Resolves with how it ended. */
function spoolDel(
  containerId: string,
  conf: string,
  killAfterMs?: number,
): Promise<{ ms: number; code: number | null; signal: string | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(SHIM, [], {
      env: cniEnv({ command: 'DEL', containerId }),
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    // Whatever happens to the test, no shim outlives it.
    env.defer(() => {
      child.kill('SIGKILL');
    });
    let t0 = 0;
    child.once('spawn', () => {
      t0 = performance.now();
      if (killAfterMs !== undefined) setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    });
    child.once('error', reject);
    child.stdin.on('error', () => undefined);
    child.stdin.end(conf);
    child.once('close', (code, signal) => resolve({ ms: performance.now() - t0, code, signal }));
  });
}

describe('shims killed while spooling', () => {
  it('leave temp files that the drain removes once stale, counted and logged, and every complete spool file is run', async (t) => {
    const daemon = new Daemon(env, { name: 'd' });
    const fixState = join(env.dir, 'fixture');
    const conf = JSON.stringify(
      stewardConf(daemon.socket, '1.0.0', [delegate('fixnet', '1.0.0', [fixturePlugin(fixState)])]),
    );
    const spool = daemon.spoolDir;
    const listed = () => readdirSync(spool);

    // How long a whole spooling shim takes here (fork, exec, fsyncs): the kills are spread over it.
    const whole: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await spoolDel(`whole-${i}`, conf);
      assert.equal(r.code, 0);
      whole.push(r.ms);
    }
    const span = Math.max(...whole);

    let next = 0;
    const ends: Array<{ code: number | null; signal: string | null }> = [];
    await Promise.all(
      Array.from({ length: AT_ONCE }, async () => {
        for (let i = next++; i < SHIMS; i = next++)
          ends.push(await spoolDel(`killed-${String(i).padStart(3, '0')}`, conf, Math.random() * span));
      }),
    );
    assert.equal(ends.length, SHIMS);
    const killed = ends.filter((e) => e.signal === 'SIGKILL').length;
    const temps = listed().filter((f) => f.endsWith('.tmp'));
    const complete = listed().filter((f) => f.endsWith('.json'));
    t.diagnostic(
      `${killed} of ${SHIMS} killed within ${span.toFixed(1)} ms: ${temps.length} temp files, ${complete.length} spool files`,
    );
    assert.ok(killed > 0, 'some shims were killed before they finished');
    assert.ok(temps.length > 0, `no shim of ${killed} killed left a temp file (spread over ${span.toFixed(1)} ms)`);
    assert.deepEqual(
      listed().filter((f) => !f.endsWith('.tmp') && !f.endsWith('.json')),
      [],
    );
    // Every spool file is whole (written, fsynced, then renamed): the container ids its DEL names.
    const spooledIds = complete.map((f) => JSON.parse(readFileSync(join(spool, f), 'utf8')).env.CNI_CONTAINERID);
    for (const t of temps) {
      const back = (Date.now() - STALE_TEMP_GRACE_MS - 60_000) / 1000;
      utimesSync(join(spool, t), back, back);
    }
    // A temp file a live writer could still be writing: younger than the grace, left alone.
    const fresh = `.${String(Date.now()).padStart(15, '0')}-live-0000beef.tmp`;
    writeFileSync(join(spool, fresh), '{"half');

    await daemon.start();
    await daemon.waitFor(
      'the drain to leave only the fresh temp file',
      () => listed().length === 1 && listed()[0] === fresh,
      15_000,
    );
    const dels = fixtureCalls(fixState, 'DEL').map((l) => l.split(' ')[1]);
    assert.deepEqual(dels.sort(), [...spooledIds].sort(), 'one delegate DEL for every complete spool file');
    const metric = /^steward_spool_temp_files_removed_total (\d+)$/m.exec((await daemon.get('/metrics')).text);
    assert.equal(Number(metric?.[1]), temps.length);
    await daemon.waitFor('the log line', () =>
      readFileSync(daemon.logFile, 'utf8').includes(`"removed":${temps.length},`),
    );
    assert.match(readFileSync(daemon.logFile, 'utf8'), /removed \d+ stale spool temp files/);
    await daemon.stop();
  });
});
