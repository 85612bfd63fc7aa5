// What the SIGTERM check makes of the API server's answers (daemon/src/lifecycle/k8s.ts): only the
// API server's own NotFound for the DaemonSet is its absence, and only for a pod that DaemonSet
// would have named. The whole exchange, against a stand-in API server: lifecycle-sigterm.test.ts.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { notFound, podOfDaemonSet, type ApiAccess } from '../../daemon/src/lifecycle/k8s.js';

const status = (details: object) =>
  JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, details });

describe("a 404 from the API: the DaemonSet's absence only when the API server says so", () => {
  it('absent: a NotFound Status naming the DaemonSet (with or without its kind)', () => {
    assert.deepEqual(notFound(status({ name: 'steward', group: 'apps', kind: 'daemonsets' }), 'steward'), {
      kind: 'absent',
    });
    assert.deepEqual(notFound(status({ name: 'steward' }), 'steward'), { kind: 'absent' });
  });

  it('unknown: another name, another kind, another reason, no details, or not a Status at all', () => {
    const unknown = (text: string) => assert.equal(notFound(text, 'steward').kind, 'unknown', text);
    unknown(status({ name: 'other', kind: 'daemonsets' }));
    unknown(status({ name: 'steward', kind: 'namespaces' }));
    unknown(JSON.stringify({ kind: 'Status', reason: 'Gone', details: { name: 'steward' } }));
    unknown(JSON.stringify({ kind: 'Status', reason: 'NotFound' }));
    unknown(JSON.stringify({ kind: 'DaemonSet', reason: 'NotFound', details: { name: 'steward' } }));
    unknown('404 page not found\n');
    unknown('null');
    unknown('');
  });

  it("says what it got, printable and cut (a proxy's page can be long and binary)", () => {
    const s = notFound(`<html>\u0000${'x'.repeat(5000)}`, 'steward');
    assert.equal(s.kind, 'unknown');
    const why = (s as { why: string }).why;
    assert.match(why, /^HTTP 404 that is not the API server's NotFound for daemonsets\/steward: <html>/);
    assert.ok(why.length < 400, why);
    assert.ok(!why.includes('\u0000'), why);
  });
});

describe('a pod the named DaemonSet would have made', () => {
  const a = (podName?: string): ApiAccess => ({
    server: 'https://api',
    tokenFile: '/t',
    caFile: '/c',
    namespace: 'steward-system',
    daemonSet: 'steward',
    timeoutMs: 1000,
    ...(podName !== undefined ? { podName } : {}),
  });
  it('is named <daemonset>-<suffix>; a pod of unknown name is taken to be one', () => {
    assert.equal(podOfDaemonSet(a('steward-x7k2p')), true);
    assert.equal(podOfDaemonSet(a()), true);
  });
  it('is not one named after another DaemonSet, a static pod, a hand-made pod, or the name alone', () => {
    assert.equal(podOfDaemonSet(a('prod-steward-x7k2p')), false);
    assert.equal(podOfDaemonSet(a('steward-prod-x7k2p')), false, 'DaemonSet steward-prod labelled steward');
    assert.equal(podOfDaemonSet(a('steward-node-1')), false, 'a static pod: <name>-<node>');
    assert.equal(podOfDaemonSet(a('steward-debug')), false);
    assert.equal(podOfDaemonSet(a('steward-aeiou')), false, 'vowels are not in the generated suffix');
    assert.equal(podOfDaemonSet(a('stewardx-1')), false);
    assert.equal(podOfDaemonSet(a('steward')), false);
  });

  it("a DaemonSet name past 57 characters: its pods' prefix is cut to 58, as generateName cuts it", () => {
    const long = 'steward-' + 'n'.repeat(55); // 63 characters, the longest a DaemonSet name may be
    const ds = { ...a(), daemonSet: long };
    assert.equal(podOfDaemonSet({ ...ds, podName: `${long.slice(0, 58)}x7k2p` }), true);
    assert.equal(podOfDaemonSet({ ...ds, podName: `${long}-x7k2p` }), false);
  });
});
