import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { Metrics, countSpooled } from '../../daemon/src/metrics.js';
import {
  METRICS_REUSE_MS,
  METRICS_CONNECTION_CHECK_MS,
  keepListeningMetrics,
  listenMetrics,
  pacedTurns,
  parseListenAddress,
  sharedRendering,
} from '../../daemon/src/metrics-listener.js';

const source = {
  counts: () => ({ attachments: { added: 2 }, steps: { added: 3, del_failed: 1, abandoned: 2 } }),
  oldestPendingTeardownAt: () => 10_000,
  countPendingTeardowns: () => 1,
};

describe('parseListenAddress', () => {
  test('accepts ADDR:PORT for IPv4, bracketed and bare IPv6 (as $(HOST_IP):PORT expands), and :PORT', () => {
    assert.deepEqual(parseListenAddress('127.0.0.1:9631'), { host: '127.0.0.1', port: 9631 });
    assert.deepEqual(parseListenAddress('[::1]:9631'), { host: '::1', port: 9631 });
    assert.deepEqual(parseListenAddress('fd00::5:9631'), { host: 'fd00::5', port: 9631 });
    assert.deepEqual(parseListenAddress(':0'), { host: '0.0.0.0', port: 0 });
  });

  test('refuses what is not ADDR:PORT, saying so', () => {
    for (const bad of [
      '9631',
      'localhost',
      '1.2.3.4:',
      '1.2.3.4:x',
      '1.2.3.4:70000',
      '[::1:9631',
      'a b:1',
      '',
      '$(HOST_IP):9631',
      'node-1:9631',
    ]) {
      const r = parseListenAddress(bad);
      assert.ok('why' in r, bad);
      assert.match(r.why, /--metrics-listen/);
    }
  });
});

describe('Metrics', () => {
  test("the whole exposition passes promtool check metrics, its lint included (prom-client's _total gauges left out)", async () => {
    const m = new Metrics(source, { version: '9.9.9' });
    const text = await m.registry.metrics();
    assert.match(text, /^steward_nodejs_active_handles\{type="[A-Za-z]+"\} \d+$/m, 'the by-type gauges stay');
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    assert.equal(r.error, undefined, "promtool not runnable: scripts/setup.sh installs Debian's prometheus package");
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(r.stdout + r.stderr, '');
  });

  test('gauges mirror the source on scrape; every known state is present; readiness follows its function', async () => {
    const m = new Metrics(source, { now: () => 70_000, version: '9.9.9' });
    let text = await m.registry.metrics();
    assert.match(text, /^steward_attachments\{state="deleting"\} 0$/m);
    assert.match(text, /^steward_attachments\{state="added"\} 2$/m);
    assert.match(text, /^steward_teardown_pending_steps 1$/m);
    assert.match(text, /^steward_teardown_abandoned_steps 2$/m);
    assert.match(text, /^steward_oldest_pending_teardown_seconds 60$/m);
    assert.match(text, /^steward_ready 0$/m);
    assert.match(text, /^steward_build_info\{version="9\.9\.9"\} 1$/m);
    let ready = true;
    m.setReadiness(() => ready);
    assert.match(await m.registry.metrics(), /^steward_ready 1$/m);
    ready = false;
    text = await m.registry.metrics();
    assert.match(text, /^steward_ready 0$/m);
    assert.doesNotMatch(text, /^stewardd_/m);
  });

  test('instrument counts and times every plugin execution by plugin, command and outcome', async () => {
    const m = new Metrics(source);
    // As the executor does: onStart once the process exists; a type never found has none.
    const run = m.instrument(async (call) => {
      if (call.type === 'missing') throw new Error('plugin missing not found');
      call.onStart?.({ pid: 1, startTime: 1, bootId: 'b', pidNamespace: 'p' });
      if (call.type === 'bad') throw new Error('no');
      return {};
    });
    const call = {
      command: 'ADD' as const,
      type: 'bridge',
      containerId: 'c',
      netns: '',
      ifname: 'eth0',
      args: '',
      cniPath: '',
      stdin: {},
    };
    await run(call);
    await assert.rejects(run({ ...call, type: 'bad', command: 'DEL' }));
    const journaled: number[] = [];
    await run({ ...call, onStart: (p) => journaled.push(p.pid) });
    await assert.rejects(run({ ...call, type: 'missing', command: 'DEL' }));
    const text = await m.registry.metrics();
    assert.deepEqual(journaled, [1], "the caller's own onStart is still told");
    assert.doesNotMatch(text, /plugin="missing"/, 'a plugin never started is no execution and makes no series');
    assert.match(text, /^steward_plugin_executions_total\{plugin="bridge",command="ADD",outcome="ok"\} 2$/m);
    assert.match(text, /^steward_plugin_executions_total\{plugin="bad",command="DEL",outcome="error"\} 1$/m);
    assert.match(text, /^steward_plugin_duration_seconds_count\{plugin="bridge",command="ADD"\} 2$/m);
  });

  test('countWriteError bumps steward_db_write_errors_total', async () => {
    const m = new Metrics(source);
    m.countWriteError(new Error('SQLITE_FULL'));
    m.countWriteError(new Error('SQLITE_IOERR'));
    assert.match(await m.registry.metrics(), /^steward_db_write_errors_total 2$/m);
  });

  test('countSpooled counts *.json in the spool dir only, and 0 for a missing dir', () => {
    const dir = mkdtempSync(join(tmpdir(), 'steward-spool-'));
    try {
      writeFileSync(join(dir, 'a.json'), '{}');
      writeFileSync(join(dir, 'b.json'), '{}');
      writeFileSync(join(dir, 'c.json.tmp'), '');
      mkdirSync(join(dir, 'rejected'));
      assert.equal(countSpooled(dir), 2);
      assert.equal(countSpooled(join(dir, 'nope')), 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an audit pass: held orphans by kind; past the grace only when the runtime answered; releases counted', async () => {
    const m = new Metrics(source);
    const orphan = (kind: string, ageSeconds: number | null, released = false, verdict = 'young') => ({
      kind: kind as 'lease',
      containerId: 'c'.repeat(64),
      network: 'n',
      ifname: 'eth0',
      ip: null,
      path: '/p',
      ageSeconds,
      journalled: false,
      released,
      verdict,
    });
    // The last: a hand-made reservation (host-local's "reserved"), which no pass ever releases.
    const orphans = [
      orphan('lease', 7200),
      orphan('lease', 60),
      orphan('cache', null),
      orphan('lease', 9000, true, 'release'),
      orphan('lease', 86_400, false, 'foreign-owner'),
    ];
    m.recordAudit({
      at: 5000,
      graceMs: 900_000,
      report: { orphans, runtime: { reachable: true, endpoint: 'e', sandboxes: 1 } },
    });
    let text = await m.registry.metrics();
    assert.match(text, /^steward_audit_orphans\{kind="lease"\} 3$/m);
    assert.match(text, /^steward_audit_orphans\{kind="cache"\} 1$/m);
    assert.match(
      text,
      /^steward_audit_orphans_past_grace\{kind="lease"\} 1$/m,
      'never a foreign-owner: it is never released',
    );
    assert.match(text, /^steward_audit_orphans_past_grace\{kind="cache"\} 0$/m, 'no age evidence: young');
    assert.match(text, /^steward_audit_released_total\{kind="lease"\} 1$/m);
    assert.match(text, /^steward_audit_last_run_success 1$/m);
    assert.match(text, /^steward_audit_last_run_timestamp_seconds 5$/m);

    // No runtime: the same findings are held, owner unknown, none of them past the grace.
    m.recordAudit({
      at: 6000,
      graceMs: 900_000,
      report: { orphans: orphans.slice(0, 3), runtime: { reachable: false, endpoint: null } },
    });
    text = await m.registry.metrics();
    assert.match(text, /^steward_audit_orphans\{kind="lease"\} 2$/m);
    assert.match(text, /^steward_audit_orphans_past_grace\{kind="lease"\} 0$/m);
    assert.match(text, /^steward_audit_last_run_success 0$/m);

    // The runtime answered the pass's first ask and was lost before a release: the owners were known gone.
    m.recordAudit({
      at: 6500,
      graceMs: 900_000,
      report: {
        orphans: orphans.slice(0, 3),
        runtime: { reachable: false, endpoint: 'e', lostDuringPass: true },
      },
    });
    text = await m.registry.metrics();
    assert.match(text, /^steward_audit_orphans_past_grace\{kind="lease"\} 1$/m);
    assert.match(text, /^steward_audit_last_run_success 0$/m);

    // A pass that failed outright leaves the gauges as they were.
    m.recordAudit({ at: 7000, graceMs: 900_000, error: new Error('journal closed') });
    text = await m.registry.metrics();
    assert.match(text, /^steward_audit_orphans\{kind="lease"\} 2$/m);
    assert.match(text, /^steward_audit_last_run_timestamp_seconds 7$/m);
  });
});

describe('every metric an alert rule reads is exported from the start (issue 40)', () => {
  test("a fresh daemon's /metrics carries every steward_* name deploy/monitoring/steward-rules.yaml uses, at 0 until it happens", async () => {
    const rules = readFileSync(new URL('../../deploy/monitoring/steward-rules.yaml', import.meta.url), 'utf8');
    const names = [...new Set(rules.match(/steward_[a-z_]+/g) ?? [])];
    assert.ok(names.length >= 10, names.join(' '));
    const text = await new Metrics(source).registry.metrics();
    const exported = new Set(
      text
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('#'))
        .map((l) => l.split(/[{ ]/)[0]),
    );
    assert.deepEqual(
      names.filter((n) => !exported.has(n)),
      [],
      'absent until the first event: increase() over the alert window misses a first lone one',
    );
  });
});

describe('the metrics port renders at most once per window, whatever the scrapes', () => {
  const counting = () => {
    let n = 0;
    const pending: Array<{ resolve: (t: string) => void; reject: (e: Error) => void }> = [];
    const render = () => {
      n++;
      return new Promise<string>((resolve, reject) => pending.push({ resolve, reject }));
    };
    /** Calls `shared`, checks that it started rendering number `nth`, finishes that with `text`. */
    const rendersAnew = async (shared: () => Promise<string>, nth: number, text: string) => {
      const p = shared();
      await Promise.resolve();
      assert.equal(n, nth);
      pending[nth - 1]!.resolve(text);
      assert.equal(await p, text);
    };
    return { render, renders: () => n, pending, rendersAnew };
  };

  test('scrapes while a rendering is in flight, and within the window after it started, share it', async () => {
    let now = 1000;
    const c = counting();
    const shared = sharedRendering(c.render, 250, () => now);
    const first = Array.from({ length: 20 }, () => shared());
    await Promise.resolve();
    assert.equal(c.renders(), 1);
    now += 400; // past the window, but the rendering has not finished: still shared
    const late = shared();
    await Promise.resolve();
    assert.equal(c.renders(), 1);
    c.pending[0]!.resolve('text 1');
    assert.deepEqual(new Set(await Promise.all([...first, late])), new Set(['text 1']));
    // Finished, and past the window since it started: the next scrape renders again.
    await c.rendersAnew(shared, 2, 'text 2');
  });

  test('a finished rendering is reused until the window has passed since it started, then rendered again', async () => {
    let now = 1000;
    const c = counting();
    const shared = sharedRendering(c.render, 250, () => now);
    await c.rendersAnew(shared, 1, 'a');
    now = 1249;
    assert.equal(await shared(), 'a');
    assert.equal(c.renders(), 1);
    now = 1250;
    await c.rendersAnew(shared, 2, 'b');
  });

  test('a failed rendering is not reused, and a renderer that throws is a rejection, not a crash', async () => {
    const now = 1000;
    const c = counting();
    const shared = sharedRendering(c.render, 250, () => now);
    const a = shared();
    await Promise.resolve();
    c.pending[0]!.reject(new Error('collect failed'));
    await assert.rejects(a, /collect failed/);
    // Rendered again at once after a failure.
    await c.rendersAnew(shared, 2, 'ok');
    const throwing = sharedRendering(() => {
      throw new Error('sync throw');
    });
    await assert.rejects(throwing(), /sync throw/);
  });

  test('over real HTTP: 40 scrapes at once share renderings, one per window; a later scrape past the window is another', async () => {
    // When each rendering started: their count is the number of renderings.
    const starts: number[] = [];
    const fake = {
      registry: {
        contentType: 'text/plain; version=0.0.4; charset=utf-8',
        metrics: async () => {
          const n = starts.push(performance.now());
          await new Promise((r) => setTimeout(r, 20));
          return `steward_fake_rendering ${n}\n`;
        },
      },
    } as unknown as Metrics;
    const log = { info: () => undefined, error: () => undefined } as never;
    // No spacing between answers here: this is the sharing alone (the pacing has tests of its own).
    const l = await listenMetrics({ host: '127.0.0.1', port: 0 }, fake, log, { spacingMs: 0 });
    try {
      const url = `http://127.0.0.1:${l.address.port}/metrics`;
      const bodies = await Promise.all(Array.from({ length: 40 }, async () => (await fetch(url)).text()));
      // On a quiet machine the 40 arrive within one window (one rendering); on a loaded one they may
      // span more, and still no two renderings start within a window of each other.
      assert.deepEqual(
        new Set(bodies),
        new Set(Array.from({ length: starts.length }, (_, i) => `steward_fake_rendering ${i + 1}\n`)),
      );
      assert.ok(starts.length < 40 / 4, `${starts.length} renderings for 40 scrapes`);
      for (let i = 1; i < starts.length; i++)
        assert.ok(
          starts[i]! - starts[i - 1]! >= METRICS_REUSE_MS - 1,
          `renderings ${starts[i]! - starts[i - 1]!} ms apart`,
        );
      await new Promise((r) => setTimeout(r, METRICS_REUSE_MS + 50));
      const next = `steward_fake_rendering ${starts.length + 1}\n`;
      assert.equal(await (await fetch(url)).text(), next);
    } finally {
      await l.close();
    }
  });
});

describe('the metrics port answers at most one request per spacing, in arrival order', () => {
  /** A manual clock and scheduler: `advance` runs what is due. */
  const manual = () => {
    let now = 1000;
    const timers: Array<{ at: number; fn: () => void }> = [];
    return {
      now: () => now,
      schedule: (fn: () => void, ms: number) => void timers.push({ at: now + ms, fn }),
      pending: () => timers.length,
      advance(ms: number) {
        now += ms;
        for (let due = timers.findIndex((t) => t.at <= now); due >= 0; due = timers.findIndex((t) => t.at <= now))
          timers.splice(due, 1)[0]!.fn();
      },
    };
  };

  test('the first request is answered at once, the next ones one spacing apart, in arrival order', () => {
    const c = manual();
    const turns = pacedTurns(50, c.now, c.schedule);
    const answered: Array<[string, number]> = [];
    for (const name of ['a', 'b', 'c']) turns.add(() => answered.push([name, c.now()]));
    assert.deepEqual(answered, [['a', 1000]]);
    assert.equal(turns.waiting, 2);
    c.advance(49);
    assert.deepEqual(answered, [['a', 1000]], 'not before the spacing has passed');
    c.advance(1);
    assert.deepEqual(answered, [
      ['a', 1000],
      ['b', 1050],
    ]);
    c.advance(50);
    assert.deepEqual(answered, [
      ['a', 1000],
      ['b', 1050],
      ['c', 1100],
    ]);
    assert.equal(turns.waiting, 0);
    assert.equal(c.pending(), 0, 'nothing left scheduled once every turn is answered');
    // Quiet for longer than the spacing: the next request is answered at once again.
    c.advance(500);
    turns.add(() => answered.push(['d', c.now()]));
    assert.deepEqual(answered.at(-1), ['d', 1600]);
  });

  test('a turn taken out (its client gone) leaves the queue at once and takes no spacing', () => {
    const c = manual();
    const turns = pacedTurns(50, c.now, c.schedule);
    const answered: string[] = [];
    turns.add(() => answered.push('a'));
    const cancelB = turns.add(() => answered.push('b'));
    turns.add(() => answered.push('c'));
    cancelB();
    assert.equal(turns.waiting, 1, 'b is out of the queue before its turn');
    c.advance(50);
    assert.deepEqual(answered, ['a', 'c'], "b's turn went to c");
    c.advance(1000);
    assert.deepEqual(answered, ['a', 'c']);
  });

  test('an answer that throws is reported and the next turn still comes; one that adds a turn keeps the spacing', () => {
    const c = manual();
    const errors: unknown[] = [];
    const turns = pacedTurns(50, c.now, c.schedule, (e) => errors.push(e));
    const answered: Array<[string, number]> = [];
    turns.add(() => {
      throw new Error('write failed');
    });
    turns.add(() => {
      answered.push(['b', c.now()]);
      // Re-entry: a new turn added from inside an answer waits its own spacing.
      turns.add(() => answered.push(['c', c.now()]));
    });
    assert.equal(errors.length, 1);
    c.advance(50);
    assert.deepEqual(answered, [['b', 1050]]);
    assert.equal(c.pending(), 1, 're-entry arms one timer, not one per drain');
    c.advance(49);
    assert.deepEqual(answered, [['b', 1050]]);
    c.advance(1);
    assert.deepEqual(answered, [
      ['b', 1050],
      ['c', 1100],
    ]);
    assert.equal(c.pending(), 0);
  });

  test('a scheduler that throws does not stall the queue: the next request schedules again', () => {
    const c = manual();
    let failOnce = true;
    const schedule = (fn: () => void, ms: number) => {
      if (failOnce) {
        failOnce = false;
        throw new Error('no timer');
      }
      c.schedule(fn, ms);
    };
    const turns = pacedTurns(50, c.now, schedule);
    const answered: string[] = [];
    turns.add(() => answered.push('a'));
    assert.throws(() => turns.add(() => answered.push('b')), /no timer/);
    turns.add(() => answered.push('c'));
    c.advance(50);
    assert.deepEqual(answered, ['a', 'b']);
    c.advance(50);
    assert.deepEqual(answered, ['a', 'b', 'c']);
  });

  const fakeMetrics = {
    registry: { contentType: 'text/plain; version=0.0.4; charset=utf-8', metrics: async () => 'steward_fake 1\n' },
  } as unknown as Metrics;
  const quietLog = { info: () => undefined, error: () => undefined } as never;

  test('an accept error once listening (no descriptor left) is logged once a minute, never the end of stewardd', async () => {
    const errors: Array<{ code: string; msg: string }> = [];
    const log = {
      info: () => undefined,
      error: (o: { code: string }, msg: string) => errors.push({ code: o.code, msg }),
    };
    const l = await listenMetrics({ host: '127.0.0.1', port: 0 }, fakeMetrics, log as never, { spacingMs: 0 });
    try {
      // What Node's net.Server emits when accept(2) fails; with no listener, emit() throws it.
      const emfile = () => Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });
      assert.equal(l.server.emit('error', emfile()), true);
      assert.equal(l.server.emit('error', emfile()), true);
      assert.deepEqual(errors, [
        {
          code: 'EMFILE',
          msg: 'metrics port could not accept a connection; stewardd serves the CNI socket regardless',
        },
      ]);
      assert.equal((await fetch(`http://127.0.0.1:${l.address.port}/metrics`)).status, 200, 'it still serves');
    } finally {
      await l.close();
    }
  });

  test('over real HTTP: a request with a body is closed at once, never read; HEAD and absolute-form GET are served', async () => {
    const l = await listenMetrics({ host: '127.0.0.1', port: 0 }, fakeMetrics, quietLog, { spacingMs: 0 });
    /** Sends `head` and a first piece of body; what came back and how long until the server closed. */
    const send = (head: string, body: string) =>
      new Promise<{ answer: string; closedMs: number }>((resolve, reject) => {
        const t0 = performance.now();
        const s = connect(l.address.port, '127.0.0.1');
        let answer = '';
        s.on('data', (d) => (answer += d.toString()));
        s.on('error', () => undefined);
        s.once('close', () => resolve({ answer, closedMs: performance.now() - t0 }));
        s.write(head + body);
        // Keeps streaming, a byte at a time, as an attacker would; the server must not wait for it.
        const drip = setInterval(() => s.writable && s.write('1\r\na\r\n'), 10);
        s.once('close', () => clearInterval(drip));
        setTimeout(() => reject(new Error(`still open after 5 s: ${answer}`)), 5000).unref();
      });
    try {
      for (const [head, body] of [
        ['POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n', '1\r\na\r\n'],
        ['POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000000\r\n\r\n', 'aaaa'],
        ['GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n', 'a'],
      ] as const) {
        const r = await send(head, body);
        assert.equal(r.answer, '', `${head.split('\r')[0]}: closed without an answer`);
        assert.ok(r.closedMs < 4000, `${head.split('\r')[0]}: closed after ${r.closedMs} ms`);
      }
      const head = await fetch(`http://127.0.0.1:${l.address.port}/metrics`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(await head.text(), '');
      const absolute = await new Promise<string>((resolve) => {
        const s = connect(l.address.port, '127.0.0.1');
        let answer = '';
        s.on('data', (d) => (answer += d.toString()));
        s.once('close', () => resolve(answer));
        s.end('GET http://node:9090/metrics HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n');
      });
      assert.match(absolute, /^HTTP\/1\.1 200 /);
      assert.match(absolute, /steward_fake 1/);
    } finally {
      await l.close();
    }
  });

  test('over real HTTP: six scrapes at once are answered one spacing apart, every one 200; a 404 waits its turn too', async () => {
    const spacingMs = 100;
    const l = await listenMetrics({ host: '127.0.0.1', port: 0 }, fakeMetrics, quietLog, { spacingMs });
    try {
      const url = `http://127.0.0.1:${l.address.port}/metrics`;
      const t0 = performance.now();
      const done = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const r = await fetch(url);
          await r.text();
          return { status: r.status, at: performance.now() - t0 };
        }),
      );
      assert.deepEqual(
        done.map((d) => d.status),
        [200, 200, 200, 200, 200, 200],
      );
      // A lower bound only (a loaded machine may answer later, never sooner): the sixth answer came
      // at least five spacings after the first request was sent.
      const last = Math.max(...done.map((d) => d.at));
      assert.ok(last >= 5 * spacingMs - 5, `the last of six answers after ${last.toFixed(1)} ms`);
      // Past the spacing, so the first of the next two is answered at once: the second (whichever
      // it is) waits a spacing, the 404 as much as the scrape.
      await new Promise((r) => setTimeout(r, spacingMs + 20));
      const t1 = performance.now();
      const [a, b] = await Promise.all([fetch(url), fetch(`http://127.0.0.1:${l.address.port}/nope`)]);
      assert.deepEqual([a.status, b.status], [200, 404]);
      await Promise.all([a.text(), b.text()]);
      assert.ok(performance.now() - t1 >= spacingMs - 5, 'the second of the two waited a spacing');
    } finally {
      await l.close();
    }
  });

  test("over real HTTP: a silent connection and a slow request are closed soon after their timeouts, not at Node's 30 s check", async () => {
    /** ms until a listener with these timeouts closes a connection that `feed` writes to (12 s at most). */
    const closedAfter = async (
      timeouts: { idleTimeoutMs: number; headersTimeoutMs: number },
      feed: (socket: Socket) => () => void,
    ) => {
      const l = await listenMetrics({ host: '127.0.0.1', port: 0 }, fakeMetrics, quietLog, {
        spacingMs: 0,
        ...timeouts,
      });
      try {
        return await new Promise<number>((resolve, reject) => {
          const t0 = performance.now();
          const socket = connect(l.address.port, '127.0.0.1');
          const stop = feed(socket);
          const timer = setTimeout(() => {
            stop();
            socket.destroy();
            reject(new Error('the connection was still open after 12 s'));
          }, 12_000);
          socket.on('error', () => undefined);
          socket.once('close', () => {
            stop();
            clearTimeout(timer);
            resolve(performance.now() - t0);
          });
        });
      } finally {
        await l.close();
      }
    };
    // Never a byte: Node times no request for it (its header timeout starts with the first byte),
    // only the idle timeout closes it.
    const silent = await closedAfter({ idleTimeoutMs: 300, headersTimeoutMs: 5_000 }, () => () => undefined);
    // Upper bounds far above the timeouts (a stalled loop on a loaded machine), far below Node's own 30 s.
    assert.ok(silent >= 250 && silent < 6_000, `silent: closed after ${silent} ms`);
    // A byte every 100 ms: never idle (its idle timeout far off), its headers never complete.
    const slow = await closedAfter({ idleTimeoutMs: 5_000, headersTimeoutMs: 600 }, (socket) => {
      const header = 'GET /metrics HTTP/1.1\r\nX-Slow: ' + 'a'.repeat(1000);
      let i = 0;
      const t = setInterval(() => socket.write(header[i++ % header.length]!), 100);
      return () => clearInterval(t);
    });
    assert.ok(slow >= 550 && slow < 600 + METRICS_CONNECTION_CHECK_MS + 5_000, `slow: closed after ${slow} ms`);
  });

  test('over real HTTP: requests pipelined on one connection close it, and a client gone while waiting leaves the queue', async () => {
    // A spacing no test run reaches: after the first answer, every turn here ends by its client, never by its answer.
    const l = await listenMetrics({ host: '127.0.0.1', port: 0 }, fakeMetrics, quietLog, { spacingMs: 600_000 });
    const get = 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n';
    const until = async (what: string, ok: () => boolean) => {
      const t = performance.now();
      while (!ok()) {
        if (performance.now() - t > 10_000) assert.fail(`waited 10 s for ${what}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    try {
      assert.equal(
        (await fetch(`http://127.0.0.1:${l.address.port}/metrics`)).status,
        200,
        'the first is answered at once',
      );
      // Three requests in one write (fewer than the queue's own cap): the first waits its turn, the
      // second closes the connection, and with it the first leaves the queue: no answer, nothing waiting.
      const pipelined = await new Promise<string>((resolve, reject) => {
        const socket = connect(l.address.port, '127.0.0.1', () => socket.write(get.repeat(3)));
        let got = '';
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error(`the pipelining connection was still open after 10 s (${l.turnsWaiting()} waiting)`));
        }, 10_000);
        socket.on('data', (d) => (got += d.toString('latin1')));
        socket.on('error', () => undefined);
        socket.once('close', () => {
          clearTimeout(timer);
          resolve(got);
        });
      });
      assert.equal(pipelined, '', 'closed without an answer');
      await until('the pipelined connection to leave the queue', () => l.turnsWaiting() === 0);
      // One request that waits its turn, and whose client then leaves: out of the queue at once.
      const leaving = connect(l.address.port, '127.0.0.1', () => leaving.write(get));
      leaving.on('error', () => undefined);
      await until('the request to wait its turn', () => l.turnsWaiting() === 1);
      leaving.destroy();
      await until('the request to leave the queue with its client', () => l.turnsWaiting() === 0);
    } finally {
      await l.close();
    }
  });
});

describe('a metrics port that cannot be bound', () => {
  const fakeMetrics = {
    registry: { contentType: 'text/plain; version=0.0.4; charset=utf-8', metrics: async () => 'steward_fake 1\n' },
  } as unknown as Metrics;

  test('is tried again until it binds, logging the first failure, not every one; close() ends the tries', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as AddressInfo).port;
    const errors: unknown[] = [];
    const infos: string[] = [];
    const log = {
      error: (o: unknown) => errors.push(o),
      info: (_o: unknown, msg?: string) => infos.push(msg ?? String(_o)),
    } as never;
    const kept = keepListeningMetrics({ host: '127.0.0.1', port }, fakeMetrics, log, 20);
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(kept.listening(), false);
    assert.equal(errors.length, 1, 'one line for the first failures, not one per try');
    assert.match(JSON.stringify(errors[0]), /EADDRINUSE/);
    await new Promise<void>((r) => blocker.close(() => r()));
    await waitUntil(() => kept.listening());
    assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 200);
    assert.ok(infos.includes('metrics port bound after failing: Prometheus can scrape again'), infos.join('; '));
    await kept.close();
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`), 'closed with the daemon');
  });

  test('closed while failing, it tries no more', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as AddressInfo).port;
    const kept = keepListeningMetrics(
      { host: '127.0.0.1', port },
      fakeMetrics,
      { error: () => undefined } as never,
      20,
    );
    await new Promise((r) => setTimeout(r, 50));
    await kept.close();
    await new Promise<void>((r) => blocker.close(() => r()));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(kept.listening(), false);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`), 'nothing bound the port after close()');
  });
});

async function waitUntil(cond: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !cond();) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
