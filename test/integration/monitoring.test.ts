// Observability proven with the real thing: stewardd's --metrics-listen port serves GET /metrics
// and nothing else; every metric the shipped rules and dashboard read exists in a live scrape; and a
// real Prometheus (Debian's package) on loopback scrapes a real stewardd whose delegate keeps
// failing DEL, sees the shipped stuck-teardown alert go pending then firing through its own HTTP
// API, and sees it resolve once the delegate heals; and the audit alerts (StewardAuditFailing,
// StewardOrphansHeld) firing for a daemon whose periodic audit finds an old lease and no runtime.

import { openDatabase } from '../helpers/sqlite.js';
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { PROTOCOL_HEADER, PROTOCOL_VERSION } from '@cni-steward/shared';
import { METRICS_MAX_CONNECTIONS } from '../../daemon/src/metrics-listener.js';
import { Daemon } from '../helpers/daemon.js';
import { fakeRuntime } from '../helpers/fake-cri.js';
import { TestEnv } from '../helpers/env.js';
import { SYNTHETIC, dashboardExprs, exposedNames, metricNames, ruleGroups, rules } from '../helpers/monitoring.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { Prometheus, freeLoopbackPort } from '../helpers/prometheus.js';
import { shim } from '../helpers/shim.js';
import { poll } from '../helpers/poll.js';

const env = new TestEnv('monitoring');
after(() => env.close());

const POD_ARGS = 'K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0;K8S_POD_UID=uid-1';

/** Starts a daemon with --metrics-listen on a free loopback port; resolves with it and "127.0.0.1:PORT". */
async function daemonWithListener(name: string, args: string[] = []): Promise<{ daemon: Daemon; addr: string }> {
  const daemon = new Daemon(env, { name, args: ['--metrics-listen', '127.0.0.1:0', ...args] });
  await daemon.start();
  const line = readFileSync(daemon.logFile, 'utf8')
    .split('\n')
    .find((l) => l.includes('"metricsListen"'));
  assert.ok(line, 'the daemon logs the address it listens on');
  return { daemon, addr: JSON.parse(line).metricsListen as string };
}

describe('--metrics-listen', () => {
  it('serves GET /metrics on TCP and 404 for everything else; the control API stays on the socket', async () => {
    const { daemon, addr } = await daemonWithListener('listener');
    assert.match(addr, /^127\.0\.0\.1:\d+$/);
    const metrics = await fetch(`http://${addr}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(await metrics.text(), /^steward_ready 1$/m);
    for (const [method, path] of [
      ['GET', '/v1/status'],
      ['GET', '/v1/attachments'],
      ['GET', '/v1/teardowns'],
      ['POST', '/v1/teardowns/retry'],
      ['POST', '/v1/cni'],
      ['GET', '/healthz'],
      ['GET', '/readyz'],
      ['GET', '/'],
      ['POST', '/metrics'],
      ['GET', '/metrics/x'],
    ] as const) {
      const r = await fetch(`http://${addr}${path}`, { method });
      assert.equal(r.status, 404, `${method} ${path}`);
      await r.text();
    }
    assert.equal((await daemon.get('/v1/status')).status, 200, 'the socket still serves the API');
    assert.equal((await daemon.get('/metrics')).status, 200, 'and /metrics');
    await daemon.stop();
  });

  it('holds at most 64 connections: idle ones past that are closed, and the CNI socket keeps serving', async () => {
    // The port is open on the node's address; idle connections without a cap took every file
    // descriptor stewardd had, and with them its CNI socket.
    const { daemon, addr } = await daemonWithListener('conn-cap');
    const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
    const socks: Socket[] = [];
    let closedEarly = 0;
    for (let i = 0; i < 100; i++) {
      const s = connect(port, host);
      s.on('error', () => undefined);
      s.once('close', () => closedEarly++);
      socks.push(s);
    }
    env.defer(() => {
      for (const s of socks) s.destroy();
    });
    await poll('the connections over the cap to be closed', 10_000, async () =>
      closedEarly >= 100 - METRICS_MAX_CONNECTIONS ? true : undefined,
    );
    assert.equal((await daemon.get('/healthz')).status, 200, 'the CNI socket still serves');
    for (const s of socks) s.destroy();
    await daemon.stop();
  });

  it('a port it cannot bind (taken, an address not on the node) never stops it: the CNI socket serves, and the port is bound once free', async () => {
    // A daemon that exited over its optional metrics port left the conflist naming a shim with no
    // daemon behind it: every new pod's ADD failed (hostile review of the DaemonSet).
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as AddressInfo).port;
    env.defer(() => void blocker.close());
    const daemon = new Daemon(env, { name: 'port-taken', args: ['--metrics-listen', `127.0.0.1:${port}`] });
    await daemon.start();
    assert.match(
      readFileSync(daemon.logFile, 'utf8'),
      /metrics port could not be bound.*EADDRINUSE|EADDRINUSE.*metrics port could not be bound/,
    );
    const add = await shim(
      { command: 'ADD', containerId: 'taken', netns: env.netns() },
      stewardConf(daemon.socket, '1.0.0', [
        delegate('podnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-taken'), {})]),
      ]),
    );
    assert.equal(add.code, 0, add.stdout);
    await new Promise<void>((r) => blocker.close(() => r()));
    await poll('the freed port bound (tried again every 10 s)', 25_000, async () =>
      (await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined))?.status === 200 ? true : undefined,
    );
    assert.match(readFileSync(daemon.logFile, 'utf8'), /metrics port bound after failing/);
    await daemon.stop();
    // An address on no interface here (TEST-NET-2): EADDRNOTAVAIL, as a node address not yet up.
    const absent = '198.51.100.77';
    assert.ok(!Object.values(networkInterfaces()).some((l) => l?.some((i) => i.address === absent)), absent);
    const away = new Daemon(env, { name: 'addr-away', args: ['--metrics-listen', `${absent}:9631`] });
    await away.start();
    assert.match(readFileSync(away.logFile, 'utf8'), /EADDRNOTAVAIL/);
    assert.equal((await away.get('/readyz')).status, 200);
    await away.stop();
  });

  it('refuses a malformed address at start, naming the flag', async () => {
    const daemon = new Daemon(env, { name: 'bad-listen', args: ['--metrics-listen', 'localhost'] });
    await assert.rejects(daemon.start(), /exited with/);
    assert.match(readFileSync(daemon.logFile, 'utf8'), /--metrics-listen must be ADDR:PORT/);
  });
});

describe('metric names', () => {
  it('every metric the alert rules and the dashboard read exists in a live scrape, and names follow Prometheus conventions', async () => {
    const { daemon, addr } = await daemonWithListener('names', [
      '--retry-base-ms',
      '50',
      '--retry-max-ms',
      '100',
      '--retry-max-attempts',
      '2',
    ]);
    const conf = (o: Record<string, unknown>) =>
      stewardConf(daemon.socket, '1.0.0', [delegate('podnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-names'), o)])]);
    // Traffic that makes every labelled series appear: a DEL abandoned after its retries, an ADD error.
    assert.equal(
      (
        await shim(
          { command: 'ADD', containerId: 'n1', netns: env.netns(), args: POD_ARGS },
          conf({ failDelAlways: true }),
        )
      ).code,
      0,
    );
    assert.equal(
      (await shim({ command: 'DEL', containerId: 'n1', netns: '', args: POD_ARGS }, conf({ failDelAlways: true })))
        .code,
      0,
    );
    assert.notEqual(
      (await shim({ command: 'ADD', containerId: 'n2', netns: env.netns() }, conf({ failAdd: true }))).code,
      0,
    );
    await daemon.waitFor(
      'the step to be abandoned',
      async () => ((await daemon.status()).steps.abandoned ?? 0) === 1,
      60_000,
    );

    // A request of a protocol version the daemon does not speak (a shim from another release): refused, counted.
    const skewed = await daemon.request('POST', '/v1/cni', '{}', { 'x-steward-protocol': '3' });
    assert.equal(skewed.status, 409, skewed.text);
    // The label is bounded: a version no release of this line can speak is "other", however many
    // different ones a client sends (one series each made 20,000 series from one loop).
    for (const v of ['999', '100000', '123456'])
      assert.equal((await daemon.request('POST', '/v1/cni', '{}', { 'x-steward-protocol': v })).status, 409);

    // Refused before the engine, and still counted (the ADD error-rate alert reads this counter): a
    // body without the CNI_* variables, named ADD by its hint; without hints, a command that is none
    // (its label bounded: "invalid", never the client's word).
    const bare = await daemon.request('POST', '/v1/cni', '{"env":{"CNI_COMMAND":"ADD"},"config":{}}', {
      'content-type': 'application/json',
      'x-cni-command': 'ADD',
      [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
    });
    assert.equal(bare.json.code, 4, bare.text);
    const frob = await daemon.request('POST', '/v1/cni', '{"env":{"CNI_COMMAND":"FROB"},"config":{}}', {
      'content-type': 'application/json',
    });
    assert.equal(frob.json.code, 4, frob.text);

    const text = await (await fetch(`http://${addr}/metrics`)).text();
    const exposed = exposedNames(text);
    const used = new Set([...rules().map((r) => r.expr), ...dashboardExprs()].flatMap(metricNames));
    assert.ok(used.size >= 15, [...used].join(', '));
    for (const name of used) {
      if (SYNTHETIC.has(name)) continue;
      assert.ok(exposed.has(name), `${name} is used by deploy/monitoring but not in the scrape`);
    }

    // One prefix; counters end in _total; no stewardd_ leftovers.
    const types = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => ({
      name: m[1] as string,
      type: m[2] as string,
    }));
    assert.ok(types.length > 20);
    for (const { name, type } of types) {
      assert.match(name, /^steward_/, name);
      if (type === 'counter') assert.match(name, /_total$/, name);
      if (name.includes('seconds') || name.includes('bytes')) assert.match(name, /_(seconds|bytes)(_total)?$/, name);
    }
    assert.match(text, /^steward_cni_requests_total\{command="ADD",code="0"\} 1$/m);
    assert.match(text, /^steward_cni_requests_total\{command="ADD",code="201"\} 1$/m);
    assert.match(text, /^steward_cni_requests_total\{command="ADD",code="4"\} 1$/m);
    assert.match(text, /^steward_cni_requests_total\{command="invalid",code="4"\} 1$/m);
    assert.match(text, /^steward_teardown_abandoned_steps 1$/m);
    assert.match(text, /^steward_teardown_abandoned_total\{plugin="steward-fixture"\} 1$/m);
    assert.match(
      text,
      /^steward_plugin_executions_total\{plugin="steward-fixture",command="DEL",outcome="error"\} [2-9]$/m,
    );
    assert.match(text, /^steward_plugin_duration_seconds_count\{plugin="steward-fixture",command="ADD"\} 2$/m);
    assert.match(text, /^steward_db_write_errors_total 0$/m);
    // Each of the two ADDs journalled its chain in one synced commit; later writes were relaxed; the
    // three requests and the retries each waited in their container's queue (docs/performance.md).
    const sample = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    assert.ok(sample(/^steward_journal_commit_seconds_count\{synced="true"\} (\d+)$/m) >= 2, 'synced commits');
    assert.ok(sample(/^steward_journal_commit_seconds_count\{synced="false"\} (\d+)$/m) >= 1, 'relaxed commits');
    assert.ok(sample(/^steward_queue_wait_seconds_count (\d+)$/m) >= 3, 'queue waits');
    assert.match(text, /^steward_version_skew_seen_total\{shim_protocol="3"\} 1$/m);
    assert.match(text, /^steward_version_skew_seen_total\{shim_protocol="other"\} 3$/m);
    assert.doesNotMatch(text, /shim_protocol="(999|100000|123456)"/);
    // Without --cni-conf-dir there is no installed shim to compare: 0 (lifecycle-shim-skew.test.ts shows 1).
    assert.match(text, /^steward_installed_shim_mismatch 0$/m);
    await daemon.stop();
  });

  it('spooled DELs waiting are counted on scrape while they drain at start, and the daemon is ready meanwhile', async () => {
    const port = await freeLoopbackPort();
    const daemon = new Daemon(env, { name: 'spool', args: ['--metrics-listen', `127.0.0.1:${port}`] });
    await daemon.start();
    const scrape = async (name: string) =>
      (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).match(new RegExp(`^${name} (\\d+)$`, 'm'))?.[1];
    assert.equal(await scrape('steward_spool_pending_dels'), '0');
    await daemon.stop();
    // What the shim does while the daemon is down: each DEL lands in the spool dir. The delegate's
    // DEL is slow, so the replay at the next start takes seconds and the files wait meanwhile.
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-spool'), { sleepDelMs: 2500 })]),
    ]);
    assert.equal((await shim({ command: 'DEL', containerId: 'sp1', netns: '' }, conf)).code, 0);
    assert.equal((await shim({ command: 'DEL', containerId: 'sp2', netns: '' }, conf)).code, 0);
    const starting = daemon.start();
    starting.catch(() => undefined);
    // The socket opens before the drain (issue 19): ready while the two DELs are still waiting.
    await starting;
    assert.equal(await scrape('steward_spool_pending_dels'), '2');
    assert.equal(await scrape('steward_ready'), '1');
    await poll('the spool to be empty', 30_000, async () =>
      (await scrape('steward_spool_pending_dels')) === '0' ? true : undefined,
    );
    assert.equal(await scrape('steward_ready'), '1');
    await daemon.stop();
  });
});

describe('database write errors', () => {
  it('a journal write SQLite refuses is counted in steward_db_write_errors_total and the ADD answers code 11', async () => {
    const { daemon, addr } = await daemonWithListener('dbwrite');
    // Another writer holds the database's write lock past the daemon's busy_timeout (5 s): SQLITE_BUSY.
    const other = openDatabase(join(daemon.stateDir, 'steward.db'));
    env.defer(() => {
      if (other.open) {
        if (other.inTransaction) other.exec('ROLLBACK');
        other.close();
      }
    });
    other.exec('BEGIN IMMEDIATE');
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('podnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-db'))]),
    ]);
    const add = await shim({ command: 'ADD', containerId: 'db-1', netns: env.netns(), args: POD_ARGS }, conf);
    other.exec('ROLLBACK');
    other.close();
    assert.equal(add.json?.code, 11, add.stdout);
    const text = await (await fetch(`http://${addr}/metrics`)).text();
    assert.match(text, /^steward_db_write_errors_total [1-9]\d*$/m);
    assert.match(text, /^steward_cni_requests_total\{command="ADD",code="11"\} 1$/m);
    await daemon.stop();
  });
});

describe('a real Prometheus scraping a real stewardd', () => {
  it(
    'sees the shipped stuck-teardown alert go pending and firing while a delegate fails DEL, and resolve once it heals',
    { timeout: 120_000 },
    async (t) => {
      const t0 = Date.now();
      const { daemon, addr } = await daemonWithListener('prom', ['--retry-base-ms', '300', '--retry-max-ms', '1000']);
      const broken = join(env.dir, 'delegate-broken');
      writeFileSync(broken, '');
      const conf = stewardConf(daemon.socket, '1.0.0', [
        delegate('podnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx-prom'), { failDelWhileFile: broken })]),
      ]);
      assert.equal(
        (await shim({ command: 'ADD', containerId: 'stuck-1', netns: env.netns(), args: POD_ARGS }, conf)).code,
        0,
      );
      assert.equal((await shim({ command: 'DEL', containerId: 'stuck-1', netns: '', args: POD_ARGS }, conf)).code, 0);
      await daemon.waitFor('a pending teardown', async () => (await daemon.status()).teardownQueue.depth === 1);

      // The shipped rules, unchanged except for speed: the stuck-teardown alert's threshold (900 s ->
      // 3 s) and its `for` (5m -> 3s), so it plays out in seconds rather than 20 minutes.
      const groups = structuredClone(ruleGroups());
      const stuck = groups.flatMap((g) => g.rules).find((r) => r.alert === 'StewardTeardownStuck');
      assert.ok(stuck);
      assert.equal(stuck.expr, 'steward_oldest_pending_teardown_seconds > 900');
      assert.equal(stuck.for, '5m');
      stuck.expr = stuck.expr.replace('> 900', '> 3');
      stuck.for = '3s';
      const prom = new Prometheus(env, { targets: [addr], groups, intervalSeconds: 1 });
      await prom.start();
      const promReady = Date.now();
      await poll('Prometheus to scrape stewardd', 30_000, async () =>
        (await prom.targetHealth()).includes('up') ? true : undefined,
      );

      const seen = new Set<string>();
      const firing = await poll('StewardTeardownStuck to fire', 60_000, async () => {
        const alerts = await prom.alerts('StewardTeardownStuck');
        for (const a of alerts) seen.add(a.state);
        return alerts.find((a) => a.state === 'firing');
      });
      assert.ok(seen.has('pending'), `the alert went through pending first (seen: ${[...seen].join(', ')})`);
      assert.deepEqual(
        { instance: firing.labels.instance, job: firing.labels.job, severity: firing.labels.severity },
        { instance: addr, job: 'steward', severity: 'warning' },
      );
      assert.ok(Number(firing.value) > 3, firing.value);
      assert.equal(await prom.ruleState('StewardTeardownStuck'), 'firing');
      const firedAt = Date.now();

      // Heal the delegate: the retry scheduler's next DEL succeeds, the gauge drops to 0, the alert resolves.
      rmSync(broken);
      const healedAt = Date.now();
      await daemon.waitFor(
        'the teardown to finish',
        async () => (await daemon.status()).teardownQueue.depth === 0,
        30_000,
      );
      await poll('StewardTeardownStuck to resolve', 60_000, async () =>
        (await prom.alerts('StewardTeardownStuck')).length === 0 &&
        (await prom.ruleState('StewardTeardownStuck')) === 'inactive'
          ? true
          : undefined,
      );

      t.diagnostic(
        `prometheus ready to firing: ${((firedAt - promReady) / 1000).toFixed(1)} s; heal to resolved: ${((Date.now() - healedAt) / 1000).toFixed(1)} s`,
      );
      // Nothing else fired on this healthy-again daemon.
      for (const r of rules())
        if (r.alert !== 'StewardTeardownStuck') assert.deepEqual(await prom.alerts(r.alert), [], r.alert);
      await prom.stop();
      await daemon.stop();
      assert.ok(Date.now() - t0 < 120_000);
    },
  );
});

describe('a real Prometheus and the audit alerts', () => {
  it(
    'sees StewardOrphansHeld fire for an old orphan lease, then StewardAuditFailing instead once the runtime is gone',
    { timeout: 300_000 },
    async () => {
      // An old leftover lease (host-local's format, 2 h old) whose sandbox the runtime does not list:
      // every pass reports it past the grace (report only, nothing released). Then the runtime stops:
      // the passes fail, the lease's owner is unknown, and only StewardAuditFailing stays.
      const leases = join(env.dir, 'audit-networks');
      mkdirSync(join(leases, 'auditnet'), { recursive: true });
      const lease = join(leases, 'auditnet', '10.78.0.10');
      writeFileSync(lease, `${'b'.repeat(64)}\r\neth0`);
      const t = (Date.now() - 7200_000) / 1000;
      utimesSync(lease, t, t);
      const runtime = join(env.dir, 'cri.sock');
      const cri = await fakeRuntime(env, runtime, ['c'.repeat(64)]);
      const { daemon, addr } = await daemonWithListener('audit-alerts', [
        '--audit-interval',
        '1s',
        '--runtime-endpoint',
        `unix://${runtime}`,
        '--audit-lease-dir',
        leases,
        '--audit-cache-dir',
        join(env.dir, 'audit-results'),
        '--audit-portmap-network',
        'no-such-network',
      ]);
      const scrape = async () => (await fetch(`http://${addr}/metrics`)).text();
      await poll('a successful periodic audit pass', 30_000, async () =>
        /^steward_audit_last_run_success 1$/m.test(await scrape()) ? true : undefined,
      );
      let text = await scrape();
      assert.match(text, /^steward_audit_orphans\{kind="lease"\} 1$/m);
      assert.match(text, /^steward_audit_orphans_past_grace\{kind="lease"\} 1$/m);
      assert.match(text, /^steward_audit_released_total\{kind="lease"\} 0$/m);

      // The shipped rules, their `for` shortened (1h and 30m -> 2s) so they play out in seconds.
      const groups = structuredClone(ruleGroups());
      const all = groups.flatMap((g) => g.rules);
      const held = all.find((r) => r.alert === 'StewardOrphansHeld');
      const failing = all.find((r) => r.alert === 'StewardAuditFailing');
      assert.ok(held && failing);
      assert.equal(held.for, '1h');
      assert.equal(failing.for, '30m');
      held.for = '2s';
      failing.for = '2s';
      const prom = new Prometheus(env, { targets: [addr], groups, intervalSeconds: 1 });
      await prom.start();
      const fires = async (name: string) => {
        const firing = await poll(`${name} to fire`, 60_000, async () =>
          (await prom.alerts(name)).find((a) => a.state === 'firing'),
        );
        assert.deepEqual(
          { instance: firing.labels.instance, job: firing.labels.job, severity: firing.labels.severity },
          { instance: addr, job: 'steward', severity: 'warning' },
        );
      };
      await fires('StewardOrphansHeld');
      assert.equal(await prom.ruleState('StewardAuditFailing'), 'inactive');

      await cri.stop();
      await poll('a pass that reached no runtime', 30_000, async () =>
        /^steward_audit_last_run_success 0$/m.test(await scrape()) ? true : undefined,
      );
      text = await scrape();
      assert.match(text, /^steward_audit_orphans\{kind="lease"\} 1$/m, 'still reported, owner unknown');
      assert.match(text, /^steward_audit_orphans_past_grace\{kind="lease"\} 0$/m);
      await fires('StewardAuditFailing');
      await poll('StewardOrphansHeld to resolve', 60_000, async () =>
        (await prom.ruleState('StewardOrphansHeld')) === 'inactive' ? true : undefined,
      );
      assert.ok(readFileSync(lease, 'utf8').startsWith('b'), 'nothing released');
      await prom.stop();
      await daemon.stop();
    },
  );
});
