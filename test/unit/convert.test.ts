import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { convertResult, validateResult } from '../../shared/src/cni/convert.js';
import { CniError, ErrorCode } from '../../shared/src/cni/errors.js';
import { SUPPORTED_VERSIONS } from '../../shared/src/cni/versions.js';

type V = (typeof SUPPORTED_VERSIONS)[number];

const PRE_1 = new Set<V>(['0.3.0', '0.3.1', '0.4.0']);

/**
 * The rich vector as a plugin speaking `version` would print it: IPs carry `version` only in
 * 0.x, and the second interface carries mtu/socketPath/pciID only in 1.1.0.
 */
function source(version: V): Record<string, unknown> {
  const v0 = PRE_1.has(version);
  return {
    cniVersion: version,
    interfaces: [
      { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/cni-1234' },
      {
        name: 'net1',
        mac: '3e:1f:aa:bb:cc:dd',
        sandbox: '/var/run/netns/cni-1234',
        ...(version === '1.1.0' ? { mtu: 9000, socketPath: '/run/vhost-user/net1.sock', pciID: '0000:3b:00.1' } : {}),
      },
    ],
    ips: [
      { ...(v0 ? { version: '4' } : {}), interface: 0, address: '10.244.0.5/24', gateway: '10.244.0.1' },
      { ...(v0 ? { version: '6' } : {}), interface: 0, address: 'fd00:10:244::5/64', gateway: 'fd00:10:244::1' },
      { ...(v0 ? { version: '4' } : {}), interface: 1, address: '192.168.50.7/28' },
    ],
    routes: [{ dst: '0.0.0.0/0', gw: '10.244.0.1' }, { dst: '::/0', gw: 'fd00:10:244::1' }, { dst: '10.96.0.0/12' }],
    dns: {
      nameservers: ['10.96.0.10', 'fd00:10:96::a'],
      domain: 'cluster.local',
      search: ['default.svc.cluster.local', 'svc.cluster.local'],
      options: ['ndots:5'],
    },
  };
}

// Expected outputs, written out by hand from the rules for each shape a conversion can produce.

const INTERFACES_BASE = [
  { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/cni-1234' },
  { name: 'net1', mac: '3e:1f:aa:bb:cc:dd', sandbox: '/var/run/netns/cni-1234' },
];
const INTERFACES_1_1 = [
  { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/cni-1234' },
  {
    name: 'net1',
    mac: '3e:1f:aa:bb:cc:dd',
    sandbox: '/var/run/netns/cni-1234',
    mtu: 9000,
    socketPath: '/run/vhost-user/net1.sock',
    pciID: '0000:3b:00.1',
  },
];
const IPS_WITH_VERSION = [
  { version: '4', interface: 0, address: '10.244.0.5/24', gateway: '10.244.0.1' },
  { version: '6', interface: 0, address: 'fd00:10:244::5/64', gateway: 'fd00:10:244::1' },
  { version: '4', interface: 1, address: '192.168.50.7/28' },
];
const IPS_WITHOUT_VERSION = [
  { interface: 0, address: '10.244.0.5/24', gateway: '10.244.0.1' },
  { interface: 0, address: 'fd00:10:244::5/64', gateway: 'fd00:10:244::1' },
  { interface: 1, address: '192.168.50.7/28' },
];
const ROUTES = [{ dst: '0.0.0.0/0', gw: '10.244.0.1' }, { dst: '::/0', gw: 'fd00:10:244::1' }, { dst: '10.96.0.0/12' }];
const DNS = {
  nameservers: ['10.96.0.10', 'fd00:10:96::a'],
  domain: 'cluster.local',
  search: ['default.svc.cluster.local', 'svc.cluster.local'],
  options: ['ndots:5'],
};

function expected(to: V, interfaces: unknown, ips: unknown) {
  return { cniVersion: to, interfaces, ips, routes: ROUTES, dns: DNS };
}

interface Case {
  from: V;
  to: V;
  name: string;
  want: unknown;
}

// All 25 ordered pairs, each with its expected output spelled out.
const CASES: Case[] = [
  // from 0.3.0
  {
    from: '0.3.0',
    to: '0.3.0',
    name: 'keeps the result as it is',
    want: expected('0.3.0', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  { from: '0.3.0', to: '0.3.1', name: 'keeps ip version', want: expected('0.3.1', INTERFACES_BASE, IPS_WITH_VERSION) },
  { from: '0.3.0', to: '0.4.0', name: 'keeps ip version', want: expected('0.4.0', INTERFACES_BASE, IPS_WITH_VERSION) },
  {
    from: '0.3.0',
    to: '1.0.0',
    name: 'drops ip version',
    want: expected('1.0.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  {
    from: '0.3.0',
    to: '1.1.0',
    name: 'drops ip version',
    want: expected('1.1.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  // from 0.3.1
  { from: '0.3.1', to: '0.3.0', name: 'keeps ip version', want: expected('0.3.0', INTERFACES_BASE, IPS_WITH_VERSION) },
  {
    from: '0.3.1',
    to: '0.3.1',
    name: 'keeps the result as it is',
    want: expected('0.3.1', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  { from: '0.3.1', to: '0.4.0', name: 'keeps ip version', want: expected('0.4.0', INTERFACES_BASE, IPS_WITH_VERSION) },
  {
    from: '0.3.1',
    to: '1.0.0',
    name: 'drops ip version',
    want: expected('1.0.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  {
    from: '0.3.1',
    to: '1.1.0',
    name: 'drops ip version',
    want: expected('1.1.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  // from 0.4.0
  { from: '0.4.0', to: '0.3.0', name: 'keeps ip version', want: expected('0.3.0', INTERFACES_BASE, IPS_WITH_VERSION) },
  { from: '0.4.0', to: '0.3.1', name: 'keeps ip version', want: expected('0.3.1', INTERFACES_BASE, IPS_WITH_VERSION) },
  {
    from: '0.4.0',
    to: '0.4.0',
    name: 'keeps the result as it is',
    want: expected('0.4.0', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '0.4.0',
    to: '1.0.0',
    name: 'drops ip version',
    want: expected('1.0.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  {
    from: '0.4.0',
    to: '1.1.0',
    name: 'drops ip version',
    want: expected('1.1.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  // from 1.0.0
  {
    from: '1.0.0',
    to: '0.3.0',
    name: 'derives ip version from the address',
    want: expected('0.3.0', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '1.0.0',
    to: '0.3.1',
    name: 'derives ip version from the address',
    want: expected('0.3.1', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '1.0.0',
    to: '0.4.0',
    name: 'derives ip version from the address',
    want: expected('0.4.0', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '1.0.0',
    to: '1.0.0',
    name: 'keeps the result as it is',
    want: expected('1.0.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  {
    from: '1.0.0',
    to: '1.1.0',
    name: 'keeps the result and adds no field',
    want: expected('1.1.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  // from 1.1.0
  {
    from: '1.1.0',
    to: '0.3.0',
    name: 'derives ip version and drops interface mtu/socketPath/pciID',
    want: expected('0.3.0', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '1.1.0',
    to: '0.3.1',
    name: 'derives ip version and drops interface mtu/socketPath/pciID',
    want: expected('0.3.1', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '1.1.0',
    to: '0.4.0',
    name: 'derives ip version and drops interface mtu/socketPath/pciID',
    want: expected('0.4.0', INTERFACES_BASE, IPS_WITH_VERSION),
  },
  {
    from: '1.1.0',
    to: '1.0.0',
    name: 'drops interface mtu/socketPath/pciID',
    want: expected('1.0.0', INTERFACES_BASE, IPS_WITHOUT_VERSION),
  },
  {
    from: '1.1.0',
    to: '1.1.0',
    name: 'keeps the result as it is, mtu/socketPath/pciID included',
    want: expected('1.1.0', INTERFACES_1_1, IPS_WITHOUT_VERSION),
  },
];

function isCniError(code: number, ...mentions: string[]) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof CniError, `expected a CniError, got ${String(err)}`);
    assert.equal(err.code, code, `code of "${err.message}"`);
    for (const m of mentions) assert.ok(err.message.includes(m), `"${err.message}" should mention ${m}`);
    return true;
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

describe('convertResult across every pair of supported versions', () => {
  test('the table covers all 25 ordered pairs', () => {
    const pairs = new Set(CASES.map((c) => `${c.from}>${c.to}`));
    assert.equal(pairs.size, 25);
    for (const a of SUPPORTED_VERSIONS)
      for (const b of SUPPORTED_VERSIONS) assert.ok(pairs.has(`${a}>${b}`), `${a} -> ${b}`);
  });

  for (const c of CASES) {
    test(`[${c.from} -> ${c.to}] ${c.name}`, () => {
      assert.deepEqual(convertResult(source(c.from), c.to), c.want);
    });
  }
});

describe('convertResult details', () => {
  test('a pre-1.1.0 result carrying mtu/socketPath/pciID loses them below 1.1.0 and keeps them at 1.1.0', () => {
    const input = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'net1', mtu: 1400, socketPath: '/s', pciID: '0000:00:01.0' }],
    };
    assert.deepEqual(convertResult(input, '1.0.0'), { cniVersion: '1.0.0', interfaces: [{ name: 'net1' }] });
    assert.deepEqual(convertResult(input, '0.4.0'), { cniVersion: '0.4.0', interfaces: [{ name: 'net1' }] });
    assert.deepEqual(convertResult(input, '1.1.0'), {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'net1', mtu: 1400, socketPath: '/s', pciID: '0000:00:01.0' }],
    });
  });

  test('down-conversion derives "6" for any address containing a colon and "4" otherwise', () => {
    const out = convertResult(
      { cniVersion: '1.1.0', ips: [{ address: '2001:db8::1/128' }, { address: '::/0' }, { address: '192.0.2.1/32' }] },
      '0.3.1',
    );
    assert.deepEqual(out.ips, [
      { version: '6', address: '2001:db8::1/128' },
      { version: '6', address: '::/0' },
      { version: '4', address: '192.0.2.1/32' },
    ]);
  });

  test('a 1.x ip that wrongly carries version loses it going up and gets it re-derived going down', () => {
    const input = { cniVersion: '1.0.0', ips: [{ version: '4', address: 'fd00::5/64' }] };
    assert.deepEqual(convertResult(input, '1.1.0').ips, [{ address: 'fd00::5/64' }]);
    assert.deepEqual(convertResult(input, '0.4.0').ips, [{ version: '6', address: 'fd00::5/64' }]);
  });

  test('a 0.x ip without a valid version gets one derived from the address', () => {
    const input = { cniVersion: '0.4.0', ips: [{ address: '10.0.0.1/8' }, { version: 'x', address: 'fe80::1/64' }] };
    assert.deepEqual(convertResult(input, '0.3.0').ips, [
      { version: '4', address: '10.0.0.1/8' },
      { version: '6', address: 'fe80::1/64' },
    ]);
  });

  test('the output cniVersion is the target version', () => {
    for (const to of SUPPORTED_VERSIONS) assert.equal(convertResult({ cniVersion: '0.3.0' }, to).cniVersion, to);
  });

  test('unknown top-level keys are dropped and absent sections stay absent', () => {
    const out = convertResult({ cniVersion: '0.4.0', ips: [], extra: 1, prevResult: {}, code: 7 }, '1.0.0');
    assert.deepEqual(out, { cniVersion: '1.0.0', ips: [] });
    assert.deepEqual(Object.keys(out).sort(), ['cniVersion', 'ips']);
  });

  test('absent or null optional fields are omitted, never written as undefined', () => {
    const out = convertResult(
      {
        cniVersion: '1.1.0',
        interfaces: [{ name: 'eth0', mac: undefined, sandbox: null, mtu: undefined }],
        ips: [{ address: '10.0.0.2/24', interface: undefined, gateway: null }],
        routes: [{ dst: '0.0.0.0/0', gw: undefined }],
        dns: null,
      },
      '0.4.0',
    );
    assert.deepEqual(out, {
      cniVersion: '0.4.0',
      interfaces: [{ name: 'eth0' }],
      ips: [{ version: '4', address: '10.0.0.2/24' }],
      routes: [{ dst: '0.0.0.0/0' }],
    });
    assert.ok(!('dns' in out));
    assert.ok(!('gateway' in (out.ips?.[0] ?? {})));
  });

  test('unknown keys inside interfaces and routes are carried over', () => {
    const input = {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'eth0', vendor: { x: [1, 2] } }],
      routes: [{ dst: '0.0.0.0/0', mtu: 1400, priority: 10, table: 100, scope: 0 }],
    };
    assert.deepEqual(convertResult(input, '0.3.1'), {
      cniVersion: '0.3.1',
      interfaces: [{ name: 'eth0', vendor: { x: [1, 2] } }],
      routes: [{ dst: '0.0.0.0/0', mtu: 1400, priority: 10, table: 100, scope: 0 }],
    });
  });

  test('the input is not mutated, even when frozen, and the output shares no objects with it', () => {
    for (const from of SUPPORTED_VERSIONS) {
      const pristine = source(from);
      const input = deepFreeze(source(from));
      for (const to of SUPPORTED_VERSIONS) {
        const out = convertResult(input, to);
        assert.deepEqual(input, pristine);
        assert.notEqual(out.interfaces, input.interfaces);
        assert.notEqual(out.interfaces?.[1], (input.interfaces as unknown[])[1]);
        assert.notEqual(out.ips?.[0], (input.ips as unknown[])[0]);
        assert.notEqual(out.routes?.[0], (input.routes as unknown[])[0]);
        assert.notEqual(out.dns, input.dns);
        assert.notEqual(out.dns?.nameservers, (input.dns as { nameservers: unknown }).nameservers);
      }
    }
  });

  test('mutating the output leaves the input alone', () => {
    const input = source('1.1.0');
    const out = convertResult(input, '1.1.0');
    const iface = out.interfaces?.[1];
    assert.ok(iface);
    iface.name = 'changed';
    out.dns?.nameservers?.push('1.1.1.1');
    out.ips?.pop();
    assert.deepEqual(input, source('1.1.0'));
  });

  test("validateResult returns a normalized copy in the result's own version", () => {
    const input = { cniVersion: '0.4.0', ips: [{ version: '4', address: '10.1.0.2/16', gateway: null }], junk: true };
    assert.deepEqual(validateResult(input), { cniVersion: '0.4.0', ips: [{ version: '4', address: '10.1.0.2/16' }] });
    assert.throws(() => validateResult({ cniVersion: '0.2.0' }), isCniError(ErrorCode.IncompatibleVersion, '0.2.0'));
    assert.throws(() => validateResult('nope'), isCniError(ErrorCode.DecodeFailure));
  });
});

describe('convertResult errors', () => {
  const valid = source('1.0.0');

  test('an unknown target version is IncompatibleVersion (1) naming the version', () => {
    for (const to of ['0.2.0', '0.1.0', '1.2.0', '2.0.0', '', 'latest']) {
      assert.throws(() => convertResult(valid, to), isCniError(ErrorCode.IncompatibleVersion, `"${to}"`));
    }
  });

  test('an unknown source version is IncompatibleVersion (1) naming the version', () => {
    for (const from of ['0.2.0', '0.1.0', '1.2.0', '9.9.9']) {
      assert.throws(
        () => convertResult({ ...valid, cniVersion: from }, '1.0.0'),
        isCniError(ErrorCode.IncompatibleVersion, from),
      );
    }
  });

  test('a non-object result is DecodeFailure (6)', () => {
    for (const bad of [null, undefined, 'a string', 42, true, [], [{ cniVersion: '1.0.0' }]]) {
      assert.throws(() => convertResult(bad, '1.0.0'), isCniError(ErrorCode.DecodeFailure, 'object'));
    }
  });

  test('a result without cniVersion is DecodeFailure (6)', () => {
    assert.throws(() => convertResult({ ips: [] }, '1.0.0'), isCniError(ErrorCode.DecodeFailure, 'cniVersion'));
    assert.throws(() => convertResult({ cniVersion: '' }, '1.0.0'), isCniError(ErrorCode.DecodeFailure, 'cniVersion'));
    assert.throws(() => convertResult({ cniVersion: 1 }, '1.0.0'), isCniError(ErrorCode.DecodeFailure, 'cniVersion'));
  });

  test('malformed sections are DecodeFailure (6) naming the field', () => {
    const bad: Array<[unknown, string]> = [
      [{ cniVersion: '1.0.0', ips: {} }, 'ips'],
      [{ cniVersion: '1.0.0', ips: [{ gateway: '10.0.0.1' }] }, 'ips[0].address'],
      [{ cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24', interface: -1 }] }, 'ips[0].interface'],
      [{ cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24', interface: '0' }] }, 'ips[0].interface'],
      [{ cniVersion: '1.0.0', interfaces: ['eth0'] }, 'interfaces[0]'],
      [{ cniVersion: '1.0.0', interfaces: [{ mac: 'x' }] }, 'interfaces[0].name'],
      [{ cniVersion: '1.1.0', interfaces: [{ name: 'e', mtu: '1500' }] }, 'interfaces[0].mtu'],
      [{ cniVersion: '1.0.0', routes: [{ gw: '10.0.0.1' }] }, 'routes[0].dst'],
      [{ cniVersion: '1.0.0', dns: [] }, 'dns'],
      [{ cniVersion: '1.0.0', dns: { nameservers: '10.0.0.10' } }, 'dns.nameservers'],
      [{ cniVersion: '1.0.0', dns: { search: [1] } }, 'dns.search[0]'],
    ];
    for (const [input, field] of bad) {
      assert.throws(() => convertResult(input, '0.4.0'), isCniError(ErrorCode.DecodeFailure, field));
    }
  });
});
