// Choosing the primary network config and rendering 00-steward.conflist around it (pure logic
// over a temp dir; the daemon and install use exactly these functions).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  capabilitiesOf,
  configNaming,
  findPrimary,
  renderConflist,
  sortsBeforeOurs,
} from '../../daemon/src/lifecycle/conflist.js';
import {
  MAX_CONFLIST_BYTES,
  planConflist,
  pluginsChainedAfterSteward,
} from '../../daemon/src/lifecycle/conflist-sync.js';
import { sha256 } from '../../daemon/src/lifecycle/files.js';
import type { InstallRecord } from '../../daemon/src/lifecycle/record.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function confDir(files: Record<string, string | object>): string {
  const d = mkdtempSync(join(tmpdir(), 'stw-conf-'));
  dirs.push(d);
  for (const [name, body] of Object.entries(files))
    writeFileSync(join(d, name), typeof body === 'string' ? body : JSON.stringify(body));
  return d;
}

const net = (name: string, extra: object = {}) => ({
  cniVersion: '1.0.0',
  name,
  plugins: [{ type: 'bridge' }],
  ...extra,
});

describe('finding the primary network config', () => {
  it('takes the first .conf/.conflist/.json by name, skipping ours and temp files', () => {
    const d = confDir({
      '00-steward.conflist': net('steward'),
      '.10-x.conflist.ab12.tmp': net('tmp'),
      '10-calico.conflist': net('k8s-pod-network'),
      '20-other.conf': { cniVersion: '0.4.0', name: 'o', type: 'bridge' },
      'README.md': '#',
    });
    const p = findPrimary(d);
    assert.equal(p.kind, 'found');
    assert.equal(p.kind === 'found' && p.file, '10-calico.conflist');
  });

  it('takes a dotfile config as libcni does (it loads ".05-x.conflist" first), so one before ours is seen', () => {
    const p = findPrimary(
      confDir({ '.05-hidden.conflist': net('hidden'), '10-calico.conflist': net('k8s-pod-network') }),
    );
    assert.equal(p.kind === 'found' && p.file, '.05-hidden.conflist');
    assert.equal(sortsBeforeOurs('.05-hidden.conflist'), true);
  });

  it('orders by bytes as libcni does (uppercase before lowercase)', () => {
    const p = findPrimary(
      confDir({
        'b.conf': { cniVersion: '1.0.0', name: 'b', type: 'x' },
        'B.conf': { cniVersion: '1.0.0', name: 'B', type: 'x' },
      }),
    );
    assert.equal(p.kind === 'found' && p.file, 'B.conf');
  });

  it('reports none for an empty or missing dir', () => {
    assert.deepEqual(findPrimary(confDir({})), { kind: 'none' });
    assert.deepEqual(findPrimary('/nonexistent/stw'), { kind: 'none' });
  });

  it('reports a half-written or foreign first file as invalid rather than skipping to the next', () => {
    const half = findPrimary(confDir({ '10-a.conflist': '{"cniVersion": "1.0.0", "na', '20-b.conflist': net('b') }));
    assert.equal(half.kind, 'invalid');
    const wrapped = findPrimary(confDir({ '10-a.conflist': net('a', { plugins: [{ type: 'steward' }] }) }));
    assert.equal(wrapped.kind === 'invalid' && wrapped.why, 'is a steward config itself');
  });

  it('reports a primary at a cniVersion stewardd cannot run its plugins at as invalid (the runtime runs it alone)', () => {
    for (const v of ['0.2.0', '0.1.0', '', 'banana', '2.0.0']) {
      const scan = findPrimary(confDir({ '10-old.conf': { cniVersion: v, name: 'old', type: 'bridge' } }));
      assert.equal(scan.kind, 'invalid', v);
      assert.match(
        scan.kind === 'invalid' ? scan.why : '',
        /^has cniVersion ".*", which stewardd cannot run its plugins at \(0\.3\.0, /,
      );
    }
    for (const v of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'])
      assert.equal(findPrimary(confDir({ '10-ok.conflist': { ...net('ok'), cniVersion: v } })).kind, 'found', v);
  });
});

describe('rendering 00-steward.conflist', () => {
  const primary = {
    cniVersion: '0.4.0',
    name: 'podnet',
    plugins: [
      { type: 'bridge' },
      { type: 'portmap', capabilities: { portMappings: true } },
      { type: 'bandwidth', capabilities: { bandwidth: true, other: false } },
    ],
  };

  it('carries the primary as the one delegate, its cniVersion, and the union of enabled capabilities', () => {
    const c = JSON.parse(
      renderConflist(primary, { socket: '/run/steward/stewardd.sock', spoolDir: '/var/lib/steward/spool' }),
    );
    assert.deepEqual(c, {
      cniVersion: '0.4.0',
      name: 'steward',
      plugins: [
        {
          type: 'steward',
          socket: '/run/steward/stewardd.sock',
          spoolDir: '/var/lib/steward/spool',
          capabilities: { bandwidth: true, portMappings: true },
          delegates: [primary],
        },
      ],
    });
  });

  it('omits capabilities when the primary declares none, and reads a single .conf too', () => {
    assert.deepEqual(capabilitiesOf({ cniVersion: '1.0.0', name: 'x', type: 'bridge' }), {});
    assert.deepEqual(capabilitiesOf({ cniVersion: '1.0.0', name: 'x', type: 'macvlan', capabilities: { ips: true } }), {
      ips: true,
    });
  });

  it("writes the primary's numbers back as written, even those a double cannot hold", () => {
    const text =
      '{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge","x":9007199254740993,"y":1e400,"z":-0,"w":2.5}]}';
    const scan = findPrimary(confDir({ '10-podnet.conflist': text }));
    assert.equal(scan.kind, 'found');
    const out = renderConflist((scan as { conf: Record<string, unknown> }).conf, { socket: '/s', spoolDir: '/d' });
    assert.match(out, /"x": 9007199254740993,/);
    assert.match(out, /"y": 1e400,/);
    assert.match(out, /"z": -0,/);
    assert.match(out, /"w": 2.5\n/);
  });

  it('is deterministic: same inputs, same bytes', () => {
    const o = { socket: '/s', spoolDir: '/d' };
    assert.equal(renderConflist(primary, o), renderConflist(structuredClone(primary), o));
  });
});

describe('configNaming: a config left in the conf dir that still names the shim (uninstall keeps the shim)', () => {
  const steward = { type: 'steward', socket: '/run/s.sock', delegates: [net('podnet')] };

  it('finds it at the top, in a conflist, in a Multus delegate, and with the key in another case', () => {
    const top = confDir({ '10-a.conf': { cniVersion: '1.0.0', name: 'a', ...steward } });
    assert.equal(configNaming([top], 'steward'), join(top, '10-a.conf'));
    const list = confDir({ '10-a.conflist': { cniVersion: '1.0.0', name: 'a', plugins: [steward] } });
    assert.equal(configNaming([list], 'steward'), join(list, '10-a.conflist'));
    const multus = confDir({
      '00-multus.conf': { cniVersion: '1.0.0', name: 'multus', type: 'multus', delegates: [{ plugins: [steward] }] },
    });
    assert.equal(configNaming([multus], 'steward'), join(multus, '00-multus.conf'));
    const cased = confDir({ '10-a.conf': { cniVersion: '1.0.0', name: 'a', Type: 'steward' } });
    assert.equal(configNaming([cased], 'steward'), join(cased, '10-a.conf'));
  });

  it('names nothing for other types, files in `skip`, non-configs, unparseable files, FIFOs and directories', () => {
    const d = confDir({
      '00-steward.conflist': { cniVersion: '1.0.0', name: 'steward', plugins: [steward] },
      '10-calico.conflist': net('k8s-pod-network'),
      '20-half.conf': '{"type": "steward", "na',
      'README.md': '{"type": "steward"}',
      '.00-steward.conflist.ab12cd34.tmp': '{"type": "steward"}',
    });
    execFileSync('mkfifo', [join(d, '30-fifo.conf')]);
    mkdirSync(join(d, '40-dir.conflist'));
    assert.equal(configNaming([d], 'steward', new Set([join(d, '00-steward.conflist')])), undefined);
    assert.equal(configNaming([d], 'steward'), join(d, '00-steward.conflist'));
    assert.equal(configNaming([join(d, 'missing')], 'steward'), undefined);
  });

  it('takes a config too large to read to name it (the shim is kept, never a config left dangling)', () => {
    const d = confDir({ '10-big.conflist': `${' '.repeat(17 * 1024 * 1024)}{}` });
    assert.equal(configNaming([d], 'steward'), join(d, '10-big.conflist'));
  });
});

describe('what is at our conflist path, as the watcher reads it every second', () => {
  const record = (d: string): InstallRecord => ({
    version: 1,
    state: 'installed',
    cniBinDir: '/opt/cni/bin',
    cniConfDir: d,
    socket: '/run/steward/stewardd.sock',
    spoolDir: '/var/lib/steward/spool',
    shim: { path: '/opt/cni/bin/steward', sha256: 'x' },
  });

  it('hashes a file of at most MAX_CONFLIST_BYTES; one larger is not read, only marked too large', () => {
    const d = confDir({ '10-podnet.conflist': net('podnet') });
    const ours = join(d, '00-steward.conflist');
    writeFileSync(ours, Buffer.alloc(MAX_CONFLIST_BYTES, 0x20));
    const fits = planConflist(record(d));
    assert.equal(fits.kind, 'file');
    assert.notEqual((fits as { onDisk?: string }).onDisk, sha256(`too large: ${ours}`));
    writeFileSync(ours, Buffer.alloc(MAX_CONFLIST_BYTES + 1, 0x20));
    const over = planConflist(record(d));
    assert.equal((over as { onDisk?: string }).onDisk, sha256(`too large: ${ours}`));
  });

  it('our own file is hashed whole even past the cap (a primary under 1 MiB indented again can pass 4 MiB)', () => {
    const big = { ...net('podnet'), plugins: [{ type: 'bridge', x: new Array(240_000).fill(0) }] };
    const d = confDir({ '10-podnet.conflist': big });
    const plan = planConflist(record(d)) as { kind: string; text: string; path: string; next: string };
    assert.ok(Buffer.byteLength(plan.text) > MAX_CONFLIST_BYTES, `${Buffer.byteLength(plan.text)} bytes`);
    writeFileSync(plan.path, plan.text);
    const again = planConflist(record(d)) as { onDisk?: string; next: string };
    assert.equal(again.onDisk, again.next, 'ours, not "too large"');
  });

  it('names the plugins someone chained after steward (five, then how many more), and nothing for another file', () => {
    const d = confDir({});
    const at = (body: unknown) => {
      const p = join(d, `c${Math.random()}.conflist`);
      writeFileSync(p, typeof body === 'string' ? body : JSON.stringify(body));
      return pluginsChainedAfterSteward(p);
    };
    const steward = { type: 'steward', delegates: [] };
    assert.deepEqual(at({ plugins: [steward] }), []);
    assert.deepEqual(at({ plugins: [steward, { type: 'istio-cni' }, {}] }), ['istio-cni', '(no type)']);
    const many = at({ plugins: [steward, ...Array.from({ length: 9 }, (_, i) => ({ type: `p${i}` }))] });
    assert.deepEqual(many, ['p0', 'p1', 'p2', 'p3', 'p4', '4 more']);
    assert.equal(at({ plugins: [{ type: 'bridge' }, steward] }), undefined);
    assert.equal(at({ type: 'steward' }), undefined);
    assert.equal(at('{"plugins": ['), undefined);
    assert.equal(pluginsChainedAfterSteward(join(d, 'absent')), undefined);
  });
});
