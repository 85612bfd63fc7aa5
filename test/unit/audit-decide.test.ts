// The audit's decision on injected inputs (no root, no runtime): alive, in flight, young, journalled,
// a network namespace still present, owner unknown and the per-run cap each keep a finding from being released.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  decide,
  releaseGroup,
  RUNTIME_ID,
  runtimeDistrust,
  VERDICT_REASON,
  type DecideInput,
  type Finding,
} from '../../daemon/src/audit/decide.js';

const NOW = 10_000_000_000;
const GRACE = 15 * 60_000;

function lease(containerId: string, ageMs: number, journalled = false): Finding {
  return {
    kind: 'lease',
    containerId,
    network: 'net',
    ifname: 'eth0',
    ip: '10.1.0.2',
    path: `/tmp/net/10.1.0.2-${containerId}`,
    mtimeMs: NOW - ageMs,
    journalled,
    addresses: ['10.1.0.2'],
  };
}

/** The node read whole, holding `held`'s addresses. */
const nodeWith = (...held: string[]) => ({ addresses: new Set(held), complete: true });

/**
 * The tests name containers ('dead', 'live'); the runtime's ids are 64 hex digits, and an unjournalled
 * finding of another form is never released (foreign-owner). So every name given is turned into an id
 * of that form on the way in, and back on the way out.
 */
const sandboxId = (name: string) => (RUNTIME_ID.test(name) ? name : createHash('sha256').update(name).digest('hex'));
const ids = (set: ReadonlySet<string> | null | undefined) => set && new Set([...set].map(sandboxId));

function run(findings: Finding[], over: Partial<DecideInput> = {}) {
  const names = new Map(findings.map((f) => [sandboxId(f.containerId), f.containerId]));
  const input: DecideInput = {
    findings,
    alive: new Set(['live']),
    inFlight: new Set(['starting']),
    nowMs: NOW,
    graceMs: GRACE,
    cap: 10,
    release: true,
    nodeAddresses: nodeWith(),
    ...over,
  };
  return decide({
    ...input,
    findings: findings.map((f) => ({ ...f, containerId: sandboxId(f.containerId) })),
    alive: ids(input.alive) ?? null,
    inFlight: ids(input.inFlight) ?? new Set(),
    ...(input.netnsPresent ? { netnsPresent: ids(input.netnsPresent) as Set<string> } : {}),
    ...(input.addressOwners
      ? { addressOwners: new Map([...input.addressOwners].map(([a, owners]) => [a, ids(owners) as Set<string>])) }
      : {}),
    ...(input.sightings
      ? {
          sightings: new Map(
            [...input.sightings].map(([key, at]) => {
              const [kind, path, id] = key.split('\0') as [string, string, string];
              return [`${kind}\0${path}\0${sandboxId(id)}`, at];
            }),
          ),
        }
      : {}),
  }).map((d) => [names.get(d.finding.containerId) ?? d.finding.containerId, d.verdict, d.orphan]);
}

describe('audit decision', () => {
  test('a sandbox the runtime lists is alive and not an orphan, however old its lease', () => {
    assert.deepEqual(run([lease('live', 7_200_000)]), [['live', 'alive', false]]);
  });

  test('a journalled ADD in flight is not an orphan, even with no sandbox listed', () => {
    assert.deepEqual(run([lease('starting', 7_200_000, true)]), [['starting', 'in-flight', false]]);
  });

  test('a sandbox whose network namespace still exists is not an orphan, even unlisted and past the grace', () => {
    assert.deepEqual(run([lease('unlisted', 7_200_000, true)], { netnsPresent: new Set(['unlisted']), graceMs: 0 }), [
      ['unlisted', 'netns-present', false],
    ]);
  });

  test('a dead sandbox past the grace is released; one inside the grace stays', () => {
    assert.deepEqual(run([lease('old', 7_200_000), lease('young', 60_000)]), [
      ['old', 'release', true],
      ['young', 'young', true],
    ]);
  });

  test('journalled or not, a dead sandbox past the grace is released (the journal only changes the path)', () => {
    assert.deepEqual(run([lease('j', GRACE + 1000, true)]), [['j', 'release', true]]);
  });

  test('a finding with no evidence of its age is never released: it cannot be shown past the grace', () => {
    const rule: Finding = { ...lease('rule', 0), kind: 'portmap', mtimeMs: null, ip: null };
    assert.deepEqual(run([rule]), [['rule', 'young', true]]);
    assert.deepEqual(run([rule], { graceMs: 0 }), [['rule', 'young', true]]);
  });

  test('a portmap rule is aged by its evidence like a file: young evidence holds it, old evidence frees it', () => {
    const rule = (id: string, age: number): Finding => ({ ...lease(id, age), kind: 'portmap', ip: null });
    // (its address, the DNAT target, is on no interface of the node)
    assert.deepEqual(run([rule('new', 60_000), rule('old', GRACE + 1000)]), [
      ['new', 'young', true],
      ['old', 'release', true],
    ]);
  });

  test('the cap stops releases after N in one run', () => {
    const many = ['a', 'b', 'c'].map((id) => lease(id, 7_200_000));
    assert.deepEqual(run(many, { cap: 2 }), [
      ['a', 'release', true],
      ['b', 'release', true],
      ['c', 'capped', true],
    ]);
  });

  test('no runtime reachable: every finding is owner unknown and nothing is released', () => {
    assert.deepEqual(run([lease('live', 7_200_000), lease('x', 7_200_000)], { alive: null }), [
      ['live', 'owner-unknown', true],
      ['x', 'owner-unknown', true],
    ]);
  });

  test('without --release orphans are reported only', () => {
    assert.deepEqual(run([lease('old', 7_200_000)], { release: false }), [['old', 'report-only', true]]);
  });

  test("an address on the node keeps its finding, unless host-local's lease gives it to another container", () => {
    const cache = (id: string): Finding => ({ ...lease(id, 7_200_000), kind: 'cache', ip: null, path: `/c/${id}` });
    const node = nodeWith('10.1.0.2');
    assert.deepEqual(
      run([cache('stale')], { nodeAddresses: node, addressOwners: new Map([['10.1.0.2', new Set(['new'])]]) }),
      [['stale', 'release', true]],
    );
    assert.deepEqual(
      run([cache('own')], { nodeAddresses: node, addressOwners: new Map([['10.1.0.2', new Set(['own'])]]) }),
      [['own', 'address-in-use', false]],
    );
    assert.deepEqual(run([cache('unleased')], { nodeAddresses: node }), [['unleased', 'address-in-use', false]]);
  });

  test('a runtime answer the node contradicts: nothing is released, every orphan says why', () => {
    assert.deepEqual(run([lease('old', 7_200_000)], { distrust: 'no' }), [['old', 'runtime-distrusted', true]]);
  });

  test('no proof from the node: released only once a sighting is as old as the grace', () => {
    const f = lease('old', 7_200_000);
    const key = `lease\0${f.path}\0old`;
    const partial = { addresses: new Set<string>(), complete: false };
    assert.deepEqual(run([f], { nodeAddresses: partial }), [['old', 'unconfirmed', true]]);
    assert.deepEqual(run([f], { nodeAddresses: partial, sightings: new Map([[key, NOW - GRACE + 1]]) }), [
      ['old', 'unconfirmed', true],
    ]);
    assert.deepEqual(run([f], { nodeAddresses: partial, sightings: new Map([[key, NOW - GRACE]]) }), [
      ['old', 'release', true],
    ]);
    // A first sighting never counts, grace 0 included: two passes must agree.
    assert.deepEqual(run([f], { nodeAddresses: null, graceMs: 0 }), [['old', 'unconfirmed', true]]);
    assert.deepEqual(run([f], { nodeAddresses: null, graceMs: 0, sightings: new Map([[key, NOW - 1]]) }), [
      ['old', 'release', true],
    ]);
  });

  test("at most a fraction of one network's leases a pass, never fewer than 10", () => {
    const many = Array.from({ length: 30 }, (_, i) => lease(`l${i}`, 7_200_000));
    const verdicts = run(many, { cap: 1000 }).map(([, v]) => v);
    assert.equal(verdicts.filter((v) => v === 'release').length, 15);
    assert.equal(run(many, { cap: 1000, capFraction: 0.1 }).filter(([, v]) => v === 'release').length, 10);
    assert.equal(run(many, { cap: 1000, capFraction: 1 }).filter(([, v]) => v === 'release').length, 30);
  });

  test('one host-local DEL frees every lease of the container on that interface: a live sibling keeps them all', () => {
    const v4 = { ...lease('dual', 7_200_000), path: '/tmp/net/10.1.0.2', addresses: ['10.1.0.2'] };
    const v6 = { ...lease('dual', 7_200_000), ip: 'fd00::2', path: '/tmp/net/fd00::2', addresses: ['fd00::2'] };
    // Its IPv4 address is on an interface, its IPv6 one is gone: the v6 lease alone would be "unused".
    assert.deepEqual(run([v4, v6], { nodeAddresses: nodeWith('10.1.0.2') }), [
      ['dual', 'address-in-use', false],
      ['dual', 'group-held', false],
    ]);
    // Both gone: both released, together.
    assert.deepEqual(run([v4, v6]), [
      ['dual', 'release', true],
      ['dual', 'release', true],
    ]);
    // One of them young: the other waits for it.
    assert.deepEqual(run([v4, { ...v6, mtimeMs: NOW - 60_000 }]), [
      ['dual', 'group-waits', true],
      ['dual', 'young', true],
    ]);
  });

  test('a group that does not fit under the cap whole is capped whole', () => {
    const a1 = { ...lease('a', 7_200_000), path: '/tmp/net/10.1.0.3', addresses: ['10.1.0.3'] };
    const a2 = { ...lease('a', 7_200_000), path: '/tmp/net/10.1.0.4', addresses: ['10.1.0.4'] };
    const b = { ...lease('b', 7_200_000), path: '/tmp/net/10.1.0.5', addresses: ['10.1.0.5'] };
    assert.deepEqual(run([b, a1, a2], { cap: 2 }), [
      ['b', 'release', true],
      ['a', 'capped', true],
      ['a', 'capped', true],
    ]);
  });

  test('a finding with no address is never proven unused by the node (only sightings release it); an attachment is, by its gone netns', () => {
    const bare: Finding = { ...lease('bare', 7_200_000), kind: 'cache', path: '/c/bare', addresses: [] };
    // The whole node was read, no address anywhere: still nothing proves this one is unused.
    assert.deepEqual(run([bare]), [['bare', 'unconfirmed', true]]);
    const att = (netns: string): Finding => ({
      ...bare,
      kind: 'attachment',
      containerId: 'att',
      netns,
      journalled: true,
    });
    assert.deepEqual(run([att('/run/netns/gone')]), [['att', 'release', true]]);
    assert.deepEqual(run([att('')]), [['att', 'unconfirmed', true]], 'no netns recorded: no proof');
    const { netns: _none, ...noNetns } = att('/run/netns/gone');
    assert.deepEqual(run([noNetns]), [['att', 'unconfirmed', true]], 'no netns field at all: no proof either');
    assert.deepEqual(run([{ ...att('/run/netns/gone'), kind: 'cache', journalled: false }]), [
      ['att', 'unconfirmed', true],
    ]);
  });

  test('a sighting made by this very pass is not an earlier one, grace 0 included', () => {
    const f: Finding = { ...lease('now', 7_200_000), addresses: [] };
    const key = `lease\0${f.path}\0now`;
    const partial = { addresses: new Set<string>(), complete: false };
    assert.deepEqual(run([f], { nodeAddresses: partial, graceMs: 0, sightings: new Map([[key, NOW]]) }), [
      ['now', 'unconfirmed', true],
    ]);
    assert.deepEqual(run([f], { nodeAddresses: partial, graceMs: 0, sightings: new Map([[key, NOW + 5000]]) }), [
      ['now', 'unconfirmed', true],
    ]);
  });

  test('release groups: what one DEL or teardown frees', () => {
    const base = lease('c1', 0);
    // A journalled container's findings are one group, whatever their kind, but for its cache files.
    assert.equal(
      releaseGroup({ ...base, journalled: true }),
      releaseGroup({ ...base, kind: 'portmap', journalled: true }),
    );
    assert.notEqual(
      releaseGroup({ ...base, kind: 'cache', journalled: true }),
      releaseGroup({ ...base, journalled: true }),
    );
    // Unjournalled leases: one per data dir, container and interface; no ifname is eth0.
    assert.equal(releaseGroup({ ...base, ifname: '' }), releaseGroup({ ...base, ifname: 'eth0' }));
    assert.notEqual(releaseGroup({ ...base, ifname: 'net1' }), releaseGroup(base));
    assert.notEqual(releaseGroup({ ...base, path: '/other/net/10.1.0.2' }), releaseGroup(base));
    assert.notEqual(releaseGroup({ ...base, containerId: 'c2' }), releaseGroup(base));
    // portmap: one per network and container, whatever the family's path.
    const pm = { ...base, kind: 'portmap' as const };
    assert.equal(
      releaseGroup({ ...pm, path: 'iptables -t nat CNI-DN-1' }),
      releaseGroup({ ...pm, path: 'ip6tables -t nat CNI-DN-1' }),
    );
    assert.notEqual(releaseGroup({ ...pm, network: 'other' }), releaseGroup(pm));
    assert.notEqual(releaseGroup(pm), releaseGroup(base), 'a rule and a lease are freed by different DELs');
    // Cache files: each its own.
    const c = { ...base, kind: 'cache' as const };
    assert.notEqual(releaseGroup({ ...c, path: '/c/a' }), releaseGroup({ ...c, path: '/c/b' }));
  });

  test("the per-network cap counts a network's leases only, never fewer than 10, and a group's leases together", () => {
    const pool = Array.from({ length: 24 }, (_, i) => ({
      ...lease(`p${i}`, 7_200_000),
      path: `/tmp/net/10.1.1.${i}`,
      addresses: [`10.1.1.${i}`],
    }));
    // 24 leases at 0.5: 12 released. Rules and cache files of the same network do not count against it.
    const rules = pool.map((f) => ({
      ...f,
      kind: 'portmap' as const,
      path: `iptables -t nat CNI-DN-${f.containerId}`,
    }));
    const out = run([...pool, ...rules], { cap: 1000 });
    assert.equal(out.filter(([, v], i) => v === 'release' && i < 24).length, 12);
    assert.equal(out.filter(([, v], i) => v === 'release' && i >= 24).length, 24);
    // Another network's leases have their own cap.
    const other = pool.map((f) => ({ ...f, network: 'other', path: f.path.replace('/net/', '/other/') }));
    assert.equal(run([...pool, ...other], { cap: 1000 }).filter(([, v]) => v === 'release').length, 24);
  });

  test("a journalled container's leases on several networks each count against their own network's cap", () => {
    // 'b' has 10 leases (cap 10, the minimum): ten unjournalled leftovers fill it. Container j is
    // journalled with one lease on 'a' (listed first) and one on 'b': its group would put 'b' at 11.
    const onB = Array.from({ length: 10 }, (_, i) => ({
      ...lease(`b${i}`, 7_200_000),
      network: 'b',
      path: `/tmp/b/10.2.0.${i}`,
      addresses: [`10.2.0.${i}`],
    }));
    const j = (network: string, ip: string): Finding => ({
      ...lease('j', 7_200_000, true),
      network,
      path: `/tmp/${network}/${ip}`,
      ip,
      addresses: [ip],
    });
    const verdicts = run([...onB, j('a', '10.1.0.9'), j('b', '10.2.0.99')], { cap: 1000 });
    assert.equal(verdicts.filter(([id, v]) => id !== 'j' && v === 'release').length, 10);
    assert.deepEqual(
      verdicts.filter(([id]) => id === 'j').map(([, v]) => v),
      ['capped', 'capped'],
      "j's lease on b would be b's 11th: the whole group waits",
    );
    // Its lease on 'a' does not use up a's cap either: with j capped, 10 leftovers on 'a' all go.
    const onA = onB.map((f) => ({
      ...f,
      containerId: `a-${f.containerId}`,
      network: 'a',
      path: f.path.replace('/b/', '/a/'),
    }));
    const both = run([j('a', '10.1.0.9'), j('b', '10.2.0.99'), ...onA], { cap: 1000 });
    assert.deepEqual(
      both.filter(([id]) => id === 'j').map(([, v]) => v),
      ['release', 'release'],
    );
    // a: 11 leases (cap 10): j's one and 9 of the ten leftovers.
    assert.equal(both.filter(([id, v]) => id !== 'j' && v === 'release').length, 9);
  });

  test("an id with anything after or before 64 hex digits is not the runtime's form", () => {
    const id = 'a'.repeat(64);
    assert.match(runtimeDistrust([`${id}x`], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([`x${id}`], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([`${id}\n`], []) ?? '', /"a{64}\\n"/);
    assert.match(runtimeDistrust([id], ['b'.repeat(64)]) ?? '', /\(e\.g\. bbbbbbbbbbbbb\)$/);
  });

  test('the age a report shows: whole seconds since the evidence, 0 for a future mtime, none without evidence; exactly the grace old is past it', () => {
    const ages = decide({
      findings: [lease('old', 7_200_500), lease('future', -60_000), { ...lease('none', 0), mtimeMs: null }],
      alive: new Set(),
      inFlight: new Set(),
      nowMs: NOW,
      graceMs: GRACE,
      cap: 10,
      release: false,
    }).map((d) => d.ageSeconds);
    assert.deepEqual(ages, [7200, 0, null]);
    assert.deepEqual(run([lease('edge', GRACE)]), [['edge', 'release', true]]);
    assert.deepEqual(run([lease('inside', GRACE - 1)]), [['inside', 'young', true]]);
  });

  test('a group that fits the cap exactly is released whole; the cap and the network cap hold at their edge', () => {
    const a1 = { ...lease('a', 7_200_000), path: '/tmp/net/10.1.0.3', addresses: ['10.1.0.3'] };
    const a2 = { ...lease('a', 7_200_000), path: '/tmp/net/10.1.0.4', addresses: ['10.1.0.4'] };
    assert.deepEqual(run([a1, a2], { cap: 2 }), [
      ['a', 'release', true],
      ['a', 'release', true],
    ]);
    const singles = ['x', 'y', 'z'].map((id, i) => ({ ...lease(id, 7_200_000), path: `/tmp/net/10.1.0.${20 + i}` }));
    assert.deepEqual(
      run(singles, { cap: 1 }).map(([, v]) => v),
      ['release', 'capped', 'capped'],
    );
    // 22 leases at 0.5 allow 11: the 11th is released, the 12th capped.
    const pool = Array.from({ length: 22 }, (_, i) => ({ ...lease(`q${i}`, 7_200_000), path: `/tmp/net/10.1.2.${i}` }));
    const verdicts = run(pool, { cap: 1000 }).map(([, v]) => v);
    assert.equal(verdicts.indexOf('capped'), 11);
    assert.equal(verdicts.filter((v) => v === 'release').length, 11);
  });

  test('a very long odd id is named cut to 80 characters', () => {
    const long = 'Z'.repeat(200);
    const why = runtimeDistrust([long], []) ?? '';
    assert.ok(why.includes(`"${'Z'.repeat(80)}"`) && !why.includes('Z'.repeat(81)), why);
  });

  test('two journalled containers are two groups: one kept does not keep the other', () => {
    const j = (id: string, age: number): Finding => ({
      ...lease(id, age),
      kind: 'attachment',
      journalled: true,
      netns: `/run/netns/${id}`,
      path: `attachment/${id}`,
    });
    assert.deepEqual(run([j('j1', 7_200_000), j('j2', 60_000)]), [
      ['j1', 'release', true],
      ['j2', 'young', true],
    ]);
  });

  test('a group that did not fit does not use up the cap of those after it', () => {
    const b = { ...lease('b', 7_200_000), path: '/tmp/net/10.1.0.5' };
    const a1 = { ...lease('a', 7_200_000), path: '/tmp/net/10.1.0.3' };
    const a2 = { ...lease('a', 7_200_000), path: '/tmp/net/10.1.0.4' };
    const c = { ...lease('c', 7_200_000), path: '/tmp/net/10.1.0.6' };
    assert.deepEqual(
      run([b, a1, a2, c], { cap: 2 }).map(([id, v]) => `${id} ${v}`),
      ['b release', 'a capped', 'a capped', 'c release'],
    );
  });

  test('a finding that names no addresses at all (none recorded) is not proven by the node either', () => {
    const { addresses: _, ...noField } = lease('nofield', 7_200_000);
    assert.deepEqual(run([noField as Finding]), [['nofield', 'unconfirmed', true]]);
  });

  test('an unjournalled finding whose owner is no sandbox id of the runtime\'s form (host-local\'s "reserved") is reported, never released', () => {
    const verdicts = (containerId: string, journalled = false) =>
      decide({
        findings: [lease(containerId, 30 * 86_400_000, journalled)],
        alive: new Set(),
        inFlight: new Set(),
        nowMs: NOW,
        graceMs: GRACE,
        cap: 10,
        release: true,
        nodeAddresses: nodeWith(),
      }).map((d) => [d.verdict, d.orphan]);
    for (const owner of ['reserved', 'router', 'default-web', 'A'.repeat(64), `${'a'.repeat(64)}-x`])
      assert.deepEqual(verdicts(owner), [['foreign-owner', true]], owner);
    assert.deepEqual(verdicts('a'.repeat(64)), [['release', true]], "the runtime's form, proven unused");
    assert.deepEqual(
      verdicts('ctr-web', true),
      [['release', true]],
      "steward's own journal names it: its netns is gone",
    );
    // What holds a finding still comes first: a reservation whose address is on the node is no orphan.
    assert.deepEqual(
      decide({
        findings: [lease('router', 30 * 86_400_000)],
        alive: new Set(),
        inFlight: new Set(),
        nowMs: NOW,
        graceMs: GRACE,
        cap: 10,
        release: true,
        nodeAddresses: nodeWith('10.1.0.2'),
      }).map((d) => [d.verdict, d.orphan]),
      [['address-in-use', false]],
    );
  });

  test('each verdict has its own reason for the report (audit -o json), never an empty one', () => {
    const reasons = Object.values(VERDICT_REASON);
    assert.equal(reasons.length, 14);
    for (const r of reasons) assert.ok(r.length > 10, r);
    assert.equal(new Set(reasons).size, reasons.length, 'no two verdicts read the same');
    assert.match(VERDICT_REASON.capped, /--cap/);
  });
});
