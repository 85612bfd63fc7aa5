// The Go runner the storm rows start their clients from (bench/fixtures/exec-runner, driven by
// bench/lib/exec-runner.ts): a figure it reports is only as good as what it ran. Built as the bench
// builds it, it must hand each call its own stdin and environment and report its exit code and
// stdout; a storm must run every call `retries` times, count each exit code, and start its clients
// at the nice value asked for (the shim-storm row's second series); a runner that dies fails what
// waits on it at once, so a row fails rather than hangs.

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
    assert.match(missing.error ?? '', /no such file/, 'and the answer says why');
  });

  it("reports each call's own CPU from its rusage, the CPU of what it reaped included", async () => {
    const exec = new GoExec(env, runner);
    // A fixed amount of work (about 80 ms of CPU on these machines, whatever the load) in a child
    // the call reaps (sh waits for it).
    const busy = await exec.run('/bin/sh', { PATH: '/usr/bin:/bin' }, '', [
      '-c',
      "sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'",
    ]);
    const idle = await exec.run('/bin/sh', { PATH: '/usr/bin:/bin' }, '', ['-c', 'sleep 0.2']);
    exec.close();
    assert.equal(busy.code, 0);
    assert.ok(busy.cpuMs >= 30, `a busy call's CPU is counted (${busy.cpuMs} ms)`);
    assert.ok(
      busy.cpuMs <= busy.ms + 1,
      `and is no more than its wall time on one thread (${busy.cpuMs} of ${busy.ms} ms)`,
    );
    assert.ok(
      idle.ms >= 200 && idle.cpuMs < 50,
      `a sleeping call's wall time is not its CPU (${idle.cpuMs} of ${idle.ms} ms)`,
    );
  });

  it('a runner that is gone fails every call at once, those queued and those after (none waits forever)', async () => {
    const exec = new GoExec(env, runner);
    // Three calls queued; the first kills the runner (its parent) while it runs.
    const calls = [
      exec.run('/bin/sh', { PATH: '/usr/bin:/bin' }, '', ['-c', 'kill -9 $PPID; sleep 5']),
      exec.run('/bin/true', {}, ''),
      exec.run('/bin/true', {}, ''),
    ];
    const outcomes = await Promise.allSettled(calls);
    for (const o of outcomes) {
      assert.equal(o.status, 'rejected');
      assert.match(String((o as PromiseRejectedResult).reason), /exec-runner exited SIGKILL before answering/);
    }
    await assert.rejects(exec.run('/bin/true', {}, ''), /exec-runner exited SIGKILL/);
  });

  it('a storm order without a worker or a try is refused, not run as a storm of nothing', async () => {
    const noop: StormCall = { id: 'x', file: '/bin/true', args: [], env: {}, stdin: '' };
    await assert.rejects(startGoStorm(env, runner, { calls: [noop], retries: 1, parallel: 0 }), /exited 1/);
    await assert.rejects(startGoStorm(env, runner, { calls: [noop], retries: 0, parallel: 2 }), /exited 1/);
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
    // `nice -n 10` adds to this process's own value (field 19 of its stat), up to 19.
    const own = Number(readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[16]);
    const want = String(Math.min(19, own + 10));
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    const perId = new Map<string, number>();
    for (const l of lines) {
      const [id, nice] = l.split(' ');
      assert.equal(nice, want, `client ${id} ran at nice ${want}`);
      perId.set(id!, (perId.get(id!) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(perId), { p0: 4, p1: 4, p2: 4 });
  });
});
