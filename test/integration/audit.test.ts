// `stewardd audit` against a real daemon: a fake CRI runtime (a gRPC server on a temp Unix socket
// serving runtime.v1 ListPodSandbox with chosen ids), host-local lease files written in host-local's
// format in a temp dataDir and aged with utimes, and a libcni cache file. The report must list exactly
// the leftovers; --release must free exactly those past the grace (through Debian's real host-local
// DEL for a lease), leaving the young one and the live pod's; with no runtime reachable it reports,
// releases nothing, and exits 5. portmap rules are real: Debian's portmap ADD run for a container in a
// netns made here (on a network named for this run, which the daemon is told to audit alone), and
// released by the daemon through a portmap DEL; every chain is removed at close whatever happens.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { basename, join } from 'node:path';
import { Daemon, FAST_RETRY } from '../helpers/daemon.js';
import { VERDICT_REASON } from '../../daemon/src/audit/decide.js';
import { RELEASE_BATCH } from '../../daemon/src/audit/run.js';
import { fakeRuntime } from '../helpers/fake-cri.js';
import { portmapCall, portmapOwners as portmapOwnersOf } from '../helpers/portmap.js';
import { REPO, TestEnv, fixtureCalls } from '../helpers/env.js';
import { stewardd } from '../helpers/node-tree.js';
import { removePortmapChainsAtClose } from '../helpers/cri/leftovers.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('audit');
after(() => env.close());

const id = (c: string) => c.repeat(64);
const LIVE = id('a');
const DEAD_OLD = id('b');
const DEAD_YOUNG = id('c');
const DEAD_CACHED = id('d');
const NET = 'auditnet';
/** Attached through steward, then its sandbox removed behind steward's back (the runtime never lists it). */
const JOURNALLED = id('e');
/** Attached through steward and not listed by the runtime yet, its network namespace still there (a sandbox starting). */
const STARTING = id('f');
/** portmap's network: named for this run, so that no other test's rules are audited or released. */
const PMNET = `stw-pm-${process.pid}`;

/** Debian's portmap CNI call for container `cid` on PMNET (hostPort given; the IP any in 10.99.0.0/24). */
function portmap(command: 'ADD' | 'DEL', cid: string, netns: string, hostPort: number): void {
  portmapCall(command, { network: PMNET, cid, netns, ip: `10.99.0.${hostPort % 250}`, hostPort });
}

/** Container ids (first character) with a portmap chain of PMNET in the nat table. */
function portmapOwners(): string[] {
  return [...new Set(portmapOwnersOf(PMNET).map((id) => id.slice(0, 1)))].sort();
}

/** portmap rules for `ids` made by Debian's portmap ADD in a netns of this run; all removed at close. */
function seedPortmap(ids: string[]): void {
  removePortmapChainsAtClose(env);
  const netns = env.netns();
  ids.forEach((cid, i) => {
    env.defer(() => {
      try {
        portmap('DEL', cid, netns, 30000 + (process.pid % 1000) * 10 + i);
      } catch {
        /* already gone */
      }
    });
    portmap('ADD', cid, netns, 30000 + (process.pid % 1000) * 10 + i);
  });
}

type Run = Awaited<ReturnType<typeof stewardd>>;
const cli = (args: string[]) => stewardd(args);

/** A daemon auditing `s`'s leftovers, asking the CRI runtime on `runtime`; `extra` flags appended. */
function auditDaemon(
  name: string,
  runtime: string,
  s: { leases: string; cache: string },
  extra: string[] = [],
): Daemon {
  return new Daemon(env, {
    name,
    args: [
      ...FAST_RETRY,
      '--runtime-endpoint',
      `unix://${runtime}`,
      '--audit-lease-dir',
      s.leases,
      '--audit-cache-dir',
      s.cache,
      ...extra,
    ],
  });
}

function age(path: string, seconds: number): void {
  const t = (Date.now() - seconds * 1000) / 1000;
  utimesSync(path, t, t);
}

/** A node's leftovers in `root`: leases (host-local's format) and a libcni cache file. */
function seed(root: string): {
  leases: string;
  cache: string;
  paths: { old: string; young: string; live: string; cache: string };
} {
  const leases = join(root, 'networks');
  const cache = join(root, 'results');
  const dir = join(leases, NET);
  mkdirSync(dir, { recursive: true });
  mkdirSync(cache, { recursive: true });
  writeFileSync(join(dir, 'lock'), '');
  writeFileSync(join(dir, 'last_reserved_ip.0'), '10.77.0.12');
  const paths = {
    old: join(dir, '10.77.0.10'),
    young: join(dir, '10.77.0.11'),
    live: join(dir, '10.77.0.12'),
    cache: join(cache, `${NET}-${DEAD_CACHED}-eth0`),
  };
  writeFileSync(paths.old, `${DEAD_OLD}\r\neth0`);
  writeFileSync(paths.young, `${DEAD_YOUNG}\r\neth0`);
  writeFileSync(paths.live, `${LIVE}\r\neth0`);
  writeFileSync(
    paths.cache,
    JSON.stringify({
      kind: 'cniCacheV1',
      containerId: DEAD_CACHED,
      ifName: 'eth0',
      networkName: NET,
      config: '',
      result: { cniVersion: '1.0.0', ips: [{ address: '10.77.0.13/24' }] },
    }),
  );
  age(paths.old, 7200);
  age(paths.young, 60);
  age(paths.live, 7200);
  age(paths.cache, 7200);
  return { leases, cache, paths };
}

const summary = (r: Run) =>
  (JSON.parse(r.stdout) as { orphans: Array<Record<string, unknown>> }).orphans
    .map((o) => `${o.kind} ${String(o.containerId).slice(0, 1)} ${o.ip ?? '-'} released=${o.released}`)
    .sort();

describe('stewardd audit with a CRI runtime', () => {
  let daemon: Daemon;
  let s: ReturnType<typeof seed>;
  let fx: string;
  let conf: unknown;

  before(async () => {
    s = seed(join(env.dir, 'node'));
    const runtime = join(env.dir, 'cri.sock');
    await fakeRuntime(env, runtime, [LIVE]);
    daemon = auditDaemon('d', runtime, s, ['--audit-portmap-network', PMNET]);
    await daemon.start();
    seedPortmap([LIVE, DEAD_OLD, DEAD_YOUNG]);
    assert.deepEqual(portmapOwners(), ['a', 'b', 'c']);
    fx = join(env.dir, 'fx');
    conf = stewardConf(daemon.socket, '1.0.0', [delegate('podnet', '1.0.0', [fixturePlugin(fx)])]);
    for (const c of [LIVE, JOURNALLED]) {
      const netns = env.netns();
      const add = await shim({ command: 'ADD', containerId: c, netns }, conf);
      assert.equal(add.code, 0, add.stdout);
      // The runtime removed JOURNALLED's sandbox, and with it its network namespace.
      if (c === JOURNALLED) execFileSync('ip', ['netns', 'del', basename(netns)]);
    }
  });

  it('reports exactly the leftovers, with their evidence, and releases nothing', async () => {
    const r = await cli(['audit', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    const body = JSON.parse(r.stdout);
    assert.equal(body.runtime.reachable, true);
    assert.deepEqual(summary(r), [
      'attachment e - released=false',
      'cache d - released=false',
      'lease b 10.77.0.10 released=false',
      'lease c 10.77.0.11 released=false',
      'portmap b - released=false',
      'portmap c - released=false',
    ]);
    const rule = body.orphans.find(
      (o: { kind: string; containerId: string }) => o.kind === 'portmap' && o.containerId === DEAD_OLD,
    );
    assert.equal(rule.network, PMNET);
    assert.match(rule.path, /^iptables -t nat CNI-DN-[0-9a-f]+$/);
    assert.equal(rule.journalled, false);
    assert.ok(rule.ageSeconds >= 7190 && rule.ageSeconds < 7300, `aged by its lease: ${rule.ageSeconds}`);
    assert.deepEqual(portmapOwners(), ['a', 'b', 'c'], 'a report removes no rule');
    const journalled = body.orphans.find((o: { kind: string }) => o.kind === 'attachment');
    assert.equal(journalled.journalled, true);
    assert.equal(journalled.network, 'steward');
    const old = body.orphans.find((o: { containerId: string }) => o.containerId === DEAD_OLD);
    assert.deepEqual(Object.keys(old).sort(), [
      'ageSeconds',
      'containerId',
      'ifname',
      'ip',
      'journalled',
      'kind',
      'network',
      'path',
      'reason',
      'released',
      'verdict',
    ]);
    // Asked only to report: each orphan's verdict says so, in the words docs/audit.md gives.
    for (const o of body.orphans)
      assert.deepEqual([o.verdict, o.reason], ['report-only', VERDICT_REASON['report-only']]);
    assert.equal(old.network, NET);
    assert.equal(old.ifname, 'eth0');
    assert.equal(old.path, s.paths.old);
    assert.equal(old.journalled, false);
    assert.ok(old.ageSeconds >= 7190 && old.ageSeconds < 7300, String(old.ageSeconds));
    for (const p of Object.values(s.paths)) assert.ok(existsSync(p), p);

    const table = await cli(['audit', '--socket', daemon.socket]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(
      table.stdout,
      /^runtime: unix:\/\/.*\(1 sandboxes\)\nnode addresses: \d+ network namespaces read\nKIND\s+CONTAINER/,
    );
    assert.equal(table.stdout.trim().split('\n').length, 3 + 6);
  });

  it('--cap 0 releases nothing, whatever is past the grace', async () => {
    const r = await cli(['audit', '--release', '--cap', '0', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(
      summary(r).every((l) => l.endsWith('released=false')),
      summary(r).join('\n'),
    );
    assert.equal(summary(r).length, 6);
    for (const p of Object.values(s.paths)) assert.ok(existsSync(p), p);
    assert.deepEqual(portmapOwners(), ['a', 'b', 'c']);
  });

  it('--release frees exactly the leftovers past the grace; the young one and the live pod keep theirs', async () => {
    const r = await cli(['audit', '--release', '--grace', '15m', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(summary(r), [
      'attachment e - released=false',
      'cache d - released=true',
      'lease b 10.77.0.10 released=true',
      'lease c 10.77.0.11 released=false',
      'portmap b - released=true',
      'portmap c - released=false',
    ]);
    assert.deepEqual(portmapOwners(), ['a', 'c'], "portmap's DEL removed exactly the old leftover's chain");
    assert.ok(!existsSync(s.paths.old), 'the old lease was released by host-local');
    assert.ok(!existsSync(s.paths.cache), 'the cache file was removed');
    assert.ok(existsSync(s.paths.young), 'the 1-minute-old leftover stays');
    assert.ok(existsSync(s.paths.live), "the live pod's lease stays");

    const again = await cli(['audit', '-o', 'json', '--socket', daemon.socket]);
    assert.deepEqual(summary(again), [
      'attachment e - released=false',
      'lease c 10.77.0.11 released=false',
      'portmap c - released=false',
    ]);
    assert.equal(fixtureCalls(fx, 'DEL').length, 0, 'nothing journalled was torn down within the grace');
  });

  it("a journalled attachment past the grace gets its normal teardown; the live pod's stays and tears down cleanly", async () => {
    await new Promise((r) => setTimeout(r, 1500));
    const r = await cli(['audit', '--release', '--grace', '1s', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(summary(r), [
      'attachment e - released=true',
      'lease c 10.77.0.11 released=true',
      'portmap c - released=true',
    ]);
    assert.deepEqual(portmapOwners(), ['a'], "the live pod's rule stays");
    const dels = fixtureCalls(fx, 'DEL');
    assert.equal(dels.length, 1, dels.join('\n'));
    assert.ok(dels[0]!.includes(JOURNALLED), dels[0]);
    const states = (await daemon.request('GET', `/v1/attachments?containerId=${JOURNALLED}`)).json as Array<{
      state: string;
    }>;
    assert.deepEqual(
      states.map((a) => a.state),
      ['deleted'],
    );
    assert.ok(existsSync(s.paths.live));
    const del = await shim({ command: 'DEL', containerId: LIVE, netns: '' }, conf);
    assert.equal(del.code, 0, del.stdout);
    assert.equal(fixtureCalls(fx, 'DEL').length, 2);
  });

  it('a journalled container the runtime does not list yet, whose network namespace exists, is neither reported nor released, even at grace 0, and the pass only reports', async () => {
    const add = await shim({ command: 'ADD', containerId: STARTING, netns: env.netns() }, conf);
    assert.equal(add.code, 0, add.stdout);
    const r = await cli(['audit', '--release', '--grace', '0s', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 5, `a pass that only reports is not exit 0: ${r.stderr}`);
    assert.ok(!summary(r).some((l) => l.includes(' f ')), summary(r).join('\n'));
    // A pod steward set up, its namespace there, missing from the list: the answer is not trusted.
    const body = JSON.parse(r.stdout) as { runtime: { distrusted?: string }; reportOnly?: string };
    assert.match(body.runtime.distrusted ?? '', /1 journalled pod\(s\) whose network namespace exists are missing/);
    assert.equal(body.reportOnly, body.runtime.distrusted);
    assert.equal((await daemon.attachment(STARTING)).state, 'added');
    assert.ok(!fixtureCalls(fx, 'DEL').some((l) => l.includes(STARTING)), 'no DEL for the starting container');
  });

  it('refuses a bad grace: the CLI before asking (exit 2), the route with 400', async () => {
    const r = await cli(['audit', '--release', '--grace', 'soon', '--socket', daemon.socket]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /--grace must be a duration such as 90s, 15m or 1h30m, got "soon"/);
    const res = await daemon.request('POST', '/v1/audit?release=true&grace=soon');
    assert.equal(res.status, 400);
    assert.match(JSON.stringify(res.json), /grace must be a duration/);
  });

  it('refuses a bad cap: the CLI before asking (exit 2), the route with 400', async () => {
    for (const bad of ['-1', 'x', '1.5', '2000000', '']) {
      const r = await cli(['audit', '--release', `--cap=${bad}`, '--socket', daemon.socket]);
      assert.equal(r.code, 2, `${bad}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /--cap must be a whole number from 0 to 1000000, got/);
    }
    const res = await daemon.request('POST', '/v1/audit?release=true&cap=many');
    assert.equal(res.status, 400);
    assert.match(JSON.stringify(res.json), /cap must be a whole number/);
  });
});

describe('stewardd audit with no runtime reachable', () => {
  it('reports every leftover as found, releases nothing and exits 5', async () => {
    const s = seed(join(env.dir, 'node2'));
    const daemon = auditDaemon('d2', join(env.dir, 'absent.sock'), s, ['--audit-portmap-network', PMNET]);
    await daemon.start();
    const r = await cli([
      'audit',
      '--release',
      '--grace',
      '1s',
      '-o',
      'json',
      '--timeout',
      '30',
      '--socket',
      daemon.socket,
    ]);
    assert.equal(r.code, 5, r.stderr);
    const body = JSON.parse(r.stdout);
    assert.equal(body.runtime.reachable, false);
    assert.deepEqual(summary(r), [
      'cache d - released=false',
      'lease a 10.77.0.12 released=false',
      'lease b 10.77.0.10 released=false',
      'lease c 10.77.0.11 released=false',
      'portmap a - released=false',
    ]);
    for (const p of Object.values(s.paths)) assert.ok(existsSync(p), p);
    assert.deepEqual(portmapOwners(), ['a']);
    const table = await cli(['audit', '--socket', daemon.socket, '--timeout', '30']);
    assert.equal(table.code, 5);
    assert.match(table.stdout, /runtime: UNREACHABLE/);
  });
});

describe('stewardd audit with a runtime that accepts and never answers', () => {
  it('the default --timeout outlasts the runtime deadline: exit 5 with the reason, not "daemon hung"; other routes answer meanwhile', async () => {
    const s = seed(join(env.dir, 'node-mute'));
    const muteSocket = join(env.dir, 'mute.sock');
    const held: Socket[] = [];
    const mute = createServer((c) => held.push(c));
    await new Promise<void>((r) => mute.listen(muteSocket, r));
    env.defer(
      () =>
        new Promise<void>((r) => {
          for (const c of held) c.destroy();
          mute.close(() => r());
        }),
    );
    const daemon = auditDaemon('dmute', muteSocket, s);
    await daemon.start();
    const audit = cli(['audit', '--release', '--grace', '1s', '-o', 'json', '--socket', daemon.socket]);
    const t0 = Date.now();
    const status = await cli(['status', '--socket', daemon.socket]);
    assert.equal(status.code, 0, status.stderr);
    assert.ok(Date.now() - t0 < 4000, 'status answers while the audit waits on the runtime');
    const r = await audit;
    assert.equal(r.code, 5, r.stderr);
    const body = JSON.parse(r.stdout);
    assert.equal(body.runtime.reachable, false);
    assert.match(body.runtime.message, /DEADLINE_EXCEEDED|Deadline exceeded/);
    assert.ok(body.orphans.every((o: { released: boolean }) => !o.released));
    for (const p of Object.values(s.paths)) assert.ok(existsSync(p), p);
  });
});

describe('stewardd audit with a runtime that stops answering during the pass', () => {
  it('one re-ask waits out its deadline, then no more asks and no more releases in that pass; exit 5', async () => {
    const s = seed(join(env.dir, 'node-hang'));
    // More dead sandboxes' leases, 2 hours old: more releasable orphans than one batch of releases.
    const extra = RELEASE_BATCH + 2;
    for (let i = 0; i < extra; i++) {
      const p = join(s.leases, NET, `10.77.1.${i + 1}`);
      writeFileSync(p, `${(0x700 + i).toString(16).padStart(64, '0')}\r\neth0`);
      age(p, 7200);
    }
    const runtime = join(env.dir, 'cri-hang.sock');
    // Answers the pass's own ask (which serves the first batch); the next batch's re-ask hangs.
    const cri = await fakeRuntime(env, runtime, [LIVE], { answer: 1 });
    const daemon = auditDaemon('dhang', runtime, s, ['--audit-portmap-network', `${PMNET}-none`]);
    await daemon.start();
    const before = cri.calls();
    const r = await cli([
      'audit',
      '--release',
      '--grace',
      '1h',
      '--cap-fraction',
      '1',
      '-o',
      'json',
      '--socket',
      daemon.socket,
    ]);
    assert.equal(r.code, 5, r.stderr);
    assert.equal(cri.calls() - before, 2, "the pass's ask, one re-ask that hung; none after it");
    const body = JSON.parse(r.stdout) as {
      orphans: Array<{ released: boolean; path: string }>;
      runtime: { reachable: boolean; lostDuringPass?: boolean };
      reportOnly?: string;
    };
    assert.equal(body.runtime.reachable, false);
    assert.equal(body.runtime.lostDuringPass, true);
    assert.match(body.reportOnly ?? '', /stopped answering/);
    const released = body.orphans.filter((o) => o.released);
    assert.equal(released.length, RELEASE_BATCH, JSON.stringify(body.orphans));
    for (const o of released) assert.ok(!existsSync(o.path), `released before the runtime hung, gone: ${o.path}`);
    for (const o of body.orphans) if (!o.released) assert.ok(existsSync(o.path), o.path);
    assert.ok(body.orphans.filter((o) => !o.released).length >= 2);
    assert.match(
      readFileSync(daemon.logFile, 'utf8'),
      /audit: the runtime stopped answering; no more releases this pass/,
    );
    const lines = readFileSync(daemon.logFile, 'utf8').match(/audit: released an orphan/g) ?? [];
    assert.equal(lines.length, RELEASE_BATCH);
    await daemon.stop();
  });
});

describe('stewardd audit --runtime-endpoint: this run asks another CRI runtime', () => {
  it("overrides the daemon's endpoint for that pass only, release included; a bad endpoint is refused", async () => {
    const s = seed(join(env.dir, 'node-endpoint'));
    const runtime = join(env.dir, 'cri-other.sock');
    await fakeRuntime(env, runtime, [LIVE]);
    // The daemon's own endpoint does not exist: without the flag every pass is report only.
    const daemon = auditDaemon('dendpoint', join(env.dir, 'no-such-cri.sock'), s, [
      '--audit-portmap-network',
      `${PMNET}-none`,
    ]);
    await daemon.start();
    const own = await cli(['audit', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(own.code, 5, own.stderr);

    const other = await cli([
      'audit',
      '-o',
      'json',
      '--runtime-endpoint',
      `unix://${runtime}`,
      '--socket',
      daemon.socket,
    ]);
    assert.equal(other.code, 0, other.stderr);
    const body = JSON.parse(other.stdout) as { runtime: { reachable: boolean; endpoint: string; sandboxes: number } };
    assert.deepEqual(body.runtime, { reachable: true, endpoint: `unix://${runtime}`, sandboxes: 1 });
    assert.deepEqual(summary(other), [
      'cache d - released=false',
      'lease b 10.77.0.10 released=false',
      'lease c 10.77.0.11 released=false',
    ]);

    const rel = await cli([
      'audit',
      '--release',
      '--grace',
      '1h',
      '-o',
      'json',
      '--runtime-endpoint',
      runtime, // a bare absolute path is accepted too
      '--socket',
      daemon.socket,
    ]);
    assert.equal(rel.code, 0, rel.stderr);
    assert.deepEqual(summary(rel), [
      'cache d - released=true',
      'lease b 10.77.0.10 released=true',
      'lease c 10.77.0.11 released=false',
    ]);
    assert.ok(existsSync(s.paths.live) && existsSync(s.paths.young));
    assert.ok(!existsSync(s.paths.old) && !existsSync(s.paths.cache));

    // The next pass without the flag asks the daemon's own endpoint again.
    assert.equal((await cli(['audit', '-o', 'json', '--socket', daemon.socket])).code, 5);
    const bad = await cli(['audit', '--runtime-endpoint', 'run/cri.sock', '--socket', daemon.socket]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--runtime-endpoint must be unix:\/\/\/ABSOLUTE\/PATH/);
    for (const path of ['/v1/audit?runtimeEndpoint=relative', '/v1/audit?runtimeEndpoint=a&runtimeEndpoint=b'])
      assert.equal((await daemon.request('GET', path)).status, 400, path);
    assert.equal((await daemon.request('POST', '/v1/audit?release=true&runtimeEndpoint=x')).status, 400);
    await daemon.stop();
  });
});

describe('the periodic audit pass (stewardd run --audit-interval)', () => {
  const metric = async (daemon: Daemon, re: RegExp) => re.test((await daemon.request('GET', '/metrics')).text);

  it('report only by default: the leftovers are counted in the metrics and nothing is released', async () => {
    const s = seed(join(env.dir, 'node3'));
    const runtime = join(env.dir, 'cri3.sock');
    await fakeRuntime(env, runtime, [LIVE]);
    const daemon = auditDaemon('d3', runtime, s, [
      '--audit-portmap-network',
      `${PMNET}-none`,
      '--audit-interval',
      '1s',
    ]);
    await daemon.start();
    await daemon.waitFor('a periodic pass', () => metric(daemon, /^steward_audit_last_run_success 1$/m), 30_000);
    const text = (await daemon.request('GET', '/metrics')).text;
    assert.match(text, /^steward_audit_orphans\{kind="lease"\} 2$/m);
    assert.match(text, /^steward_audit_orphans_past_grace\{kind="lease"\} 1$/m);
    assert.match(text, /^steward_audit_orphans\{kind="cache"\} 1$/m);
    assert.match(text, /^steward_audit_released_total\{kind="lease"\} 0$/m);
    for (const p of Object.values(s.paths)) assert.ok(existsSync(p), p);
    assert.match(readFileSync(daemon.logFile, 'utf8'), /periodic audit: orphans held on the node/);
    await daemon.stop();
  });

  it('--audit-release frees what is past --audit-grace on its own; a manual audit meanwhile waits its turn', async () => {
    const s = seed(join(env.dir, 'node4'));
    const runtime = join(env.dir, 'cri4.sock');
    await fakeRuntime(env, runtime, [LIVE]);
    const daemon = auditDaemon('d4', runtime, s, [
      '--audit-portmap-network',
      `${PMNET}-none`,
      '--audit-interval',
      '1s',
      '--audit-release',
      '--audit-grace',
      '1h',
    ]);
    await daemon.start();
    // Manual audits while periodic passes run: each answers a whole pass of its own.
    const manual = await Promise.all([1, 2, 3].map(() => cli(['audit', '-o', 'json', '--socket', daemon.socket])));
    for (const r of manual) assert.equal(r.code, 0, r.stderr);
    await daemon.waitFor(
      'the periodic pass to release',
      () => metric(daemon, /^steward_audit_released_total\{kind="lease"\} 1$/m),
      30_000,
    );
    assert.ok(!existsSync(s.paths.old), 'the 2-hour-old lease was released by host-local');
    assert.ok(!existsSync(s.paths.cache), 'the 2-hour-old cache file was removed');
    assert.ok(existsSync(s.paths.young), 'the 1-minute-old lease stays');
    assert.ok(existsSync(s.paths.live), "the live pod's lease stays");
    await daemon.waitFor(
      'a pass that finds only the young lease',
      () => metric(daemon, /^steward_audit_orphans\{kind="lease"\} 1$/m),
      30_000,
    );
    const text = (await daemon.request('GET', '/metrics')).text;
    assert.match(text, /^steward_audit_released_total\{kind="cache"\} 1$/m);
    assert.match(text, /^steward_audit_orphans_past_grace\{kind="lease"\} 0$/m);
    assert.match(text, /^steward_audit_last_run_success 1$/m);
    const passes = readFileSync(daemon.logFile, 'utf8').match(/audit: released an orphan/g) ?? [];
    assert.equal(passes.length, 2, 'each leftover released once, however many passes ran');
    await daemon.stop();
  });
});

describe("host-local's lock while scanning", () => {
  it('a scan waits while host-local holds a network lock, then reads what was written under it', async () => {
    const s = seed(join(env.dir, 'node5'));
    const runtime = join(env.dir, 'cri5.sock');
    await fakeRuntime(env, runtime, [LIVE]);
    const daemon = auditDaemon('d5', runtime, s, ['--audit-portmap-network', `${PMNET}-none`]);
    await daemon.start();
    // util-linux flock on host-local's lock file, as host-local holds it around a reservation.
    const lockFile = join(s.leases, NET, 'lock');
    const holder = spawn('flock', ['--exclusive', lockFile, 'cat'], { stdio: ['pipe', 'ignore', 'ignore'] });
    env.defer(() => {
      holder.stdin.end();
      holder.kill();
    });
    const free = () => spawnSync('flock', ['--exclusive', '--nonblock', lockFile, 'true']).status === 0;
    await daemon.waitFor('the lock to be held', () => !free(), 10_000);

    let answered = false;
    const audit = cli(['audit', '-o', 'json', '--timeout', '60', '--socket', daemon.socket]).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(answered, false, 'the scan waits for the lock');
    // A reservation made under the lock, as host-local makes one, then the lock let go.
    const fresh = join(s.leases, NET, '10.77.0.13');
    writeFileSync(fresh, `${DEAD_OLD}\r\neth1`);
    holder.stdin.end();
    const r = await audit;
    assert.equal(r.code, 0, r.stderr);
    assert.ok(summary(r).includes('lease b 10.77.0.13 released=false'), summary(r).join('\n'));
    assert.ok(free(), 'the audit let go of the lock');
    await daemon.stop();
  });
});

describe("the node's proof of addresses in use, from a PID namespace of its own", () => {
  it('is never whole: stewardd in a pod without hostPID sees only its own processes (a pass that said whole freed a live lease)', () => {
    const module = join(REPO, 'daemon/src/audit/node-addresses.ts');
    const script = `import(${JSON.stringify(module)}).then(async (m) => {
      const own = await m.collectNodeAddresses({ netnsDirs: [], readInNetns: async () => '' });
      console.log(JSON.stringify({ unread: own.unread, expected: m.NOT_HOST_PID_NS }));
    })`;
    const inOwn = spawnSync(
      'unshare',
      ['--pid', '--fork', '--mount-proc', process.execPath, '--import', 'tsx', '-e', script],
      { cwd: REPO, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(inOwn.status, 0, inOwn.stderr);
    const r = JSON.parse(inOwn.stdout) as { unread: string[]; expected: string };
    assert.deepEqual(r.unread, [r.expected]);
    const onHost = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: REPO,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(onHost.status, 0, onHost.stderr);
    assert.equal((JSON.parse(onHost.stdout) as { unread: string[] }).unread.includes(r.expected), false);
  });
});
