// One whole audit pass (runAudit) on a fake node, root-free: lease and cache files in temp dirs,
// network namespaces as plain files (existsSync is all the guard asks of them), the journal, the
// runtime's answers, the nat tables, the node's addresses and the clock injected. What an operator
// sees: which findings are reported, which released (and through which DEL or removal), what the
// report says of the runtime and the node, and what the sightings remember for the next pass.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import {
  AuditCallerGone,
  AuditQueueFull,
  Auditor,
  MAX_WAITING_PASSES,
  type PassOutcome,
} from '../../daemon/src/audit/auditor.js';
import { RELEASE_BATCH, runAudit, type AuditDeps, type AuditReport } from '../../daemon/src/audit/run.js';
import { VERDICT_REASON } from '../../daemon/src/audit/decide.js';
import type { NodeAddresses } from '../../daemon/src/audit/node-addresses.js';
import type { Attachment, Step } from '../../daemon/src/store/types.js';

const root = mkdtempSync(join(tmpdir(), 'stw-audit-pass-'));
after(() => rmSync(root, { recursive: true, force: true }));

const NOW = 1_900_000_000_000;
const HOUR = 3_600_000;
const id = (c: string) => c.repeat(64);
let seq = 0;

/** A fake node: its own lease dir (network `net`), cache dir and netns dir. */
function node() {
  const base = join(root, `n${++seq}`);
  const leases = join(base, 'networks');
  const cache = join(base, 'results');
  const netns = join(base, 'netns');
  for (const d of [join(leases, 'net'), cache, netns]) mkdirSync(d, { recursive: true });
  const age = (p: string, ms: number) => utimesSync(p, (NOW - ms) / 1000, (NOW - ms) / 1000);
  return {
    base,
    leases,
    cache,
    netns,
    /** A host-local lease of `cid` on `ip`, `ageMs` old. */
    lease(ip: string, cid: string, ageMs = 2 * HOUR, ifname = 'eth0', network = 'net'): string {
      mkdirSync(join(leases, network), { recursive: true });
      const p = join(leases, network, ip);
      writeFileSync(p, ifname === '' ? cid : `${cid}\r\n${ifname}`);
      age(p, ageMs);
      return p;
    },
    /** A libcni cache entry of `cid`, `ageMs` old, with its result's addresses and netns. */
    cacheFile(cid: string, o: { ips?: string[]; netns?: string; ageMs?: number } = {}): string {
      const p = join(cache, `net-${cid}-eth0`);
      const doc = {
        kind: 'cniCacheV1',
        containerId: cid,
        ifName: 'eth0',
        networkName: 'net',
        ...(o.netns !== undefined ? { netns: o.netns } : {}),
        result: { cniVersion: '1.0.0', ips: (o.ips ?? []).map((a) => ({ address: `${a}/24` })) },
      };
      writeFileSync(p, JSON.stringify(doc));
      age(p, o.ageMs ?? 2 * HOUR);
      return p;
    },
    /** A network namespace that exists (a plain file: only its existence is asked). */
    ns(name: string): string {
      const p = join(netns, name);
      writeFileSync(p, '');
      return p;
    },
  };
}

type Node = ReturnType<typeof node>;

/** An attachment of `cid` journalled `ageMs` ago, in `state`, its namespace at `netns`. */
function attachment(n: number, cid: string, o: Partial<Attachment> = {}): Attachment {
  return {
    id: n,
    containerId: cid,
    network: 'net',
    ifname: 'eth0',
    netns: `/nonexistent/netns/${n}`,
    cniArgs: '',
    cniPath: '',
    cniVersion: '1.0.0',
    bootId: 'b',
    state: 'added',
    config: '{}',
    result: null,
    error: null,
    podNamespace: null,
    podName: null,
    podUid: null,
    createdAt: NOW - 2 * HOUR,
    updatedAt: NOW - 2 * HOUR,
    ...o,
  };
}

interface World extends AuditDeps {
  calls: string[];
  torn: number[];
  logs: Array<{ msg: string } & Record<string, unknown>>;
  asks: number;
  saved: Array<Map<string, number>>;
  netnsDirs: string[][];
  attachments: Attachment[];
}

/**
 * The deps of a pass on `n`: `answers` are the runtime's successive answers (the last repeats);
 * `node` what the node's addresses read gives (default: read whole, nothing on it).
 */
function world(
  n: Node,
  o: {
    answers?: Array<string[] | null>;
    attachments?: Attachment[];
    steps?: Record<number, Step[]>;
    node?: NodeAddresses | (() => Promise<NodeAddresses>) | null;
    nat?: Partial<Record<'iptables' | 'ip6tables', string | Error>>;
    sightings?: Map<string, number>;
    now?: () => number;
    onRun?: (call: Parameters<AuditDeps['run']>[0]) => void;
    onTeardown?: (id: number) => { done: boolean; error?: Error };
  } = {},
): World {
  const answers = o.answers ?? [[]];
  const w: World = {
    calls: [],
    torn: [],
    logs: [],
    asks: 0,
    saved: [],
    netnsDirs: [],
    attachments: o.attachments ?? [],
    journal: {
      attachmentsInState: (s) => w.attachments.filter((a) => a.state === s),
      stepsOf: (aid) => o.steps?.[aid] ?? [],
    },
    teardown: async (aid) => {
      w.torn.push(aid);
      const out = o.onTeardown?.(aid) ?? { done: true };
      if (out.done) w.attachments = w.attachments.map((a) => (a.id === aid ? { ...a, state: 'deleted' } : a));
      return out;
    },
    run: async (call) => {
      w.calls.push(`${call.command} ${call.type} ${call.containerId.slice(0, 1)} ${call.ifname}`);
      o.onRun?.(call);
      return undefined;
    },
    listSandboxes: async () => answers[Math.min(w.asks++, answers.length - 1)] ?? null,
    runtime: () => ({ reachable: true, endpoint: 'unix:///fake.sock' }),
    leaseDirs: [n.leases],
    cacheDir: n.cache,
    log: pino({ level: 'info' }, { write: (line: string) => w.logs.push(JSON.parse(line)) }),
    now: o.now ?? (() => NOW),
  };
  if (o.node !== null) {
    const given = o.node ?? { addresses: new Set<string>(), namespaces: 1, unread: [] };
    w.nodeAddresses = async (dirs) => {
      w.netnsDirs.push(dirs);
      return typeof given === 'function' ? given() : given;
    };
  }
  if (o.nat !== undefined) {
    const nat = o.nat;
    w.readNat = async (family) => {
      const t = nat[family] ?? '*nat\nCOMMIT\n';
      if (t instanceof Error) throw t;
      return t;
    };
  }
  if (o.sightings !== undefined) {
    const store = o.sightings;
    w.sightings = {
      load: () => new Map(store),
      save: (s) => {
        w.saved.push(new Map(s));
        store.clear();
        for (const [k, v] of s) store.set(k, v);
      },
    };
  }
  return w;
}

/** The report's findings as `kind container released`, in report order. */
const seen = (r: AuditReport) => r.orphans.map((f) => `${f.kind} ${f.containerId.slice(0, 1)} ${f.released}`);
/** Each orphan's verdict and the reason the report gives for it. */
const why = (r: AuditReport) => r.orphans.map((f) => [f.verdict, f.reason]);
const msgs = (w: World) => w.logs.map((l) => l.msg);

const jump = (net: string, cid: string, chain: string) =>
  `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"${net}\\" id: \\"${cid}\\"" -j ${chain}`;
const natOf = (...lines: string[]) => ['*nat', ...lines, 'COMMIT', ''].join('\n');

describe("an audit pass: the runtime's answer weighed against the node", () => {
  it('an unlisted, unjournalled container holding an address on the node makes the pass report only', async () => {
    const n = node();
    n.lease('10.1.0.5', id('a')); // its address is on an interface: a pod the runtime missed
    n.lease('10.1.0.6', id('b')); // a true leftover, old and unused
    const store = new Map<string, number>();
    const w = world(n, { node: { addresses: new Set(['10.1.0.5']), namespaces: 2, unread: [] }, sightings: store });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease b false'], 'the held lease is not an orphan; the leftover is kept');
    assert.match(
      r.runtime.distrusted ?? '',
      /^1 container\(s\) the runtime does not list still hold an address on an interface or a network namespace \(e\.g\. aaaaaaaaaaaaa\)$/,
    );
    assert.equal(r.reportOnly, r.runtime.distrusted);
    assert.deepEqual(w.calls, [], 'no DEL');
    assert.deepEqual(w.saved, [], 'a distrusted pass neither adds nor forgets sightings');
    assert.ok(msgs(w).includes("audit: the runtime's answer contradicts the node; this pass only reports"));
  });

  it('asked only to report, a distrusted pass says why in runtime.distrusted but has no reportOnly', async () => {
    const n = node();
    n.lease('10.1.0.5', id('a'));
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { node: { addresses: new Set(['10.1.0.5']), namespaces: 2, unread: [] } });
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.match(r.runtime.distrusted ?? '', /^1 container\(s\) the runtime does not list/);
    assert.equal(r.reportOnly, undefined);
    assert.deepEqual(seen(r), ['lease b false']);
    assert.deepEqual(why(r), [['runtime-distrusted', VERDICT_REASON['runtime-distrusted']]]);
  });

  it("an unlisted, unjournalled container whose cache entry's namespace exists distrusts the answer too", async () => {
    const n = node();
    n.cacheFile(id('c'), { netns: n.ns('pod-c') });
    n.lease('10.1.0.6', id('b'));
    const w = world(n);
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.match(r.runtime.distrusted ?? '', /^1 container\(s\) the runtime does not list .*\(e\.g\. ccccccccccccc\)$/);
    assert.deepEqual(seen(r), ['lease b false']);
    assert.deepEqual(w.calls, []);
  });

  it("a journalled pod's address on the node keeps its findings without distrusting the runtime", async () => {
    const n = node();
    // steward set it up; its namespace path is gone but its address is on an interface (a moved pod, say)
    const a = attachment(1, id('a'), { result: JSON.stringify({ ips: [{ address: '10.1.0.5/24' }] }) });
    n.lease('10.1.0.5', id('a'));
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { attachments: [a], node: { addresses: new Set(['10.1.0.5']), namespaces: 2, unread: [] } });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.equal(r.runtime.distrusted, undefined);
    assert.equal(r.reportOnly, undefined);
    assert.deepEqual(seen(r), ['lease b true']);
    assert.deepEqual(w.calls, ['DEL host-local b eth0']);
    assert.deepEqual(w.torn, []);
    assert.ok(!msgs(w).includes("audit: the runtime's answer contradicts the node; this pass only reports"));
  });

  it('a list that misses a pod steward set up whose namespace exists is not trusted', async () => {
    const n = node();
    const a = attachment(1, id('a'), { netns: n.ns('pod-a') });
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { attachments: [a], answers: [[]] });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.match(r.runtime.distrusted ?? '', /^the runtime listed no sandbox while 1 journalled pod\(s\) still have/);
    assert.deepEqual(seen(r), ['lease b false']);
    assert.deepEqual(w.calls, []);
    // Listed, the same pod contradicts nothing: the leftover goes.
    const w2 = world(n, { attachments: [a], answers: [[id('a')]] });
    const r2 = await runAudit(w2, { release: true, graceMs: HOUR });
    assert.equal(r2.runtime.distrusted, undefined);
    assert.deepEqual(seen(r2), ['lease b true']);
  });

  it('an attachment still tearing down whose namespace exists is kept, and does not distrust the list', async () => {
    const n = node();
    const a = attachment(1, id('a'), { netns: n.ns('pod-a'), state: 'deleting' });
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { attachments: [a] });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.equal(r.runtime.distrusted, undefined);
    assert.deepEqual(seen(r), ['lease b true'], 'the attachment (netns present) is no orphan');
    assert.deepEqual(w.torn, []);
  });

  it('an id not in the runtime form distrusts the whole answer', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { answers: [['ABC']] });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.match(r.runtime.distrusted ?? '', /not 64 lower-case hex digits \("ABC"\)/);
    assert.deepEqual(seen(r), ['lease b false']);
  });

  it('no runtime: every finding reported as owner unknown, nothing released, no sightings moved', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const store = new Map([['stale', 1]]);
    const w = world(n, { answers: [null], sightings: store });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease b false']);
    assert.deepEqual(why(r), [['owner-unknown', VERDICT_REASON['owner-unknown']]]);
    assert.equal(r.runtime.distrusted, undefined);
    assert.equal(r.reportOnly, undefined);
    assert.deepEqual(w.saved, []);
    assert.deepEqual([...store], [['stale', 1]]);
  });
});

describe('an audit pass: sightings', () => {
  it("a trusted pass keeps each orphan's first sighting, dates new ones now, and forgets what is held or gone", async () => {
    const n = node();
    const b = n.lease('10.1.0.6', id('b'));
    n.lease('10.1.0.7', id('c'), 60_000); // young: an orphan, sighted now
    n.lease('10.1.0.8', id('d')); // listed: alive, forgotten
    const kb = `lease\0${b}\0${id('b')}`;
    const kd = `lease\0${join(n.leases, 'net', '10.1.0.8')}\0${id('d')}`;
    const kc = `lease\0${join(n.leases, 'net', '10.1.0.7')}\0${id('c')}`;
    const store = new Map([
      [kb, NOW - 30 * 60_000],
      [kd, NOW - 30 * 60_000],
      ['lease\0/gone\0x', NOW - HOUR],
    ]);
    // The node not read whole: b is released only on its sighting, which is half the grace old.
    const w = world(n, {
      answers: [[id('d')]],
      sightings: store,
      node: { addresses: new Set(), namespaces: 1, unread: ['/run/netns/stuck'] },
    });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease b false', 'lease c false']);
    assert.equal(w.saved.length, 1);
    assert.deepEqual(
      [...(w.saved[0] ?? [])].sort(),
      [
        [kb, NOW - 30 * 60_000],
        [kc, NOW],
      ].sort(),
    );
    assert.deepEqual(r.node, { namespaces: 1, unread: ['/run/netns/stuck'] });
  });
});

describe('an audit pass: its deadline and its batches', () => {
  it('a pass whose deadline has come starts no release: the report says so and why', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = world(n);
    const r = await runAudit(w, { release: true, graceMs: HOUR, deadlineMs: 0 });
    assert.deepEqual(seen(r), ['lease b false']);
    assert.equal(r.deadlineReached, true);
    assert.equal(r.reportOnly, 'the pass reached its deadline; what is left waits for the next pass');
    assert.deepEqual(why(r), [['release', `releases stopped: ${r.reportOnly}`]]);
    assert.deepEqual(w.calls, []);
    assert.ok(msgs(w).includes('audit: the pass reached its deadline; no more releases this pass'));
    // A millisecond left on a clock that does not move: the release goes.
    const w2 = world(n);
    const r2 = await runAudit(w2, { release: true, graceMs: HOUR, deadlineMs: 1 });
    assert.deepEqual(seen(r2), ['lease b true']);
    assert.deepEqual(why(r2), [['release', VERDICT_REASON.release]]);
    assert.equal(r2.deadlineReached, undefined);
    assert.equal(r2.reportOnly, undefined);
  });

  it('the deadline counts from the start of the pass: reached midway, the rest waits', async () => {
    const n = node();
    for (let i = 0; i < 3; i++) n.lease(`10.1.0.${10 + i}`, id(`${i}`));
    let clock = NOW;
    // Each host-local DEL takes a minute on this clock; the pass has 90 s.
    const w = world(n, { now: () => clock, onRun: () => (clock += 60_000) });
    const r = await runAudit(w, { release: true, graceMs: HOUR, deadlineMs: 90_000 });
    assert.deepEqual(seen(r), ['lease 0 true', 'lease 1 true', 'lease 2 false']);
    assert.equal(r.deadlineReached, true);
  });

  /** `count` unjournalled leftovers, one lease each, ids 0..count-1 as 64 hex digits. */
  const leftovers = (n: Node, count: number) =>
    Array.from({ length: count }, (_, i) => {
      const cid = i.toString(16).padStart(64, '0');
      n.lease(`10.3.${100 + i}.1`, cid); // scanned (path order) in index order
      return cid;
    });

  it('the runtime is asked again once per batch: a sandbox it lists by then keeps its lease', async () => {
    const n = node();
    const ids = leftovers(n, RELEASE_BATCH + 2);
    const late = ids[RELEASE_BATCH] as string;
    const w = world(n, { answers: [[], [late]] });
    const r = await runAudit(w, { release: true, graceMs: HOUR, capFraction: 1 });
    const released = r.orphans.filter((o) => o.released).map((o) => o.containerId);
    assert.equal(released.length, RELEASE_BATCH + 1);
    assert.ok(!released.includes(late), 'listed by the re-ask: kept');
    assert.equal(
      r.orphans.find((o) => o.containerId === late)?.reason,
      'the runtime listed its sandbox when asked again',
    );
    assert.equal(w.asks, 2, 'one ask for the pass, one for the second batch');
    assert.equal(r.runtime.distrusted, undefined);
    assert.equal(r.reportOnly, undefined);
  });

  it('the journal is read again per batch: a container whose ADD began meanwhile keeps its lease', async () => {
    const n = node();
    const ids = leftovers(n, RELEASE_BATCH + 2);
    const late = ids[RELEASE_BATCH + 1] as string;
    const w = world(n);
    // Its ADD begins while the first batch is released.
    w.run = async (call) => {
      w.calls.push(call.containerId);
      if (w.calls.length === 1) w.attachments = [attachment(9, late, { state: 'adding' })];
      return undefined;
    };
    const r = await runAudit(w, { release: true, graceMs: HOUR, capFraction: 1 });
    const released = r.orphans.filter((o) => o.released).map((o) => o.containerId);
    assert.equal(released.length, RELEASE_BATCH + 1);
    assert.ok(!released.includes(late));
    assert.equal(
      r.orphans.find((o) => o.containerId === late)?.reason,
      'an ADD of its container began during the pass',
    );
    assert.ok(!w.calls.includes(late), 'no DEL of a starting container');
  });

  it('a re-ask the node contradicts stops the releases: the report says the runtime was distrusted', async () => {
    const n = node();
    leftovers(n, RELEASE_BATCH + 2);
    const w = world(n, { answers: [[], ['not-a-sandbox-id']] });
    const r = await runAudit(w, { release: true, graceMs: HOUR, capFraction: 1 });
    assert.equal(r.orphans.filter((o) => o.released).length, RELEASE_BATCH);
    assert.equal(r.orphans.length, RELEASE_BATCH + 2);
    assert.match(r.runtime.distrusted ?? '', /not 64 lower-case hex digits \("not-a-sandbox-id"\)/);
    assert.equal(r.reportOnly, r.runtime.distrusted);
    assert.deepEqual(
      r.orphans.filter((o) => !o.released).map((o) => o.reason),
      Array(2).fill(`releases stopped: ${r.runtime.distrusted ?? ''}`),
    );
    assert.equal(w.asks, 2, 'not asked again once distrusted');
    assert.equal(w.calls.length, RELEASE_BATCH);
  });

  it("a namespace that appears before a finding's release keeps it", async () => {
    const n = node();
    const netns = join(n.netns, 'pod-c');
    n.cacheFile(id('c'), { netns, ips: ['10.1.0.9'] });
    n.lease('10.1.0.6', id('b'));
    n.lease('10.1.0.7', id('c'));
    const w = world(n, { onRun: () => writeFileSync(netns, '') });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    // Leases are released first (scan order), b's before c's: c's namespace exists by its turn.
    assert.deepEqual(w.calls, ['DEL host-local b eth0']);
    assert.ok(r.orphans.some((o) => o.containerId === id('c') && !o.released));
    assert.ok(
      r.orphans
        .filter((o) => o.containerId === id('c'))
        .every((o) => o.reason === "its container's network namespace came back during the pass"),
    );
    assert.ok(existsSync(join(n.cache, `net-${id('c')}-eth0`)), 'its cache file is left');
  });
});

describe('an audit pass: what each kind of finding is released through', () => {
  it("an unjournalled container's lease, rule and cache file: host-local's DEL, portmap's DEL, the file removed", async () => {
    const n = node();
    const lease = n.lease('10.1.0.6', id('b'), 2 * HOUR, 'net1');
    const cache = n.cacheFile(id('b'), { ips: ['10.1.0.6'] });
    const chain = 'CNI-DN-b8792723c7f8dfe785327';
    const dnat = `-A ${chain} -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.6:80`;
    const stdin: unknown[] = [];
    const w = world(n, {
      nat: { iptables: natOf(jump('net', id('b'), chain), dnat) },
      onRun: (call) => {
        stdin.push(call.stdin);
        if (call.type === 'host-local') rmSync(lease);
      },
    });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease b true', 'cache b true', 'portmap b true']);
    assert.deepEqual(w.calls, ['DEL host-local b net1', 'DEL portmap b eth0']);
    assert.equal((stdin[1] as { name: string }).name, 'net');
    assert.ok(!existsSync(cache), 'the cache file is removed');
    const rule = r.orphans.find((o) => o.kind === 'portmap');
    assert.equal(rule?.path, `iptables -t nat ${chain}`);
    assert.equal(rule?.ageSeconds, 2 * 3600, "the rule's age is its container's lease's");
  });

  it('a rule with no other evidence of its age is reported, first seen now, and not released', async () => {
    const n = node();
    const firstSeen = new Map<string, number>();
    const w = world(n, { nat: { ip6tables: natOf(jump('net', id('e'), 'CNI-DN-e')) } });
    w.firstSeen = firstSeen;
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['portmap e false']);
    assert.deepEqual(why(r), [['young', VERDICT_REASON.young]]);
    assert.deepEqual(w.calls, []);
    assert.deepEqual([...firstSeen], [[`ip6tables -t nat CNI-DN-e\0${id('e')}`, NOW]]);
  });

  it("a journalled container goes through the engine's teardown, once, for its attachment, lease and rule", async () => {
    const n = node();
    n.lease('10.1.0.6', id('a'));
    const a = attachment(1, id('a'), { result: JSON.stringify({ ips: [{ address: '10.1.0.6/24' }] }) });
    const dnat = '-A CNI-DN-a -p tcp -j DNAT --to-destination 10.1.0.6:80';
    const w = world(n, { attachments: [a], nat: { iptables: natOf(jump('net', id('a'), 'CNI-DN-a'), dnat) } });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['attachment a true', 'lease a true', 'portmap a true']);
    assert.deepEqual(w.torn, [1]);
    assert.deepEqual(w.calls, [], 'no plugin run by the audit itself');
  });

  it("a journalled container's cache file is its own: removed, not a teardown", async () => {
    const n = node();
    const cache = n.cacheFile(id('a'), { ips: ['10.1.0.6'] });
    // Its attachment is torn down already (nothing owes a teardown) but the cache file was left.
    const w = world(n, { attachments: [attachment(1, id('a'), { state: 'adding', updatedAt: NOW })] });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), [], 'an ADD in flight: its cache file is not an orphan');
    const w2 = world(n, { attachments: [attachment(1, id('a'), { state: 'deleting' })] });
    w2.teardown = async () => ({ done: false, error: new Error('bridge DEL failed') });
    const r2 = await runAudit(w2, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r2), ['attachment a false', 'cache a true']);
    assert.ok(!existsSync(cache));
    assert.ok(
      w2.logs.some((l) => l.msg === 'audit: release failed' && l.err === 'bridge DEL failed'),
      'the failed teardown is logged with its error',
    );
  });

  it('a lease whose owner freed it after the scan is neither reported nor released', async () => {
    const n = node();
    const gone = n.lease('10.1.0.6', id('b'));
    n.lease('10.1.0.7', id('c'));
    // The owner's own DEL removes it while the pass reads the node.
    const w = world(n, {
      node: async () => {
        rmSync(gone);
        return { addresses: new Set<string>(), namespaces: 1, unread: [] };
      },
    });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease c true']);
    assert.deepEqual(w.calls, ['DEL host-local c eth0']);
  });

  it('an attachment whose own DEL finished during the pass is neither reported nor torn down', async () => {
    const n = node();
    const w = world(n, { attachments: [attachment(1, id('a')), attachment(2, id('f'))] });
    w.nodeAddresses = async () => {
      w.attachments = w.attachments.map((a) => (a.id === 1 ? { ...a, state: 'deleted' } : a));
      return { addresses: new Set<string>(), namespaces: 1, unread: [] };
    };
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['attachment f true']);
    assert.deepEqual(w.torn, [2]);
  });

  it("a lease its owner's DEL freed just before its release is reported, and no DEL is run for it", async () => {
    const n = node();
    const paths = Array.from({ length: RELEASE_BATCH + 1 }, (_, i) =>
      n.lease(`10.3.${100 + i}.1`, i.toString(16).padStart(64, '0')),
    );
    const last = paths[RELEASE_BATCH] as string;
    const w = world(n);
    // The re-ask before the second batch: by then the last lease's owner has freed it.
    const ask = w.listSandboxes;
    w.listSandboxes = async () => {
      if (w.asks === 1) rmSync(last);
      return ask();
    };
    const r = await runAudit(w, { release: true, graceMs: HOUR, capFraction: 1 });
    assert.equal(r.orphans.length, RELEASE_BATCH + 1);
    assert.equal(r.orphans.filter((o) => o.released).length, RELEASE_BATCH);
    assert.equal(r.orphans.find((o) => o.path === last)?.released, false);
    assert.equal(r.orphans.find((o) => o.path === last)?.reason, 'nothing was left to free');
    assert.equal(w.calls.length, RELEASE_BATCH, 'no host-local DEL for a lease already gone');
  });
});

describe('an audit pass: what it reads', () => {
  it('reads the dataDirs journalled configs name, besides the default ones; an ADD in flight is no finding', async () => {
    const n = node();
    const other = join(n.base, 'other-data');
    mkdirSync(join(other, 'net2'), { recursive: true });
    writeFileSync(join(other, 'net2', '10.9.0.2'), `${id('b')}\r\neth0`);
    utimesSync(join(other, 'net2', '10.9.0.2'), (NOW - 2 * HOUR) / 1000, (NOW - 2 * HOUR) / 1000);
    const a = attachment(1, id('a'), { state: 'adding' });
    const step = { config: JSON.stringify({ type: 'bridge', ipam: { type: 'host-local', dataDir: other } }) } as Step;
    const w = world(n, { attachments: [a], steps: { 1: [step] } });
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(
      r.orphans.map((o) => `${o.kind} ${o.containerId.slice(0, 1)} ${o.network} ${o.path}`),
      [`lease b net2 ${join(other, 'net2', '10.9.0.2')}`],
    );
    assert.deepEqual(why(r), [['report-only', VERDICT_REASON['report-only']]]);
  });

  it("asks the node's addresses in the runtimes' netns dirs and those the journal and cache entries name", async () => {
    const n = node();
    n.cacheFile(id('c'), { netns: '/var/run/custom/pod-c' });
    n.cacheFile(id('d'), { netns: '/proc/123/ns/net' });
    const a = attachment(1, id('a'), { netns: '/run/other/pod-a' });
    const b = attachment(2, id('b'), { netns: 'relative/pod-b' });
    const w = world(n, { attachments: [a, b] });
    await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(w.netnsDirs, [['/run/netns', '/var/run/netns', '/run/other', '/var/run/custom']]);
  });

  it("the node's addresses not read: the report says why, the log warns, and only sightings release", async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = world(n, {
      node: async () => {
        throw new Error('nsenter not found');
      },
    });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(r.node, { error: 'nsenter not found' });
    assert.deepEqual(seen(r), ['lease b false'], 'unconfirmed: no proof, no sighting');
    assert.ok(
      w.logs.some(
        (l) =>
          l.msg === "audit: the node's addresses not read; only sightings release" && l.err === 'nsenter not found',
      ),
    );
  });

  it('no reader of the node at all: nothing proven, the report says it was not looked for', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { node: null });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(r.node, { error: 'not looked for' });
    assert.deepEqual(seen(r), ['lease b false']);
  });

  it('namespaces left unread are logged, and the report names them', async () => {
    const n = node();
    const w = world(n, { node: { addresses: new Set(), namespaces: 4, unread: ['/run/netns/x', 'net:[4026532001]'] } });
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(r.node, { namespaces: 4, unread: ['/run/netns/x', 'net:[4026532001]'] });
    const warn = w.logs.find((l) => l.msg === 'audit: network namespaces not read; only sightings release');
    assert.deepEqual(warn?.unread, ['/run/netns/x', 'net:[4026532001]']);
  });
});

describe('an audit pass: who an address belongs to', () => {
  it("a stale cache entry whose address host-local gave to another container is released; that container's lease is not", async () => {
    const n = node();
    n.lease('10.1.0.5', id('a')); // a's now: a is listed, its address on its interface
    const stale = n.cacheFile(id('c'), { ips: ['10.1.0.5'] }); // c is long gone
    const w = world(n, { answers: [[id('a')]], node: { addresses: new Set(['10.1.0.5']), namespaces: 2, unread: [] } });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['cache c true']);
    assert.ok(!existsSync(stale));
    assert.equal(r.runtime.distrusted, undefined);
  });

  it('an address two networks lease, one of them to this container, is its own: its lease is kept', async () => {
    const n = node();
    n.lease('10.1.0.5', id('c'), 2 * HOUR, 'eth0', 'net1');
    n.lease('10.1.0.5', id('a'), 2 * HOUR, 'eth0', 'net2');
    const w = world(n, { answers: [[id('a')]], node: { addresses: new Set(['10.1.0.5']), namespaces: 2, unread: [] } });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    // c's lease holds an address on an interface: not an orphan, and the runtime missed c, so it is distrusted.
    assert.deepEqual(seen(r), []);
    assert.match(r.runtime.distrusted ?? '', /\(e\.g\. ccccccccccccc\)$/);
    assert.deepEqual(w.calls, []);
  });
});

describe('an audit pass: what it reads, in detail', () => {
  it('a network whose host-local lock is not had is skipped, with a warning naming it', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    n.lease('10.2.0.6', id('c'), 2 * HOUR, 'eth0', 'busy');
    const w = world(n);
    w.lockNetwork = async (file) => {
      if (file.includes('/busy/')) throw new Error('not had within 30s');
      return () => undefined;
    };
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease b false']);
    const warn = w.logs.find((l) => l.msg === "audit: host-local's lock of a network not had; its leases skipped");
    assert.equal(warn?.dir, join(n.leases, 'busy'));
    assert.equal(warn?.err, 'not had within 30s');
  });

  it("leases are reported dataDir by dataDir in name order, the journalled configs' dirs among them", async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const first = join(n.base, 'a-data'); // sorts before n.leases (…/networks)
    mkdirSync(join(first, 'net'), { recursive: true });
    writeFileSync(join(first, 'net', '10.9.0.2'), `${id('c')}\r\neth0`);
    const a = attachment(1, id('a'), { state: 'adding' });
    const step = { config: JSON.stringify({ type: 'host-local', dataDir: first }) } as Step;
    const w = world(n, { attachments: [a], steps: { 1: [step] } });
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(
      r.orphans.map((o) => o.path),
      [join(first, 'net', '10.9.0.2'), join(n.leases, 'net', '10.1.0.6')],
    );
  });

  it('an attachment is reported by its journal id; a whole read of the node warns of nothing', async () => {
    const n = node();
    const w = world(n, { attachments: [attachment(7, id('a'))] });
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(
      r.orphans.map((o) => `${o.kind} ${o.path} ${o.journalled} ${o.ageSeconds}`),
      ['attachment attachment/7 true 7200'],
    );
    assert.deepEqual(
      w.logs.filter((l) => (l as { level?: number }).level === 40).map((l) => l.msg),
      [],
      'no warning: every namespace read, no nat table asked',
    );
  });

  it('portmap rules only of the networks asked for', async () => {
    const n = node();
    const w = world(n, {
      nat: { iptables: natOf(jump('net', id('b'), 'CNI-DN-b'), jump('other', id('c'), 'CNI-DN-c')) },
    });
    w.portmapNetworks = ['other'];
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    assert.deepEqual(
      r.orphans.map((o) => `${o.network} ${o.path}`),
      ['other iptables -t nat CNI-DN-c'],
    );
  });

  it("a rule ages from its container's oldest lease or cache file, whichever kind; an attachment's age is not such evidence", async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'), 3 * HOUR);
    n.cacheFile(id('b'), { ageMs: 2 * HOUR });
    n.cacheFile(id('e'), { ageMs: 4 * HOUR });
    n.lease('10.1.0.7', id('a'), HOUR / 2);
    const w = world(n, {
      attachments: [attachment(1, id('a'), { updatedAt: NOW - 5 * HOUR })],
      nat: {
        iptables: natOf(
          jump('net', id('b'), 'CNI-DN-b'),
          jump('net', id('e'), 'CNI-DN-e'),
          jump('net', id('a'), 'CNI-DN-a'),
        ),
      },
    });
    const r = await runAudit(w, { release: false, graceMs: HOUR });
    const ages = Object.fromEntries(
      r.orphans.filter((o) => o.kind === 'portmap').map((o) => [o.containerId.slice(0, 1), o.ageSeconds]),
    );
    assert.deepEqual(ages, { a: 1800, b: 3 * 3600, e: 4 * 3600 });
  });
});

describe('an audit pass: a sandbox that starts while the pass runs', () => {
  /** A world whose journal changes while the leases are scanned (under host-local's lock). */
  function during(n: Node, before: Attachment[], after: Attachment[]) {
    const w = world(n, { attachments: before });
    w.lockNetwork = async () => {
      w.attachments = after;
      return () => undefined;
    };
    return w;
  }

  it('an ADD that began and finished while the leases were scanned keeps its lease', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = during(n, [], [attachment(1, id('b'))]);
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.equal(r.runtime.distrusted, undefined);
    assert.deepEqual(seen(r), [], 'starting, not an orphan');
    assert.deepEqual(w.calls, []);
  });

  it('an ADD in flight at the first read that finished during the scan keeps its lease: no teardown of a new pod', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = during(n, [attachment(1, id('b'), { state: 'adding' })], [attachment(1, id('b'))]);
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), []);
    assert.deepEqual(w.torn, []);
  });

  it('a second interface of a journalled pod whose ADD began during the scan keeps the pod', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const eth0 = attachment(1, id('b'));
    const net1 = attachment(2, id('b'), { ifname: 'net1', state: 'adding' });
    const w = during(n, [eth0], [eth0, net1]);
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), []);
    assert.deepEqual(w.torn, []);
  });

  it('a container whose namespace the journal and its cache entry name differently is kept while either exists', async () => {
    const n = node();
    // The cache entry names a namespace that exists; the journal one that does not.
    n.cacheFile(id('b'), { netns: n.ns('pod-b'), ips: ['10.1.0.6'] });
    const w = world(n, {
      attachments: [attachment(1, id('b'), { netns: join(n.netns, 'gone') })],
      answers: [[id('9')]],
    });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.equal(r.runtime.distrusted, undefined);
    assert.deepEqual(seen(r), []);
    assert.deepEqual(w.torn, []);
  });
});

describe('an audit pass: the release itself', () => {
  it('each release is logged with its evidence: the finding and how many sandboxes the runtime listed', async () => {
    const n = node();
    n.lease('10.1.0.6', id('b'));
    const w = world(n, { answers: [[id('1'), id('2')]] });
    w.cniPath = '/opt/cni/bin';
    const cniPaths: string[] = [];
    w.run = async (call) => {
      cniPaths.push(call.cniPath);
      return undefined;
    };
    await runAudit(w, { release: true, graceMs: HOUR });
    const line = w.logs.find((l) => l.msg === 'audit: released an orphan: its sandbox is not listed by the runtime');
    assert.equal(line?.kind, 'lease');
    assert.equal(line?.containerId, id('b'));
    assert.equal(line?.path, join(n.leases, 'net', '10.1.0.6'));
    assert.equal(line?.runtimeSandboxes, 2);
    assert.deepEqual(cniPaths, ['/opt/cni/bin'], "host-local's DEL is given the daemon's CNI path");
    const w2 = world(n, {});
    const bare: string[] = [];
    w2.run = async (call) => {
      bare.push(call.cniPath);
      return undefined;
    };
    await runAudit(w2, { release: true, graceMs: HOUR });
    assert.deepEqual(bare, [''], 'none given: empty');
  });

  it('the runtime lost midway: the report says why the rest was only reported', async () => {
    const n = node();
    for (let i = 0; i < RELEASE_BATCH + 1; i++) n.lease(`10.3.${100 + i}.1`, i.toString(16).padStart(64, '0'));
    const w = world(n, { answers: [[], null] });
    const r = await runAudit(w, { release: true, graceMs: HOUR, capFraction: 1 });
    assert.equal(r.reportOnly, 'the runtime stopped answering during the pass');
    assert.equal(r.runtime.lostDuringPass, true);
    assert.equal(r.orphans.filter((o) => o.released).length, RELEASE_BATCH);
  });

  it('one journalled container torn down, another the runtime lists by the next batch kept: only its own attachments', async () => {
    const n = node();
    const ids = Array.from({ length: RELEASE_BATCH + 1 }, (_, i) => (i + 1).toString(16).padStart(64, '0'));
    const atts = ids.map((cid, i) => attachment(i + 1, cid));
    const late = ids[RELEASE_BATCH] as string;
    const w = world(n, { attachments: atts, answers: [[], [late]] });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.equal(r.orphans.filter((o) => o.released).length, RELEASE_BATCH);
    assert.deepEqual(
      [...w.torn].sort((a, b) => a - b),
      atts.slice(0, RELEASE_BATCH).map((a) => a.id),
      'one teardown per released container, never the listed one',
    );
  });

  it("a journalled lease whose attachment's own DEL finished during the pass is reported, not torn down again", async () => {
    const n = node();
    n.lease('10.1.0.6', id('b')); // its DEL left the lease file (host-local failed, say)
    const w = world(n, { attachments: [attachment(1, id('b'))] });
    w.nodeAddresses = async () => {
      w.attachments = [];
      return { addresses: new Set<string>(), namespaces: 1, unread: [] };
    };
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['lease b false']);
    assert.deepEqual(w.torn, []);
  });

  it('a teardown that does not finish, with no error given, is a failed release, logged as unfinished', async () => {
    const n = node();
    const w = world(n, { attachments: [attachment(1, id('a'))], onTeardown: () => ({ done: false }) });
    const r = await runAudit(w, { release: true, graceMs: HOUR });
    assert.deepEqual(seen(r), ['attachment a false']);
    const line = w.logs.find((l) => l.msg === 'audit: release failed');
    assert.equal(line?.err, 'teardown unfinished');
  });
});

describe('audit passes one at a time: the queue (audit/auditor.ts)', () => {
  /** A node whose first ask of the runtime waits for `gate`; `ask` counts the asks. */
  function gatedWorld(gate: Promise<void>, ask: () => number): World {
    const w = world(node());
    w.listSandboxes = async () => {
      if (ask() === 1) await gate;
      return [];
    };
    return w;
  }

  it(`at most ${MAX_WAITING_PASSES} passes wait behind the one running; one more is refused, and the queue takes passes again as it drains`, async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let asks = 0;
    const auditor = new Auditor(
      gatedWorld(gate, () => ++asks),
      pino({ level: 'silent' }),
    );
    const running = auditor.run({ release: false, graceMs: 0 });
    while (asks === 0) await new Promise((r) => setTimeout(r, 5));
    const waiting = Array.from({ length: MAX_WAITING_PASSES }, () => auditor.run({ release: false, graceMs: 0 }));
    await assert.rejects(auditor.run({ release: false, graceMs: 0 }), (e: Error) => {
      assert.ok(e instanceof AuditQueueFull);
      assert.match(e.message, new RegExp(`^${MAX_WAITING_PASSES} audit passes are already waiting`));
      return true;
    });
    open();
    await running;
    await Promise.all(waiting);
    assert.equal(asks, 1 + MAX_WAITING_PASSES, 'every queued pass ran, the refused one did not');
    await auditor.run({ release: false, graceMs: 0 });
    assert.equal(asks, 2 + MAX_WAITING_PASSES, 'a pass is taken again once the queue has drained');
  });

  it('a waiting pass whose caller has gone is not run when its turn comes; the others are', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let asks = 0;
    const outcomes: PassOutcome[] = [];
    const auditor = new Auditor(
      gatedWorld(gate, () => ++asks),
      pino({ level: 'silent' }),
      (o) => outcomes.push(o),
    );
    let gone = false;
    let runningGone = false;
    const running = auditor.run({ release: false, graceMs: 0 }, () => runningGone);
    while (asks === 0) await new Promise((r) => setTimeout(r, 5));
    runningGone = true; // a pass already started is finished whatever its caller does
    const abandoned = auditor.run({ release: false, graceMs: 0 }, () => gone);
    const kept = auditor.run({ release: false, graceMs: 0 }, () => false);
    gone = true;
    open();
    await running;
    await assert.rejects(abandoned, (e: Error) => e instanceof AuditCallerGone);
    await kept;
    assert.equal(asks, 2, 'the running pass and the one whose caller waits');
    assert.equal(outcomes.length, 2, 'a pass not run is no outcome');
  });
});
