// `stewardd audit` and bridge's masquerade chains (audit/masquerade.ts), with Debian's real bridge and
// host-local, the host's iptables, a real daemon and a fake CRI runtime: a chain left by a DEL that
// never reached stewardd (the plain chain, as the runtime ran it before steward was installed, DELed
// after its netns went) is reported, and released with --release once its owner is unlisted and its
// address is on no interface; a live pod's chain is neither. Every chain is removed at close.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { masqueradeChain } from '../../daemon/src/engine/masquerade.js';
import { Daemon, FAST_RETRY } from '../helpers/daemon.js';
import { directAdd, directDel } from '../helpers/direct.js';
import { TestEnv, sh } from '../helpers/env.js';
import { fakeRuntime } from '../helpers/fake-cri.js';
import { bridgePlugin } from '../helpers/netconf.js';
import { stewardd } from '../helpers/node-tree.js';

const env = new TestEnv('auditmasq');
after(() => env.close());

const LIVE = 'a'.repeat(64);
const DEAD = 'b'.repeat(64);
const NET = `amasq-${env.tag}`;

/** The nat table's lines naming the chain (its rules and the POSTROUTING jump), IPv4. */
const natLines = (chain: string) =>
  sh('iptables-save', ['-t', 'nat'])
    .split('\n')
    .filter((l) => l.includes(chain));

/** Removes a chain and the jumps to it, whatever is left. */
function dropChain(chain: string): void {
  for (const line of natLines(chain).filter((l) => l.startsWith('-A POSTROUTING '))) {
    const words = line.replace(/^-A /, '-D ').match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? [];
    execFileSync('iptables', [
      '-w',
      '-t',
      'nat',
      ...words.map((w) => (w.startsWith('"') ? w.slice(1, -1).replace(/\\(.)/g, '$1') : w)),
    ]);
  }
  for (const op of ['-F', '-X'])
    try {
      execFileSync('iptables', ['-w', '-t', 'nat', op, chain], { stdio: 'ignore' });
    } catch {
      /* not there */
    }
}

interface Orphan {
  kind: string;
  containerId: string;
  network: string;
  path: string;
  verdict: string;
  released: boolean;
}
const masqOrphans = (stdout: string) =>
  (JSON.parse(stdout) as { orphans: Orphan[] }).orphans.filter((o) => o.kind === 'masquerade' && o.network === NET);

describe('stewardd audit: masquerade chains nobody removed', () => {
  let daemon: Daemon;
  const dataDir = join(env.dir, 'ipam');
  const net = {
    name: NET,
    cniVersion: '1.0.0',
    plugins: [{ ...bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir }), ipMasq: true }],
  };
  const liveNs = env.netns();

  before(async () => {
    for (const id of [LIVE, DEAD]) env.defer(() => dropChain(masqueradeChain(NET, id)));
    env.defer(() => directDel(net, { containerId: LIVE, netns: liveNs }).then(() => undefined));
    const runtime = join(env.dir, 'cri.sock');
    await fakeRuntime(env, runtime, [LIVE]);
    const empty = join(env.dir, 'empty');
    mkdirSync(join(empty, 'networks'), { recursive: true });
    mkdirSync(join(empty, 'results'), { recursive: true });
    daemon = new Daemon(env, {
      name: 'd',
      args: [
        ...FAST_RETRY,
        '--runtime-endpoint',
        `unix://${runtime}`,
        '--audit-lease-dir',
        join(empty, 'networks'),
        '--audit-cache-dir',
        join(empty, 'results'),
      ],
    });
    await daemon.start();
    // The plain chain, before steward: both pods added; the dead one's netns removed, then its DEL.
    assert.equal((await directAdd(net, { containerId: LIVE, netns: liveNs })).ok, true);
    const deadNs = env.netns();
    assert.equal((await directAdd(net, { containerId: DEAD, netns: deadNs })).ok, true);
    sh('ip', ['netns', 'del', deadNs.split('/').pop() as string]);
    assert.equal(await directDel(net, { containerId: DEAD, netns: '' }), true);
    assert.equal(natLines(masqueradeChain(NET, DEAD)).length, 4, 'bridge left its chain');
  });

  after(() => daemon.stop());

  it("reports the dead pod's chain and not the live one's; a report removes nothing", async () => {
    const r = await stewardd(['audit', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      masqOrphans(r.stdout).map((o) => [o.containerId.slice(0, 1), o.path, o.verdict, o.released]),
      [['b', `iptables -t nat ${masqueradeChain(NET, DEAD)}`, 'report-only', false]],
    );
    assert.equal(natLines(masqueradeChain(NET, DEAD)).length, 4);
  });

  it('--release frees it, jump and chain; the live pod keeps its own', async () => {
    const r = await stewardd(['audit', '--release', '--grace', '0s', '-o', 'json', '--socket', daemon.socket]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      masqOrphans(r.stdout).map((o) => [o.containerId.slice(0, 1), o.released]),
      [['b', true]],
    );
    assert.deepEqual(natLines(masqueradeChain(NET, DEAD)), []);
    assert.equal(natLines(masqueradeChain(NET, LIVE)).length, 4);
    const again = await stewardd(['audit', '-o', 'json', '--socket', daemon.socket]);
    assert.deepEqual(masqOrphans(again.stdout), []);
  });
});
