import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError, ErrorCode, type PluginConf } from '@cni-steward/shared';
import { parseStewardConf, pluginStdin, type Delegate } from '../../daemon/src/engine/netconf.js';

function conf(delegates: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { cniVersion: '1.0.0', name: 'steward-net', type: 'steward', delegates, ...extra };
}

function cniError(code: number, ...mentions: string[]) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof CniError, `expected a CniError, got ${String(err)}`);
    assert.equal(err.code, code, `code ${err.code} (${err.message}), expected ${code}`);
    for (const m of mentions) assert.ok(err.message.includes(m), `"${err.message}" should mention ${m}`);
    return true;
  };
}

describe('parseStewardConf', () => {
  test('normalises a conflist delegate to its plugin chain with the runtime ifname', () => {
    const plugins = [
      { type: 'bridge', bridge: 'cni0' },
      { type: 'portmap', capabilities: { portMappings: true } },
    ];
    const parsed = parseStewardConf(
      conf([{ name: 'podnet', plugins }], { runtimeConfig: { portMappings: [] } }),
      'eth0',
    );
    assert.equal(parsed.name, 'steward-net');
    assert.equal(parsed.cniVersion, '1.0.0');
    assert.deepEqual(parsed.runtimeConfig, { portMappings: [] });
    assert.equal(parsed.disableGC, false);
    assert.deepEqual(parsed.delegates, [
      {
        index: 0,
        name: 'podnet',
        cniVersion: '1.0.0',
        ifname: 'eth0',
        ownIfname: false,
        plugins,
        disableCheck: false,
        disableGC: false,
      },
    ]);
  });

  test('normalises a single-conf delegate into a one-plugin chain that keeps its own cniVersion', () => {
    const single = { name: 'ext', cniVersion: '0.4.0', type: 'macvlan', master: 'ens3', disableCheck: true };
    const parsed = parseStewardConf(conf([single]), 'eth0');
    const [d] = parsed.delegates;
    assert.ok(d);
    assert.equal(d.cniVersion, '0.4.0');
    assert.equal(d.disableCheck, true);
    assert.equal(d.plugins.length, 1);
    assert.equal(d.plugins[0]?.type, 'macvlan');
    assert.equal(d.plugins[0]?.master, 'ens3');
  });

  test('does not pass a single-conf delegate its steward-level ifname as a plugin field', () => {
    const parsed = parseStewardConf(conf([{ name: 'ext', type: 'macvlan', ifname: 'ext0' }]), 'eth0');
    assert.equal(parsed.delegates[0]?.ifname, 'ext0');
    assert.equal(parsed.delegates[0]?.ownIfname, true);
    assert.ok(!('ifname' in (parsed.delegates[0]?.plugins[0] ?? {})));
  });

  test('a delegate without its own cniVersion inherits the outer one', () => {
    const parsed = parseStewardConf(conf([{ name: 'a', type: 'bridge' }], { cniVersion: '0.3.1' }), 'eth0');
    assert.equal(parsed.delegates[0]?.cniVersion, '0.3.1');
  });

  test('gives the first delegate the runtime ifname and later ones net1, net2, ... unless they set ifname', () => {
    const parsed = parseStewardConf(
      conf([
        { name: 'a', type: 'bridge' },
        { name: 'b', type: 'macvlan' },
        { name: 'c', type: 'ipvlan', ifname: 'data0' },
        { name: 'd', plugins: [{ type: 'bridge' }] },
      ]),
      'eth9',
    );
    assert.deepEqual(
      parsed.delegates.map((d) => [d.index, d.ifname]),
      [
        [0, 'eth9'],
        [1, 'net1'],
        [2, 'data0'],
        [3, 'net3'],
      ],
    );
  });

  test('the first delegate may override the runtime ifname too', () => {
    const parsed = parseStewardConf(conf([{ name: 'a', type: 'bridge', ifname: 'pod0' }]), 'eth0');
    assert.equal(parsed.delegates[0]?.ifname, 'pod0');
  });

  test('refuses two delegates on the same interface with code 7', () => {
    assert.throws(
      () =>
        parseStewardConf(
          conf([
            { name: 'a', type: 'bridge' },
            { name: 'b', type: 'macvlan', ifname: 'eth0' },
          ]),
          'eth0',
        ),
      cniError(ErrorCode.InvalidConfig, 'eth0'),
    );
    assert.throws(
      () =>
        parseStewardConf(
          conf([
            { name: 'a', type: 'bridge' },
            { name: 'b', type: 'x' },
            { name: 'c', type: 'y', ifname: 'net1' },
          ]),
          'eth0',
        ),
      cniError(ErrorCode.InvalidConfig, 'net1'),
    );
  });

  test('refuses an unsupported outer cniVersion with code 1', () => {
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', type: 'bridge' }], { cniVersion: '2.0.0' }), 'eth0'),
      cniError(ErrorCode.IncompatibleVersion, '2.0.0'),
    );
  });

  test('refuses an unsupported outer cniVersion with code 1 even when the rest of the netconf is malformed', () => {
    assert.throws(
      () => parseStewardConf({ cniVersion: '0.1.0', name: 'x' }, 'eth0'),
      cniError(ErrorCode.IncompatibleVersion),
    );
  });

  test('refuses an unsupported delegate cniVersion with code 1', () => {
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', type: 'bridge', cniVersion: '0.2.0' }]), 'eth0'),
      cniError(ErrorCode.IncompatibleVersion, '0.2.0'),
    );
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', cniVersion: '9.9.9', plugins: [{ type: 'bridge' }] }]), 'eth0'),
      cniError(ErrorCode.IncompatibleVersion, '9.9.9'),
    );
  });

  test('refuses a plugin type containing "/" with code 7, in a conflist or a single conf', () => {
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', plugins: [{ type: 'bridge' }, { type: '../../bin/sh' }] }]), 'eth0'),
      cniError(ErrorCode.InvalidConfig, '../../bin/sh'),
    );
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', type: '/usr/bin/evil' }]), 'eth0'),
      cniError(ErrorCode.InvalidConfig, '/usr/bin/evil'),
    );
  });

  test('refuses a netconf without delegates with code 7 and a message naming "delegates"', () => {
    assert.throws(
      () => parseStewardConf({ cniVersion: '1.0.0', name: 'steward-net' }, 'eth0'),
      cniError(ErrorCode.InvalidConfig, 'delegates'),
    );
  });

  test('refuses an empty delegates list with code 7', () => {
    assert.throws(() => parseStewardConf(conf([]), 'eth0'), cniError(ErrorCode.InvalidConfig, 'delegates'));
  });

  test('refuses a relative spoolDir with code 7 and accepts an absolute one', () => {
    const spool = (spoolDir: string) => ({ ...conf([{ name: 'a', type: 'bridge' }]), spoolDir });
    assert.throws(() => parseStewardConf(spool('spool'), 'eth0'), cniError(ErrorCode.InvalidConfig, 'spoolDir'));
    assert.throws(() => parseStewardConf(spool(''), 'eth0'), cniError(ErrorCode.InvalidConfig, 'spoolDir'));
    assert.equal(parseStewardConf(spool('/var/lib/steward/spool'), 'eth0').delegates.length, 1);
  });

  test('refuses a delegate with both plugins and type, or neither, with code 7', () => {
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', type: 'bridge', plugins: [{ type: 'bridge' }] }]), 'eth0'),
      cniError(ErrorCode.InvalidConfig),
    );
    assert.throws(() => parseStewardConf(conf([{ name: 'a' }]), 'eth0'), cniError(ErrorCode.InvalidConfig));
  });

  test('refuses a bad network name with code 7, outer or delegate', () => {
    assert.throws(
      () => parseStewardConf(conf([{ name: 'a', type: 'bridge' }], { name: 'bad name!' }), 'eth0'),
      cniError(ErrorCode.InvalidConfig, 'bad name!'),
    );
    assert.throws(
      () => parseStewardConf(conf([{ name: '-dash', type: 'bridge' }]), 'eth0'),
      cniError(ErrorCode.InvalidConfig, '-dash'),
    );
  });

  test('refuses something that is not a JSON object with code 7', () => {
    for (const bad of [null, [], 'x', 3]) {
      assert.throws(() => parseStewardConf(bad, 'eth0'), cniError(ErrorCode.InvalidConfig));
    }
  });

  test('defaults runtimeConfig to an empty object and keeps the raw netconf', () => {
    const input = conf([{ name: 'a', type: 'bridge' }], { disableGC: true });
    const parsed = parseStewardConf(input, 'eth0');
    assert.deepEqual(parsed.runtimeConfig, {});
    assert.equal(parsed.disableGC, true);
    assert.equal(parsed.raw, input);
  });
});

describe('pluginStdin', () => {
  const delegate: Delegate = {
    index: 0,
    name: 'podnet',
    cniVersion: '1.0.0',
    ifname: 'eth0',
    ownIfname: false,
    plugins: [],
    disableCheck: false,
    disableGC: false,
  };
  const runtimeConfig = {
    portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
    bandwidth: { ingressRate: 1000 },
  };

  test('injects the network name and cniVersion over whatever the plugin conf says', () => {
    const out = pluginStdin(delegate, { type: 'bridge', name: 'other', cniVersion: '0.3.1', bridge: 'cni0' }, {});
    assert.equal(out.name, 'podnet');
    assert.equal(out.cniVersion, '1.0.0');
    assert.equal(out.type, 'bridge');
    assert.equal(out.bridge, 'cni0');
  });

  test('drops any prevResult or runtimeConfig written into the plugin conf', () => {
    const plugin: PluginConf = {
      type: 'bridge',
      prevResult: { cniVersion: '1.0.0', interfaces: [], ips: [] } as unknown as NonNullable<PluginConf['prevResult']>,
      runtimeConfig: { portMappings: ['forged'] },
    };
    const out = pluginStdin(delegate, plugin, runtimeConfig);
    assert.ok(!('prevResult' in out), 'prevResult must be dropped');
    assert.ok(!('runtimeConfig' in out), 'runtimeConfig must be dropped for a plugin without capabilities');
    assert.ok('prevResult' in plugin && 'runtimeConfig' in plugin, 'the stored plugin conf itself is not mutated');
  });

  test('passes only the runtimeConfig keys the plugin declares in capabilities', () => {
    const portmap = pluginStdin(delegate, { type: 'portmap', capabilities: { portMappings: true } }, runtimeConfig);
    assert.deepEqual(portmap.runtimeConfig, { portMappings: runtimeConfig.portMappings });

    const bridge = pluginStdin(delegate, { type: 'bridge' }, runtimeConfig);
    assert.ok(!('runtimeConfig' in bridge), 'bridge declares no capabilities and gets no runtimeConfig');
  });

  test('a capability declared false, or absent from the runtime config, is not passed', () => {
    const out = pluginStdin(
      delegate,
      { type: 'bandwidth', capabilities: { bandwidth: false, ipRanges: true } },
      runtimeConfig,
    );
    assert.ok(!('runtimeConfig' in out));
    const plugin = {
      type: 'portmap',
      capabilities: { portMappings: true, bandwidth: true },
      runtimeConfig: { stale: 1 },
    };
    assert.deepEqual(pluginStdin(delegate, plugin, runtimeConfig).runtimeConfig, runtimeConfig);
  });

  test('a capability named like an Object.prototype member is not passed when the runtime did not supply it', () => {
    const caps = JSON.parse('{"constructor":true,"toString":true}') as Record<string, boolean>;
    const out = pluginStdin(
      delegate,
      { type: 'odd', capabilities: caps },
      JSON.parse('{"portMappings":[]}') as Record<string, unknown>,
    );
    assert.ok(!('runtimeConfig' in out), `got runtimeConfig ${JSON.stringify(out.runtimeConfig)}`);
  });
});

describe('parseStewardConf: the error texts an operator reads', () => {
  const failure = (c: unknown, ifname = 'eth0') => {
    try {
      parseStewardConf(c, ifname);
    } catch (e) {
      assert.ok(e instanceof CniError);
      return [e.code, e.message, e.details ?? null];
    }
    assert.fail('the netconf was accepted');
  };
  const SUPPORTED = 'supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0';

  test('a shape error names every problem with its JSON path, at most eight of them', () => {
    assert.deepEqual(failure({ cniVersion: '1.0.0' }), [
      7,
      "invalid steward netconf: (root) must have required property 'name'; (root) must have required property 'delegates'",
      null,
    ]);
    assert.deepEqual(failure(conf([{ name: 'd', plugins: [{ type: 5 }, {}] }])), [
      7,
      "invalid steward netconf: /delegates/0/plugins/0/type must be string; /delegates/0/plugins/1 must have required property 'type'",
      null,
    ]);
    const nine = {
      cniVersion: 1,
      name: 2,
      delegates: 3,
      socket: '',
      spoolDir: 'rel',
      timeouts: 1,
      runtimeConfig: 2,
      disableGC: 'x',
      type: 4,
    };
    assert.deepEqual(failure(nine), [
      7,
      'invalid steward netconf: /cniVersion must be string; /name must be string; /type must be string; ' +
        '/socket must NOT have fewer than 1 characters; /spoolDir must match pattern "^/"; /delegates must be array; ' +
        '/timeouts must be object; /runtimeConfig must be object',
      null,
    ]);
  });

  test('an unsupported version, outer or delegate, lists the supported ones; a bad ifname says which delegate', () => {
    assert.deepEqual(failure(conf([], { cniVersion: '9.9.9' })), [1, 'cniVersion "9.9.9" is not supported', SUPPORTED]);
    assert.deepEqual(failure(conf([{ name: 'd', cniVersion: '9.9', type: 'x' }])), [
      1,
      'delegate 0 ("d"): cniVersion "9.9" is not supported',
      SUPPORTED,
    ]);
    assert.deepEqual(failure(conf([{ name: 'd', ifname: 'bad/if', type: 'x' }])), [
      7,
      'delegate 0 ("d"): ifname "bad/if" must not contain "/", ":" or whitespace',
      null,
    ]);
    assert.deepEqual(failure(conf([{ name: 'd', type: 'x' }]), 'a'.repeat(20)), [
      7,
      `delegate 0 ("d"): ifname "${'a'.repeat(20)}" is longer than 15 bytes`,
      null,
    ]);
    for (const bad of [[], null, 'text', 7]) assert.deepEqual(failure(bad), [7, 'netconf must be a JSON object', null]);
  });
});
