// bridge's and ptp's masquerade chains as audit findings (audit/masquerade.ts), read from
// `iptables-save -t nat` as Debian's bridge 1.1.1 writes them: the owner named by the comment, a
// chain only theirs when its name is the hash of that network and id, one finding per family and
// chain, and a pass that releases both families' chains in one removal, or reports them.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { parseMasqueradeRules } from '../../daemon/src/audit/masquerade.js';
import { natFindings } from '../../daemon/src/audit/nat-rules.js';
import { canonicalIp } from '../../daemon/src/audit/addresses.js';
import { releaseGroup } from '../../daemon/src/audit/decide.js';
import { scanNat } from '../../daemon/src/audit/gather.js';
import { runAudit, type AuditDeps } from '../../daemon/src/audit/run.js';
import { masqueradeChain } from '../../daemon/src/engine/masquerade.js';

const root = mkdtempSync(join(tmpdir(), 'stw-audit-masq-'));
after(() => rmSync(root, { recursive: true, force: true }));

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const NOW = 1_900_000_000_000;
const comment = (net: string, id: string) => `-m comment --comment "name: \\"${net}\\" id: \\"${id}\\""`;
/** What bridge's ADD writes for `id` on `net` at `ip` (the jump, the chain's two rules). */
const bridgeRules = (net: string, id: string, ip: string, len = 32) => {
  const chain = masqueradeChain(net, id);
  return [
    `:${chain} - [0:0]`,
    `-A POSTROUTING -s ${ip}/${len} ${comment(net, id)} -j ${chain}`,
    `-A ${chain} -d 10.231.0.0/24 ${comment(net, id)} -j ACCEPT`,
    `-A ${chain} ! -d 224.0.0.0/4 ${comment(net, id)} -j MASQUERADE`,
  ];
};
const natOf = (...lines: string[]) => ['*nat', ':POSTROUTING ACCEPT [0:0]', ...lines, 'COMMIT', ''].join('\n');

describe('audit: masquerade chains', () => {
  it("one per chain, its owner from the comment and its addresses from the jumps' sources", () => {
    const save = natOf(
      ...bridgeRules('cbr0', A, '10.231.0.5'),
      // a portmap jump (its own kind), a chain commented like bridge's whose name is not that hash,
      // and kube-proxy's masquerade: none of them bridge's
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"cbr0\\" id: \\"${B}\\"" -j CNI-DN-1`,
      `-A POSTROUTING -s 10.231.0.9/32 ${comment('cbr0', B)} -j CNI-0123456789abcdef01234567`,
      '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    );
    assert.deepEqual(parseMasqueradeRules('iptables', save), [
      {
        family: 'iptables',
        network: 'cbr0',
        containerId: A,
        chain: masqueradeChain('cbr0', A),
        addresses: ['10.231.0.5'],
      },
    ]);
  });

  it('a chain whose jump is gone is still found (no address); IPv6 sources are canonical', () => {
    const [decl, , accept, masq] = bridgeRules('v6', B, 'fd00::5');
    assert.deepEqual(parseMasqueradeRules('ip6tables', natOf(decl!, accept!, masq!)), [
      { family: 'ip6tables', network: 'v6', containerId: B, chain: masqueradeChain('v6', B), addresses: [] },
    ]);
    const withJump = parseMasqueradeRules('ip6tables', natOf(...bridgeRules('v6', B, 'FD00:0:0::5', 128)));
    assert.deepEqual(withJump[0]?.addresses, [canonicalIp('fd00::5')]);
  });

  it("both families' findings of one chain are one release group, apart from portmap's of the same owner", () => {
    const rules = [
      ...parseMasqueradeRules('iptables', natOf(...bridgeRules('cbr0', A, '10.231.0.5'))),
      ...parseMasqueradeRules('ip6tables', natOf(...bridgeRules('cbr0', A, 'fd00::5', 128))),
    ];
    const found = natFindings('masquerade', rules, new Set(), () => NOW);
    assert.deepEqual(
      found.map((f) => [f.kind, f.path, f.journalled]),
      [
        ['masquerade', `ip6tables -t nat ${masqueradeChain('cbr0', A)}`, false],
        ['masquerade', `iptables -t nat ${masqueradeChain('cbr0', A)}`, false],
      ],
    );
    assert.equal(releaseGroup(found[0]!), releaseGroup(found[1]!));
    assert.notEqual(releaseGroup(found[0]!), releaseGroup({ ...found[0]!, kind: 'portmap' }));
    assert.equal(natFindings('masquerade', rules, new Set([A]), () => NOW)[0]?.journalled, true);
  });

  it('scanned from the same read as portmap, whatever networks portmap is limited to, aged from first seen', async () => {
    const firstSeen = new Map<string, number>();
    const deps = {
      readNat: async (family: 'iptables' | 'ip6tables') =>
        family === 'iptables' ? natOf(...bridgeRules('cbr0', A, '10.231.0.5')) : natOf(),
      portmapNetworks: ['only-this'],
      firstSeen,
      log: pino({ level: 'silent' }),
    };
    const first = await scanNat(deps, new Set(), [], NOW - 60_000);
    assert.deepEqual(
      first.map((f) => [f.kind, f.mtimeMs]),
      [['masquerade', NOW - 60_000]],
    );
    assert.deepEqual(
      (await scanNat(deps, new Set(), [], NOW)).map((f) => f.mtimeMs),
      [NOW - 60_000],
    );
  });
});

describe('audit: a pass over masquerade chains', () => {
  function deps(o: { listed: string[]; onNode?: string[]; release?: AuditDeps['releaseMasquerade'] }) {
    const released: string[] = [];
    const save = (ip: string) => natOf(...bridgeRules('cbr0', A, ip));
    const d: AuditDeps = {
      journal: { attachmentsInState: () => [], stepsOf: () => [] },
      teardown: async () => ({ done: true }),
      run: async () => undefined,
      listSandboxes: async () => o.listed,
      runtime: () => ({ reachable: true, endpoint: 'unix:///fake.sock' }),
      leaseDirs: [],
      cacheDir: join(root, 'no-cache'),
      readNat: async (family) => (family === 'iptables' ? save('10.231.0.5') : save('fd00::5')),
      nodeAddresses: async () => ({ addresses: new Set(o.onNode ?? []), namespaces: 3, unread: [] }),
      releaseMasquerade:
        o.release ??
        (async (network, id) => {
          released.push(`${network} ${id.slice(0, 1)}`);
          return 6;
        }),
      log: pino({ level: 'silent' }),
      now: () => NOW,
    };
    return { d, released };
  }

  it('an unlisted owner whose addresses are on no interface: both families released by one removal', async () => {
    const { d, released } = deps({ listed: [B] });
    const r = await runAudit(d, { release: true, graceMs: 0 });
    assert.deepEqual(
      r.orphans.map((o) => [o.kind, o.path.split(' ')[0], o.released]),
      [
        ['masquerade', 'ip6tables', true],
        ['masquerade', 'iptables', true],
      ],
    );
    assert.deepEqual(released, ['cbr0 a']);
  });

  it('kept while its owner is listed, or its address is on an interface; only reported when not asked to release', async () => {
    const listed = deps({ listed: [A] });
    assert.deepEqual((await runAudit(listed.d, { release: true, graceMs: 0 })).orphans, []);
    const inUse = deps({ listed: [B], onNode: ['10.231.0.5'] });
    const r = await runAudit(inUse.d, { release: true, graceMs: 0 });
    assert.equal(
      r.orphans.some((o) => o.released),
      false,
    );
    assert.deepEqual([...listed.released, ...inUse.released], []);
    const report = deps({ listed: [B] });
    const rr = await runAudit(report.d, { release: false, graceMs: 0 });
    assert.deepEqual(
      rr.orphans.map((o) => o.verdict),
      ['report-only', 'report-only'],
    );
    assert.deepEqual(report.released, []);
  });

  it('a removal that fails is reported with its error; a daemon without one cannot release', async () => {
    const failing = deps({
      listed: [B],
      release: async () => {
        throw new Error('iptables exited with status 4: xtables lock');
      },
    });
    const r = await runAudit(failing.d, { release: true, graceMs: 0 });
    assert.match(r.orphans[0]?.reason ?? '', /^release failed: iptables exited with status 4: xtables lock$/);
    const none = deps({ listed: [B] });
    delete none.d.releaseMasquerade;
    const rn = await runAudit(none.d, { release: true, graceMs: 0 });
    assert.match(rn.orphans[0]?.reason ?? '', /this daemon removes no masquerade chain/);
  });
});
