// bridge's and ptp's masquerade chain after a DEL without the pod's netns (engine/masquerade.ts): the
// chain's name as the plugins make it, the POSTROUTING jumps found in `iptables -S`, the removal
// through a recorded tool runner, and the teardown that asks for it (only then, and only when no other
// live attachment of the container shares the chain). The real iptables and bridge are in
// test/integration/masquerade.test.ts.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  chainShared,
  jumpsTo,
  leavesMasquerade,
  masqueradeChain,
  releaseMasquerade,
  ruleWords,
} from '../../daemon/src/engine/masquerade.js';
import { Priority } from '../../daemon/src/engine/limiter.js';
import { ToolMissing, type ToolRunner } from '../../daemon/src/plugins/executor.js';
import { conf, NETNS, req, setup } from '../helpers/engine-fakes.js';

// As Debian's bridge 1.1.1 printed them for network "mqnet", container "abc123" (2 Dec 2026).
const CHAIN = 'CNI-1a6b7065ab67ab61a6b6ffa7';
const JUMP = `-A POSTROUTING -s 10.231.0.2/32 -m comment --comment "name: \\"mqnet\\" id: \\"abc123\\"" -j ${CHAIN}`;

/**
 * A tool runner over one nat table per tool: `-S POSTROUTING` prints it, -D/-F/-X change it; an
 * operation in `failing` throws its error instead.
 */
function fakeTables(
  tables: Record<string, { jumps: string[]; chains: Set<string> } | 'missing' | Error>,
  failing: Record<string, Error> = {},
) {
  const calls: string[] = [];
  const run: ToolRunner = async (name, args) => {
    calls.push([name, ...args].join(' '));
    const t = tables[name];
    if (t === undefined || t === 'missing') throw new ToolMissing(`${name} is in none of /usr/sbin`);
    if (t instanceof Error) throw t;
    const [wait, seconds, table, nat, op, chain, ...rest] = args;
    assert.deepEqual([wait, seconds, table, nat], ['-w', '5', '-t', 'nat']);
    const failure = failing[op as string];
    if (failure) throw failure;
    if (op === '-S') return ['-P POSTROUTING ACCEPT', ...t.jumps].join('\n') + '\n';
    if (op === '-D') {
      const i = t.jumps.findIndex((j) => JSON.stringify(ruleWords(j).slice(2)) === JSON.stringify(rest));
      if (i < 0) throw new Error(`${name}: Bad rule (does a matching rule exist in that chain?).`);
      t.jumps.splice(i, 1);
      return '';
    }
    if (!t.chains.has(chain as string))
      throw new Error(`${name} exited with status 1: iptables: No chain/target/match by that name.`);
    if (op === '-X') t.chains.delete(chain as string);
    return '';
  };
  return { run, calls };
}

describe('masquerade: the chain a bridge DEL without the netns leaves', () => {
  test("the chain's name is the plugins' own: CNI- and 24 hex of sha512(network + container id)", () => {
    assert.equal(masqueradeChain('mqnet', 'abc123'), CHAIN);
    assert.notEqual(masqueradeChain('mqnet', 'abc124'), CHAIN);
    assert.equal(masqueradeChain('a'.repeat(200), 'b'.repeat(64)).length, 28);
  });

  test("a rule's words unquote the comment, its escaped quotes and backslashes kept as text", () => {
    assert.deepEqual(ruleWords(JUMP), [
      '-A',
      'POSTROUTING',
      '-s',
      '10.231.0.2/32',
      '-m',
      'comment',
      '--comment',
      'name: "mqnet" id: "abc123"',
      '-j',
      CHAIN,
    ]);
    assert.deepEqual(ruleWords('-A X --comment "a\\\\b"  -j  Y'), ['-A', 'X', '--comment', 'a\\b', '-j', 'Y']);
    assert.deepEqual(ruleWords('-A X --comment ""'), ['-A', 'X', '--comment', '']);
  });

  test('only POSTROUTING rules whose target is the chain are its jumps, not one whose comment names it', () => {
    const listing = [
      '-P POSTROUTING ACCEPT',
      JUMP,
      `-A POSTROUTING -s 10.231.0.3/32 -m comment --comment "-j ${CHAIN}" -j CNI-000000000000000000000000`,
      `-A OTHER -s 10.231.0.2/32 -j ${CHAIN}`,
      `-A POSTROUTING -s fd00::2/128 -j ${CHAIN}`,
    ].join('\n');
    assert.deepEqual(jumpsTo(listing, CHAIN), [ruleWords(JUMP).slice(2), ['-s', 'fd00::2/128', '-j', CHAIN]]);
  });

  test('only a bridge or ptp DEL without a netns on an ipMasq network leaves one', () => {
    assert.equal(leavesMasquerade({ type: 'bridge', ipMasq: true }, ''), true);
    assert.equal(leavesMasquerade({ type: 'ptp', ipMasq: true }, ''), true);
    assert.equal(leavesMasquerade({ type: 'bridge', ipMasq: true }, '/run/netns/p'), false);
    assert.equal(leavesMasquerade({ type: 'bridge', ipMasq: true }, '/run/netns/p', true), true);
    assert.equal(leavesMasquerade({ type: 'portmap', ipMasq: true }, '/run/netns/p', true), false);
    assert.equal(leavesMasquerade({ type: 'bridge', ipMasq: 'true' }, ''), false);
    assert.equal(leavesMasquerade({ type: 'bridge' }, ''), false);
    assert.equal(leavesMasquerade({ type: 'macvlan', ipMasq: true }, ''), false);
  });

  test('the jumps go by their own words, then the chain is flushed and deleted; a family without the tool is skipped', async () => {
    const v4 = { jumps: [JUMP, '-A POSTROUTING -s 10.9.0.9/32 -j CNI-other'], chains: new Set([CHAIN, 'CNI-other']) };
    const { run, calls } = fakeTables({ iptables: v4, ip6tables: 'missing' });
    assert.equal(await releaseMasquerade(run, 'mqnet', 'abc123'), 2);
    assert.deepEqual(v4.jumps, ['-A POSTROUTING -s 10.9.0.9/32 -j CNI-other']);
    assert.deepEqual([...v4.chains], ['CNI-other']);
    assert.deepEqual(calls, [
      'iptables -w 5 -t nat -S POSTROUTING',
      `iptables -w 5 -t nat -D POSTROUTING -s 10.231.0.2/32 -m comment --comment name: "mqnet" id: "abc123" -j ${CHAIN}`,
      `iptables -w 5 -t nat -F ${CHAIN}`,
      `iptables -w 5 -t nat -X ${CHAIN}`,
      'ip6tables -w 5 -t nat -S POSTROUTING',
    ]);
  });

  test('nothing there is nothing done; a family without a nat table is skipped; any other failure rejects', async () => {
    const empty = fakeTables({
      iptables: { jumps: [], chains: new Set() },
      ip6tables: new Error("ip6tables exited with status 3: can't initialize ip6tables table `nat'"),
    });
    assert.equal(await releaseMasquerade(empty.run, 'mqnet', 'abc123'), 0);
    const nft = fakeTables({
      iptables: { jumps: [], chains: new Set() },
      ip6tables: new Error("ip6tables exited with status 1: ip6tables v1.8.9 (nf_tables): table `nat' does not exist"),
    });
    assert.equal(await releaseMasquerade(nft.run, 'mqnet', 'abc123'), 0);
    assert.equal(
      empty.calls.some((c) => c.includes(' -X ')),
      false,
    );
    const broken = fakeTables({
      iptables: new Error('iptables exited with status 4: Another app is currently holding the xtables lock'),
    });
    await assert.rejects(releaseMasquerade(broken.run, 'mqnet', 'abc123'), /xtables lock/);
    // A flush that fails after the listing and the jumps' removal went through rejects too, deleting nothing.
    const v4 = { jumps: [JUMP], chains: new Set([CHAIN]) };
    const flushFails = fakeTables(
      { iptables: v4, ip6tables: { jumps: [], chains: new Set() } },
      { '-F': new Error('iptables exited with status 4: Another app is currently holding the xtables lock') },
    );
    await assert.rejects(releaseMasquerade(flushFails.run, 'mqnet', 'abc123'), /xtables lock/);
    assert.deepEqual([v4.jumps, [...v4.chains]], [[], [CHAIN]]);
    assert.equal(flushFails.calls.filter((c) => c.includes(' -X ') || c.startsWith('ip6tables')).length, 0);
  });
});

describe('masquerade: the teardown asks for it', () => {
  const masq = (delegates: Array<Record<string, unknown>>) => ({
    ...conf([]),
    delegates: delegates.map((d, i) => ({ name: `pod${i}`, cniVersion: '1.0.0', plugins: [d] })),
  });

  test('a bridge ipMasq step DELed without the netns has its chain removed, by delegate name and container; with the netns, not', async () => {
    const asked: string[] = [];
    const { engine, store } = setup({
      masquerade: async (network, id) => {
        asked.push(`${network} ${id}`);
        return 2;
      },
    });
    const netconf = masq([{ type: 'bridge', ipMasq: true }, { type: 'bridge' }]);
    await engine.handle(req('ADD', 'gone', netconf));
    const a = store.listAttachments({ containerId: 'gone', limit: 10 })[0]!;
    await engine.runTeardown(a.id, Priority.Background, { force: true, emptyNetns: true });
    assert.deepEqual(asked, ['pod0 gone']);
    await engine.handle(req('ADD', 'here', netconf));
    await engine.handle(req('DEL', 'here', netconf));
    assert.deepEqual(asked, ['pod0 gone']);
  });

  test("the removal runs in a plugin slot, as the plugin's own DEL did", async () => {
    const seen: number[] = [];
    const box: { limiter?: { inUse: number } } = {};
    const { engine, store } = setup({
      maxParallel: 1,
      masquerade: async () => {
        seen.push(box.limiter?.inUse ?? -1);
        return 2;
      },
    });
    box.limiter = engine.limiter;
    await engine.handle(req('ADD', 'slot', masq([{ type: 'bridge', ipMasq: true }])));
    const a = store.listAttachments({ containerId: 'slot', limit: 10 })[0]!;
    await engine.runTeardown(a.id, Priority.Background, { force: true, emptyNetns: true });
    assert.deepEqual(seen, [1]);
    assert.equal(engine.limiter.inUse, 0);
  });

  test('a DEL with the netns is asked for it only when it runs again after a failed one (the interface may have gone with that)', async () => {
    const asked: string[] = [];
    const { engine, plugins, store } = setup({
      masquerade: async (network, id) => {
        asked.push(`${network} ${id}`);
        return 0;
      },
    });
    let fail = true;
    plugins.on('bridge', (call) => {
      if (call.command === 'DEL' && fail) {
        fail = false;
        throw new Error('failed to release the address');
      }
      return call.command === 'ADD' ? { cniVersion: '1.0.0', ips: [{ address: '10.1.0.2/24' }] } : undefined;
    });
    const netconf = masq([{ type: 'bridge', ipMasq: true }]);
    await engine.handle(req('ADD', 'again', netconf));
    const a = store.listAttachments({ containerId: 'again', limit: 10 })[0]!;
    assert.equal((await engine.runTeardown(a.id, Priority.Background, { force: true })).done, false);
    assert.deepEqual(asked, [], 'the failed DEL asks nothing');
    assert.equal((await engine.runTeardown(a.id, Priority.Background, { force: true })).done, true);
    assert.deepEqual(asked, ['pod0 again']);
    assert.deepEqual(
      plugins.callsOf('DEL').map((c) => c.netns),
      [NETNS, NETNS],
      'both DELs ran with the netns',
    );
  });

  test('a removal that fails fails the step (11, naming the chain), and its retry removes it', async () => {
    let fail = true;
    const { engine, store } = setup({
      masquerade: async () => {
        if (fail) throw new Error('iptables exited with status 4: xtables lock');
        return 2;
      },
    });
    const netconf = masq([{ type: 'bridge', ipMasq: true }]);
    await engine.handle(req('ADD', 'lock', netconf));
    const a = store.listAttachments({ containerId: 'lock', limit: 10 })[0]!;
    const out = await engine.runTeardown(a.id, Priority.Background, { force: true, emptyNetns: true });
    assert.equal(out.done, false);
    assert.equal(out.error?.code, 11);
    assert.match(
      out.error?.message ?? '',
      new RegExp(
        `left its masquerade chain ${masqueradeChain('pod0', 'lock')} \\(run without the pod's netns, or after a failed DEL\\); removing it failed: .*xtables lock`,
      ),
    );
    assert.equal(store.stepsOf(a.id)[0]?.state, 'del_failed');
    fail = false;
    assert.equal((await engine.runTeardown(a.id, Priority.Background, { force: true, emptyNetns: true })).done, true);
    assert.equal(store.getAttachment(a.id)?.state, 'deleted');
  });

  test("kept while another added attachment of the container has a delegate of that name: the chain is that one's too", async () => {
    const asked: string[] = [];
    const { engine, store } = setup({
      masquerade: async (network, id) => {
        asked.push(`${network} ${id}`);
        return 2;
      },
    });
    const netconf = masq([{ type: 'bridge', ipMasq: true }]);
    await engine.handle(req('ADD', 'twice', netconf));
    await engine.handle(req('ADD', 'twice', { ...netconf, name: 'net2' }, { ifname: 'eth1' }));
    const [first, second] = store.listAttachments({ containerId: 'twice', limit: 10 }).sort((x, y) => x.id - y.id);
    assert.equal(chainShared(store, 'twice', 'pod0', first!.id), true);
    assert.equal(chainShared(store, 'twice', 'pod1', first!.id), false);
    await engine.runTeardown(first!.id, Priority.Background, { force: true, emptyNetns: true });
    assert.deepEqual(asked, []);
    await engine.runTeardown(second!.id, Priority.Background, { force: true, emptyNetns: true });
    assert.deepEqual(asked, ['pod0 twice']);
  });

  test('a DEL passed through without a netns (one steward never added) removes it too', async () => {
    const asked: string[] = [];
    const { engine } = setup({
      masquerade: async (network, id) => {
        asked.push(`${network} ${id}`);
        return 2;
      },
    });
    await engine.handle(req('DEL', 'never', masq([{ type: 'bridge', ipMasq: true }]), { netns: '' }));
    assert.deepEqual(asked, ['pod0 never']);
    // Passed through with the netns, the plugin finds its own rules: nothing is asked.
    await engine.handle(req('DEL', 'never2', masq([{ type: 'bridge', ipMasq: true }])));
    assert.deepEqual(asked, ['pod0 never']);
  });
});
