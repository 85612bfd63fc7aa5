// The audit against runtimes that answer wrong (issue 28): an empty list, ids in upper case, cut to 12
// characters or prefixed, an error mid-pass, a slow answer. On one node, in one lease dir, hours old:
// pod A went through steward (bridge + host-local, a real netns), pod B never did (the same chain run
// directly, as a runtime on another conflist runs it; a libcni cache entry without a netns, as
// containerd 1.6 writes it; a portmap rule to its address), and C is a true leftover. Whatever the
// runtime says, no lease, cache file or portmap rule of A or B is ever released, in one-shot and
// periodic release alike; the report says why a pass only reported; C goes once a runtime answers
// sanely. Then the pass's bounds: one ask for ten releases from a runtime that takes 3 s to answer,
// and host-local's lock held for a batch of files, not a scan of 50,000.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Daemon, FAST_RETRY } from '../helpers/daemon.js';
import { directAdd, directDel } from '../helpers/direct.js';
import { TestEnv, leases } from '../helpers/env.js';
import { stewardd } from '../helpers/node-tree.js';
import { fakeRuntime } from '../helpers/fake-cri.js';
import { bridgePlugin, delegate, stewardConf } from '../helpers/netconf.js';
import { portmapCall, portmapOwners } from '../helpers/portmap.js';
import { removePortmapChainsAtClose } from '../helpers/cri/leftovers.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('audit-hostile');
after(() => env.close());

const A = 'a1'.repeat(32);
const B = 'b2'.repeat(32);
const C = 'c3'.repeat(32);
const NET = `hostile-${process.pid}`;
const PMNET = `stw-hpm-${process.pid}`;
const HOURS = 3 * 3600;

const cli = (args: string[]) => stewardd(args);

function age(path: string, seconds: number): void {
  const t = (Date.now() - seconds * 1000) / 1000;
  utimesSync(path, t, t);
}

interface Report {
  orphans: Array<{ kind: string; containerId: string; released: boolean; path: string }>;
  runtime: { reachable: boolean; distrusted?: string; message?: string };
  reportOnly?: string;
}

describe('the audit against a runtime that answers wrong, with live pods through steward and on a plain chain', () => {
  let daemon: Daemon;
  const dataDir = join(env.dir, 'networks');
  const cacheDir = join(env.dir, 'results');
  let ipB = '';
  let ipA = '';
  const held: string[] = [];
  let leftover = '';

  before(async () => {
    mkdirSync(cacheDir, { recursive: true });
    const right = join(env.dir, 'right.sock');
    await fakeRuntime(env, right, [A, B]);
    daemon = new Daemon(env, {
      name: 'd',
      args: auditArgs(right),
    });
    await daemon.start();
    const bridge = env.bridge();
    const subnet = env.subnet();
    const chain = bridgePlugin({ bridge, subnet, dataDir });
    // A: through steward.
    const nsA = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate(NET, '1.0.0', [chain])]);
    const add = await shim({ command: 'ADD', containerId: A, netns: nsA }, conf);
    assert.equal(add.code, 0, add.stdout);
    ipA = (JSON.parse(add.stdout) as { ips: Array<{ address: string }> }).ips[0]!.address.split('/')[0]!;
    env.defer(async () => {
      await shim({ command: 'DEL', containerId: A, netns: nsA }, conf);
    });
    // B: the same chain run directly, never through steward.
    const nsB = env.netns();
    const net = { name: NET, cniVersion: '1.0.0', plugins: [chain] };
    const b = await directAdd(net, { containerId: B, netns: nsB });
    assert.ok(b.ok, JSON.stringify(b.error));
    env.defer(async () => {
      await directDel(net, { containerId: B, netns: nsB }, b.result);
    });
    ipB = (b.result as { ips: Array<{ address: string }> }).ips[0]!.address.split('/')[0]!;
    const cacheB = join(cacheDir, `${NET}-${B}-eth0`);
    writeFileSync(
      cacheB,
      JSON.stringify({
        kind: 'cniCacheV1',
        containerId: B,
        ifName: 'eth0',
        networkName: NET,
        config: '',
        result: b.result,
      }),
    );
    removePortmapChainsAtClose(env);
    const hostPort = 31000 + (process.pid % 1000);
    portmapCall('ADD', { network: PMNET, cid: B, netns: nsB, ip: ipB, hostPort });
    env.defer(() => portmapCall('DEL', { network: PMNET, cid: B, netns: nsB, ip: ipB, hostPort }));
    // C: a true leftover in the same pool.
    const base = subnet.split('.').slice(0, 3).join('.');
    leftover = join(dataDir, NET, `${base}.200`);
    writeFileSync(leftover, `${C}\r\neth0`);
    // Everything hours old: the grace alone protects nothing.
    for (const ip of [ipA, ipB]) {
      age(join(dataDir, NET, ip), HOURS);
      held.push(join(dataDir, NET, ip));
    }
    age(leftover, HOURS);
    age(cacheB, HOURS);
    held.push(cacheB);
    assert.deepEqual(leases(dataDir, NET).sort(), [ipA, ipB, `${base}.200`].sort());
  });

  /** A daemon's flags to audit this node's dirs and portmap network, asking the runtime on `sock`. */
  const auditArgs = (sock: string) => [
    ...FAST_RETRY,
    '--runtime-endpoint',
    `unix://${sock}`,
    '--audit-lease-dir',
    dataDir,
    '--audit-cache-dir',
    cacheDir,
    '--audit-portmap-network',
    PMNET,
  ];

  /** Everything A and B hold is still there: leases, B's cache file and portmap rule, A's attachment. */
  async function nothingLiveReleased(why: string): Promise<void> {
    for (const p of held) assert.ok(existsSync(p), `${why}: ${p} is still held`);
    assert.ok(portmapOwners(PMNET).includes(B), `${why}: B's portmap rule stays`);
    assert.equal((await daemon.attachment(A)).state, 'added', `${why}: A's attachment stays`);
  }

  async function auditWith(name: string, ids: string[], opts: Parameters<typeof fakeRuntime>[3] = {}) {
    const sock = join(env.dir, `${name}.sock`);
    await fakeRuntime(env, sock, ids, opts);
    const r = await cli([
      'audit',
      '--release',
      '--grace',
      '1s',
      '--runtime-endpoint',
      `unix://${sock}`,
      '-o',
      'json',
      '--socket',
      daemon.socket,
    ]);
    return { r, body: JSON.parse(r.stdout) as Report };
  }

  const distrusting: Array<[string, () => string[], RegExp]> = [
    ['an empty list', () => [], /listed no sandbox while 1 journalled pod\(s\) still have their network namespace/],
    ['upper-case ids', () => [A.toUpperCase(), B.toUpperCase()], /not 64 lower-case hex digits/],
    ['12-character short ids', () => [A.slice(0, 12), B.slice(0, 12)], /not 64 lower-case hex digits/],
    ['sha256:-prefixed ids', () => [`sha256:${A}`, `sha256:${B}`], /not 64 lower-case hex digits/],
  ];
  for (const [what, ids, reason] of distrusting) {
    it(`${what}: the pass only reports, says why, and releases nothing (not even the true leftover)`, async () => {
      const { r, body } = await auditWith(what.replace(/\W+/g, '-'), ids());
      assert.equal(r.code, 5, `not trusted: exit 5, as with no runtime: ${r.stderr}`);
      assert.match(body.runtime.distrusted ?? '', reason);
      assert.equal(body.reportOnly, body.runtime.distrusted);
      assert.deepEqual(
        body.orphans.filter((o) => o.released),
        [],
      );
      assert.ok(existsSync(leftover));
      await nothingLiveReleased(what);
      const table = await cli([
        'audit',
        '--runtime-endpoint',
        `unix://${join(env.dir, `${what.replace(/\W+/g, '-')}.sock`)}`,
        '--socket',
        daemon.socket,
      ]);
      assert.match(table.stdout, /runtime NOT TRUSTED this pass: .*; report only/);
    });
  }

  it('an answer that lies, then errors mid-pass: nothing live released; exit 5 once it stops answering', async () => {
    const { body } = await auditWith('lies-then-errors', [], { failAfter: 1 });
    assert.ok(body.orphans.every((o) => !o.released));
    await nothingLiveReleased('errors mid-pass');
    const { r: r2, body: b2 } = await auditWith('errors', [], { failAfter: 0 });
    assert.equal(r2.code, 5, r2.stderr);
    assert.equal(b2.runtime.reachable, false);
    assert.ok(b2.orphans.every((o) => !o.released));
    await nothingLiveReleased('errors');
  });

  it('a slow, empty answer (3 s): report only, nothing released', async () => {
    const { r, body } = await auditWith('slow', [], { delayMs: 3000 });
    assert.equal(r.code, 5, r.stderr);
    assert.match(body.runtime.distrusted ?? '', /listed no sandbox/);
    assert.ok(body.orphans.every((o) => !o.released));
    await nothingLiveReleased('slow');
  });

  it('a runtime that forgot the plain pod (lists A only): the node shows B alive, so the list is not trusted and nothing is released', async () => {
    const { r, body } = await auditWith('forgot-b', [A]);
    assert.equal(r.code, 5, r.stderr);
    assert.match(body.runtime.distrusted ?? '', /1 container\(s\) the runtime does not list still hold an address/);
    assert.ok(!body.orphans.some((o) => o.containerId === B), 'B is not an orphan: its address is on an interface');
    assert.ok(body.orphans.every((o) => !o.released));
    assert.ok(existsSync(leftover), 'C waits for a runtime whose list the node does not contradict');
    await nothingLiveReleased('forgot B');
  });

  it('the periodic pass (every 1 s, release, grace 1 s) against a runtime listing nothing keeps every live pod, and says why', async () => {
    // A second daemon that never saw A: only the node's proof protects A and B here.
    const empty = join(env.dir, 'periodic-empty.sock');
    await fakeRuntime(env, empty, []);
    const periodic = new Daemon(env, {
      name: 'p',
      args: [...auditArgs(empty), '--audit-interval', '1s', '--audit-release', '--audit-grace', '1s'],
    });
    await periodic.start();
    // Five passes, told apart by the time each one finished (a loaded machine spaces them out): a
    // release needs two trusted passes a grace apart, so one pass would prove little.
    const passes = new Set<string>();
    await periodic.waitFor(
      'five audit passes',
      async () => {
        const at = /^steward_audit_last_run_timestamp_seconds (\S+)$/m.exec((await periodic.get('/metrics')).text)?.[1];
        if (at !== undefined && Number(at) > 0) passes.add(at);
        return passes.size >= 5;
      },
      60_000,
    );
    await nothingLiveReleased('periodic');
    assert.ok(existsSync(leftover));
    const metrics = (await periodic.get('/metrics')).text;
    assert.match(metrics, /^steward_audit_runtime_distrusted 1$/m);
    const log = readFileSync(periodic.logFile, 'utf8');
    assert.doesNotMatch(log, /audit: released an orphan/);
    assert.match(log, /the runtime's answer contradicts the node/);
    await periodic.stop();
  });

  it('a runtime that lists every live pod: the true leftover goes through host-local, the live pods keep everything', async () => {
    const { r, body } = await auditWith('right-again', [A, B]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(body.runtime.distrusted, undefined);
    assert.deepEqual(
      body.orphans.filter((o) => o.containerId === C).map((o) => [o.kind, o.released]),
      [['lease', true]],
    );
    assert.ok(!existsSync(leftover), "host-local's DEL freed C's lease");
    await nothingLiveReleased('a sane list');
  });
});

/** A daemon auditing only the leases under dataDir (no cache dir, none of the first describe's portmap rules). */
function leasesOnlyDaemon(name: string, sock: string, dataDir: string): Daemon {
  return new Daemon(env, {
    name,
    args: [
      ...FAST_RETRY,
      '--runtime-endpoint',
      `unix://${sock}`,
      '--audit-lease-dir',
      dataDir,
      '--audit-cache-dir',
      join(env.dir, 'none'),
      '--audit-portmap-network',
      `${PMNET}-none`,
    ],
  });
}

describe("an audit pass's bounds", () => {
  it('a runtime answering in 3 s: ten releases take one answer, not one each', async () => {
    const dataDir = join(env.dir, 'bounded');
    const dir = join(dataDir, 'slownet');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'lock'), '');
    for (let i = 1; i <= 10; i++) {
      const p = join(dir, `10.66.0.${i}`);
      writeFileSync(p, `${(0xd00 + i).toString(16).padStart(64, '0')}\r\neth0`);
      age(p, HOURS);
    }
    const sock = join(env.dir, 'slow3.sock');
    const cri = await fakeRuntime(env, sock, [], { delayMs: 3000 });
    const d = leasesOnlyDaemon('b', sock, dataDir);
    await d.start();
    const t0 = Date.now();
    const r = await cli(['audit', '--release', '--grace', '1m', '-o', 'json', '--socket', d.socket]);
    const took = Date.now() - t0;
    assert.equal(r.code, 0, r.stderr);
    const body = JSON.parse(r.stdout) as Report;
    assert.equal(body.orphans.filter((o) => o.released).length, 10, r.stdout);
    assert.equal(cri.calls(), 1, 'one ask for the pass and its one batch of releases');
    // Ten asks would be 30 s; one answer plus ten host-local DELs is a few seconds.
    assert.ok(took < 9000, `took ${took} ms`);
    await d.stop();
  });

  it("50,000 leases in one network: host-local's lock is never held for more than a batch of files", async () => {
    const dataDir = join(env.dir, 'big');
    const dir = join(dataDir, 'bignet');
    mkdirSync(dir, { recursive: true });
    const lock = join(dir, 'lock');
    writeFileSync(lock, '');
    const N = 50_000;
    for (let i = 0; i < N; i++)
      writeFileSync(
        join(dir, `10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`),
        `${i.toString(16).padStart(64, '0')}\r\neth0`,
      );
    const sock = join(env.dir, 'big.sock');
    await fakeRuntime(env, sock, []);
    const d = leasesOnlyDaemon('big', sock, dataDir);
    await d.start();
    let done = false;
    const pass = d.request('GET', '/v1/audit').finally(() => (done = true));
    // A pod's ADD takes this lock around its reservation: time how long it waits while the pass scans.
    const run = promisify(execFile);
    const waits: number[] = [];
    while (!done) {
      const t = Date.now();
      await run('flock', ['--exclusive', '-w', '120', lock, 'true']);
      waits.push(Date.now() - t);
      await new Promise((r) => setTimeout(r, 20));
    }
    const res = await pass;
    assert.equal(res.status, 200);
    const found = (res.json as Report).orphans.filter((o) => o.kind === 'lease').length;
    assert.equal(found, N, 'every lease read, batch by batch');
    assert.ok(waits.length >= 5, `the lock was asked for during the scan (${waits.length} times)`);
    const longest = Math.max(...waits);
    assert.ok(longest < 3000, `the longest wait for host-local's lock was ${longest} ms (${waits.length} waits)`);
    await d.stop();
  });
});
