// `stewardd status|attachments|teardowns|retry` run as processes against a real daemon on its
// real socket, with real failing teardowns (the fixture plugin) and pods named in CNI_ARGS; and
// the CLI's errors when the socket is absent, root-only, or served by something that never answers.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('cli');
after(() => env.close());

const POD_ARGS =
  'IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID=uid-web-0';
const OTHER_ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=team-b;K8S_POD_NAME=db-0;K8S_POD_UID=uid-db-0';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], opts: { asNobody?: boolean } = {}): Promise<Run> {
  const argv = [join(REPO, 'bin/stewardd'), ...args];
  const [file, fileArgs] = opts.asNobody
    ? ['setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, ...argv]]
    : [process.execPath, argv];
  return new Promise((resolve, reject) => {
    const child = spawn(file as string, fileArgs as string[], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Drops the fields that change between two reads of /v1/status a moment apart. */
function stable(status: any): any {
  const { uptimeSeconds: _u, teardownQueue, lastErrors, admission, ...rest } = status;
  // addPriority is true for a while after an ADD: two reads a moment apart may differ (a flake under load).
  const { addPriority: _p, ...admissionCounts } = admission ?? {};
  return {
    ...rest,
    admission: admissionCounts,
    depth: teardownQueue.depth,
    lastErrors: lastErrors.map((e: any) => ({ ...e, nextAttemptAt: undefined })),
  };
}

describe('stewardd status / attachments / teardowns / retry against a real daemon', () => {
  let daemon: Daemon;
  let fx: string;
  let healFile: string;

  before(async () => {
    // Retries far apart: the failing teardown stays pending, with 1 attempt, for the whole test.
    daemon = new Daemon(env, { name: 'pending', args: ['--retry-base-ms', '600000', '--retry-max-ms', '600000'] });
    await daemon.start();
    fx = join(env.dir, 'fx');
    healFile = join(env.dir, 'delegate-broken');
    writeFileSync(healFile, '');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [fixturePlugin(fx, { failDelWhileFile: healFile })]),
    ]);
    const add = await shim(
      { command: 'ADD', containerId: 'ctr-web-0-0123456789', netns: env.netns(), args: POD_ARGS },
      conf,
    );
    assert.equal(add.code, 0, add.stdout);
    const other = await shim({ command: 'ADD', containerId: 'ctr-db-0', netns: env.netns(), args: OTHER_ARGS }, conf);
    assert.equal(other.code, 0, other.stdout);
    const del = await shim({ command: 'DEL', containerId: 'ctr-web-0-0123456789', netns: '', args: POD_ARGS }, conf);
    assert.equal(del.code, 0, `the default policy defers the failed DEL: ${del.stdout}`);
    await daemon.waitFor('a pending teardown', async () => (await daemon.status()).teardownQueue.depth === 1);
  });

  it('status prints a table naming the pod, the plugin, attempts and next retry; -o json is the API body', async () => {
    const r = await cli(['status', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^stewardd \S+, up \S+, ready$/m);
    assert.match(
      r.stdout,
      /teardowns: +1 pending \(oldest \d+s\), 0 abandoned, next retry \d\d:\d\d:\d\dZ \(in \d+m\d\ds\)/,
    );
    assert.match(r.stdout, /STEP +POD +CONTAINER +PLUGIN +STATE +ATTEMPTS +NEXT RETRY +LAST ERROR/);
    const row = r.stdout.split('\n').find((l) => l.includes('team-a/web-0'));
    assert.ok(row, r.stdout);
    assert.match(
      row,
      /team-a\/web-0 +ctr-web-0-01 +steward-fixture +del_failed +1 +\d\d:\d\d:\d\dZ \(in \d+m\d\ds\) +steward-fixture: DEL failed while/,
    );

    const j = await cli(['status', '--socket', daemon.socket, '-o', 'json']);
    assert.equal(j.code, 0, j.stderr);
    const api = await daemon.status();
    assert.deepEqual(stable(JSON.parse(j.stdout)), stable(api));
    assert.equal(api.lastErrors[0].podName, 'web-0');
    assert.equal(api.lastErrors[0].podNamespace, 'team-a');
    assert.equal(api.lastErrors[0].podUid, 'uid-web-0');
  });

  it('status --check exits 0 while nothing is abandoned', async () => {
    const r = await cli(['status', '--check', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
  });

  it('attachments filters by pod and by state, and -o json matches /v1/attachments with the same filter', async () => {
    const all = await cli(['attachments', '--socket', daemon.socket]);
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stdout, /^ID +POD +CONTAINER +NETWORK +IFNAME +STATE +STEPS +UPDATED$/m);
    assert.match(all.stdout, /team-a\/web-0 +ctr-web-0-01 +steward +eth0 +deleting +steward-fixture:del_failed/);
    assert.match(all.stdout, /team-b\/db-0 +ctr-db-0 +steward +eth0 +added +steward-fixture:added/);

    const one = await cli(['attachments', '--socket', daemon.socket, '--pod', 'team-b/db-0']);
    assert.equal(one.code, 0, one.stderr);
    assert.ok(!one.stdout.includes('web-0'), one.stdout);
    assert.match(one.stdout, /team-b\/db-0/);

    const none = await cli(['attachments', '--socket', daemon.socket, '--pod', 'team-b/db-0', '--state', 'deleting']);
    assert.equal(none.stdout.trim(), 'no attachments match');

    const j = await cli(['attachments', '--socket', daemon.socket, '--pod', 'team-a/web-0', '-o', 'json']);
    assert.equal(j.code, 0, j.stderr);
    const api = (await daemon.get('/v1/attachments?pod=team-a%2Fweb-0')).json;
    assert.deepEqual(JSON.parse(j.stdout), api);
    assert.equal(api.length, 1);
    assert.deepEqual(
      [api[0].podNamespace, api[0].podName, api[0].podUid, api[0].state],
      ['team-a', 'web-0', 'uid-web-0', 'deleting'],
    );
  });

  it('teardowns lists the pending step; -o json is the API body', async () => {
    const r = await cli(['teardowns', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^1 pending, 0 abandoned$/m);
    assert.match(r.stdout, /team-a\/web-0 +ctr-web-0-01 +steward-fixture +del_failed +1 /);
    const j = await cli(['teardowns', '--socket', daemon.socket, '-o', 'json']);
    assert.deepEqual(JSON.parse(j.stdout), (await daemon.get('/v1/teardowns')).json);
  });

  it('every log line about the container names its pod, with an ISO-8601 time and a string level', async () => {
    const lines = readFileSync(daemon.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    assert.ok(lines.length > 3);
    for (const l of lines) {
      assert.match(l.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(['trace', 'debug', 'info', 'warn', 'error', 'fatal'].includes(l.level), JSON.stringify(l));
    }
    const about = lines.filter((l) => l.containerId === 'ctr-web-0-0123456789');
    assert.ok(about.some((l) => /added/.test(l.msg)) && about.some((l) => l.level === 'warn'), JSON.stringify(about));
    for (const l of about)
      assert.deepEqual([l.podNamespace, l.podName, l.podUid], ['team-a', 'web-0', 'uid-web-0'], JSON.stringify(l));
  });

  it('retry runs the pending teardown at once once the delegate heals, and status then shows none pending', async () => {
    rmSync(healFile);
    const r = await cli(['retry', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'retried 1 attachment(s): 1 torn down, 0 still pending');
    const s = await cli(['status', '--socket', daemon.socket]);
    assert.match(s.stdout, /teardowns: +0 pending, 0 abandoned/);
    const t = await cli(['teardowns', '--socket', daemon.socket]);
    assert.equal(t.stdout.trim(), 'no pending or abandoned teardowns');
  });

  it('a filter the daemon rejects exits 4 naming the socket; a malformed --pod or -o exits 2', async () => {
    const bad = await cli(['attachments', '--socket', daemon.socket, '--state', 'bogus']);
    assert.equal(bad.code, 4);
    assert.ok(bad.stderr.includes(daemon.socket), bad.stderr);
    assert.match(bad.stderr, /400: state must be one of/);
    assert.equal((await cli(['attachments', '--socket', daemon.socket, '--pod', 'no-slash'])).code, 2);
    for (const bad of ['no-slash', '/web-0', 'team-a/', 'a/b/c']) {
      const r = await daemon.get(`/v1/attachments?pod=${encodeURIComponent(bad)}`);
      assert.equal(r.status, 400, bad);
      assert.deepEqual(r.json, { error: 'pod must be NAMESPACE/NAME' });
    }
    assert.equal((await cli(['status', '--socket', daemon.socket, '-o', 'yaml'])).code, 2);
    assert.equal((await cli(['status', '--socket', daemon.socket, '--bogus'])).code, 2);
  });
});

describe('an answer stdout cannot take', () => {
  let daemon: Daemon;
  after(() => daemon?.stop());

  /** The CLI with stdout on /dev/full, on a pipe whose reader is gone, or on a file at a path. */
  function cliInto(args: string[], into: string): Promise<{ code: number | null; stderr: string }> {
    const full = into === 'closed-pipe' ? undefined : openSync(into === 'full' ? '/dev/full' : into, 'w');
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [join(REPO, 'bin/stewardd'), ...args], {
        stdio: ['ignore', full ?? 'pipe', 'pipe'],
      });
      if (full !== undefined) closeSync(full);
      child.stdout?.destroy();
      let stderr = '';
      child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stderr }));
    });
  }

  it('exits 6 saying the answer is lost (a full disk, a closed pipe), never 0 with nothing printed', async () => {
    daemon = new Daemon(env, { name: 'stdout-full' });
    await daemon.start();
    for (const args of [['status'], ['status', '--check'], ['attachments', '-o', 'json'], ['teardowns']])
      for (const into of ['full', 'closed-pipe'] as const) {
        const r = await cliInto([...args, '--socket', daemon.socket], into);
        assert.equal(r.code, 6, `${args.join(' ')} into ${into}: ${r.stderr}`);
        assert.match(
          r.stderr,
          /: the answer could not be written to stdout \((ENOSPC|EPIPE)\): it is lost or cut off$/m,
        );
      }
    // No socket needed: a script reading `stewardd version` must not take nothing for an answer.
    for (const args of [['version'], ['--help'], ['run', '--help'], ['status', '--help'], ['retry', '-h']]) {
      const r = await cliInto(args, 'full');
      assert.equal(r.code, 6, `${args.join(' ')}: ${r.stderr}`);
      assert.match(
        r.stderr,
        /^stewardd( \w+)?: the answer could not be written to stdout \(ENOSPC\): it is lost or cut off$/m,
      );
    }
    assert.equal(
      (await cli(['status', '--socket', daemon.socket])).code,
      0,
      'the same command into a pipe read to its end',
    );
    // A file on a disk with less room than the answer: the kernel takes part of a write without an
    // error, and Node's own file stream dropped the rest (exit 0, the JSON cut off).
    const small = join(env.dir, 'small-disk');
    mkdirSync(small);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8k', 'tmpfs', small]);
    env.defer(() => void execFileSync('umount', [small]));
    const rows = Array.from({ length: 600 }, (_, i) => ({ step: `s-${i}`, plugin: 'bridge', attempts: i }));
    const body = JSON.stringify({ pending: rows, abandoned: [] });
    assert.ok(body.length > 16_384, 'the answer is larger than the disk');
    const sock = await fakeDaemon('big-teardowns.sock', (c) => {
      c.resume();
      c.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
    const cut = await cliInto(['teardowns', '-o', 'json', '--socket', sock], join(small, 'out.json'));
    assert.equal(cut.code, 6, cut.stderr);
    assert.match(cut.stderr, /the answer could not be written to stdout \(ENOSPC\): it is lost or cut off$/m);
    rmSync(join(small, 'out.json'));
    const fits = await cliInto(['status', '--socket', daemon.socket], join(small, 'status.txt'));
    assert.equal(fits.code, 0, fits.stderr);
    assert.match(readFileSync(join(small, 'status.txt'), 'utf8'), /\n$/);
    const bare = await cli([]);
    assert.deepEqual([bare.code, bare.stdout], [2, ''], 'no command: the usage is an error, on stderr');
    assert.match(bare.stderr, /^usage: stewardd <command>/);
  });
});

describe('retries asked at once', () => {
  let daemon: Daemon;
  after(() => daemon?.stop());

  it('run the failing teardown once and share its answer: 20 at once spend one attempt, not 20', async () => {
    // Retries far apart, so only the asked ones run; the DEL takes a second, so all 20 arrive during it.
    daemon = new Daemon(env, { name: 'retry-flight', args: ['--retry-base-ms', '600000', '--retry-max-ms', '600000'] });
    await daemon.start();
    const fx = join(env.dir, 'fx-flight');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [fixturePlugin(fx, { failDelAlways: true, sleepDelMs: 1000 })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'flight', netns: env.netns() }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'flight', netns: '' }, conf)).code, 0);
    await daemon.waitFor('a pending teardown', async () => (await daemon.status()).teardownQueue.depth === 1);
    const dels = fixtureCalls(fx, 'DEL').length;
    const answers = await Promise.all(Array.from({ length: 20 }, () => daemon.request('POST', '/v1/teardowns/retry')));
    for (const a of answers)
      assert.deepEqual(a.json, { attempted: 1, done: 0, abandoned: 0, pending: 1, stepsAbandoned: 0, rearmed: 0 });
    assert.equal(fixtureCalls(fx, 'DEL').length, dels + 1, 'one DEL for the 20 retries');
    const [step] = (await daemon.get('/v1/teardowns')).json.pending;
    assert.equal(step.attempts, 2, 'the runtime DEL and one retry');
    // The next retry, asked after that pass, runs a pass of its own.
    const next = await cli(['retry', '--socket', daemon.socket]);
    assert.equal(next.stdout.trim(), 'retried 1 attachment(s): 0 torn down, 1 still pending', next.stderr);
    assert.equal(fixtureCalls(fx, 'DEL').length, dels + 2);
  });
});

describe('a retry that abandons the step', () => {
  let daemon: Daemon;
  after(() => daemon?.stop());

  it('says it finished by abandoning a step, never "torn down", and status --check exits 1', async () => {
    // Retries far apart, so only the asked one runs; the runtime's DEL is attempt 1 of 2.
    daemon = new Daemon(env, {
      name: 'retry-abandons',
      args: ['--retry-base-ms', '600000', '--retry-max-ms', '600000', '--retry-max-attempts', '2'],
    });
    await daemon.start();
    const fx = join(env.dir, 'fx-retry-abandons');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [fixturePlugin(fx, { failDelAlways: true })]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'given-up', netns: env.netns() }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'given-up', netns: '' }, conf)).code, 0);
    await daemon.waitFor('a pending teardown', async () => (await daemon.status()).teardownQueue.depth === 1);
    const r = await cli(['retry', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stdout.trim(),
      'retried 1 attachment(s): 0 torn down, 1 finished by abandoning a step, 0 still pending; 1 step(s) abandoned (what they held may be leaked: stewardd teardowns)',
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, 2);
    assert.equal((await cli(['status', '--check', '--socket', daemon.socket])).code, 1);
  });
});

describe('status --check with an abandoned teardown, and retry --abandoned', () => {
  // The delegate's DEL fails while this file exists (the test heals it by removing the file).
  const broken = join(env.dir, 'fx-ab-broken');
  let daemon: Daemon;
  let conf: Record<string, unknown>;
  after(() => daemon?.stop());

  it('exits 1 and says what to do', async () => {
    daemon = new Daemon(env, {
      name: 'abandon',
      args: ['--retry-base-ms', '50', '--retry-max-ms', '100', '--retry-max-attempts', '2'],
    });
    await daemon.start();
    writeFileSync(broken, '');
    conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-ab'), { failDelWhileFile: broken })]),
    ]);
    assert.equal(
      (await shim({ command: 'ADD', containerId: 'doomed', netns: env.netns(), args: POD_ARGS }, conf)).code,
      0,
    );
    assert.equal((await shim({ command: 'DEL', containerId: 'doomed', netns: '', args: POD_ARGS }, conf)).code, 0);
    await daemon.waitFor(
      'the step to be abandoned',
      async () => ((await daemon.status()).steps.abandoned ?? 0) === 1,
      60_000,
    );
    const r = await cli(['status', '--check', '--socket', daemon.socket]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /0 pending, 1 abandoned/);
    assert.match(r.stdout, /team-a\/web-0 +doomed +steward-fixture +abandoned +2 +never \(abandoned\)/);
    assert.match(r.stdout, /1 abandoned step\(s\): release what they hold by hand/);
    assert.equal((await cli(['status', '--socket', daemon.socket])).code, 0, 'without --check the same status exits 0');
  });

  it('retry --abandoned while the plugin still fails: the step is retried and abandoned again', async () => {
    const dels = () => fixtureCalls(join(env.dir, 'fx-ab'), 'DEL').length;
    const before = dels();
    const r = await cli(['retry', '--abandoned', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /^re-armed 1 abandoned step\(s\); retried 1 attachment\(s\): 0 torn down, 1 still pending$/m,
    );
    await daemon.waitFor(
      'the step to be abandoned again',
      async () => ((await daemon.status()).steps.abandoned ?? 0) === 1 && dels() >= before + 2,
      60_000,
    );
    assert.equal(dels(), before + 2, 'exactly --retry-max-attempts more DELs, then given up again');
    assert.equal((await cli(['status', '--check', '--socket', daemon.socket])).code, 1);
  });

  it('retry --abandoned once the plugin is healed: the DEL runs, the step is cleared, status --check exits 0', async () => {
    rmSync(broken);
    const r = await cli(['retry', '--abandoned', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {
      attempted: 1,
      done: 1,
      abandoned: 0,
      pending: 0,
      stepsAbandoned: 0,
      rearmed: 1,
      skippedNewer: 0,
    });
    const s = await daemon.status();
    assert.equal(s.steps.abandoned ?? 0, 0);
    assert.equal((await cli(['status', '--check', '--socket', daemon.socket])).code, 0);
    const rows = (await daemon.request('GET', '/v1/attachments?containerId=doomed')).json as Array<{ state: string }>;
    assert.deepEqual(
      rows.map((a) => a.state),
      ['deleted'],
    );
    // Nothing left to re-arm: a second call re-arms none and runs nothing.
    const again = await cli(['retry', '--abandoned', '--socket', daemon.socket]);
    assert.match(again.stdout, /^re-armed 0 abandoned step\(s\); retried 0 attachment\(s\)/m);
  });

  it('POST /v1/teardowns/retry?abandoned= refuses a value other than true or false', async () => {
    const res = await daemon.request('POST', '/v1/teardowns/retry?abandoned=yes');
    assert.equal(res.status, 400);
    assert.match(res.text, /abandoned/);
  });
});

describe('retry --abandoned after the container was added again: the new pod keeps its lease', () => {
  // A DEL that failed until abandoned, then the same container id added again (podman restart):
  // host-local releases by container id and interface, so re-running the old DEL would free the
  // new attachment's address for the next pod (a duplicate IP).
  const broken = join(env.dir, 'fx-again-broken');
  const dataDir = join(env.dir, 'again-ipam');
  let daemon: Daemon;
  after(() => daemon?.stop());

  it('leaves the old steps abandoned, runs no DEL, and the lease stays', async () => {
    daemon = new Daemon(env, {
      name: 'again',
      args: ['--retry-base-ms', '50', '--retry-max-ms', '100', '--retry-max-attempts', '1'],
    });
    await daemon.start();
    const fx = join(env.dir, 'fx-again');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('againnet', '1.0.0', [
        fixturePlugin(fx, {
          failDelWhileFile: broken,
          delegateIpam: true,
          ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: env.subnet() }]] },
        }),
      ]),
    ]);
    const leases = () => readdirSync(join(dataDir, 'againnet')).filter((f) => /^\d/.test(f));
    const call = (command: string) =>
      shim({ command, containerId: 'again', netns: command === 'DEL' ? '' : env.netns(), args: POD_ARGS }, conf);
    assert.equal((await call('ADD')).code, 0);
    writeFileSync(broken, '');
    assert.equal((await call('DEL')).code, 0);
    await daemon.waitFor(
      'the step abandoned',
      async () => ((await daemon.status()).steps.abandoned ?? 0) === 1,
      60_000,
    );
    rmSync(broken);
    const add = await call('ADD');
    assert.equal(add.code, 0, add.stdout);
    const held = leases();
    assert.equal(held.length, 1, 'the new attachment holds one lease');
    const dels = fixtureCalls(fx, 'DEL').length;

    const r = await cli(['retry', '--abandoned', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /^re-armed 0 abandoned step\(s\); left 1 attachment\(s\) abandoned: their container was added again/m,
    );
    assert.equal(fixtureCalls(fx, 'DEL').length, dels, 'no DEL ran');
    assert.deepEqual(leases(), held, "the new attachment's lease is still held");
    assert.equal((await daemon.status()).steps.abandoned, 1);
    const json = await cli(['retry', '--abandoned', '-o', 'json', '--socket', daemon.socket]);
    assert.deepEqual(JSON.parse(json.stdout), {
      attempted: 0,
      done: 0,
      abandoned: 0,
      pending: 0,
      stepsAbandoned: 0,
      rearmed: 0,
      skippedNewer: 1,
    });
  });
});

/** A socket in the test's dir served by `serve` (each connection), closed with every connection at the end. */
async function fakeDaemon(name: string, serve: (c: Socket) => void): Promise<string> {
  const sock = join(env.dir, name);
  const held: Socket[] = [];
  const server = createServer((c) => {
    held.push(c);
    serve(c);
  });
  await new Promise<void>((r) => server.listen(sock, r));
  env.defer(
    () =>
      new Promise<void>((r) => {
        for (const c of held) c.destroy();
        server.close(() => r());
      }),
  );
  return sock;
}

describe('CLI errors name the socket and the cause', () => {
  it('absent socket: exit 3, "does not exist"', async () => {
    const sock = join(env.dir, 'nothing-here.sock');
    const r = await cli(['status', '--socket', sock]);
    assert.equal(r.code, 3);
    assert.equal(
      r.stderr.trim(),
      `stewardd status: cannot talk to stewardd on ${sock}: the socket does not exist (is stewardd running? give its path with --socket)`,
    );
  });

  it('a root-only socket, as an unprivileged user: exit 3, "permission denied"', async () => {
    const daemon = new Daemon(env, { name: 'perm' });
    await daemon.start();
    const r = await cli(['teardowns', '--socket', daemon.socket], { asNobody: true });
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`cannot talk to stewardd on ${daemon.socket.replace(/[.]/g, '\\.')}: permission denied`),
    );
    await daemon.stop();
  });

  it('a socket left behind by a dead daemon: exit 3, "nothing is listening"', async () => {
    const daemon = new Daemon(env, { name: 'stale' });
    await daemon.start();
    await daemon.kill9();
    const r = await cli(['status', '--socket', daemon.socket]);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stderr, /nothing is listening on it/);
  });

  it('a socket that accepts but never answers: exit 3 after --timeout, "did not answer within"', async () => {
    const sock = await fakeDaemon('silent.sock', () => undefined);
    const t0 = Date.now();
    const r = await cli(['retry', '--socket', sock, '--timeout', '1']);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.equal(
      r.stderr.trim(),
      `stewardd retry: cannot talk to stewardd on ${sock}: the daemon did not answer within 1 s (busy or hung); the teardowns it started go on in stewardd (each plugin within --plugin-timeout): \`stewardd teardowns\` shows where they are`,
    );
    assert.ok(Date.now() - t0 < 30_000);
  });

  it('an answer whose body drips: exit 3 at ten times --timeout, not when the drip stops', async () => {
    const sock = await fakeDaemon('drip.sock', (c) => {
      c.resume();
      c.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      const drip = setInterval(() => (c.writable ? c.write('1\r\n \r\n') : clearInterval(drip)), 500);
      c.on('close', () => clearInterval(drip));
    });
    const t0 = Date.now();
    const r = await cli(['status', '--socket', sock, '--timeout', '1']);
    const took = Date.now() - t0;
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stderr, /the daemon did not answer within 1 s \(busy or hung\)/);
    assert.ok(took >= 9_000 && took < 25_000, `${took} ms`);
  });

  it('a 200 answer of another shape (another program on the socket): exit 4 naming it, never a crash', async () => {
    for (const body of ['{}', 'null', '[1,2]', '{"ready":true,"steps":{}}']) {
      const sock = await fakeDaemon(`shape-${body.length}.sock`, (c) => {
        c.resume();
        c.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      });
      for (const command of [['status', '--check'], ['attachments'], ['teardowns'], ['retry'], ['audit']]) {
        const r = await cli([...command, '--socket', sock]);
        assert.equal(r.code, 4, `${command.join(' ')} on ${body}: ${r.stdout}${r.stderr}`);
        assert.match(
          r.stderr,
          /is not what stewardd answers \(another program on the socket, or another version of stewardd\)/,
        );
        assert.doesNotMatch(r.stderr, /TypeError|Cannot read/);
      }
    }
  });

  it('a 200 answer of the right outline whose fields are of other types: exit 4, never a TypeError or exit 1', async () => {
    const cases: Array<[string[], unknown]> = [
      [
        ['status', '--check'],
        {
          ready: true,
          version: 'x',
          uptimeSeconds: 1,
          steps: { abandoned: '5' },
          attachments: { added: 'x' },
          teardownQueue: { depth: 'q', nextAttemptAt: 12 },
          executions: { slots: 1, inUse: 1, queued: 1 },
          lastErrors: [1, null, 's'],
        },
      ],
      [
        ['status'],
        {
          ready: true,
          version: 'x',
          uptimeSeconds: 1,
          steps: {},
          attachments: {},
          teardownQueue: { depth: 0, nextAttemptAt: 12 },
          executions: { slots: 1, inUse: 1, queued: 1 },
          lastErrors: [],
        },
      ],
      [
        ['teardowns'],
        { pending: [{ step: 'x', attempts: {}, nextAttemptAt: 'notadate', lastError: { a: 1 } }], abandoned: [{}] },
      ],
      [['attachments'], [{ id: {}, steps: 'notarray', updatedAt: 5 }, { steps: [null, 1] }]],
      [['audit'], { orphans: [null, 1, { kind: {} }], runtime: { reachable: true, distrusted: null } }],
      [['retry'], { attempted: 1, done: 1, pending: 0, skippedNewer: '\u001b[2J' }],
      [['retry'], { attempted: 1, done: 0, pending: 0, abandoned: '1' }],
      [['retry'], { attempted: 1, done: 0, pending: 1, stepsAbandoned: [1] }],
    ];
    for (const [i, [command, answer]] of cases.entries()) {
      const body = JSON.stringify(answer);
      const sock = await fakeDaemon(`fields-${i}.sock`, (c) => {
        c.resume();
        c.end(
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
      });
      const r = await cli([...command, '--socket', sock]);
      assert.equal(r.code, 4, `${command.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /is not what stewardd answers/, command.join(' '));
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  it('a program on the socket that does not answer in HTTP: exit 4, "not HTTP"', async () => {
    const sock = await fakeDaemon('not-http.sock', (c) => {
      c.resume();
      c.end('\u0000\u00ff garbage \u001b[31m red\r\n\r\n');
    });
    for (const command of [['status'], ['retry']]) {
      const r = await cli([...command, '--socket', sock]);
      assert.equal(r.code, 4, r.stdout + r.stderr);
      assert.match(r.stderr, /is not what stewardd answers \(another program on the socket, .*\): not HTTP/);
    }
  });

  it("a 200 answer's words reach the terminal printable, the version and the counts' names too", async () => {
    const body = JSON.stringify({
      ready: true,
      version: '0.1.0\u001b]0;PWNED\u0007\u001b[2J',
      uptimeSeconds: 1,
      steps: {},
      attachments: { '\u001b[31mred': 1 },
      teardownQueue: { depth: 0, oldestPendingSeconds: null, nextAttemptAt: null },
      executions: { slots: 1, inUse: 0, queued: 0 },
      lastErrors: [],
    });
    const sock = await fakeDaemon('escape-200.sock', (c) => {
      c.resume();
      c.end(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
    const r = await cli(['status', '--socket', sock]);
    assert.equal(r.code, 0, r.stderr);
    for (const raw of ['\u001b', '\u0007']) assert.ok(!r.stdout.includes(raw), 'no raw control character');
    assert.match(r.stdout, /stewardd 0\.1\.0\\x1b\]0;PWNED\\x07/);
    assert.match(r.stdout, /\\x1b\[31mred 1/);
  });

  it('an empty --socket is a usage error (exit 2), not the working directory', async () => {
    const r = await cli(['status', '--socket', '']);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /--socket needs a path/);
  });

  it('a --socket path longer than a Unix socket address holds: exit 2, saying so', async () => {
    const r = await cli(['status', '--socket', `/tmp/${'s'.repeat(120)}.sock`]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /--socket must be a path of at most 107 bytes/);
  });

  it('version takes no arguments (exit 2); --help is its usage', async () => {
    const bad = await cli(['version', '--bogus']);
    assert.equal(bad.code, 2, bad.stdout + bad.stderr);
    assert.match(bad.stderr, /stewardd version takes no arguments, got "--bogus"/);
    assert.equal(bad.stdout, '');
    const help = await cli(['version', '--help']);
    assert.deepEqual([help.code, help.stdout.trim()], [0, 'usage: stewardd version']);
    const plain = await cli(['version']);
    assert.equal(plain.code, 0);
    assert.match(plain.stdout, /^\S+\n$/);
  });

  it("an error's words from whatever answers reach the terminal printable", async () => {
    const body = JSON.stringify({ error: '\u001b]0;pwned\u0007\u001b[31mred\u202e' });
    const sock = await fakeDaemon('escape.sock', (c) => {
      c.resume();
      c.end(
        `HTTP/1.1 500 Oops\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
    const r = await cli(['status', '--socket', sock]);
    assert.equal(r.code, 4);
    for (const raw of ['\u001b', '\u0007', '\u202e'])
      assert.ok(!r.stderr.includes(raw), 'no raw control or bidi character');
    assert.match(r.stderr, /red/);
  });

  it('--timeout takes decimal seconds only', async () => {
    for (const t of ['0x10', '1e1', ' 5', '0', '5s']) {
      const r = await cli(['status', '--socket', join(env.dir, 'unused.sock'), '--timeout', t]);
      assert.equal(r.code, 2, `${t}: ${r.stderr}`);
      assert.match(r.stderr, /--timeout must be a number of seconds/);
    }
  });

  it('a --socket that is a regular file or a directory: exit 3, "is not a socket"', async () => {
    const file = join(env.dir, 'not-a-socket');
    writeFileSync(file, '');
    for (const path of [file, env.dir]) {
      const r = await cli(['status', '--socket', path]);
      assert.equal(r.code, 3, r.stdout + r.stderr);
      assert.equal(r.stderr.trim(), `stewardd status: cannot talk to stewardd on ${path}: ${path} is not a socket`);
    }
  });
});
