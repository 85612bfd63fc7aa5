// podman 4.3 (CNI backend) running real containers whose network is a conflist pointing at the
// steward shim: the runtime's own VERSION/ADD/DEL calls, its trimmed-env cleanup process, its lack of
// DEL retries. Setup and cleanup are test/helpers/runtimes/; the machine is checked at the end.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_RUNTIME_SOCKETS } from '../../daemon/src/audit/cri.js';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, fixtureCalls } from '../helpers/env.js';
import { run } from '../helpers/runtimes/exec.js';
import { baseSkipReason, skipOrFail } from '../helpers/runtimes/skip.js';
import { RuntimeHost, defaultGatewayOf, ipv4Of, type BridgeNet } from '../helpers/runtimes/host.js';
import { Podman } from '../helpers/runtimes/podman.js';

const env = new TestEnv('e2e-podman');
// Short teardown retries so the seed 002 case settles in seconds.
const daemon = new Daemon(env, { args: ['--retry-base-ms', '200', '--retry-max-ms', '1000'] });

let host: RuntimeHost | undefined;
let podman: Podman | undefined;
let reason = baseSkipReason(['podman', 'conmon', 'runc', 'ip', 'iptables', 'tar']);
try {
  if (reason === undefined) {
    host = await RuntimeHost.create(env);
    podman = await Podman.setup(host);
    reason = await podman.probe();
  }
} catch (e) {
  await (host ? host.finish() : env.close()); // nothing of a failed setup stays on the machine
  throw e;
}
const skip = skipOrFail('podman end-to-end cases', reason);

after(async () => {
  if (!host) return env.close();
  assert.deepEqual(await host.finish(), [], 'the suite left the machine as it found it');
});

const steward = () => ({ socket: daemon.socket, spoolDir: daemon.spoolDir });

async function attachmentsOf(containerId: string): Promise<any[]> {
  return (await daemon.get(`/v1/attachments?containerId=${containerId}`)).json;
}

async function waitTornDown(h: RuntimeHost, net: BridgeNet, containerId: string, timeoutMs = 30_000): Promise<void> {
  await daemon.waitFor(
    `teardown of ${containerId.slice(0, 12)} on ${net.name}`,
    async () => {
      const atts = await attachmentsOf(containerId);
      return h.leases(net).length === 0 && atts.length > 0 && atts.every((a) => a.state === 'deleted');
    },
    timeoutMs,
  );
}

describe('podman runs containers on a steward network', { skip }, () => {
  before(() => daemon.start());

  for (const version of ['0.4.0', '1.0.0']) {
    it(`[${version}] the container has its address and default route inside, and after exit the lease is gone and the attachment torn down`, async () => {
      const h = host!;
      const net = h.bridgeNetwork(`v${version.replaceAll('.', '')}`, version, { steward: steward() });
      const cidFile = join(env.dir, `cid-${version}`);
      const out = join(env.dir, `out-${version}`);
      mkdirSync(out);
      const r = await podman!.runRm(
        net.name,
        ['/bin/sh', '-c', 'ip -o -4 addr show eth0 > /out/seen; ip route >> /out/seen'],
        ['--cidfile', cidFile, '-v', `${out}:/out`],
      );
      assert.equal(r.code, 0, `podman run: ${r.stderr}`);
      const seen = readFileSync(join(out, 'seen'), 'utf8');
      const inet = ipv4Of(seen);
      assert.ok(inet, `no IPv4 address on eth0 inside the container: ${seen}`);
      assert.ok(inet.address.startsWith(net.subnet.replace(/0\/24$/, '')), `${inet.address} not in ${net.subnet}`);
      assert.equal(inet.prefix, 24);
      assert.equal(defaultGatewayOf(seen), net.gateway, `no default route via ${net.gateway}: ${seen}`);
      const cid = readFileSync(cidFile, 'utf8').trim();
      await waitTornDown(h, net, cid);
      const [att] = await attachmentsOf(cid);
      assert.equal(att.network, net.name);
      assert.equal(att.cniVersion, version);
      assert.deepEqual(
        att.steps.map((s: { plugin: string; state: string }) => `${s.plugin}:${s.state}`),
        ['bridge:deleted'],
      );
    });
  }

  it('20 containers started in parallel all get distinct addresses, and every lease is released after', async () => {
    const h = host!;
    const net = h.bridgeNetwork('par20', '1.0.0', { steward: steward() });
    // Each container writes what it sees to a bind-mounted file: podman's attach can lose the
    // output of a short-lived container when many start at once.
    const out = join(env.dir, 'par20-out');
    mkdirSync(out);
    const runs = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        podman!.runRm(
          net.name,
          ['/bin/sh', '-c', `ip -o -4 addr show eth0 > /out/${i}`],
          ['--name', `${net.name}-${i}`, '-v', `${out}:/out`],
          240_000,
        ),
      ),
    );
    runs.forEach((r, i) => assert.equal(r.code, 0, `container ${i}: ${r.stderr}`));
    const seen = runs.map((_, i) =>
      existsSync(join(out, String(i))) ? readFileSync(join(out, String(i)), 'utf8') : '(no file)',
    );
    const ips = seen.map((text) => ipv4Of(text)?.address);
    ips.forEach((ip, i) =>
      assert.ok(
        ip?.startsWith(net.subnet.replace(/0\/24$/, '')),
        `container ${i} had no address in ${net.subnet}: ${seen[i]}`,
      ),
    );
    assert.equal(new Set(ips).size, 20, `addresses not distinct: ${ips.join(' ')}`);
    await daemon.waitFor('all 20 leases released', () => h.leases(net).length === 0, 60_000);
    const atts = ((await daemon.get('/v1/attachments?limit=100000')).json as any[]).filter(
      (a) => a.network === net.name,
    );
    assert.equal(atts.length, 20);
    assert.ok(
      atts.every((a) => a.state === 'deleted'),
      'every attachment torn down',
    );
  });

  describe('seed 002: a chained plugin fails ADD and then fails DEL twice; podman never retries', () => {
    const FAIL_DELS = 2;
    const chain = (dir: string) => [{ type: 'steward-fixture', stateDir: dir, failAdd: true, failDelTimes: FAIL_DELS }];

    it('without steward (the plugins listed directly) the lease host-local allocated is leaked', async () => {
      const h = host!;
      const fx = join(env.dir, 'fixture-direct');
      const net = h.bridgeNetwork('leak-direct', '1.0.0', { chain: chain(fx) });
      const r = await podman!.runRm(net.name, ['/bin/true']);
      assert.notEqual(r.code, 0, 'the ADD must fail');
      // podman sends one DEL for a failed ADD, which fails at the fixture before reaching bridge.
      await daemon.waitFor("podman's one DEL", () => fixtureCalls(fx, 'DEL').length >= 1, 20_000);
      await new Promise((res) => setTimeout(res, 3000));
      assert.equal(fixtureCalls(fx, 'DEL').length, 1, 'podman sent exactly one DEL and never retried');
      assert.equal(h.leases(net).length, 1, 'the IP host-local allocated is leaked');
    });

    it('through steward the failed ADD is rolled back and the teardown retried until no lease is left', async () => {
      const h = host!;
      const fx = join(env.dir, 'fixture-steward');
      const net = h.bridgeNetwork('leak-steward', '1.0.0', { steward: steward(), chain: chain(fx) });
      const r = await podman!.runRm(net.name, ['/bin/true']);
      assert.notEqual(r.code, 0, 'the ADD must fail');
      assert.match(r.stderr, /ADD failed on cue/, "podman reports the chain's original error");
      await daemon.waitFor(
        'the retried teardown to release the lease',
        async () => {
          const atts = ((await daemon.get('/v1/attachments?limit=100000')).json as any[]).filter(
            (a) => a.network === net.name,
          );
          return (
            h.leases(net).length === 0 &&
            atts.length === 1 &&
            atts[0].steps.every((s: { state: string }) => s.state === 'deleted')
          );
        },
        30_000,
      );
      assert.ok(fixtureCalls(fx, 'DEL').length >= FAIL_DELS + 1, 'the failing DEL was retried until it succeeded');
      assert.equal((await daemon.get('/v1/teardowns')).json.pending.length, 0);
    });
  });

  it('a container started before stewardd restarts is still torn down by the DEL that comes after the restart', async () => {
    const h = host!;
    const net = h.bridgeNetwork('restart', '1.0.0', { steward: steward() });
    const cid = await podman!.runDetached(net.name, net.name);
    assert.equal(h.leases(net).length, 1);
    assert.equal((await attachmentsOf(cid))[0].state, 'added');
    await daemon.restart();
    const k = await podman!.cmd(['kill', cid]);
    assert.equal(k.code, 0, k.stderr);
    await waitTornDown(h, net, cid);
    await daemon.waitFor('podman to remove the container', async () => !(await podman!.exists(cid)));
  });

  it('under podman (no CRI) `stewardd audit --release` finds no runtime: the running container is reported owner unknown, nothing is released, exit 5', async (t) => {
    // Through the suite's rule: with STEWARD_E2E_REQUIRE=1 a machine that cannot be a podman-only node
    // fails here with the reason instead of passing over the case.
    const present = DEFAULT_RUNTIME_SOCKETS.filter((p) => existsSync(p));
    const why = skipOrFail(
      'the podman-only audit case',
      present.length > 0
        ? `a CRI socket exists on this machine (${present.join(', ')}): not a podman-only node`
        : undefined,
    );
    if (why) return t.skip(why);
    const h = host!;
    const net = h.bridgeNetwork('audit', '1.0.0', { steward: steward() });
    const cid = await podman!.runDetached(net.name, net.name);
    const [lease] = h.leases(net);
    assert.ok(lease);
    const r = await run(
      process.execPath,
      [join(REPO, 'bin/stewardd'), 'audit', '--release', '--grace', '0s', '-o', 'json', '--socket', daemon.socket],
      { timeoutMs: 60_000 },
    );
    assert.equal(r.code, 5, `exit ${r.code}: ${r.stderr}`);
    const body = JSON.parse(r.stdout) as {
      orphans: Array<{ kind: string; containerId: string; released: boolean }>;
      runtime: { reachable: boolean; message?: string };
    };
    assert.equal(body.runtime.reachable, false);
    assert.match(body.runtime.message ?? '', /no runtime endpoint given/);
    const mine = body.orphans
      .filter((o) => o.containerId === cid)
      .map((o) => o.kind)
      .sort();
    assert.deepEqual(mine, ['attachment', 'cache', 'lease'], JSON.stringify(body.orphans));
    assert.ok(
      body.orphans.every((o) => !o.released),
      'nothing released',
    );
    assert.deepEqual(h.leases(net), [lease], 'the lease is still held');
    assert.equal((await attachmentsOf(cid))[0].state, 'added');
    const k = await podman!.cmd(['kill', cid]);
    assert.equal(k.code, 0, k.stderr);
    await waitTornDown(h, net, cid);
    await daemon.waitFor('podman to remove the container', async () => !(await podman!.exists(cid)));
  });

  it('a container that exits while stewardd is down has its DEL spooled, and the lease is released when stewardd starts', async () => {
    const h = host!;
    const net = h.bridgeNetwork('spool', '1.0.0', { steward: steward() });
    const cid = await podman!.runDetached(net.name, net.name);
    assert.equal(h.leases(net).length, 1);
    await daemon.stop();
    const k = await podman!.cmd(['kill', cid]);
    assert.equal(k.code, 0, k.stderr);
    await daemon.waitFor('podman to remove the container', async () => !(await podman!.exists(cid)));
    const spooled = () => {
      try {
        return readdirSync(daemon.spoolDir).filter((f) => f.endsWith('.json'));
      } catch {
        return [];
      }
    };
    await daemon.waitFor('the DEL to be spooled', () => spooled().length >= 1);
    assert.equal(h.leases(net).length, 1, 'nothing is released while stewardd is down');
    await daemon.start();
    await waitTornDown(h, net, cid);
    assert.deepEqual(spooled(), [], 'the spool was ingested');
  });
});

describe('per-container time of podman run --rm, with and without steward', { skip }, () => {
  it('measures the median over several runs of each and prints it', async (t) => {
    const h = host!;
    if (daemon.proc === undefined) await daemon.start();
    const runs = Number(process.env.STEWARD_E2E_TIMING_RUNS ?? 7);
    const wrapped = h.bridgeNetwork('time-steward', '1.0.0', { steward: steward() });
    const direct = h.bridgeNetwork('time-direct', '1.0.0');
    const ms: Record<string, number[]> = { steward: [], direct: [] };
    for (let i = 0; i <= runs; i++) {
      for (const [k, net] of [
        ['steward', wrapped],
        ['direct', direct],
      ] as const) {
        const r = await podman!.runRm(net.name, ['/bin/true']);
        assert.equal(r.code, 0, r.stderr);
        if (i > 0) ms[k]!.push(r.ms); // the first of each is a warm-up
      }
    }
    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s[Math.floor(s.length / 2)]!;
    };
    const line = (k: string) =>
      `${k}: median ${median(ms[k]!).toFixed(0)} ms over ${runs} runs (min ${Math.min(...ms[k]!).toFixed(0)}, max ${Math.max(...ms[k]!).toFixed(0)}; shim ${h.shim.kind})`;
    t.diagnostic(line('steward'));
    t.diagnostic(line('direct'));
    process.stderr.write(
      `e2e timing: podman run --rm --network NET --rootfs DIR:O /bin/true\n  ${line('steward')}\n  ${line('direct')}\n`,
    );
    await daemon.waitFor(
      'timing leases released',
      () => h.leases(wrapped).length === 0 && h.leases(direct).length === 0,
    );
  });
});
