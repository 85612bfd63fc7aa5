// Delegates at a CNI version other than the runtime's: each plugin gets prevResult at its own
// delegate's version, the runtime gets the result at its own, and CHECK of a delegate declared
// before CHECK existed (< 0.4.0) really checks (at a version its plugin supports) or says it cannot.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('versions');
const daemon = new Daemon(env, { name: 'versions' });
before(() => daemon.start());
after(async () => {
  await daemon.stop();
  await env.close();
});

function recorded(fx: string, command: string, containerId: string): any {
  return JSON.parse(readFileSync(join(fx, `stdin-${command}-${containerId}.json`), 'utf8'));
}

describe('mixed CNI versions', () => {
  for (const [outer, inner] of [
    ['1.0.0', '0.4.0'],
    ['0.4.0', '1.0.0'],
    ['1.1.0', '0.3.1'],
  ] as const) {
    it(`[runtime ${outer}, delegate ${inner}] the chained plugin gets prevResult at ${inner}; the runtime gets ${outer}`, async () => {
      const fx = join(env.dir, `fx-${outer}-${inner}`);
      const netns = env.netns();
      const id = `v-${outer}-${inner}`.replaceAll('.', '');
      const conf = stewardConf(daemon.socket, outer, [
        delegate('mixnet', inner, [
          bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'ipam') }),
          fixturePlugin(fx, { recordStdin: true }),
        ]),
      ]);
      const add = await shim({ command: 'ADD', containerId: id, netns }, conf);
      assert.equal(add.code, 0, add.stdout);
      assert.equal(add.json.cniVersion, outer);
      assert.ok(add.json.ips?.length >= 1, 'the bridge result came through');
      const seen = recorded(fx, 'ADD', id);
      assert.equal(seen.cniVersion, inner);
      assert.equal(seen.prevResult.cniVersion, inner);
      assert.ok(seen.prevResult.ips.length >= 1);
      assert.equal((await shim({ command: 'DEL', containerId: id, netns }, conf)).code, 0);
      const del = recorded(fx, 'DEL', id);
      if (inner !== '0.3.1')
        assert.equal(del.prevResult.cniVersion, inner, 'DEL gets the stored result at the delegate version');
      else assert.equal(del.prevResult, undefined, 'before 0.4.0 DEL gets no prevResult');
    });
  }
});

describe('a delegate at a version its plugins do not speak', () => {
  it('the ADD fails with code 1 and its rollback leaves nothing pending or abandoned (the plugin refused it before doing anything)', async () => {
    // Debian's plugins speak up to 1.0.0: bridge refuses 1.1.0, ADD and DEL alike, with code 1.
    const netns = env.netns();
    const bridge = env.bridge();
    const conf = stewardConf(daemon.socket, '1.1.0', [
      delegate('toonew', '1.1.0', [bridgePlugin({ bridge, subnet: env.subnet(), dataDir: join(env.dir, 'ipam-new') })]),
    ]);
    const before = (await daemon.status()).steps;
    const add = await shim({ command: 'ADD', containerId: 'too-new', netns }, conf);
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json.code, 1);
    assert.match(add.json.msg, /incompatible CNI versions/);
    await daemon.waitFor('the rollback', async () => {
      const rows = (await daemon.get('/v1/attachments?containerId=too-new')).json as Array<{ state: string }>;
      return rows.length === 1 && rows[0]!.state === 'deleted';
    });
    const s = await daemon.status();
    assert.equal(s.teardownQueue.depth, 0, 'no DEL left to retry');
    assert.equal(s.steps.abandoned ?? 0, before.abandoned ?? 0, 'and none abandoned');
    assert.throws(() => sh('ip', ['link', 'show', bridge]), 'bridge made no bridge');
    assert.equal((await shim({ command: 'DEL', containerId: 'too-new', netns }, conf)).code, 0);
  });
});

describe('CHECK of a delegate older than 0.4.0', () => {
  it("runs the plugins' CHECK at a version they support, and fails once the interface is deleted by hand", async () => {
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [
      delegate('oldnet', '0.3.1', [
        bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'old-ipam') }),
      ]),
    ]);
    assert.equal((await shim({ command: 'ADD', containerId: 'old-1', netns }, conf)).code, 0);
    const ok = await shim({ command: 'CHECK', containerId: 'old-1', netns }, conf);
    assert.equal(ok.code, 0, ok.stdout);
    sh('ip', ['-n', netns.split('/').pop()!, 'link', 'del', 'eth0']);
    const broken = await shim({ command: 'CHECK', containerId: 'old-1', netns }, conf);
    assert.equal(broken.code, 1, 'a deleted interface is not reported healthy');
    assert.match(broken.stdout, /eth0/);
    assert.equal((await shim({ command: 'DEL', containerId: 'old-1', netns }, conf)).code, 0);
  });

  it('answers code 107 when the plugin supports no version with CHECK', async () => {
    // A plugin from before CHECK: it speaks 0.3.x only and records every command it is given.
    const bin = join(env.dir, 'oldbin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'old-plugin'),
      `#!/bin/sh
echo "$CNI_COMMAND" >> ${bin}/calls
case "$CNI_COMMAND" in
  VERSION) echo '{"cniVersion":"0.3.1","supportedVersions":["0.3.0","0.3.1"]}' ;;
  ADD) echo '{"cniVersion":"0.3.1","interfaces":[],"ips":[]}' ;;
  DEL) ;;
  *) echo '{"cniVersion":"0.3.1","code":4,"msg":"unsupported command"}'; exit 1 ;;
esac
`,
      { mode: 0o755 },
    );
    const netns = env.netns();
    const path = `${bin}:/usr/lib/cni`;
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('ancient', '0.3.1', [{ type: 'old-plugin' }])]);
    assert.equal((await shim({ command: 'ADD', containerId: 'anc-1', netns, path }, conf)).code, 0);
    const res = await shim({ command: 'CHECK', containerId: 'anc-1', netns, path }, conf);
    assert.equal(res.code, 1);
    assert.equal(res.json.code, 107, res.stdout);
    assert.match(res.json.msg, /cannot verify/);
    assert.deepEqual(
      readFileSync(join(bin, 'calls'), 'utf8').trim().split('\n'),
      ['ADD', 'VERSION'],
      'CHECK itself was never run',
    );
    assert.equal((await shim({ command: 'DEL', containerId: 'anc-1', netns, path }, conf)).code, 0);
  });
});

describe('capabilities', () => {
  it('warns in /v1/status when a delegate declares a capability the steward entry does not', async () => {
    const d = new Daemon(env, { name: 'caps' });
    await d.start();
    const netns = env.netns();
    const portmap = { type: 'portmap', capabilities: { portMappings: true }, snat: false };
    const bridge = bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir: join(env.dir, 'caps-ipam') });
    const declared = stewardConf(d.socket, '1.0.0', [delegate('capnet', '1.0.0', [bridge, portmap])], {
      capabilities: { portMappings: true },
    });
    assert.equal((await shim({ command: 'ADD', containerId: 'cap-ok', netns }, declared)).code, 0);
    assert.deepEqual((await d.status()).warnings, []);
    assert.equal((await shim({ command: 'DEL', containerId: 'cap-ok', netns }, declared)).code, 0);

    const undeclared = stewardConf(d.socket, '1.0.0', [delegate('capnet', '1.0.0', [bridge, portmap])]);
    assert.equal((await shim({ command: 'ADD', containerId: 'cap-no', netns }, undeclared)).code, 0);
    const warnings: string[] = (await d.status()).warnings;
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /capability "portMappings".*steward entry does not/);
    assert.equal((await shim({ command: 'DEL', containerId: 'cap-no', netns }, undeclared)).code, 0);
    await d.stop();
  });
});
