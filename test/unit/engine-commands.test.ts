// The engine's CHECK, GC, STATUS and VERSION, and the ADD checks made before anything is journaled
// (netns, plugins present, capabilities), without root: in-memory store, fake plugin runner.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { checkVersionFor } from '../../daemon/src/engine/check-version.js';
import { StatusCache } from '../../daemon/src/engine/gc-status.js';
import { netnsProblem, teardownNetns } from '../../daemon/src/engine/netns.js';
import { NETNS, conf, counterValue, deferred, req, setup } from '../helpers/engine-fakes.js';

const KEY = { network: 'net', ifname: 'eth0' };
const chain = conf([{ type: 'one' }, { type: 'two' }]);
const v11 = (plugins: Array<Record<string, unknown>>) => conf(plugins, '1.1.0');

const code = (n: number) => (e: CniError) => e.code === n;

describe('engine: requests refused before anything is journaled', () => {
  test('VERSION is the shim’s to answer: code 4', async () => {
    const { engine } = setup();
    await assert.rejects(engine.handle(req('VERSION', 'c', chain)), (e: CniError) => {
      return e.code === 4 && /answered by the steward shim/.test(e.message);
    });
  });

  test('GC, STATUS and VERSION naming a container held for its spooled DELs are answered without waiting', async () => {
    const { engine, plugins } = setup();
    const held = deferred();
    engine.spoolHold = (id) => (id === 'X' ? held.promise : undefined);
    // With an ADD of X held, a DEL of X would keep its place behind it; the other commands never wait.
    const add = engine.handle(req('ADD', 'X', chain));
    const answers: Record<string, unknown> = {};
    for (const command of ['VERSION', 'STATUS', 'GC'])
      void engine.handle(req(command, 'X', chain)).then(
        () => (answers[command] = 'answered'),
        (e: CniError) => (answers[command] = e.code),
      );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(answers, { VERSION: 4, STATUS: 1, GC: 1 }, 'each refused with its own error at once');
    assert.deepEqual(plugins.calls, [], 'the ADD still waits');
    held.resolve();
    await add;
    assert.deepEqual(plugins.of('ADD'), ['ADD one X', 'ADD two X']);
  });

  test('an ADD whose netns is not an absolute path, or does not exist, is code 4 and runs nothing', async () => {
    const { engine, plugins, store } = setup();
    await assert.rejects(engine.handle(req('ADD', 'rel', chain, { netns: 'ns/x' })), (e: CniError) => {
      return e.code === 4 && /not an absolute path/.test(e.message);
    });
    await assert.rejects(engine.handle(req('ADD', 'gone', chain, { netns: '/nonexistent/ns' })), (e: CniError) => {
      return e.code === 4 && /does not exist/.test(e.message);
    });
    await assert.rejects(engine.handle(req('ADD', 'file', chain, { netns: '/proc/self/stat' })), (e: CniError) => {
      return e.code === 4 && /is not a network namespace/.test(e.message);
    });
    assert.equal(plugins.calls.length, 0);
    assert.equal(store.listAttachments({}).length, 0);
  });

  const SERVED = [
    ['ADD', '1.0.0'],
    ['CHECK', '1.0.0'],
    ['GC', '1.1.0'],
    ['STATUS', '1.1.0'],
  ] as const;

  /** Each of `commands` with `netconf(version)` is code 7 matching `why`; nothing runs or is journaled. */
  async function refusedByServedCommands(
    s: ReturnType<typeof setup>,
    containerId: string,
    netconf: (version: string) => Record<string, unknown>,
    why: RegExp,
    commands: ReadonlyArray<(typeof SERVED)[number]> = SERVED,
  ): Promise<void> {
    for (const [command, version] of commands)
      await assert.rejects(s.engine.handle(req(command, containerId, netconf(version))), (e: CniError) => {
        assert.equal(e.code, 7, `${command}: ${e.message}`);
        assert.match(e.message, why);
        return true;
      });
    assert.equal(s.plugins.calls.length, 0);
    assert.equal(s.store.listAttachments({}).length, 0);
  }

  test('a delegate that is steward itself: ADD, CHECK, GC and STATUS are code 7 and run nothing (each would wait behind itself); DEL stays lenient', async () => {
    const s = setup();
    const self = (version = '1.0.0') => conf([{ type: 'one' }, { type: 'steward' }], version);
    await refusedByServedCommands(s, 'self', self, /plugin 1: type "steward" is steward itself/);
    await s.engine.handle(req('DEL', 'self', self()));
  });

  test('a delegate\'s own ifname with "%": ADD and CHECK are code 7 and run nothing; DEL, GC and STATUS go on (they make no interface); "%" elsewhere is data', async () => {
    const s = setup();
    const templated = (version = '1.0.0') =>
      conf([], version, [
        { name: 'pod', cniVersion: version, plugins: [{ type: 'one' }] },
        { name: 'side', cniVersion: version, ifname: 'net%d', plugins: [{ type: 'two' }] },
      ]);
    await refusedByServedCommands(
      s,
      'tpl',
      templated,
      /delegate 1 \("side"\): ifname "net%d" must not contain "%": the kernel reads it/,
      SERVED.slice(0, 2),
    );
    // DEL runs the chain it is given (nothing was added: the netconf's, in reverse) and is not refused.
    await s.engine.handle(req('DEL', 'tpl', templated()));
    // GC (a cleanup) and STATUS reach the delegates.
    await s.engine.handle(req('GC', 'tpl', { ...templated('1.1.0'), 'cni.dev/valid-attachments': [] }));
    await s.engine.handle(req('STATUS', 'tpl', templated('1.1.0')));
    assert.deepEqual(s.plugins.calls.filter((c) => !c.startsWith('DEL')).sort(), [
      'GC one ',
      'GC two ',
      'STATUS one ',
      'STATUS two ',
    ]);
    // A "%" in a plugin's own keys (a bridge named "br%1", say) is the plugin's business.
    await s.engine.handle(req('ADD', 'pct', conf([{ type: 'one', bridge: 'br%1' }])));
    assert.deepEqual(s.plugins.calls.slice(0, 2), ['DEL two tpl', 'DEL one tpl']);
    assert.equal(s.plugins.calls.at(-1), 'ADD one pct');
  });

  test("a network name over 255 characters, steward's or a delegate's: ADD is code 7, runs and journals nothing, echoes the name cut; 255 is accepted; DEL, CHECK, GC and STATUS go on", async () => {
    const s = setup();
    const long = 'n'.repeat(256);
    const ownLong = (version = '1.0.0') => ({ ...conf([{ type: 'one' }], version), name: long });
    const delegateLong = (version = '1.0.0') =>
      conf([], version, [{ name: long, cniVersion: version, plugins: [{ type: 'one' }] }]);
    for (const [netconf, what] of [
      [
        ownLong,
        /^network name "n{200}… \[56 more characters cut\]" is 256 characters long; an ADD accepts at most 255/,
      ],
      [delegateLong, /^delegate 0: name "n{200}… \[56 more characters cut\]" is 256 characters long/],
    ] as const)
      await refusedByServedCommands(s, 'long', netconf, what, SERVED.slice(0, 1));
    // Not ADD: a name accepted before the bound is served (a STATUS refused would make the node NotReady).
    await s.engine.handle(req('GC', 'long', { ...delegateLong('1.1.0'), 'cni.dev/valid-attachments': [] }));
    await s.engine.handle(req('STATUS', 'long', delegateLong('1.1.0')));
    await s.engine.handle(req('DEL', 'long', delegateLong()));
    assert.deepEqual(s.plugins.calls, ['GC one ', 'STATUS one ', 'DEL one long']);
    // CHECK reaches the journal: refused only as any CHECK of an attachment never added is.
    await assert.rejects(s.engine.handle(req('CHECK', 'long', delegateLong())), (e: CniError) => {
      assert.match(e.message, /^container long has no attachment on network net interface eth0$/);
      return true;
    });
    // 255 characters, at both levels: added.
    const at = { ...conf([], '1.0.0', [{ name: 'd'.repeat(255), plugins: [{ type: 'one' }] }]), name: 'o'.repeat(255) };
    await s.engine.handle(req('ADD', 'ok', at));
    assert.equal(
      s.store.currentAttachment({ containerId: 'ok', network: 'o'.repeat(255), ifname: 'eth0' })?.state,
      'added',
    );
  });

  test('a host-local lease directory that cannot be a path (a part over 255 bytes, or 4096 bytes whole): ADD is code 7 and runs nothing; at the bounds, and other IPAM, it is added', async () => {
    const s = setup();
    const withIpam = (ipam: Record<string, unknown>, name = 'pod') =>
      conf([], '1.0.0', [{ name, plugins: [{ type: 'one' }, { type: 'two', ipam }] }]);
    const longPart = `/tmp/${'a'.repeat(256)}`;
    const longWhole = `/${Array.from({ length: 17 }, () => 'b'.repeat(240)).join('/')}`; // 4097 bytes with "/pod"
    for (const [ipam, why] of [
      [
        { type: 'host-local', dataDir: longPart },
        /^delegate 0 plugin 1: host-local's lease directory "\/tmp\/a{195}… \[65 more characters cut\]" has a part of 256 bytes; a file name holds at most 255$/,
      ],
      [
        { type: 'host-local', dataDir: longWhole },
        /lease directory "\/b{199}… \[3901 more characters cut\]" is 4101 bytes long; a path holds at most 4095$/,
      ],
    ] as const)
      await refusedByServedCommands(s, 'dir', () => withIpam(ipam), why, SERVED.slice(0, 1));
    // The name's own bound holds for the default dataDir (/var/lib/cni/networks/<name>).
    await s.engine.handle(req('ADD', 'at-255', withIpam({ type: 'host-local' }, 'n'.repeat(255))));
    await s.engine.handle(req('ADD', 'part-255', withIpam({ type: 'host-local', dataDir: `/tmp/${'a'.repeat(255)}` })));
    await s.engine.handle(req('ADD', 'other-ipam', withIpam({ type: 'static', dataDir: longPart })));
    assert.deepEqual(
      s.plugins.calls.filter((c) => c.startsWith('ADD two')),
      ['ADD two at-255', 'ADD two part-255', 'ADD two other-ipam'],
    );
  });

  test('"lo", the loopback every namespace has: ADD and CHECK are refused (CNI_IFNAME 4, a delegate\'s own ifname 7) and run nothing, but for the loopback plugin; DEL goes on', async () => {
    const s = setup();
    const own = (version = '1.0.0') => conf([], version, [{ name: 'pod', ifname: 'lo', plugins: [{ type: 'one' }] }]);
    await refusedByServedCommands(
      s,
      'lo-own',
      own,
      /^delegate 0 \("pod"\): ifname "lo" is the loopback every network namespace has/,
      SERVED.slice(0, 2),
    );
    for (const command of ['ADD', 'CHECK'])
      await assert.rejects(
        s.engine.handle(req(command, 'lo-env', conf([{ type: 'one' }]), { ifname: 'lo' })),
        (e: CniError) => {
          assert.equal(e.code, 4, e.message);
          assert.match(e.message, /^CNI_IFNAME "lo" is the loopback/);
          return true;
        },
      );
    assert.equal(s.plugins.calls.length, 0);
    await s.engine.handle(req('DEL', 'lo-env', conf([{ type: 'one' }]), { ifname: 'lo' }));
    assert.deepEqual(s.plugins.calls, ['DEL one lo-env']);
    // A name that only starts so is any other name; and lo is the loopback plugin's own interface.
    await s.engine.handle(req('ADD', 'lo0', conf([{ type: 'one' }]), { ifname: 'lo0' }));
    assert.equal(s.plugins.calls.at(-1), 'ADD one lo0');
    await s.engine.handle(req('ADD', 'lo-plugin', conf([{ type: 'loopback' }]), { ifname: 'lo' }));
    assert.equal(s.plugins.calls.at(-1), 'ADD loopback lo-plugin');
  });

  test('an ADD with a missing plugin fails before journaling or running anything; every plugin is looked up in CNI_PATH', async () => {
    const { engine, plugins, store, located } = setup({ missing: ['two'] });
    await assert.rejects(engine.handle(req('ADD', 'c', chain, { path: '/opt/x' })), /plugin two not found/);
    assert.deepEqual(located, ['one@/opt/x', 'two@/opt/x']);
    assert.equal(plugins.calls.length, 0);
    assert.equal(store.currentAttachment({ containerId: 'c', ...KEY }), undefined);
  });

  test('a plugin capability the steward entry does not declare is warned about once per network and capability', async () => {
    const { engine } = setup();
    const withCap = (entryCaps?: Record<string, boolean>) => ({
      ...conf([{ type: 'one', capabilities: { portMappings: true, bandwidth: false } }]),
      ...(entryCaps ? { capabilities: entryCaps } : {}),
    });
    await engine.handle(req('ADD', 'a', withCap({ portMappings: true })));
    assert.deepEqual(engine.configWarnings(), [], 'declared by the entry: no warning; false capabilities never warn');
    await engine.handle(req('ADD', 'b', withCap()));
    await engine.handle(req('ADD', 'c', withCap({ portMappings: false })));
    const warnings = engine.configWarnings();
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /network net: delegate pod plugin one declares capability "portMappings"/);
    assert.match(warnings[0]!, /"capabilities": \{"portMappings": true\}/);
  });

  test('"capabilities": null in the steward entry declares nothing: the ADD succeeds and the capability is warned about', async () => {
    const { engine, plugins } = setup();
    const nullCaps = { ...conf([{ type: 'one', capabilities: { portMappings: true } }]), capabilities: null };
    const out = JSON.parse(await engine.handle(req('ADD', 'nc', nullCaps)));
    assert.equal(out.cniVersion, '1.0.0');
    assert.deepEqual(plugins.of('ADD'), ['ADD one nc']);
    assert.equal(engine.configWarnings().length, 1);
    assert.match(engine.configWarnings()[0]!, /declares capability "portMappings" but the steward entry does not/);
  });

  test('at most 100 netconf warnings are kept', async () => {
    const { engine } = setup();
    const caps = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`cap${i}`, true]));
    await engine.handle(req('ADD', 'many', conf([{ type: 'one', capabilities: caps }])));
    assert.equal(engine.configWarnings().length, 100);
  });

  test('an ADD after one cut off mid-chain (left adding) first rolls the old one back', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'cut', chain));
    const old = store.currentAttachment({ containerId: 'cut', ...KEY })!;
    store.setAttachmentState(old.id, 'adding');
    await engine.handle(req('ADD', 'cut', chain));
    assert.equal(store.getAttachment(old.id)!.state, 'deleted');
    assert.deepEqual(plugins.of('DEL'), ['DEL two cut', 'DEL one cut']);
    const now = store.currentAttachment({ containerId: 'cut', ...KEY })!;
    assert.notEqual(now.id, old.id);
    assert.equal(now.state, 'added');
  });

  test('a DEL that finishes while an ADD of the same key is queued leaves no tombstone behind', async () => {
    const { engine, plugins, store } = setup();
    const gate = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'DEL' && c.containerId === 'race') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const del = engine.handle(req('DEL', 'race', chain));
    await new Promise((r) => setImmediate(r));
    const add = engine.handle(req('ADD', 'race', chain));
    gate.resolve();
    await Promise.all([del, add]);
    assert.equal(store.currentAttachment({ containerId: 'race', ...KEY })!.state, 'added');
    const before = plugins.of('DEL').length;
    await engine.handle(req('DEL', 'race', chain));
    assert.equal(plugins.of('DEL').length, before + 2, 'the later DEL tore the new attachment down');
    assert.equal(store.currentAttachment({ containerId: 'race', ...KEY })!.state, 'deleted');
  });

  test('with two ADDs of a key queued, a DEL between them leaves no tombstone; after the last one settles, repeats are tombstoned again', async () => {
    const { engine, plugins, store, metrics } = setup();
    const gate = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'ADD' && c.containerId === 'two-adds') await gate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const add1 = engine.handle(req('ADD', 'two-adds', chain));
    const del1 = engine.handle(req('DEL', 'two-adds', chain));
    const add2 = engine.handle(req('ADD', 'two-adds', chain));
    gate.resolve();
    await Promise.all([add1, del1]);
    await add2;
    assert.equal(store.currentAttachment({ containerId: 'two-adds', ...KEY })!.state, 'added');
    const before = plugins.of('DEL').length;
    await engine.handle(req('DEL', 'two-adds', chain));
    assert.equal(plugins.of('DEL').length, before + 2, 'the DEL after the second ADD tore it down');
    assert.equal(store.currentAttachment({ containerId: 'two-adds', ...KEY })!.state, 'deleted');
    const tombstoned = await counterValue(metrics.coalescedDels, { how: 'tombstone' });
    await engine.handle(req('DEL', 'two-adds', chain));
    assert.equal(
      await counterValue(metrics.coalescedDels, { how: 'tombstone' }),
      tombstoned + 1,
      'a repeat is answered from memory',
    );
    assert.equal(plugins.of('DEL').length, before + 2);
  });

  test('a DEL queued behind a new ADD is still joined by a repeat after the DEL before the ADD finished', async () => {
    const { engine, plugins, metrics } = setup();
    await engine.handle(req('ADD', 'jn', chain));
    const delGate = deferred();
    const addGate = deferred();
    let adds = 0;
    plugins.on('one', async (c) => {
      if (c.command === 'DEL' && plugins.of('DEL').length === 2) await delGate.promise;
      if (c.command === 'ADD' && ++adds === 1) await addGate.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    const del1 = engine.handle(req('DEL', 'jn', chain));
    const add = engine.handle(req('ADD', 'jn', chain));
    const del2 = engine.handle(req('DEL', 'jn', chain));
    delGate.resolve();
    await del1;
    for (let i = 0; i < 50 && adds === 0; i++) await new Promise((r) => setImmediate(r));
    assert.equal(adds, 1, 'the new ADD is running');
    const del3 = engine.handle(req('DEL', 'jn', chain));
    addGate.resolve();
    await Promise.all([add, del2, del3]);
    assert.equal(await counterValue(metrics.coalescedDels, { how: 'joined' }), 1, 'the repeat joined the queued DEL');
    assert.equal(plugins.of('DEL').length, 4, 'two teardowns, two plugins each');
  });

  test('an ADD records the pod named in CNI_ARGS and its CNI_PATH and netns', async () => {
    const { engine, store } = setup();
    const args = 'K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web;K8S_POD_UID=u-9';
    await engine.handle(req('ADD', 'pod', chain, { args, path: '/opt/cni' }));
    const a = store.currentAttachment({ containerId: 'pod', ...KEY })!;
    assert.deepEqual(
      [a.podNamespace, a.podName, a.podUid, a.cniArgs, a.cniPath, a.netns, a.bootId, a.cniVersion],
      ['ns1', 'web', 'u-9', args, '/opt/cni', NETNS, 'boot-1', '1.0.0'],
    );
    await engine.idle('rel'); // the rollback runs after the answer
    assert.deepEqual(JSON.parse(a.config), chain);
  });

  test('a plugin ADD that prints nothing is a failure (100) and is rolled back', async () => {
    const { engine, plugins, store } = setup();
    plugins.on('two', () => undefined);
    await assert.rejects(engine.handle(req('ADD', 'quiet', chain)), (e: CniError) => {
      return e.code === 100 && /plugin two ADD succeeded but printed no result/.test(e.message);
    });
    await engine.idle('quiet'); // the rollback runs after the answer
    assert.deepEqual(plugins.of('DEL'), ['DEL two quiet', 'DEL one quiet']);
    const a = store.currentAttachment({ containerId: 'quiet', ...KEY })!;
    const steps = store.stepsOf(a.id);
    assert.match(steps[1]!.error!, /printed no result/);
  });

  test('a plain Error from a plugin is code 100 in the answer and journaled as the step’s error', async () => {
    const { engine, plugins, store } = setup();
    plugins.on('one', (c) => {
      if (c.command === 'ADD') throw new Error('exec format error');
    });
    await assert.rejects(engine.handle(req('ADD', 'plain', chain)), (e: CniError) => {
      return e instanceof CniError && e.code === 100 && e.message === 'exec format error';
    });
    await engine.idle('plain'); // the rollback runs after the answer
    const a = store.currentAttachment({ containerId: 'plain', ...KEY })!;
    assert.equal(store.stepsOf(a.id)[0]!.state, 'deleted');
    assert.equal(store.stepsOf(a.id)[0]!.error, 'exec format error');
    assert.equal(a.error, 'exec format error');
  });

  test('the answer is the first delegate’s final result at the netconf version; prevResult stays within a delegate', async () => {
    const { engine, plugins } = setup();
    const two = conf([], '1.0.0', [
      { name: 'pod', plugins: [{ type: 'one' }, { type: 'two' }] },
      { name: 'side', cniVersion: '0.4.0', type: 'three' },
    ]);
    plugins.on('two', (c) => ({ ...(c.stdin.prevResult as object), dns: { nameservers: ['10.0.0.10'] } }));
    const out = JSON.parse(await engine.handle(req('ADD', 'multi', two)));
    assert.deepEqual(out, {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0' }],
      ips: [{ address: '10.1.0.2/24' }],
      dns: { nameservers: ['10.0.0.10'] },
    });
    const three = plugins.callsOf('ADD')[2]!;
    assert.equal(three.type, 'three');
    assert.equal(three.ifname, 'net1', 'a later delegate gets net1 unless it names its own');
    assert.equal(three.stdin.prevResult, undefined, 'no prevResult across delegates');
    assert.equal(three.stdin.cniVersion, '0.4.0');
    assert.equal(three.stdin.name, 'side');
  });

  test('a repeated ADD with another netns is a conflict (102); after a DEL the same ADD runs again', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'again', chain));
    await assert.rejects(
      engine.handle(req('ADD', 'again', chain, { netns: `/proc/${process.pid}/ns/net` })),
      (e: CniError) =>
        e.code === 102 &&
        e.message === 'container again already has interface eth0 on network net; DEL it before adding again',
    );
    await engine.handle(req('DEL', 'again', chain));
    await engine.handle(req('ADD', 'again', chain));
    assert.deepEqual(plugins.of('ADD'), ['ADD one again', 'ADD two again', 'ADD one again', 'ADD two again']);
  });

  test('a repeated ADD answered from the journal is converted to the version asked for', async () => {
    const { engine } = setup();
    await engine.handle(req('ADD', 'conv', chain));
    const again = JSON.parse(await engine.handle(req('ADD', 'conv', chain)));
    assert.equal(again.cniVersion, '1.0.0');
    assert.equal(again.ips[0].version, undefined);
  });
});

describe('engine: CHECK', () => {
  test('CHECK of an unknown attachment is code 3; of one torn down, code 106', async () => {
    const { engine } = setup();
    await assert.rejects(engine.handle(req('CHECK', 'nobody', chain)), (e: CniError) => {
      return e.code === 3 && /container nobody has no attachment on network net interface eth0/.test(e.message);
    });
    await engine.handle(req('ADD', 'gone', chain));
    await engine.handle(req('DEL', 'gone', chain));
    await assert.rejects(engine.handle(req('CHECK', 'gone', chain)), (e: CniError) => {
      return e.code === 106 && /is deleted, not added/.test(e.message);
    });
    // A DEL passed through for a container never added leaves a row with no steps: nothing was attached.
    await engine.handle(req('DEL', 'never', chain));
    await assert.rejects(engine.handle(req('CHECK', 'never', chain)), (e: CniError) => {
      return e.code === 3 && /container never has no attachment/.test(e.message);
    });
  });

  test("a delegate's ADD result steward cannot use is code 100 (the delegate's fault), not 6 or 1, and is rolled back", async () => {
    const { engine, plugins, store } = setup();
    for (const [cid, result] of [
      ['bad-ips', { cniVersion: '1.0.0', ips: 'oops' }],
      ['bad-version', { cniVersion: '9.9.9' }],
    ] as const) {
      plugins.on('two', (c) => (c.command === 'ADD' ? result : undefined));
      await assert.rejects(engine.handle(req('ADD', cid, chain)), (e: CniError) => {
        return e.code === 100 && /^plugin two ADD printed a result steward cannot use: /.test(e.message);
      });
      await engine.idle(cid); // the rollback goes on after the answer
      assert.equal(store.currentAttachment({ containerId: cid, ...KEY })!.state, 'deleted');
    }
  });

  test('CHECK with a netconf before 0.4.0 is code 1 (CHECK came with 0.4.0), as the reference plugins answer', async () => {
    const { engine, plugins } = setup();
    const old = conf([{ type: 'one' }], '0.3.1');
    await engine.handle(req('ADD', 'old', old));
    await assert.rejects(engine.handle(req('CHECK', 'old', old)), (e: CniError) => {
      return e.code === 1 && /CHECK needs cniVersion 0.4.0 or later, the netconf says 0.3.1/.test(e.message);
    });
    assert.deepEqual(plugins.of('CHECK'), []);
  });

  test('CHECK with a netns that is not a namespace is code 4 and asks no plugin', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'c', chain));
    await assert.rejects(engine.handle(req('CHECK', 'c', chain, { netns: '/nonexistent' })), code(4));
    assert.deepEqual(plugins.of('CHECK'), []);
  });

  test('every step gets CHECK with its stored config, the request’s env and its delegate’s final result', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('ADD', 'chk', chain));
    const out = await engine.handle(req('CHECK', 'chk', chain, { args: 'A=b', path: '/p' }));
    assert.equal(out, '');
    const checks = plugins.callsOf('CHECK');
    assert.deepEqual(
      checks.map((c) => [c.type, c.containerId, c.netns, c.ifname, c.args, c.cniPath]),
      [
        ['one', 'chk', NETNS, 'eth0', 'A=b', '/p'],
        ['two', 'chk', NETNS, 'eth0', 'A=b', '/p'],
      ],
    );
    for (const c of checks) {
      assert.equal(c.stdin.cniVersion, '1.0.0');
      assert.equal(c.stdin.name, 'pod');
      assert.deepEqual(c.stdin.prevResult, {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'eth0' }],
        ips: [{ address: '10.1.0.2/24' }],
      });
    }
  });

  test('a failing CHECK is the answer; a delegate with disableCheck is not asked', async () => {
    const { engine, plugins } = setup();
    const two = conf([], '1.0.0', [
      { name: 'pod', plugins: [{ type: 'one' }] },
      { name: 'side', type: 'two', disableCheck: true },
    ]);
    await engine.handle(req('ADD', 'dc', two));
    await engine.handle(req('CHECK', 'dc', two));
    assert.deepEqual(plugins.of('CHECK'), ['CHECK one dc']);
    plugins.on('one', (c) => {
      if (c.command === 'CHECK') throw new CniError(51, 'no route');
    });
    await assert.rejects(engine.handle(req('CHECK', 'dc', two)), (e: CniError) => e.code === 51);
  });

  test('a delegate older than 0.4.0 is checked at the lowest version its plugin supports, prevResult converted', async () => {
    const { engine, plugins } = setup();
    // steward's own netconf at 0.4.0 (a runtime sends CHECK for nothing older), its delegate at 0.3.1.
    const old = conf([], '0.4.0', [{ name: 'pod', cniVersion: '0.3.1', plugins: [{ type: 'one' }] }]);
    plugins.on('one', (c) => {
      if (c.command === 'VERSION') return { supportedVersions: ['0.3.1', 7, '1.0.0', '0.4.0'] };
      if (c.command === 'ADD') return { cniVersion: '0.3.1', ips: [{ version: '4', address: '10.2.0.3/24' }] };
      return undefined;
    });
    await engine.handle(req('ADD', 'old', old));
    await engine.handle(req('CHECK', 'old', old));
    const [probe] = plugins.callsOf('VERSION');
    assert.deepEqual(probe!.stdin, { cniVersion: '0.4.0' });
    assert.equal(probe!.containerId, 'old');
    const [check] = plugins.callsOf('CHECK');
    assert.equal(check!.stdin.cniVersion, '0.4.0');
    assert.deepEqual(check!.stdin.prevResult, { cniVersion: '0.4.0', ips: [{ version: '4', address: '10.2.0.3/24' }] });
  });

  test('checkVersionFor: code 107 when the plugin supports nothing from 0.4.0 on, saying what it supports', async () => {
    await assert.rejects(
      checkVersionFor('old', 'pod', async () => ({ supportedVersions: ['0.3.0', '0.3.1'] })),
      (e: CniError) =>
        e.code === 107 &&
        /CHECK cannot verify delegate pod: plugin old supports no CNI version with CHECK/.test(e.message) &&
        e.details === 'it supports: 0.3.0, 0.3.1',
    );
    await assert.rejects(
      checkVersionFor('mute', 'pod', async () => undefined),
      (e: CniError) => e.code === 107 && e.details === 'it supports: nothing it would say',
    );
    await assert.rejects(
      checkVersionFor('odd', 'pod', async () => ({ supportedVersions: '1.0.0' })),
      (e: CniError) => e.code === 107,
    );
    assert.equal(await checkVersionFor('p', 'pod', async () => ({ supportedVersions: ['1.1.0', '1.0.0'] })), '1.0.0');
  });
  test('checkVersionFor asks the plugin VERSION at 0.4.0 and lists only the string versions it names', async () => {
    const asked: unknown[] = [];
    await assert.rejects(
      checkVersionFor('mixed', 'side', async (call) => {
        asked.push(call);
        return { supportedVersions: ['0.3.1', 7, null, '0.2.0'] };
      }),
      (e: CniError) => e.code === 107 && e.details === 'it supports: 0.3.1, 0.2.0',
    );
    assert.deepEqual(asked, [{ command: 'VERSION', type: 'mixed', stdin: { cniVersion: '0.4.0' } }]);
    assert.equal(await checkVersionFor('p', 'pod', async () => ({ supportedVersions: [7, '0.4.0'] })), '0.4.0');
  });
});

describe('engine: GC', () => {
  test('GC needs cniVersion 1.1.0 (code 1); disableGC answers at once', async () => {
    const { engine, plugins } = setup();
    await assert.rejects(engine.handle(req('GC', '', chain)), (e: CniError) => {
      return e.code === 1 && /GC needs cniVersion 1.1.0 or later, the netconf says 1.0.0/.test(e.message);
    });
    const off = { ...v11([{ type: 'one' }]), disableGC: true, 'cni.dev/valid-attachments': 'not a list' };
    assert.equal(await engine.handle(req('GC', '', off)), '');
    assert.equal(plugins.calls.length, 0);
  });

  test('a malformed valid-attachments list is code 7', async () => {
    const { engine } = setup();
    const base = v11([{ type: 'one' }]);
    await assert.rejects(engine.handle(req('GC', '', { ...base, 'cni.dev/valid-attachments': {} })), (e: CniError) => {
      return e.code === 7 && /must be a list/.test(e.message);
    });
    const bad = [{ containerID: 'a', ifname: 'eth0' }, { containerID: 'b' }];
    await assert.rejects(engine.handle(req('GC', '', { ...base, 'cni.dev/valid-attachments': bad })), (e: CniError) => {
      return e.code === 7 && /valid-attachments\[1\] needs string containerID and ifname/.test(e.message);
    });
    await assert.rejects(
      engine.handle(req('GC', '', { ...base, 'cni.dev/valid-attachments': [null] })),
      (e: CniError) => e.code === 7,
    );
  });

  test('GC tears down the attachments the runtime no longer lists, then passes GC to 1.1 delegates', async () => {
    const { engine, plugins, store } = setup();
    const net = conf([], '1.1.0', [
      { name: 'pod', plugins: [{ type: 'one' }, { type: 'two' }] },
      { name: 'side', ifname: 'side0', type: 'three' },
      { name: 'old', cniVersion: '1.0.0', type: 'four' },
      { name: 'nogc', type: 'five', disableGC: true },
    ]);
    for (const id of ['keep', 'stale']) await engine.handle(req('ADD', id, net));
    const other = { ...net, name: 'othernet' };
    await engine.handle(req('ADD', 'elsewhere', other));
    plugins.calls.length = 0;
    const valid = [{ containerID: 'keep', ifname: 'eth0' }];
    assert.equal(
      await engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': valid }, { path: '/gc' })),
      '',
    );

    assert.equal(store.currentAttachment({ containerId: 'stale', ...KEY })!.state, 'deleted');
    assert.equal(store.currentAttachment({ containerId: 'keep', ...KEY })!.state, 'added');
    assert.equal(
      store.currentAttachment({ containerId: 'elsewhere', network: 'othernet', ifname: 'eth0' })!.state,
      'added',
    );
    assert.deepEqual(
      plugins.of('DEL').map((c) => c.split(' ')[2]),
      ['stale', 'stale', 'stale', 'stale', 'stale'],
    );
    const gcs = plugins.callsOf('GC');
    assert.deepEqual(
      gcs.map((c) => c.type),
      ['one', 'two', 'three'],
      'not the 1.0.0 delegate, not the one with disableGC',
    );
    for (const c of gcs) {
      assert.deepEqual([c.containerId, c.netns, c.ifname, c.args, c.cniPath], ['', '', '', '', '/gc']);
    }
    assert.deepEqual(gcs[0]!.stdin['cni.dev/valid-attachments'], [{ containerID: 'keep', ifname: 'eth0' }]);
    assert.equal(gcs[0]!.stdin.name, 'pod');
    assert.deepEqual(
      gcs[2]!.stdin['cni.dev/valid-attachments'],
      [{ containerID: 'keep', ifname: 'side0' }],
      'a later delegate is told its own interface',
    );
  });

  test("GC tells each delegate the interface its step ran at: a first delegate's own ifname, a delegate an edited netconf moved", async () => {
    const { engine, plugins } = setup();
    const added = conf([], '1.1.0', [
      { name: 'pod', ifname: 'eth9', type: 'one' },
      { name: 'side', type: 'two' },
    ]);
    await engine.handle(req('ADD', 'c', added));
    assert.deepEqual(
      plugins.callsOf('ADD').map((c) => `${c.type} ${c.ifname}`),
      ['one eth9', 'two net1'],
    );
    // The operator inserts a delegate: "side" is now the third, whose default interface is net2.
    const edited = conf([], '1.1.0', [
      { name: 'pod', ifname: 'eth9', type: 'one' },
      { name: 'fresh', type: 'three' },
      { name: 'side', type: 'two' },
    ]);
    plugins.calls.length = 0;
    const valid = [{ containerID: 'c', ifname: 'eth0' }];
    await engine.handle(req('GC', '', { ...edited, 'cni.dev/valid-attachments': valid }));
    const told = (type: string) =>
      plugins.callsOf('GC').find((c) => c.type === type)!.stdin['cni.dev/valid-attachments'] as Array<{
        containerID: string;
        ifname: string;
      }>;
    assert.deepEqual(told('one'), [{ containerID: 'c', ifname: 'eth9' }], 'its own ifname, not CNI_IFNAME');
    assert.ok(
      told('two').some((v) => v.containerID === 'c' && v.ifname === 'net1'),
      `the interface its ADD made is kept: ${JSON.stringify(told('two'))}`,
    );
  });

  test('GC reads the older cni.dev/attachments key; with no list it is code 7 and tears down nothing, a null list is empty', async () => {
    const a = setup();
    const net = v11([{ type: 'one' }]);
    for (const id of ['x', 'y']) await a.engine.handle(req('ADD', id, net));
    await a.engine.handle(req('GC', '', { ...net, 'cni.dev/attachments': [{ containerID: 'x', ifname: 'eth0' }] }));
    assert.equal(a.store.currentAttachment({ containerId: 'x', ...KEY })!.state, 'added');
    assert.equal(a.store.currentAttachment({ containerId: 'y', ...KEY })!.state, 'deleted');
    const delsBefore = a.plugins.of('DEL').length;
    await assert.rejects(
      a.engine.handle(req('GC', '', net)),
      (e: CniError) =>
        e.code === 7 &&
        /^GC names no cni.dev\/valid-attachments/.test(e.message) &&
        /"cni.dev\/valid-attachments": \[\]/.test(e.details ?? ''),
    );
    assert.equal(
      a.store.currentAttachment({ containerId: 'x', ...KEY })!.state,
      'added',
      'a GC without a list sweeps nothing',
    );
    assert.equal(a.plugins.of('DEL').length, delsBefore, 'and runs no DEL');
    // libcni sends a nil slice as null: a node with no pods left.
    await a.engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': null }));
    assert.equal(a.store.currentAttachment({ containerId: 'x', ...KEY })!.state, 'deleted');
  });

  test('GC whose requester left before its turn came is code 11 and sweeps nothing (its list is a stale view)', async () => {
    const a = setup();
    const net = v11([{ type: 'one' }]);
    await a.engine.handle(req('ADD', 'newer', net));
    let gone = false;
    // The gate is held (by a GC in flight, or a frozen daemon): the shim's 2 s bound passes meanwhile.
    const running = deferred();
    const release = deferred();
    const held = a.engine.gate.exclusive(async () => {
      running.resolve();
      await release.promise;
    });
    await running.promise;
    const gc = a.engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': [] }), () => gone);
    gone = true;
    release.resolve();
    await held;
    await assert.rejects(gc, (e: CniError) => e.code === 11 && /nothing was torn down/.test(e.message));
    assert.equal(a.store.currentAttachment({ containerId: 'newer', ...KEY })!.state, 'added');
    assert.deepEqual(a.plugins.of('DEL'), []);
  });

  test('GC: an entry without containerID is code 7, and nothing is torn down', async () => {
    const { engine, plugins } = setup();
    const net = v11([{ type: 'one' }, { type: 'two' }]);
    await engine.handle(req('ADD', 'kept', net));
    await assert.rejects(
      engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': [{ ifname: 'eth0' }] })),
      (e: CniError) => e.code === 7 && e.message === 'cni.dev/valid-attachments[0] needs string containerID and ifname',
    );
    assert.deepEqual(plugins.of('DEL'), []);
  });

  test('GC tells the first delegate each attachment’s own interface, a later one its configured interface', async () => {
    const { engine, plugins } = setup();
    const net = conf([], '1.1.0', [
      { name: 'pod', type: 'one' },
      { name: 'side', type: 'three' },
    ]);
    await engine.handle(req('ADD', 'k1', net, { ifname: 'eth1' }));
    const valid = [{ containerID: 'k1', ifname: 'eth1' }];
    assert.equal(await engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': valid })), '');
    const gcs = plugins.callsOf('GC');
    assert.deepEqual(
      gcs.map((c) => [c.type, c.stdin['cni.dev/valid-attachments']]),
      [
        ['one', [{ containerID: 'k1', ifname: 'eth1' }]],
        ['three', [{ containerID: 'k1', ifname: 'net1' }]],
      ],
    );
    assert.equal(plugins.of('DEL').length, 0, 'the listed attachment is kept');
  });

  test('GC tells delegates every attachment the runtime lists as valid, not only those steward holds', async () => {
    // A pod added before steward was installed is the runtime's and the delegate's alone: a delegate
    // told to keep only steward's would free its address for the next pod.
    const { engine, plugins } = setup();
    const net = conf([], '1.1.0', [
      { name: 'pod', type: 'one' },
      { name: 'side', type: 'three' },
    ]);
    await engine.handle(req('ADD', 'ours', net));
    const valid = [
      { containerID: 'ours', ifname: 'eth0' },
      { containerID: 'before-install', ifname: 'eth0' },
      { containerID: 'before-install', ifname: 'eth0' },
    ];
    assert.equal(await engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': valid })), '');
    const gcs = plugins.callsOf('GC');
    assert.deepEqual(
      gcs.map((c) => [c.type, c.stdin['cni.dev/valid-attachments']]),
      [
        [
          'one',
          [
            { containerID: 'ours', ifname: 'eth0' },
            { containerID: 'before-install', ifname: 'eth0' },
          ],
        ],
        [
          'three',
          [
            { containerID: 'ours', ifname: 'net1' },
            { containerID: 'before-install', ifname: 'net1' },
          ],
        ],
      ],
      'each listed once, a later delegate with its own interface',
    );
    assert.equal(plugins.of('DEL').length, 0);
  });

  test('a delegate GC failure fails the GC (100) naming each plugin, after every plugin was asked', async () => {
    const { engine, plugins } = setup();
    const net = v11([{ type: 'one' }, { type: 'two' }, { type: 'three' }]);
    for (const t of ['one', 'three']) {
      plugins.on(t, (c) => {
        if (c.command === 'GC') throw new Error(`${t} broke`);
      });
    }
    await assert.rejects(engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': [] })), (e: CniError) => {
      return e.code === 100 && e.message === 'delegate GC failed: pod/one: one broke; pod/three: three broke';
    });
    assert.deepEqual(plugins.of('GC'), ['GC one ', 'GC two ', 'GC three ']);
  });

  test('an incomplete GC teardown is left to the retry scheduler; GC still answers', async () => {
    const { engine, plugins, store } = setup();
    const net = v11([{ type: 'one' }]);
    await engine.handle(req('ADD', 'sticky', net));
    plugins.on('one', (c) => {
      if (c.command === 'DEL') throw new CniError(11, 'busy');
    });
    assert.equal(await engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': [] })), '');
    assert.equal(store.currentAttachment({ containerId: 'sticky', ...KEY })!.state, 'deleting');
  });

  test('GC waits for a running ADD, and an ADD that arrives during GC waits for it; neither is swept', async () => {
    const { engine, plugins, store } = setup();
    const net = v11([{ type: 'one' }]);
    const hold = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'ADD' && c.containerId === 'first') await hold.promise;
      return c.command === 'ADD' ? { cniVersion: '1.1.0' } : undefined;
    });
    const add = engine.handle(req('ADD', 'first', net));
    await new Promise((r) => setImmediate(r));
    const gc = engine.handle(req('GC', '', { ...net, 'cni.dev/valid-attachments': [] }));
    await new Promise((r) => setImmediate(r));
    const later = engine.handle(req('ADD', 'later', net));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(plugins.of('ADD'), ['ADD one first'], 'the later ADD waits behind the waiting GC');
    hold.resolve();
    await Promise.all([add, gc, later]);
    assert.deepEqual(
      plugins.calls.filter((c) => !c.startsWith('DEL')),
      ['ADD one first', 'GC one ', 'ADD one later'],
      "the delegate's GC ran after the running ADD and before the later one",
    );
    // Neither is in the GC's list: the runtime made it before them (gc-gate.test.ts).
    for (const id of ['first', 'later'])
      assert.equal(store.currentAttachment({ containerId: id, ...KEY })!.state, 'added', `${id} is kept`);
    assert.deepEqual(plugins.of('DEL'), []);
  });
});

describe('engine: STATUS', () => {
  test('STATUS needs 1.1.0 (code 1), asks each plugin of the 1.1 delegates, and caches the answer', async () => {
    const { engine, plugins } = setup();
    await assert.rejects(engine.handle(req('STATUS', '', chain)), (e: CniError) => {
      return e.code === 1 && /STATUS needs cniVersion 1.1.0 or later, the netconf says 1.0.0/.test(e.message);
    });
    const net = conf([], '1.1.0', [
      { name: 'pod', plugins: [{ type: 'one' }, { type: 'two' }] },
      { name: 'old', cniVersion: '1.0.0', type: 'three' },
    ]);
    assert.equal(await engine.handle(req('STATUS', '', net, { path: '/s' })), '');
    assert.deepEqual(plugins.of('STATUS'), ['STATUS one ', 'STATUS two ']);
    const [first] = plugins.callsOf('STATUS');
    assert.deepEqual([first!.netns, first!.ifname, first!.args, first!.cniPath], ['', '', '', '/s']);
    assert.equal(first!.stdin.name, 'pod');
    assert.equal(await engine.handle(req('STATUS', '', net)), '');
    assert.equal(plugins.of('STATUS').length, 2, 'answered from the cache');
  });

  test('a failing STATUS is cached too: the same error, without asking again; a plain Error is code 50', async () => {
    const { engine, plugins } = setup();
    const net = v11([{ type: 'one' }, { type: 'two' }]);
    plugins.on('one', (c) => {
      if (c.command === 'STATUS') throw new Error('bridge down');
    });
    const e1 = await engine.handle(req('STATUS', '', net)).catch((e: CniError) => e);
    assert.ok(e1 instanceof CniError);
    assert.equal((e1 as CniError).code, 50);
    assert.equal((e1 as CniError).message, 'bridge down');
    const e2 = await engine.handle(req('STATUS', '', net)).catch((e: CniError) => e);
    assert.equal(e2, e1);
    assert.deepEqual(plugins.of('STATUS'), ['STATUS one ']);
  });

  test('StatusCache: entries expire after the TTL; a full cache starts over', () => {
    const clock = { t: 1000 };
    const cache = new StatusCache(5000, () => clock.t);
    assert.equal(cache.get('k'), undefined);
    const err = new CniError(50, 'x');
    cache.set('k', err);
    cache.set('ok');
    assert.equal(cache.get('k')!.error, err);
    assert.deepEqual(Object.keys(cache.get('ok')!), ['at']);
    clock.t += 5000;
    assert.ok(cache.get('k'), 'still valid at exactly the TTL');
    clock.t += 1;
    assert.equal(cache.get('k'), undefined);
    const full = new StatusCache(5000, () => clock.t);
    for (let i = 0; i < 257; i++) full.set(`n${i}`);
    assert.ok(full.get('n0'), '257 entries are kept');
    full.set('one-more');
    assert.equal(full.get('n0'), undefined, 'past 256 the cache is cleared');
    assert.ok(full.get('one-more'));
  });
  test('StatusCache: callers during a pass share it; once it expired, the next caller runs a new one', async () => {
    const clock = { t: 1000 };
    const cache = new StatusCache(5000, () => clock.t);
    let passes = 0;
    const gate = deferred();
    const pass = async () => {
      passes++;
      await gate.promise;
    };
    const waiting = [cache.answer('net', pass), cache.answer('net', pass), cache.answer('net', pass)];
    gate.resolve();
    await Promise.all(waiting);
    assert.equal(passes, 1, 'one pass for three concurrent callers');
    await cache.answer('net', pass);
    assert.equal(passes, 1, 'answered from the cache');
    clock.t += 5001;
    await cache.answer('net', pass);
    assert.equal(passes, 2, 'expired: a new pass, not the old one in flight');
  });
});

describe('what a CNI_NETNS names (netns.ts)', async () => {
  test('each refusal says why: not inspectable (with its errno), another namespace kind, the host’s own', async () => {
    assert.equal(
      await netnsProblem('/proc/self/stat/x'),
      'CNI_NETNS "/proc/self/stat/x" cannot be inspected (ENOTDIR)',
    );
    assert.equal(
      await netnsProblem('/proc/self/ns/uts'),
      'CNI_NETNS "/proc/self/ns/uts" is not a network namespace (it is the uts namespace kind)',
    );
    assert.equal(await netnsProblem(NETNS), undefined);
    assert.equal(await netnsProblem('/proc/self/root/proc/self/ns/net'), undefined, 'through /proc/<pid>/root/: net');
    assert.equal(
      await netnsProblem(NETNS, '/nonexistent/host-ns'),
      undefined,
      'an unreadable host path refuses nothing',
    );
    assert.equal(
      await netnsProblem(NETNS, NETNS),
      `CNI_NETNS "${NETNS}" is the host's network namespace (stewardd's own)`,
    );
    assert.match(
      (await netnsProblem('/nonexistent/' + 'x'.repeat(300)))!,
      /^CNI_NETNS "\/nonexistent\/x+… \[113 more characters cut\]" does not exist$/,
      'the path is clipped',
    );
  });

  test('a namespace file reached through /proc/<pid>/root/ is told by its kind like any other', async () => {
    // Through another process's root the file is still a link naming its kind: a uts namespace there
    // is refused up front, not handed to a plugin whose setns fails and whose ADD is then rolled back.
    for (const root of ['/proc/self/root', `/proc/${process.pid}/root`, '/proc/thread-self/root']) {
      assert.equal(
        await netnsProblem(`${root}/proc/self/ns/uts`),
        `CNI_NETNS "${root}/proc/self/ns/uts" is not a network namespace (it is the uts namespace kind)`,
      );
      assert.match((await netnsProblem(`${root}/proc/${process.pid}/ns/ipc`))!, /\(it is the ipc namespace kind\)$/);
      assert.equal(
        await netnsProblem(`${root}/proc/self/ns/net`, '/proc/self/ns/net'),
        `CNI_NETNS "${root}/proc/self/ns/net" is the host's network namespace (stewardd's own)`,
      );
    }
  });

  test('a symlink is followed to the namespace it names', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'steward-netns-'));
    try {
      symlinkSync('/proc/self/ns/uts', join(dir, 'uts'));
      symlinkSync(join(dir, 'uts'), join(dir, 'uts2'));
      symlinkSync(NETNS, join(dir, 'net'));
      assert.match(
        (await netnsProblem(join(dir, 'uts2')))!,
        /is not a network namespace \(it is the uts namespace kind\)$/,
      );
      assert.equal(await netnsProblem(join(dir, 'net')), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a teardown DEL gets the stored netns while it is still a network namespace, else an empty one', async () => {
    assert.equal(await teardownNetns(NETNS), NETNS);
    assert.equal(await teardownNetns('/proc/self/ns/uts'), '');
    assert.equal(await teardownNetns('/nonexistent/ns'), '');
    assert.equal(await teardownNetns(''), '');
    assert.equal(await teardownNetns(NETNS, NETNS), '', 'never the host’s own');
    assert.equal(await teardownNetns(NETNS, '/nonexistent/host-ns'), NETNS);
  });
});

describe('engine: an interface another attachment holds in the same namespace', () => {
  test('an ADD of the same container, netns and ifname on another network is code 102 and runs and journals nothing', async () => {
    const { engine, plugins, store } = setup();
    await engine.handle(req('ADD', 'both', conf([{ type: 'one' }])));
    const other = { ...conf([{ type: 'two' }]), name: 'other' };
    await assert.rejects(
      engine.handle(req('ADD', 'both', other)),
      (e: CniError) =>
        e.code === 102 &&
        /container both already has interface eth0 in \/proc\/self\/ns\/net on network net; give this network another CNI_IFNAME/.test(
          e.message,
        ),
    );
    assert.deepEqual(plugins.of('ADD'), ['ADD one both'], "the other network's plugin never ran");
    assert.deepEqual(plugins.of('DEL'), [], 'so no rollback DEL removed the held interface');
    assert.equal(store.currentAttachment({ containerId: 'both', network: 'other', ifname: 'eth0' }), undefined);
    // Another ifname on that network is a second interface, served.
    await engine.handle(req('ADD', 'both', other, { ifname: 'net1' }));
    assert.deepEqual(plugins.of('ADD'), ['ADD one both', 'ADD two both']);
  });

  test("a DEL passed through for a container steward never saw runs its delegates without the netns where another attachment's interface of that name lives", async () => {
    const { engine, plugins } = setup();
    const net = conf([{ type: 'one' }]);
    await engine.handle(req('ADD', 'holder', net));
    await engine.handle(req('DEL', 'ghost', net));
    const [ghost] = plugins.callsOf('DEL');
    assert.equal(ghost!.containerId, 'ghost');
    assert.equal(ghost!.netns, '', "the holder's interface is not the ghost's to remove");
    // A namespace nobody's interface of that name lives in is passed on.
    await engine.handle(req('DEL', 'ghost2', net, { ifname: 'eth9' }));
    assert.equal(plugins.callsOf('DEL')[1]!.netns, NETNS);
  });

  test('a DEL passed through skips a delegate that is steward itself (it would wait behind this DEL)', async () => {
    const { engine, plugins } = setup();
    await engine.handle(req('DEL', 'nested', conf([{ type: 'one' }, { type: 'steward' }, { type: 'two' }])));
    assert.deepEqual(plugins.of('DEL'), ['DEL two nested', 'DEL one nested']);
  });
});
