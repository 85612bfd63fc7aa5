// The audit's own evidence against a runtime's word (issue 28): the node's addresses as /proc shows
// them, read into one comparable form; sightings that make passes the grace apart agree before a
// finding the node cannot prove unused is released, kept in the journal across a restart.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import {
  canonicalIp,
  collectNodeAddresses,
  parseFibTrieLocal,
  parseIfInet6,
  resultAddresses,
  type NodeAddresses,
} from '../../daemon/src/audit/node-addresses.js';
import { runAudit, type AuditDeps } from '../../daemon/src/audit/run.js';
import { runtimeDistrust } from '../../daemon/src/audit/decide.js';
import { Store } from '../../daemon/src/store/store.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-audit-proof-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const HOUR = 3600_000;
const id = (c: string) => c.repeat(64);

const FIB = `Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.88.0.0/16 2 0 2
        |-- 10.88.0.0
           /16 link UNICAST
        |-- 10.88.0.7
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.88.0.7
        /32 host LOCAL
     |-- 10.88.255.255
        /32 link BROADCAST
     |-- 127.0.0.1
        /32 host LOCAL
`;
const INET6 = `fd00000000000000000000000000000a 02 40 00 80     eth0
00000000000000000000000000000001 01 80 10 80       lo
`;

describe("the node's addresses", () => {
  it('fib_trie gives the local addresses only (not networks, not broadcasts)', () => {
    assert.deepEqual(parseFibTrieLocal(FIB).sort(), ['10.88.0.7', '127.0.0.1']);
  });

  it('if_inet6 gives every IPv6 address, in the canonical form leases and results are compared in', () => {
    assert.deepEqual(parseIfInet6(INET6), [
      'fd00:0000:0000:0000:0000:0000:0000:000a',
      '0000:0000:0000:0000:0000:0000:0000:0001',
    ]);
    assert.equal(canonicalIp('fd00::a'), 'fd00:0000:0000:0000:0000:0000:0000:000a');
    assert.equal(canonicalIp('FD00:0:0::A/64'), 'fd00:0000:0000:0000:0000:0000:0000:000a');
    assert.equal(canonicalIp('::ffff:10.0.0.1'), '0000:0000:0000:0000:0000:ffff:0a00:0001');
    assert.equal(canonicalIp('10.1.2.3/24'), '10.1.2.3');
    assert.equal(canonicalIp('not an ip'), null);
  });

  it("a result's addresses, 0.3.0 and later and 0.2.0 alike", () => {
    assert.deepEqual(resultAddresses({ ips: [{ address: '10.1.0.5/24' }, { address: 'fd00::5/64' }] }), [
      '10.1.0.5',
      'fd00:0000:0000:0000:0000:0000:0000:0005',
    ]);
    assert.deepEqual(resultAddresses({ ip4: { ip: '10.2.0.9/16' } }), ['10.2.0.9']);
    assert.deepEqual(resultAddresses(null), []);
  });

  it('one read per namespace through /proc, however many processes share it', async () => {
    const proc = join(dir, 'proc');
    // Two processes in one namespace, one in another; a fake /proc with their links and files.
    for (const [pid, ns, addr] of [
      ['1', '4026531840', '192.0.2.1'],
      ['7', '4026531840', '192.0.2.1'],
      ['42', '4026532001', '10.88.0.7'],
    ] as const) {
      mkdirSync(join(proc, pid, 'ns'), { recursive: true });
      mkdirSync(join(proc, pid, 'net'), { recursive: true });
      symlinkSync(`net:[${ns}]`, join(proc, pid, 'ns', 'net'));
      writeFileSync(join(proc, pid, 'net', 'fib_trie'), `Local:\n  |-- ${addr}\n     /32 host LOCAL\n`);
    }
    const read: string[] = [];
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [join(dir, 'no-netns-dir')],
      readInNetns: async (p) => {
        read.push(p);
        return '';
      },
    });
    assert.deepEqual([...out.addresses].sort(), ['10.88.0.7', '192.0.2.1']);
    assert.equal(out.namespaces, 2);
    assert.deepEqual(out.unread, []);
    assert.deepEqual(read, [], 'no namespace to enter');
  });
});

describe("the runtime's answer against what the node proves", () => {
  it('an id not in the runtime form, or a pod with its netns missing from the list, distrusts the answer', () => {
    assert.equal(runtimeDistrust([id('a')], [id('a')]), undefined);
    assert.match(runtimeDistrust([id('A')], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([id('a').slice(0, 12)], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([`sha256:${id('a')}`], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([], [id('b')]) ?? '', /listed no sandbox while 1 journalled pod/);
    assert.match(
      runtimeDistrust([id('a')], [id('b'), id('b')]) ?? '',
      /^1 journalled pod\(s\) whose network namespace exists are missing/,
    );
  });
});

describe('sightings: passes the grace apart agree before what the node cannot prove is released', () => {
  function leaseDir(name: string, cid: string): string {
    const root = join(dir, name);
    mkdirSync(join(root, 'net'), { recursive: true });
    const p = join(root, 'net', '10.1.0.5');
    writeFileSync(p, `${cid}\r\neth0`);
    const t = (Date.now() - 5 * HOUR) / 1000;
    utimesSync(p, t, t);
    return root;
  }

  function deps(o: {
    leaseDir: string;
    node: NodeAddresses;
    sightings: AuditDeps['sightings'];
    now: () => number;
    run: string[];
  }): AuditDeps {
    return {
      journal: { attachmentsInState: () => [], stepsOf: () => [] },
      teardown: async () => ({ done: true }),
      run: async (req) => {
        o.run.push(`${req.command} ${req.type} ${req.containerId.slice(0, 1)}`);
        return {} as never;
      },
      listSandboxes: async () => [],
      runtime: () => ({ reachable: true, endpoint: 'unix:///fake.sock', sandboxes: 0 }),
      leaseDirs: [o.leaseDir],
      cacheDir: join(dir, 'no-results'),
      nodeAddresses: async () => o.node,
      sightings: o.sightings,
      log: pino({ level: 'silent' }),
      now: o.now,
    };
  }

  it('with part of the node unread, one pass is never enough; a pass the grace later, after a restart, releases', async () => {
    const db = join(dir, 'sightings.db');
    let clock = Date.now();
    const calls: string[] = [];
    const unread: NodeAddresses = { addresses: new Set(), namespaces: 3, unread: ['/run/netns/stuck'] };
    const lease = leaseDir('unread', id('d'));
    const first = new Store(db);
    const r1 = await runAudit(
      deps({ leaseDir: lease, node: unread, sightings: first.sightings, now: () => clock, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r1.orphans.map((o) => o.released),
      [false],
    );
    assert.deepEqual(calls, [], 'no DEL on the runtime word alone');
    first.close();

    clock += HOUR - 1000;
    const second = new Store(db); // a restart: the sighting is read back from the journal
    const r2 = await runAudit(
      deps({ leaseDir: lease, node: unread, sightings: second.sightings, now: () => clock, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r2.orphans.map((o) => o.released),
      [false],
      'still inside the grace since the first sighting',
    );
    clock += 2000;
    const r3 = await runAudit(
      deps({ leaseDir: lease, node: unread, sightings: second.sightings, now: () => clock, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r3.orphans.map((o) => o.released),
      [true],
    );
    assert.deepEqual(calls, ['DEL host-local d']);
    second.close();
  });

  it('the whole node read and the address nowhere: released at once past the grace; on an interface: never', async () => {
    const calls: string[] = [];
    const clean: NodeAddresses = { addresses: new Set(), namespaces: 3, unread: [] };
    const r = await runAudit(
      deps({ leaseDir: leaseDir('proven', id('e')), node: clean, sightings: undefined, now: Date.now, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r.orphans.map((o) => o.released),
      [true],
    );
    const inUse: NodeAddresses = { addresses: new Set(['10.1.0.5']), namespaces: 3, unread: ['/run/netns/x'] };
    const old = new Map([[`lease\0${join(dir, 'inuse', 'net', '10.1.0.5')}\0${id('f')}`, Date.now() - 10 * HOUR]]);
    const kept = await runAudit(
      deps({
        leaseDir: leaseDir('inuse', id('f')),
        node: inUse,
        sightings: { load: () => new Map(old), save: () => undefined },
        now: Date.now,
        run: calls,
      }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(kept.orphans, [], 'a lease whose address is on an interface is not an orphan');
    assert.deepEqual(calls, ['DEL host-local e']);
  });
});
