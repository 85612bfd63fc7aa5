// Result conversion through the engine, without root: for every delegate version D and runtime
// version R (0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0 each way) a delegate of two plugins at D returns a
// D-shaped result, and ADD must answer it converted to R (the runtime's cniVersion), the next plugin
// must get it as prevResult at D, and a DEL must pass it back at D. The expected shapes are written
// out here from the spec's rules, not computed with convertResult:
//   - ips[].version ("4" | "6") exists below 1.0.0 and not from 1.0.0 on;
//   - interfaces[].mtu / socketPath / pciID exist from 1.1.0 on (so only when both D and R are >= 1.1.0);
//   - gateway, interface, routes and dns are carried through at every version.
//
// Kills the defect "convert a delegate's result to the wrong CNI version" (issue 20), each variant
// applied by hand to add.ts: the ADD answer converted to the delegate's version instead of the
// runtime's (runChains), or not converted at all; each step's result converted to the runtime's
// version instead of its delegate's (runStep: prevResult and the journaled step results); the
// repeated ADD answered from the journal at the delegate's version. Each fails the 20 tests with
// D != R below (and the first two the two-delegate test), and no other root-free test fails for
// the last three.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { SUPPORTED_VERSIONS } from '@cni-steward/shared';
import { conf, NETNS, req, setup } from '../helpers/engine-fakes.js';

const at = (v: string) => SUPPORTED_VERSIONS.indexOf(v as never);
const below1 = (v: string) => at(v) < at('1.0.0');
const from11 = (v: string) => at(v) >= at('1.1.0');

/** What a plugin of version `v` prints: ip versions below 1.0.0, 1.1.0's interface fields from 1.1.0 on. */
function pluginResult(v: string): Record<string, unknown> {
  return {
    cniVersion: v,
    interfaces: [
      {
        name: 'eth0',
        mac: '0a:58:0a:01:00:02',
        sandbox: NETNS,
        ...(from11(v) ? { mtu: 1400, pciID: '0000:00:1f.6' } : {}),
      },
    ],
    ips: [
      { ...(below1(v) ? { version: '4' } : {}), address: '10.1.0.2/24', gateway: '10.1.0.1', interface: 0 },
      { ...(below1(v) ? { version: '6' } : {}), address: 'fd00::2/64', gateway: 'fd00::1', interface: 0 },
    ],
    routes: [{ dst: '0.0.0.0/0', gw: '10.1.0.1' }],
    dns: { nameservers: ['10.1.0.1'], search: ['svc.local'] },
  };
}

/** The same result as a runtime of version `to` must see it, having been printed at `from`. */
function expected(from: string, to: string): Record<string, unknown> {
  return {
    cniVersion: to,
    interfaces: [
      {
        name: 'eth0',
        mac: '0a:58:0a:01:00:02',
        sandbox: NETNS,
        ...(from11(from) && from11(to) ? { mtu: 1400, pciID: '0000:00:1f.6' } : {}),
      },
    ],
    ips: [
      { ...(below1(to) ? { version: '4' } : {}), address: '10.1.0.2/24', gateway: '10.1.0.1', interface: 0 },
      { ...(below1(to) ? { version: '6' } : {}), address: 'fd00::2/64', gateway: 'fd00::1', interface: 0 },
    ],
    routes: [{ dst: '0.0.0.0/0', gw: '10.1.0.1' }],
    dns: { nameservers: ['10.1.0.1'], search: ['svc.local'] },
  };
}

describe('ADD result converted from the delegate’s version to the runtime’s (kills: wrong-version conversion)', () => {
  for (const d of SUPPORTED_VERSIONS) {
    for (const r of SUPPORTED_VERSIONS) {
      test(`delegate ${d}, runtime ${r}: ADD answers at ${r}, prevResult and DEL's prevResult at ${d}`, async () => {
        const { engine, plugins, store } = setup();
        plugins.on('one', (c) => (c.command === 'ADD' ? pluginResult(d) : undefined));
        plugins.on('two', (c) => (c.command === 'ADD' ? c.stdin.prevResult : undefined));
        const netconf = conf([], r, [{ name: 'pod', cniVersion: d, plugins: [{ type: 'one' }, { type: 'two' }] }]);

        const text = await engine.handle(req('ADD', 'c', netconf));
        const out = JSON.parse(text) as Record<string, unknown>;
        assert.equal(out.cniVersion, r);
        assert.deepEqual(out, expected(d, r));
        const ips = out.ips as Array<Record<string, unknown>>;
        assert.deepEqual(
          ips.map((ip) => ip.version),
          below1(r) ? ['4', '6'] : [undefined, undefined],
          `ips[].version ${below1(r) ? 'required' : 'absent'} at ${r}`,
        );

        // Within the delegate, every plugin speaks the delegate's version.
        const [add1, add2] = plugins.callsOf('ADD');
        assert.equal(add1!.stdin.cniVersion, d);
        assert.equal(add2!.stdin.cniVersion, d);
        assert.deepEqual(
          add2!.stdin.prevResult,
          expected(d, d),
          'the second plugin gets the first’s result at the delegate’s version',
        );

        // The journal keeps each step's result at the delegate's version and the answer at the runtime's.
        const a = store.currentAttachment({ containerId: 'c', network: 'net', ifname: 'eth0' })!;
        assert.deepEqual(JSON.parse(a.result!), expected(d, r));
        for (const s of store.stepsOf(a.id)) assert.deepEqual(JSON.parse(s.result!), expected(d, d));

        // A repeated ADD is answered from the journal, at the runtime's version, running nothing.
        assert.deepEqual(JSON.parse(await engine.handle(req('ADD', 'c', netconf))), expected(d, r));
        assert.equal(plugins.callsOf('ADD').length, 2);

        // DEL passes the delegate's final result back at the delegate's version (libcni does from 0.4.0 on).
        await engine.handle(req('DEL', 'c', netconf));
        const dels = plugins.callsOf('DEL');
        assert.equal(dels.length, 2);
        for (const del of dels) {
          assert.equal(del.stdin.cniVersion, d);
          if (at(d) >= at('0.4.0')) assert.deepEqual(del.stdin.prevResult, expected(d, d));
          else assert.equal(del.stdin.prevResult, undefined, `no prevResult on DEL at ${d}`);
        }
      });
    }
  }

  test('two delegates at different versions: ADD answers the first delegate’s result at the runtime’s version', async () => {
    const { engine, plugins } = setup();
    plugins.on('one', (c) => (c.command === 'ADD' ? pluginResult('0.3.1') : undefined));
    plugins.on('two', (c) => {
      if (c.command !== 'ADD') return undefined;
      return { ...pluginResult('1.1.0'), ips: [{ address: '192.168.9.9/24', interface: 0 }] };
    });
    const netconf = conf([], '1.0.0', [
      { name: 'pod', cniVersion: '0.3.1', plugins: [{ type: 'one' }] },
      { name: 'side', cniVersion: '1.1.0', plugins: [{ type: 'two' }] },
    ]);
    const out = JSON.parse(await engine.handle(req('ADD', 'c', netconf)));
    assert.deepEqual(out, expected('0.3.1', '1.0.0'), 'the first delegate’s result, not the last one’s');
    const [, second] = plugins.callsOf('ADD');
    assert.equal(second!.stdin.prevResult, undefined, 'a delegate’s chain starts without prevResult');
  });
});
