// Issue 28 item 5 (b): logs to a stdout nobody reads. The daemon's stdout is a FIFO whose reader
// never reads (a container runtime's log pipe that is stuck): pino's sonic-boom kept every line it
// could not write in memory (RSS grew with every request) and a blocking write would stop the loop.
// With the bounded sink the daemon keeps answering, its RSS stays put while thousands of requests
// log, and steward_log_lines_dropped_total counts what was dropped.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, constants, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { REPO, SYSTEM_CNI_BIN, TestEnv, sh } from '../helpers/env.js';

const env = new TestEnv('logsink');
after(() => env.close());

const rssKiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

describe('logs to a stdout nobody reads', () => {
  it('the daemon keeps answering, RSS stays bounded, and the dropped lines are counted', async () => {
    const socket = join(env.dir, 'run', 's.sock');
    const stateDir = join(env.dir, 'state');
    const boot = join(env.dir, 'boot_id');
    mkdirSync(stateDir, { recursive: true });
    writeFileSync(boot, 'boot-1\n');
    const fifo = join(env.dir, 'stdout.fifo');
    sh('mkfifo', [fifo]);
    // Held open read-write, never read: the pipe fills at 64 KiB and stays full.
    const fd = openSync(fifo, constants.O_RDWR);
    env.defer(() => closeSync(fd));
    const stderr = openSync(join(env.dir, 'stderr.log'), 'w');
    env.defer(() => closeSync(stderr));
    const proc: ChildProcess = spawn(
      process.execPath,
      [
        join(REPO, 'bin/stewardd'),
        'run',
        '--socket',
        socket,
        '--state-dir',
        stateDir,
        '--boot-id-file',
        boot,
        '--bin-dir',
        SYSTEM_CNI_BIN,
        '--log-level',
        'debug',
      ],
      { stdio: ['ignore', fd, stderr] },
    );
    env.defer(() => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    });
    const pid = proc.pid!;

    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    env.defer(() => agent.destroy());
    const call = (method: string, path: string, body?: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(
          { socketPath: socket, path, method, agent, headers: body ? { 'content-type': 'application/json' } : {} },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString('utf8')));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)));
        req.on('error', reject);
        req.end(body);
      });
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (existsSync(socket) && (await call('GET', '/readyz').catch(() => ({ status: 0 }))).status === 200) break;
      assert.ok(Date.now() < deadline, 'stewardd did not become ready');
      await new Promise((r) => setTimeout(r, 50));
    }
    // A CHECK whose netconf is unusable: answered code 7 at once, nothing stored, one warn line
    // naming the container; its id at 1,000 characters (1,024 are accepted) makes that ~1.2 KB.
    const pad = 'x'.repeat(980);
    const check = (i: number) =>
      JSON.stringify({
        env: {
          CNI_COMMAND: 'CHECK',
          CNI_CONTAINERID: `logsink-${i}-${pad}`,
          CNI_NETNS: '/proc/self/ns/net',
          CNI_IFNAME: 'eth0',
          CNI_PATH: SYSTEM_CNI_BIN,
        },
        config: { cniVersion: '1.0.0', name: 'steward', type: 'steward', delegates: 'unusable' },
      });
    const burst = async (from: number, n: number) => {
      let next = from;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < from + n) {
            const r = await call('POST', '/v1/cni', check(next++));
            assert.equal(r.status, 400, r.text);
          }
        }),
      );
    };
    // Warm up (the pipe fills, the heap settles), then measure across many more.
    await burst(0, 3000);
    const before = rssKiB(pid);
    await burst(3000, 40_000);
    const t0 = performance.now();
    const h = await call('GET', '/healthz');
    assert.equal(h.status, 200);
    assert.ok(performance.now() - t0 < 1000, '/healthz answered within a second');
    const grown = rssKiB(pid) - before;
    // 40,000 requests log ~48 MB. Kept, they were 137 MB more RSS here; dropped, RSS grew 3.5 MB
    // (1.7 MB with stdout to a file).
    assert.ok(grown < 32 * 1024, `RSS grew by ${grown} KiB over 40,000 logged requests`);
    const m = /^steward_log_lines_dropped_total (\d+)$/m.exec((await call('GET', '/metrics')).text);
    assert.ok(m && Number(m[1]) > 10_000, `dropped lines: ${m?.[1]}`);
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode === null ? proc.once('exit', r) : r(undefined)));
  });
});
