// The Go runner the storm rows start their clients from (bench/fixtures/exec-runner, driven by
// bench/lib/exec-runner.ts): a figure it reports is only as good as what it ran. Built as the bench
// builds it, it must hand each call its own stdin and environment and report its exit code and
// stdout; a storm must run every call `retries` times, count each exit code, and start its clients
// at the nice value asked for (the shim-storm row's second series).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Scratch } from '../../bench/lib/scratch.js';
import { execRunner, GoExec, startGoStorm, type StormCall } from '../../bench/lib/exec-runner.js';

describe('bench exec-runner', () => {
  const env = new Scratch('exec-runner-test');
  after(() => env.close());
  const runner = execRunner(env);

  it('runs calls one at a time with their own stdin and environment, and reports code and stdout', async () => {
    const exec = new GoExec(env, runner);
    const script = 'read -r line; printf "%s/%s" "$line" "$WHO"; exit "$CODE"';
    // Sent together: the runner answers them in order.
    const [a, b] = await Promise.all([
      exec.run('/bin/sh', { WHO: 'a', CODE: '0' }, 'first\n', ['-c', script]),
      exec.run('/bin/sh', { WHO: 'b', CODE: '7' }, 'second\n', ['-c', script]),
    ]);
    exec.close();
    assert.deepEqual([a.code, a.stdout, b.code, b.stdout], [0, 'first/a', 7, 'second/b']);
    assert.ok(a.ms > 0 && b.ms > 0, 'each call is timed');
    const other = new GoExec(env, runner);
    const missing = await other.run('/nonexistent/plugin', {}, '');
    other.close();
    assert.equal(missing.code, -1, 'a program that cannot start is -1, not a crash of the runner');
  });

  it('a storm runs every call `retries` times, counts exit codes, and starts its clients at the nice value asked', async () => {
    const log = join(env.dir, 'storm.log');
    // Each execution appends its id and its nice value (field 19 of /proc/self/stat), then exits with the id's code.
    const call = (id: string, code: number): StormCall => ({
      id,
      file: '/bin/sh',
      args: ['-c', `echo "$ID $(cut -d' ' -f19 /proc/self/stat)" >> ${log}; exit ${code}`],
      env: { ID: id, PATH: '/usr/bin:/bin' },
      stdin: '',
    });
    const calls = [call('p0', 0), call('p1', 0), call('p2', 3)];
    const go = await startGoStorm(env, runner, { calls, retries: 4, parallel: 2 }, 10);
    const report = await go();
    assert.equal(report.execs, 12);
    assert.deepEqual(report.exitCodes, { '0': 8, '3': 4 });
    assert.ok(report.ms > 0 && report.clientCpuMs >= 0);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    const perId = new Map<string, number>();
    for (const l of lines) {
      const [id, nice] = l.split(' ');
      assert.equal(nice, '10', `client ${id} ran at nice 10`);
      perId.set(id!, (perId.get(id!) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(perId), { p0: 4, p1: 4, p2: 4 });
  });
});
