// The interfaces other attachments hold in a pod's namespace (engine/interface-holders.ts): an ADD
// that would make one of them is refused before anything runs (its rollback DEL would remove the
// held one), and a DEL passed through runs a delegate whose interface is held without the netns.
// An attachment holds one interface per delegate; only one of this boot, at the same path, in the
// namespace that path still names, holds any.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CniError } from '@cni-steward/shared';
import { NETNS, newAttachment, req, setup } from '../helpers/engine-fakes.js';
import type { Store } from '../../daemon/src/store/store.js';

/** A steward netconf of network `name` whose delegates are one plugin each, with these ifnames. */
function net(name: string, delegates: Array<{ type: string; ifname?: string }>): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name,
    type: 'steward',
    delegates: delegates.map((d, i) => ({
      name: `${name}${i}`,
      cniVersion: '1.0.0',
      plugins: [{ type: d.type }],
      ...(d.ifname !== undefined ? { ifname: d.ifname } : {}),
    })),
  };
}

/** An added attachment journaled directly, holding `ifname` through one step. */
function holder(store: Store, over: Parameters<typeof newAttachment>[0], ifname = 'eth0'): void {
  const a = store.createAttachment(newAttachment({ netns: NETNS, bootId: 'boot-1', ...over }), 'added');
  const step = store.insertStep({
    attachmentId: a.id,
    seq: 0,
    delegateIndex: 0,
    delegateName: 'old0',
    ifname,
    pluginIndex: 0,
    pluginType: 'one',
    config: '{}',
  });
  store.setStepAdded(step.id, '{}');
}

describe('engine: state a plugin keeps by container and network, not interface', () => {
  /** Network `name`, one delegate (`delegate`) of a plugin and portmap or bandwidth, given runtimeConfig `rc`. */
  const chain = (name: string, keyed: string, rc: Record<string, unknown>, delegate = `${name}0`) => ({
    cniVersion: '1.0.0',
    name,
    type: 'steward',
    runtimeConfig: rc,
    delegates: [
      {
        name: delegate,
        cniVersion: '1.0.0',
        plugins: [{ type: 'one' }, { type: keyed, capabilities: { portMappings: true, bandwidth: true } }],
      },
    ],
  });
  const mapped = { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }] };
  const shaped = { bandwidth: { egressRate: 1000, egressBurst: 1000 } };
  const refused = (keyed: string, what: string) => (e: CniError) => {
    assert.equal(e.code, 102, e.message);
    assert.match(
      e.message,
      new RegExp(
        `already has delegate network a0 with ${keyed} \\(network a, interface eth0\\); ${keyed} keeps its ${what} by container and network`,
      ),
    );
    return true;
  };

  test('portmap: the same delegate network with port mappings again for the container (another interface, or another steward network) is 102 and runs nothing; either without mappings, or another delegate name, is added', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'pm', chain('a', 'portmap', mapped)));
    for (const [conf, ifname] of [
      [chain('a', 'portmap', mapped), 'eth1'],
      [chain('b', 'portmap', mapped, 'a0'), 'eth2'],
    ] as const)
      await assert.rejects(
        engine.handle(req('ADD', 'pm', conf, { ifname })),
        refused('portmap', 'port-mapping chains'),
      );
    await engine.handle(req('ADD', 'pm', chain('a', 'portmap', {}), { ifname: 'eth3' }));
    await engine.handle(req('ADD', 'pm', chain('c', 'portmap', mapped), { ifname: 'eth4' }));
    // Multus's `networks: a, a`: neither holds a chain.
    await engine.handle(req('ADD', 'twice', chain('a', 'portmap', {})));
    await engine.handle(req('ADD', 'twice', chain('a', 'portmap', mapped), { ifname: 'eth1' }));
    // A third with mappings clashes with the one that has them, whichever was added last.
    await engine.handle(req('ADD', 'twice', chain('a', 'portmap', {}), { ifname: 'eth2' }));
    await assert.rejects(
      engine.handle(req('ADD', 'twice', chain('a', 'portmap', mapped), { ifname: 'eth3' })),
      (e: CniError) => e.code === 102 && /interface eth1\)/.test(e.message),
    );
    assert.deepEqual(
      plugins.of('ADD').filter((c) => c.startsWith('ADD portmap')),
      [
        'ADD portmap pm',
        'ADD portmap pm',
        'ADD portmap pm',
        'ADD portmap twice',
        'ADD portmap twice',
        'ADD portmap twice',
      ],
    );
  });

  test("bandwidth: the same delegate network again is 102 when either shapes (the DEL removes the ifb device whatever it is given); neither shaping, it is added; a DEL passed through skips the holder's bandwidth only", async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'bw', chain('a', 'bandwidth', shaped)));
    await assert.rejects(
      engine.handle(req('ADD', 'bw', chain('a', 'bandwidth', {}), { ifname: 'eth1' })),
      refused('bandwidth', 'shaping \\(its ifb device\\)'),
    );
    await engine.handle(req('ADD', 'calm', chain('a', 'bandwidth', {})));
    await assert.rejects(
      engine.handle(req('ADD', 'calm', chain('a', 'bandwidth', shaped), { ifname: 'eth1' })),
      refused('bandwidth', 'shaping \\(its ifb device\\)'),
    );
    await engine.handle(req('ADD', 'calm', chain('a', 'bandwidth', {}), { ifname: 'eth2' }));
    assert.deepEqual(
      plugins.of('ADD').filter((c) => c.startsWith('ADD bandwidth')),
      ['ADD bandwidth bw', 'ADD bandwidth calm', 'ADD bandwidth calm'],
    );
    await engine.handle(req('DEL', 'bw', chain('a', 'bandwidth', shaped), { ifname: 'eth9' }));
    await engine.handle(req('DEL', 'calm', chain('a', 'bandwidth', {}), { ifname: 'eth9' }));
    assert.deepEqual(plugins.of('DEL'), ['DEL one bw', 'DEL bandwidth calm', 'DEL one calm']);
  });
});

describe('engine: the interfaces other attachments hold in a namespace', () => {
  test("an ADD whose later delegate makes an interface the container's other network holds (net1 on both) is 102, naming it, and runs nothing", async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'two', net('a', [{ type: 'one' }, { type: 'two' }])));
    await assert.rejects(
      engine.handle(req('ADD', 'two', net('b', [{ type: 'three' }, { type: 'four' }]), { ifname: 'eth1' })),
      (e: CniError) =>
        e.code === 102 && /already has interface net1 in \/proc\/self\/ns\/net on network a;/.test(e.message),
    );
    assert.deepEqual(plugins.of('ADD'), ['ADD one two', 'ADD two two']);
    assert.deepEqual(plugins.of('DEL'), []);
    // Named apart, the second network is served.
    await engine.handle(
      req('ADD', 'two', net('b', [{ type: 'three' }, { type: 'four', ifname: 'net9' }]), { ifname: 'eth1' }),
    );
    assert.deepEqual(plugins.of('ADD'), ['ADD one two', 'ADD two two', 'ADD three two', 'ADD four two']);
  });

  test("the same network added again at another CNI_IFNAME is 102 when its later delegate's net1 is the first one's", async () => {
    const { engine, plugins } = setup();
    const twice = net('a', [{ type: 'one' }, { type: 'two' }]);
    await engine.handle(req('ADD', 'dup', twice));
    await assert.rejects(
      engine.handle(req('ADD', 'dup', twice, { ifname: 'eth1' })),
      (e: CniError) =>
        e.code === 102 && /already has interface net1 in \/proc\/self\/ns\/net on network a;/.test(e.message),
    );
    assert.deepEqual(plugins.of('ADD'), ['ADD one dup', 'ADD two dup']);
    assert.deepEqual(plugins.of('DEL'), []);
    // Its later delegate named apart, the second attachment is served.
    await engine.handle(
      req('ADD', 'dup', net('a', [{ type: 'one' }, { type: 'two', ifname: 'net7' }]), { ifname: 'eth1' }),
    );
    assert.deepEqual(plugins.of('ADD'), ['ADD one dup', 'ADD two dup', 'ADD one dup', 'ADD two dup']);
  });

  test("the runtime's DEL after that refusal skips the delegate whose net1 is the first one's: even without the netns its IPAM would free that address", async () => {
    const { engine, plugins } = setup();
    const twice = net('a', [{ type: 'one' }, { type: 'two' }]);
    await engine.handle(req('ADD', 'dup', twice));
    await assert.rejects(engine.handle(req('ADD', 'dup', twice, { ifname: 'eth1' })), { code: 102 });
    await engine.handle(req('DEL', 'dup', twice, { ifname: 'eth1' }));
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => `${c.type} ${c.ifname} ${c.netns}`),
      [`one eth1 ${NETNS}`],
    );
    // The first attachment's own DEL still runs both.
    await engine.handle(req('DEL', 'dup', twice));
    assert.deepEqual(plugins.of('DEL').slice(1), ['DEL two dup', 'DEL one dup']);
  });

  test('an attachment whose namespace identity was never recorded (a row from before it was) still holds its interfaces', async () => {
    const { engine, plugins, store } = setup();
    holder(store, { containerId: 'r', network: 'old' });
    await assert.rejects(
      engine.handle(req('ADD', 'r', net('c', [{ type: 'three' }]))),
      (e: CniError) => e.code === 102 && /already has interface eth0 .* on network old;/.test(e.message),
    );
    assert.deepEqual(plugins.of('ADD'), []);
  });

  test('the same namespace by another path holds its interfaces (namespaces are compared, not paths)', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'p', net('a', [{ type: 'one' }])));
    for (const netns of ['/proc/thread-self/ns/net', NETNS.replace('/ns/', '//ns/'), NETNS.replace('/ns/', '/./ns/')])
      await assert.rejects(engine.handle(req('ADD', 'p', net('b', [{ type: 'two' }]), { netns })), (e: CniError) => {
        assert.equal(e.code, 102, `${netns}: ${e.message}`);
        return true;
      });
    assert.deepEqual(plugins.of('ADD'), ['ADD one p']);
  });

  test('no holder: a path now naming another namespace, or an attachment of another boot', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'p', net('a', [{ type: 'one' }])));
    await engine.handle(req('ADD', 'p', net('b', [{ type: 'two', ifname: 'side0' }])));
    // A row whose path was made again for another namespace since (netnsId), and one of another boot.
    holder(store, { containerId: 'q', network: 'old', netnsId: 'a namespace since gone' });
    holder(store, { containerId: 'q', network: 'older', bootId: 'boot-0' });
    await engine.handle(req('ADD', 'q', net('c', [{ type: 'three' }])));
    assert.deepEqual(plugins.of('ADD'), ['ADD one p', 'ADD two p', 'ADD three q']);
  });

  test("a DEL of the container on a network it was never added to runs, delegate by delegate, without the netns where its interface is another network's", async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'x', net('a', [{ type: 'one' }, { type: 'two' }])));
    // Network b: its first delegate's eth0 is a's, its second's own name is nobody's.
    await engine.handle(req('DEL', 'x', net('b', [{ type: 'three' }, { type: 'four', ifname: 'free0' }])));
    const dels = plugins.callsOf('DEL').map((c) => `${c.type} ${c.ifname} ${c.netns}`);
    assert.deepEqual(dels, [`four free0 ${NETNS}`, 'three eth0 ']);
    // Network a's attachment is untouched.
    assert.equal(plugins.of('DEL').length, 2);
  });
});
