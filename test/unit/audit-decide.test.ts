// The audit's decision on injected inputs (no root, no runtime): alive, in flight, young, journalled,
// a network namespace still present, owner unknown and the per-run cap each keep a finding from being released.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decide, type DecideInput, type Finding } from '../../daemon/src/audit/decide.js';

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

function run(findings: Finding[], over: Partial<DecideInput> = {}) {
  return decide({
    findings,
    alive: new Set(['live']),
    inFlight: new Set(['starting']),
    nowMs: NOW,
    graceMs: GRACE,
    cap: 10,
    release: true,
    nodeAddresses: nodeWith(),
    ...over,
  }).map((d) => [d.finding.containerId, d.verdict, d.orphan]);
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
});
