// Bad input: each case gets a CNI error with the right code on stdout, a non-zero exit, and
// leaves the daemon healthy and its database without a half-written row.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, fixtureCalls, leases, sh } from '../helpers/env.js';
import { bridgePlugin, delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { shim } from '../helpers/shim.js';

const env = new TestEnv('badinput');
const daemon = new Daemon(env);
before(() => daemon.start());
after(() => env.close());

const good = () =>
  stewardConf(daemon.socket, '1.0.0', [delegate('badnet', '1.0.0', [fixturePlugin(join(env.dir, 'fx'))])]);

async function expectError(call: Parameters<typeof shim>[0], conf: unknown, code: number, msg: RegExp): Promise<void> {
  const res = await shim(call, conf);
  assert.equal(res.code, 1, `exit code; stdout: ${res.stdout}`);
  assert.equal(res.json?.code, code, res.stdout);
  assert.match(res.json.msg, msg);
  assert.equal(typeof res.json.cniVersion, 'string');
  assert.doesNotMatch(res.stdout, /not found|no such file or directory/i);
}

describe('bad input gets the right CNI error code', () => {
  it('malformed JSON on stdin: code 6', async () => {
    await expectError(
      { command: 'ADD', containerId: 'b1', netns: '/run/netns/x' },
      '{"cniVersion": "1.0.0", "name":',
      6,
      /not valid JSON/,
    );
  });

  it('missing env vars: code 4 naming every one of them', async () => {
    const res = await shim({ command: 'ADD', env: { CNI_COMMAND: 'ADD' } }, good());
    assert.equal(res.code, 1);
    assert.equal(res.json.code, 4);
    for (const v of ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'])
      assert.match(res.json.msg, new RegExp(v));
  });

  it('CNI_CONTAINERID of ../x: code 4', async () => {
    await expectError({ command: 'ADD', containerId: '../x', netns: '/run/netns/x' }, good(), 4, /CNI_CONTAINERID/);
  });

  it('a 100,000-character CNI_CONTAINERID: code 4 from the shim, for ADD and DEL', async () => {
    const id = 'a'.repeat(100_000);
    await expectError(
      { command: 'ADD', containerId: id, netns: '/run/netns/x' },
      good(),
      4,
      /CNI_CONTAINERID is 100000 characters long; at most 1024/,
    );
    await expectError({ command: 'DEL', containerId: id }, good(), 4, /CNI_CONTAINERID is 100000 characters long/);
  });

  it('a 100,000-character container id sent straight to the daemon (no shim): code 4, nothing journalled', async () => {
    const id = 'b'.repeat(100_000);
    for (const command of ['ADD', 'DEL']) {
      const body = JSON.stringify({
        env: {
          CNI_COMMAND: command,
          CNI_CONTAINERID: id,
          CNI_NETNS: '/run/netns/x',
          CNI_IFNAME: 'eth0',
          CNI_PATH: '/usr/lib/cni',
        },
        config: good(),
      });
      const res = await daemon.request('POST', '/v1/cni', body);
      assert.equal(res.json?.code, 4, res.text.slice(0, 300));
      assert.match(res.json.msg, /at most 1024/);
    }
    const atts = await daemon.get('/v1/attachments');
    assert.doesNotMatch(atts.text, /bbbbbbbbbb/);
  });

  it('an over-long ifname: code 4', async () => {
    await expectError(
      { command: 'ADD', containerId: 'b2', netns: '/run/netns/x', ifname: 'a-very-long-ifname0' },
      good(),
      4,
      /CNI_IFNAME/,
    );
  });

  it('an ifname containing "/": code 4', async () => {
    await expectError(
      { command: 'ADD', containerId: 'b3', netns: '/run/netns/x', ifname: 'et/h0' },
      good(),
      4,
      /CNI_IFNAME/,
    );
  });

  it('plugin type ../../bin/sh: code 7, nothing executed', async () => {
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('evil', '1.0.0', [{ type: '../../bin/sh' }])]);
    await expectError({ command: 'ADD', containerId: 'b4', netns: '/run/netns/x' }, conf, 7, /bare plugin name/);
  });

  it('an unknown plugin type: code 7 naming the type, before anything is journaled or run', async () => {
    const netns = env.netns();
    const conf = stewardConf(daemon.socket, '1.0.0', [delegate('ghost', '1.0.0', [{ type: 'no-such-plugin-here' }])]);
    await expectError({ command: 'ADD', containerId: 'b5', netns }, conf, 7, /no-such-plugin-here/);
    const atts = (await daemon.get('/v1/attachments?containerId=b5')).json;
    assert.deepEqual(atts, []);
  });

  it('stdin over the 1 MiB bound: code 7', async () => {
    const big = JSON.stringify({ ...good(), padding: 'x'.repeat(1024 * 1024 + 10) });
    await expectError({ command: 'ADD', containerId: 'b6', netns: '/run/netns/x' }, big, 7, /larger than/);
  });

  it('an unsupported cniVersion: code 1', async () => {
    const conf = { ...good(), cniVersion: '0.2.0' };
    await expectError({ command: 'ADD', containerId: 'b7', netns: '/run/netns/x' }, conf, 1, /0\.2\.0/);
  });

  it('a netconf without delegates: code 7', async () => {
    const { delegates: _d, ...conf } = good();
    await expectError({ command: 'ADD', containerId: 'b8', netns: '/run/netns/x' }, conf, 7, /delegates/);
  });

  it('ADD whose CNI_NETNS is not a network namespace: code 4, nothing journaled or run', async () => {
    // The other namespace kinds are nsfs files too: only their kind tells them from a netns, read
    // from the link of a /proc/<pid>/ns file and from mountinfo for a bind mount of one.
    const utsMount = join(env.dir, 'uts-ns');
    writeFileSync(utsMount, '');
    sh('mount', ['--bind', '/proc/self/ns/uts', utsMount]);
    env.defer(() => {
      sh('umount', [utsMount]);
    });
    // A symlink to one is followed to its kind. The host's own netns (stewardd's) is refused too:
    // a failed ADD's rollback there would delete a host interface of the pod's interface name.
    const utsLink = join(env.dir, 'uts-link');
    symlinkSync('/proc/self/ns/uts', utsLink);
    const paths = [
      '/etc/passwd',
      'relative/ns',
      '/run/netns/stw-never-made',
      '/proc/self/ns/uts',
      '/proc/1/ns/pid',
      utsMount,
      utsLink,
      '/proc/self/ns/net',
    ];
    for (const [i, netns] of paths.entries()) {
      await expectError({ command: 'ADD', containerId: `ns-${i}`, netns }, good(), 4, /CNI_NETNS/);
      assert.deepEqual((await daemon.get(`/v1/attachments?containerId=ns-${i}`)).json, []);
    }
    assert.deepEqual(
      fixtureCalls(join(env.dir, 'fx')).filter((l) => / ns-\d /.test(l)),
      [],
      'no plugin ran',
    );
  });

  it('ADD with CNI_ARGS the reference plugins cannot parse: code 4, nothing journaled', async () => {
    const netns = env.netns();
    for (const [i, args] of ['IgnoreUnknown=1;', 'K=a=b', 'garbage', `K=${'v'.repeat(100_000)};x`].entries()) {
      const res = await shim({ command: 'ADD', containerId: `args-${i}`, netns, args }, good());
      assert.equal(res.json?.code, 4, res.stdout.slice(0, 300));
      assert.match(res.json.msg, /CNI_ARGS pair/);
      assert.ok(res.stdout.length < 2000, 'a huge pair is not echoed back whole');
      assert.deepEqual((await daemon.get(`/v1/attachments?containerId=args-${i}`)).json, []);
    }
  });

  it('CHECK of a container never added: code 3', async () => {
    await expectError(
      { command: 'CHECK', containerId: 'never-added', netns: '/run/netns/x' },
      good(),
      3,
      /no attachment/,
    );
  });

  it('CHECK after a DEL of a container never added: code 3, not 106 (the DEL ran no plugin of an attachment)', async () => {
    const del = await shim({ command: 'DEL', containerId: 'del-only', netns: '/run/netns/x' }, good());
    assert.equal(del.code, 0, del.stdout);
    await expectError({ command: 'CHECK', containerId: 'del-only', netns: '/run/netns/x' }, good(), 3, /no attachment/);
  });

  it("a delegate's ADD result steward cannot use: code 100 naming the plugin (not 6 or 1, the runtime's input was fine), rolled back", async () => {
    for (const [cid, addResult] of [
      ['bad-result-ips', { cniVersion: '1.0.0', ips: 'oops' }],
      ['bad-result-version', { cniVersion: '9.9.9' }],
    ] as const) {
      const conf = stewardConf(daemon.socket, '1.0.0', [
        delegate('badresult', '1.0.0', [fixturePlugin(join(env.dir, 'fx-result'), { addResult })]),
      ]);
      await expectError(
        { command: 'ADD', containerId: cid, netns: env.netns() },
        conf,
        100,
        /^plugin steward-fixture ADD printed a result steward cannot use: /,
      );
      await daemon.waitFor('the rollback', async () => (await daemon.attachment(cid)).state === 'deleted');
    }
  });

  it("a delegate network name over 255 characters: ADD is code 7 before anything runs (host-local's lease directory is named for it, and its rollback DEL failed too, an abandoned step); 255 works end to end", async () => {
    const dataDir = join(env.dir, 'leases-long');
    const netns = env.netns();
    const withName = (name: string) =>
      stewardConf(daemon.socket, '1.0.0', [
        delegate(name, '1.0.0', [bridgePlugin({ bridge: env.bridge(), subnet: env.subnet(), dataDir })]),
      ]);
    await expectError(
      { command: 'ADD', containerId: 'long-name', netns },
      withName('n'.repeat(256)),
      7,
      /^delegate 0: name "n{200}… \[56 more characters cut\]" is 256 characters long; an ADD accepts at most 255/,
    );
    assert.deepEqual((await daemon.get('/v1/attachments?containerId=long-name')).json, []);
    assert.equal(existsSync(dataDir), false, 'host-local never ran');
    // At the bound the real host-local keeps its lease under it, and the DEL releases it.
    const at = 'n'.repeat(255);
    const add = await shim({ command: 'ADD', containerId: 'name-255', netns }, withName(at));
    assert.equal(add.code, 0, add.stdout);
    assert.equal(leases(dataDir, at).length, 1);
    const del = await shim({ command: 'DEL', containerId: 'name-255', netns }, withName(at));
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(leases(dataDir, at), []);
    assert.deepEqual((await daemon.get('/v1/teardowns')).json, { pending: [], abandoned: [] });
  });

  it('an unknown CNI_COMMAND: code 4', async () => {
    await expectError({ command: 'FROB', containerId: 'b9', netns: '/run/netns/x' }, good(), 4, /FROB/);
  });

  it('after all of that the daemon is healthy and no row is half-written', async () => {
    assert.equal((await daemon.get('/healthz')).status, 200);
    const status = await daemon.status();
    assert.equal(status.ready, true);
    assert.equal(status.attachments.adding ?? 0, 0);
    assert.equal(status.steps.adding ?? 0, 0);
    assert.equal(status.steps.deleting ?? 0, 0);
    const shimOk = await shim({ command: 'ADD', containerId: 'b-ok', netns: env.netns() }, good());
    assert.equal(shimOk.code, 0, shimOk.stdout);
  });
});

describe('a plugin past its deadline', () => {
  it('is killed with its process group and the runtime gets code 101; the chain is rolled back', async () => {
    const slow = new Daemon(env, { name: 'deadline', args: ['--plugin-timeout', '1'] });
    await slow.start();
    const fx = join(env.dir, 'fx-slow');
    // Six times the deadline, so a loaded machine (a spawner to fork first) cannot blur the two.
    const sleepAddMs = 6000;
    const conf = stewardConf(slow.socket, '1.0.0', [delegate('slownet', '1.0.0', [fixturePlugin(fx, { sleepAddMs })])]);
    const started = Date.now();
    const res = await shim({ command: 'ADD', containerId: 'slowpoke', netns: env.netns() }, conf);
    assert.equal(res.code, 1);
    assert.equal(res.json.code, 101, res.stdout);
    const answered = Date.now();
    const took = answered - started;
    assert.ok(
      took < sleepAddMs - 1000,
      `answered after ${took} ms: at the deadline, not when the plugin would have finished`,
    );
    // The rollback runs after the answer.
    const state = async () => (await slow.get('/v1/attachments?containerId=slowpoke')).json[0].state;
    await slow.waitFor('the rollback after the answer', async () => (await state()) === 'deleted');
    // Had it survived, the fixture would write its "added" marker once its sleep ended (it was started
    // about a deadline before the answer).
    await new Promise((r) => setTimeout(r, Math.max(0, answered + sleepAddMs + 500 - Date.now())));
    assert.equal(existsSync(join(fx, 'added-slowpoke-eth0')), false, 'the plugin was killed');
    assert.equal(await state(), 'deleted');
    await slow.stop();
  });
});

describe('daemon unreachable', () => {
  it('ADD gets code 11 at once, naming the socket', async () => {
    const conf = { ...good(), socket: join(env.dir, 'nobody-home.sock') };
    const started = Date.now();
    await expectError({ command: 'ADD', containerId: 'b10', netns: '/run/netns/x' }, conf, 11, /nobody-home\.sock/);
    assert.ok(Date.now() - started < 5000);
  });

  it('VERSION is answered by the shim itself with all five versions', async () => {
    const res = await shim({ command: 'VERSION', env: { CNI_COMMAND: 'VERSION' } }, '{"cniVersion":"1.0.0"}');
    assert.equal(res.code, 0);
    assert.deepEqual(res.json.supportedVersions, ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });
});
