// Kubernetes' own call path: containerd 1.6's CRI plugin, driven over its gRPC socket by a
// kubelet-like client (test/helpers/cri/), calling CNI through go-cni/libcni with the conflist that
// `stewardd install` wrote into the CRI plugin's own conf dir and the installed dist/steward shim,
// stewardd running with --cni-conf-dir as on a node. One node (test/helpers/cri/node.ts) serves
// the scenarios, which run in order (the last ones uninstall steward); each prints its figures as
// "# cri figure: <scenario>: {json}". Issue 11; docs/runtimes.md, "Kubernetes' path: containerd's CRI plugin".
// Over 300 lines on purpose: the scenarios share one node (containerd, pause image, install), set up
// once, and run in order (the last ones uninstall steward), so they stay in one file; the helpers
// they share are test/helpers/cri/scenario.ts.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixtureCalls } from '../helpers/env.js';
import { PLAIN_HANDLER } from '../helpers/cri/node.js';
import { startCriSuite } from '../helpers/cri/suite.js';
import { median, type Pod, type RunOutcome } from '../helpers/cri/kubelet.js';
import {
  figure,
  journaledCniArgs,
  natRulesNow,
  parseCniArgs,
  plainChainLoaded,
  round,
  runOnReloadedPlainHandler,
  sleep,
  within,
} from '../helpers/cri/scenario.js';
import { curlExecMs, histogramSums, perPod } from '../helpers/cri/timing.js';

const suite = await startCriSuite('e2e-cri', 'containerd CRI end-to-end suite');
const { env, node, skip } = suite;
let kubelet = suite.kubelet;
const TIMING_RUNS = Math.max(1, Number(process.env.STEWARD_E2E_TIMING_RUNS ?? 7));
const CNI_CACHE = '/var/lib/cni/results';

async function attachments(query = ''): Promise<any[]> {
  const r = await node!.daemon.get(`/v1/attachments${query}`);
  assert.equal(r.status, 200, r.text);
  return r.json as any[];
}

async function status(): Promise<any> {
  return node!.daemon.status();
}

/** Pod: RunPodSandbox, then the sync loop's kill (stop with retries, remove); returns the figures. */
async function runAndKill(pod: Pod, attempt: number, maxStops = kubelet!.stopMaxAttempts) {
  const run = await kubelet!.runPod(pod, { attempt });
  const kill = await kubelet!.killPod(pod, maxStops);
  return { run, kill };
}

after(async () => {
  kubelet = undefined;
  await suite.finish();
});

describe('containerd 1.6 CRI plugin (kubelet-like driver) with steward installed', { skip }, () => {
  it('the CRI plugin reports NetworkReady from 00-steward.conflist, the one stewardd install wrote', async () => {
    const n = node!;
    const v = await n.cri.version();
    const l = await n.loaded();
    figure('runtime', {
      runtime: `${v.runtimeName} ${v.runtimeVersion}`,
      criApi: v.runtimeApiVersion,
      loaded: l.name,
      steward: l.steward,
    });
    assert.equal(v.runtimeApiVersion, 'v1');
    assert.ok(l.ready && l.steward && l.name === 'steward', `loaded ${JSON.stringify(l)}`);
    assert.deepEqual(
      l.plugins.map((p) => p.type),
      ['bridge', 'portmap'],
    );
    assert.ok(existsSync(join(n.binDir, 'steward')), 'stewardd install copied the shim into the CRI bin_dir');
  });

  it("stewardd install --cni-version auto asks this containerd 1.6 what it is and keeps the primary's version (it never calls STATUS)", async () => {
    const n = node!;
    const primary = JSON.parse(readFileSync(n.net.file, 'utf8')) as {
      cniVersion: string;
    };
    const inst = await n.stewardd(['install', '--runtime-endpoint', n.runtimeEndpoint]);
    assert.equal(inst.code, 0, inst.stderr);
    const written = JSON.parse(readFileSync(join(n.confDir, '00-steward.conflist'), 'utf8')) as { cniVersion: string };
    figure('conflist version under containerd 1.6', { primary: primary.cniVersion, written: written.cniVersion });
    assert.equal(written.cniVersion, primary.cniVersion);
    assert.match(
      inst.stdout,
      /STATUS: not asked by this runtime \(conflist [0-9.]+, containerd v?1\.6\.[^;]*; --cni-version auto: containerd v?1\.6\.\S* does not ask STATUS\)/,
    );
  });

  it("10 pods in parallel: 10 distinct addresses, each attachment carries its pod's namespace and name; after stop + remove no lease, no attachment left added", async () => {
    const n = node!;
    const k = kubelet!;
    const pods = Array.from({ length: 10 }, (_, i) => k.pod(`par-${i}`, `ns-${i % 3}`));
    const t0 = performance.now();
    const runs = await Promise.all(pods.map((p) => k.runPod(p)));
    const runAll = performance.now() - t0;
    for (const r of runs) assert.ok(r.id, `RunPodSandbox ${r.pod.name}: ${r.error?.message}`);
    const ids = runs.map((r) => r.id!);
    const ips: string[] = [];
    for (const id of ids) {
      const st = await n.cri.podSandboxStatus(id);
      assert.equal(st.state, 'SANDBOX_READY');
      ips.push(st.network?.ip ?? '');
    }
    assert.equal(new Set(ips).size, 10, `distinct addresses: ${ips.join(' ')}`);
    for (const ip of ips) assert.ok(ip.startsWith(n.net.subnet.replace(/0\/24$/, '')), `${ip} not in ${n.net.subnet}`);
    assert.equal(n.leases().length, 10);

    // The attachment of each sandbox: pod namespace/name/uid from the API (podNamespace, podName,
    // podUid, taken from CNI_ARGS by stewardd), and the journaled CNI_ARGS themselves.
    const args = journaledCniArgs(node!, ids);
    for (const [i, id] of ids.entries()) {
      const [att] = await attachments(`?containerId=${id}`);
      assert.ok(att, `no attachment for sandbox ${id}`);
      assert.equal(att.state, 'added');
      assert.equal(att.ifname, 'eth0');
      assert.deepEqual(
        [att.podNamespace, att.podName, att.podUid],
        [pods[i]!.namespace, pods[i]!.name, pods[i]!.uid],
        `attachment ${id}`,
      );
      const [byPod] = await attachments(`?pod=${pods[i]!.namespace}/${pods[i]!.name}`);
      assert.equal(byPod?.containerId, id, "GET /v1/attachments?pod=NS/NAME finds the pod's attachment");
      const cniArgs = parseCniArgs(args.get(id) ?? '');
      assert.equal(cniArgs.K8S_POD_NAMESPACE, pods[i]!.namespace, `CNI_ARGS ${args.get(id)}`);
      assert.equal(cniArgs.K8S_POD_NAME, pods[i]!.name);
      assert.equal(cniArgs.K8S_POD_INFRA_CONTAINER_ID, id);
      assert.equal(cniArgs.IgnoreUnknown, '1');
      assert.equal(cniArgs.K8S_POD_UID, pods[i]!.uid);
      assert.ok(existsSync(join(CNI_CACHE, `steward-${id}-eth0`)), 'libcni cached the ADD result');
    }
    const sample = args.get(ids[0]!) ?? '';

    const t1 = performance.now();
    const kills = await Promise.all(pods.map((p) => k.killPod(p)));
    const killAll = performance.now() - t1;
    for (const kill of kills) {
      assert.equal(kill.sandboxes, 1);
      assert.equal(kill.removed, 1);
      assert.equal(kill.stops[0]!.attempts, 1, `StopPodSandbox: ${kill.stops[0]!.lastError}`);
    }
    assert.deepEqual(n.leases(), [], 'no lease left');
    for (const id of ids) {
      const [att] = await attachments(`?containerId=${id}`);
      assert.equal(att.state, 'deleted', `attachment of ${id}`);
      assert.ok(!existsSync(join(CNI_CACHE, `steward-${id}-eth0`)), 'libcni removed its cached result after DEL');
    }
    assert.equal((await attachments('?state=added')).length, 0);
    figure('10 parallel pods', {
      runAllMs: round(runAll),
      runMedianMs: round(median(runs.map((r) => r.ms))),
      killAllMs: round(killAll),
      distinctIps: new Set(ips).size,
      leasesAfter: n.leases().length,
      cniArgsSample: sample,
    });
  });

  it("a pod with a hostPort: portmap's DNAT rule exists while it runs and is gone after stop", async () => {
    const n = node!;
    const k = kubelet!;
    const hostPort = 20000 + (process.pid % 20000);
    const pod = k.pod('hostport');
    const r = await k.runPod(pod, { portMappings: [{ protocol: 'TCP', containerPort: 8080, hostPort }] });
    assert.ok(r.id, r.error?.message);
    const ip = (await n.cri.podSandboxStatus(r.id!)).network?.ip;
    const dnat = () => natRulesNow().filter((l) => l.includes(`--dport ${hostPort}`) && l.includes('DNAT'));
    const running = dnat();
    assert.ok(
      running.some((l) => l.includes(`--to-destination ${ip}:8080`)),
      `no DNAT to ${ip}:8080 for host port ${hostPort}: ${running.join(' | ')}`,
    );
    const kill = await k.killPod(pod);
    assert.equal(kill.stops[0]?.attempts, 1);
    const after = dnat();
    assert.deepEqual(after, [], 'the DNAT rule is gone after StopPodSandbox');
    assert.equal(natRulesNow().filter((l) => l.includes(r.id!.slice(0, 12))).length, 0);
    assert.deepEqual(n.leases(), []);
    figure('hostPort', { hostPort, pod: ip, dnatRulesWhileRunning: running.length, dnatRulesAfterStop: after.length });
  });

  it('seed 002 shape: a chained plugin failing ADD always and DEL twice: 5 RunPodSandbox attempts, each followed by stop/remove; no lease left within 60 s', async () => {
    const n = node!;
    const k = kubelet!;
    const stateDir = join(env.dir, 'fixture-002');
    await n.setChain([{ type: 'steward-fixture', stateDir, failAdd: true, failDelTimes: 2 }]);
    const pod = k.pod('seed-002');
    const attempts: Array<{ runMs: number; sandboxes: number; stopAttempts: number[] }> = [];
    for (let a = 0; a < 5; a++) {
      const { run, kill } = await runAndKill(pod, a);
      assert.ok(run.error, 'RunPodSandbox fails: the chained plugin fails ADD');
      assert.match(run.error!.details, /ADD failed on cue/);
      assert.ok(
        kill.stops.every((s) => s.ok),
        `StopPodSandbox failed: ${JSON.stringify(kill.stops)}`,
      );
      attempts.push({
        runMs: round(run.ms),
        sandboxes: kill.sandboxes,
        stopAttempts: kill.stops.map((s) => s.attempts),
      });
    }
    // stewardd answered containerd's one DEL with success, so containerd kept no NotReady sandbox to stop.
    assert.ok(
      attempts.every((a) => a.sandboxes === 0),
      'no sandbox left after a failed RunPodSandbox',
    );
    const leasesRightAfter = n.leases().length;
    const ms = await within('no lease left after 5 failed RunPodSandbox', 60_000, () => n.leases().length === 0);
    await within('no teardown pending', 60_000, async () => (await status()).teardownQueue.depth === 0);
    const fixtureDels = fixtureCalls(stateDir, 'DEL').length;
    figure('seed 002 shape', {
      attempts,
      leasesRightAfterLastAttempt: leasesRightAfter,
      msToZeroLeases: round(ms),
      leasesAfter: n.leases().length,
      fixtureAdds: fixtureCalls(stateDir, 'ADD').length,
      fixtureDels,
    });
    assert.equal(fixtureCalls(stateDir, 'ADD').length, 5);
  });

  it('seed 000 shape: a chained plugin failing ADD and failing DEL for containers it never set up: StopPodSandbox succeeds at its first attempt, the lease is released within 30 s', async () => {
    const n = node!;
    const k = kubelet!;
    const stateDir = join(env.dir, 'fixture-000');
    await n.setChain([{ type: 'steward-fixture', stateDir, failAdd: true, requireAddSuccessForDel: true }]);
    const pod = k.pod('seed-000');
    const t0 = performance.now();
    const run = await k.runPod(pod);
    assert.ok(run.error, 'RunPodSandbox fails');
    assert.match(run.error!.details, /ADD failed on cue/);
    // The sync loop: the pod's sandboxes as listed (containerd dropped the failed one: its DEL
    // succeeded), plus the one the ADD ran for, stopped by id as the kubelet does on pod deletion.
    const listed = await k.sandboxesOf(pod);
    assert.equal(listed.length, 0, 'containerd kept no sandbox: stewardd answered its DEL');
    const sandboxId = fixtureCalls(stateDir, 'ADD')[0]!.split(' ')[1]!;
    const stop = await k.stopSandbox(sandboxId);
    assert.ok(stop.ok && stop.attempts === 1, `StopPodSandbox at its first attempt: ${JSON.stringify(stop)}`);
    const kill = await k.killPod(pod);
    for (const s of kill.stops) assert.equal(s.attempts, 1, `StopPodSandbox at its first attempt: ${s.lastError}`);
    await within('the bridge/host-local lease released', 30_000, () => n.leases().length === 0);
    const released = performance.now() - t0;
    // The fixture's DEL fails with code 7 (permanent) forever: stewardd gives that step up, loudly.
    const abandoned = await within(
      'the failing step abandoned, no teardown pending',
      60_000,
      async () => (await status()).teardownQueue.depth === 0,
    );
    const [att] = await attachments(`?containerId=${sandboxId}`);
    assert.equal(att.state, 'deleted');
    figure('seed 000 shape (steward)', {
      runMs: round(run.ms),
      sandboxesListed: listed.length,
      stopAttempts: stop.attempts,
      stopAnswer: stop.notFound ? 'NotFound (already removed)' : 'OK',
      msToLeaseReleased: round(released),
      msToFailingStepAbandoned: round(released + abandoned),
      steps: att.steps.map((s: any) => `${s.plugin}:${s.state}:${s.attempts}`),
      fixtureDels: fixtureCalls(stateDir, 'DEL').length,
    });
  });

  it(
    'seed 000 shape, the plain chain alongside (runtime handler ' +
      PLAIN_HANDLER +
      ', no steward): StopPodSandbox never succeeds and the lease stays held',
    async () => {
      const n = node!;
      const k = kubelet!;
      const stateDir = join(env.dir, 'fixture-000-plain');
      n.writePlain([{ type: 'steward-fixture', stateDir, failAdd: true, requireAddSuccessForDel: true }]);
      const pod = k.pod('seed-000-plain');
      const run = await runOnReloadedPlainHandler(k, pod);
      assert.ok(run.error, 'RunPodSandbox fails');
      assert.match(run.error!.details, /ADD failed on cue/);
      const leasesAfterRun = n.leases().length;
      const kill = await k.killPod(pod, 6);
      const leasesAfterStops = n.leases().length;
      figure('seed 000 shape (plain chain)', {
        runMs: round(run.ms),
        sandboxesListed: kill.sandboxes,
        stops: kill.stops.map((s) => ({ ok: s.ok, attempts: s.attempts, ms: round(s.ms) })),
        lastError: kill.stops[0]?.lastError,
        leasesAfterRun,
        leasesAfterStops,
        fixtureDels: fixtureCalls(stateDir, 'DEL').length,
      });
      assert.equal(kill.sandboxes, 1, 'containerd keeps the sandbox whose network teardown failed');
      assert.ok(
        kill.stops.every((s) => !s.ok),
        'StopPodSandbox never succeeds',
      );
      assert.equal(leasesAfterStops, 1, 'the bridge/host-local lease stays held');
      // Cleanup the way an operator would: the failing plugin leaves the chain; the sync loop's next stops succeed.
      n.writePlain([]);
      const fixed = await k.killPod(pod, 30);
      assert.ok(fixed.stops.length === 1 && fixed.stops.every((s) => s.ok), JSON.stringify(fixed.stops));
      assert.deepEqual(n.leases(), []);
    },
  );

  it(
    'seed 002 shape without steward (handler ' +
      PLAIN_HANDLER +
      "): containerd 1.6.20 keeps the sandbox and the sync loop's StopPodSandbox retries release the lease",
    async () => {
      // The version difference behind seed 002: 1.6.37+, 1.7.23+ and 2.x drop the failed DEL after a
      // failed ADD and keep no sandbox, so nothing retries it and the lease leaks (docs/runtimes.md).
      const n = node!;
      const k = kubelet!;
      const stateDir = join(env.dir, 'fixture-002-plain');
      n.writePlain([{ type: 'steward-fixture', stateDir, failAdd: true, failDelTimes: 2 }]);
      const pod = k.pod('seed-002-plain');
      const run = await runOnReloadedPlainHandler(k, pod);
      assert.ok(run.error, 'RunPodSandbox fails');
      const leasesAfterRun = n.leases().length;
      const kill = await k.killPod(pod);
      figure('seed 002 shape (plain chain, containerd 1.6.20)', {
        sandboxesListed: kill.sandboxes,
        stops: kill.stops.map((s) => ({ ok: s.ok, attempts: s.attempts, ms: round(s.ms) })),
        leasesAfterRun,
        leasesAfterStops: n.leases().length,
        fixtureDels: fixtureCalls(stateDir, 'DEL').length,
      });
      assert.equal(leasesAfterRun, 1, 'the failed RunPodSandbox left its lease held');
      assert.equal(kill.sandboxes, 1, 'containerd 1.6.20 keeps the sandbox whose network teardown failed');
      assert.ok(
        kill.stops[0]!.ok && kill.stops[0]!.attempts >= 2,
        `released by a retried StopPodSandbox: ${JSON.stringify(kill.stops)}`,
      );
      assert.deepEqual(n.leases(), []);
      n.writePlain([]);
      await plainChainLoaded(k);
    },
  );

  it('stewardd killed -9 during a burst of 5 RunPodSandbox: after restart, no lease left and every attachment accounted for', async () => {
    const n = node!;
    const k = kubelet!;
    const stateDir = join(env.dir, 'fixture-kill');
    await n.setChain([{ type: 'steward-fixture', stateDir, sleepAddMs: 700 }]);
    const before = new Set((await attachments()).map((a) => a.id));
    const pods = Array.from({ length: 5 }, (_, i) => k.pod(`burst-${i}`));
    // Staggered by 400 ms; the kill comes when the third ADD reached the chain's last step (bridge
    // has run, the fixture sleeps 700 ms): typically one pod is up, two are mid-ADD, two not yet sent.
    const runsP = Promise.all(
      pods.map(async (p, i) => {
        await sleep(400 * i);
        return k.runPod(p);
      }),
    );
    await within('three ADDs in flight', 60_000, () => fixtureCalls(stateDir, 'ADD').length >= 3);
    await n.daemon.kill9();
    const killedAt = performance.now();
    const runs: RunOutcome[] = await runsP;
    await sleep(500);
    await n.daemon.start();
    const restartMs = performance.now() - killedAt;
    const kills = [];
    for (const p of pods) kills.push(await k.killPod(p));
    const ms = await within('no lease left after the restart', 60_000, () => n.leases().length === 0);
    await within('no teardown pending', 60_000, async () => (await status()).teardownQueue.depth === 0);
    const burst = (await attachments()).filter((a) => !before.has(a.id));
    const okIds = runs.filter((r) => r.id).map((r) => r.id!);
    for (const id of okIds)
      assert.ok(
        burst.some((a) => a.containerId === id),
        `sandbox ${id} ran but has no attachment`,
      );
    const reached = new Set(fixtureCalls(stateDir, 'ADD').map((l) => l.split(' ')[1]!));
    for (const id of reached)
      assert.ok(
        burst.some((a) => a.containerId === id),
        `the chain ran ADD for ${id} but stewardd has no attachment`,
      );
    const byState: Record<string, number> = {};
    for (const a of burst) byState[a.state] = (byState[a.state] ?? 0) + 1;
    assert.deepEqual(
      burst.filter((a) => a.state !== 'deleted').map((a) => `${a.containerId.slice(0, 12)}:${a.state}`),
      [],
      'every attachment of the burst is torn down',
    );
    for (const kill of kills)
      assert.ok(
        kill.stops.every((s) => s.ok),
        JSON.stringify(kill.stops),
      );
    figure('kill -9 during a burst of 5', {
      runsOk: okIds.length,
      runsFailed: runs.length - okIds.length,
      restartMs: round(restartMs),
      msToZeroLeases: round(ms),
      attachments: burst.length,
      byState,
      fixtureAddsSeen: fixtureCalls(stateDir, 'ADD').length,
      sandboxesLeftAfterKill: kills.reduce((s, x) => s + x.sandboxes, 0),
    });
    await n.setChain([]);
  });

  it(`per-pod time through CRI with and without steward, alternating: RunPodSandbox + StopPodSandbox + RemovePodSandbox, ${TIMING_RUNS} runs each`, async () => {
    const n = node!;
    const k = kubelet!;
    const t: Record<'steward' | 'plain' | 'curl', number[]> = { steward: [], plain: [], curl: [] };
    let sums0 = histogramSums('');
    for (let i = -1; i < TIMING_RUNS; i++) {
      // After the warm-up: the daemon's histograms from here on cover exactly the timed steward pods.
      if (i === 0) sums0 = histogramSums((await n.daemon.get('/metrics')).text);
      // The floor of any executed client, in the same run: one curl --unix-socket process per round.
      const curlMs = await curlExecMs(n.daemon.socket);
      if (i >= 0) t.curl.push(curlMs);
      for (const kind of ['steward', 'plain'] as const) {
        const pod = k.pod(`timed-${kind}-${i + 1}`);
        const t0 = performance.now();
        const r = await k.runPod(pod, { handler: kind === 'plain' ? PLAIN_HANDLER : '' });
        assert.ok(r.id, r.error?.message);
        await k.cri.stopPodSandbox(r.id!);
        await k.cri.removePodSandbox(r.id!);
        const ms = performance.now() - t0;
        if (i >= 0) t[kind].push(ms); // the first of each is a warm-up, not counted
        const atts = await attachments(`?containerId=${r.id}`);
        assert.equal(
          atts.length,
          kind === 'steward' ? 1 : 0,
          `${kind} pod ${r.id}: ${atts.length} attachments in stewardd`,
        );
      }
    }
    const breakdown = perPod(sums0, histogramSums((await n.daemon.get('/metrics')).text), TIMING_RUNS);
    assert.deepEqual(n.leases(), []);
    const s = median(t.steward);
    const p = median(t.plain);
    const c = median(t.curl);
    const paired = median(t.steward.map((x, j) => x - (t.plain[j] as number)));
    figure('per-pod time', {
      runs: TIMING_RUNS,
      stewardMedianMs: round(s),
      plainMedianMs: round(p),
      costMs: round(s - p),
      pairedCostMs: round(paired),
      curlExecMedianMs: round(c),
      costOverCurl: Math.round(((s - p) / c) * 100) / 100,
      // Per steward pod (means from stewardd's histograms): the daemon's answer to each command, each
      // delegate execution, the daemon's own path (requests minus delegates), and the rest of the cost
      // outside the daemon (shim exec, connect, containerd's side): cost minus the daemon's own path.
      ...breakdown,
      outsideDaemonMs: round(s - p - (breakdown.daemonOwnMs ?? 0)),
      stewardMinMs: round(Math.min(...t.steward)),
      plainMinMs: round(Math.min(...t.plain)),
      steward: t.steward.map(round),
      plain: t.plain.map(round),
    });
  });

  it('seed 001 shape: stewardd stopped and `stewardd uninstall`: the CRI plugin loads the primary again and a new pod gets an address', async () => {
    const n = node!;
    const k = kubelet!;
    const old = k.pod('before-uninstall');
    const r1 = await k.runPod(old);
    assert.ok(r1.id, r1.error?.message);
    assert.equal(await n.daemon.stop(), 0, 'stewardd exits 0 on SIGTERM');
    const un = await n.stewardd(['uninstall']);
    assert.equal(un.code, 0, `stewardd uninstall: ${un.stderr}`);
    assert.ok(
      !existsSync(join(n.confDir, '00-steward.conflist')) && !existsSync(join(n.binDir, 'steward')),
      'uninstall removed what install added',
    );
    const t0 = performance.now();
    await n.waitForNetwork((l) => !l.steward && l.name === n.net.name);
    const reloadMs = performance.now() - t0;
    const fresh = k.pod('after-uninstall');
    const r2 = await k.runPod(fresh);
    assert.ok(r2.id, `a new pod after uninstall: ${r2.error?.message}`);
    const ip = (await n.cri.podSandboxStatus(r2.id!)).network?.ip ?? '';
    assert.ok(ip.startsWith(n.net.subnet.replace(/0\/24$/, '')), `address ${ip} from ${n.net.subnet}`);
    // The pod started through steward is torn down by the primary itself now (same container id, same lease).
    const kOld = await k.killPod(old);
    const kNew = await k.killPod(fresh);
    assert.equal(kOld.stops[0]?.attempts, 1);
    assert.equal(kNew.stops[0]?.attempts, 1);
    assert.deepEqual(n.leases(), []);
    figure('seed 001 shape', {
      reloadMs: round(reloadMs),
      newPodIp: ip,
      uninstall: un.stdout.trim().split('\n').slice(-3).join(' | '),
    });
  });
});
