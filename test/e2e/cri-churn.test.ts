// Pod churn through Kubernetes' own path, scaled down from the cri-churn soak (bench/rows/cri-churn.ts) to
// a correctness test: 15 pods run through steward on containerd 1.6's CRI plugin (the kubelet-like
// client of test/helpers/cri/), then 60 replacements one at a time (the slot's sandbox stopped and
// removed, a new pod run in its place; every other slot maps a hostPort, so portmap's per-pod chains
// come and go). Every call succeeds, stewardd's and its spawner's open fds do not grow past a small
// slack after the first turn, and once every pod is stopped and removed nothing is left: no lease,
// veth, pod netns, libcni cache file, per-pod iptables chain or rule, containerd shim, pending
// teardown. Not timed (issue 39; docs/runtimes.md).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCriSuite } from '../helpers/cri/suite.js';
import { Churn } from '../helpers/cri/churn.js';
import { iptablesBaseline, podResidue, procUsage, settledResidue, spawnerPid } from '../helpers/cri/residue.js';
import { figure, round } from '../helpers/cri/scenario.js';

const PODS = 15;
const REPLACEMENTS = 60;
/** Open fds may differ by this many between two quiet moments (a connection, a journal handle). */
const FD_SLACK = 5;
const NOTHING = { leases: 0, veths: 0, netns: 0, cacheFiles: 0, cniChains: 0, rules: 0, shims: 0 };

const suite = await startCriSuite('e2e-cri-churn', 'containerd CRI churn end-to-end test');
const { node, kubelet, skip } = suite;

after(() => suite.finish());

describe('pod churn through containerd 1.6 CRI with steward', { skip }, () => {
  it(`${PODS} pods kept alive, ${REPLACEMENTS} replacements one at a time: every call succeeds, fds do not grow, nothing left after`, async () => {
    const n = node!;
    const baseline = iptablesBaseline();
    const daemonPid = n.daemon.proc!.pid!;
    const churn = new Churn(kubelet!, PODS);
    await churn.fill(5);
    assert.deepEqual(churn.failures, [], 'every pod of the first fill runs');

    // One full turn first (every slot replaced once), then the fds as a baseline.
    const ms: number[] = [];
    for (let i = 0; i < PODS; i++) ms.push((await churn.replaceNext()).runMs);
    const live = podResidue(n, churn.everyId, baseline);
    assert.equal(live.leases, PODS, JSON.stringify(live));
    assert.equal(live.veths, PODS, JSON.stringify(live));
    assert.equal(live.netns, PODS, JSON.stringify(live));
    assert.ok(
      live.cniChains >= Math.ceil(PODS / 2),
      `portmap's per-pod chains while the pods run: ${JSON.stringify(live)}`,
    );
    assert.ok(live.rules >= Math.ceil(PODS / 2), `rules naming the sandboxes: ${JSON.stringify(live)}`);
    const spawner0 = spawnerPid(daemonPid);
    const d0 = procUsage(daemonPid)!;
    const s0 = spawner0 === undefined ? undefined : procUsage(spawner0);

    for (let i = PODS; i < REPLACEMENTS; i++) ms.push((await churn.replaceNext()).runMs);
    assert.deepEqual(churn.failures, [], 'every Stop, Remove and RunPodSandbox of the churn succeeds');
    const spawner1 = spawnerPid(daemonPid);
    const d1 = procUsage(daemonPid)!;
    const s1 = spawner1 === undefined ? undefined : procUsage(spawner1);
    assert.ok(d1.fds <= d0.fds + FD_SLACK, `stewardd's fds: ${d0.fds} after the first turn, ${d1.fds} at the end`);
    assert.equal(spawner1, spawner0, 'the spawner is the same process throughout');
    if (s0 && s1)
      assert.ok(s1.fds <= s0.fds + FD_SLACK, `the spawner's fds: ${s0.fds} after the first turn, ${s1.fds} at the end`);

    await churn.drain(5);
    assert.deepEqual(churn.failures, [], 'every pod stops and is removed');
    const { residue } = await settledResidue(n, churn.everyId, baseline, 10_000);
    assert.deepEqual(residue, NOTHING, 'nothing left after the churn');
    const st = await n.daemon.status();
    assert.equal(st.teardownQueue.depth, 0, 'no teardown pending');
    assert.equal(st.attachments.added ?? 0, 0, 'no attachment still added');
    const sorted = [...ms].sort((a, b) => a - b);
    figure(`churn of ${PODS} pods, ${REPLACEMENTS} replacements`, {
      sandboxes: churn.everyId.length,
      runMedianMs: round(sorted[Math.floor(sorted.length / 2)]!),
      fds: `${d0.fds} -> ${d1.fds}`,
      spawnerFds: `${s0?.fds} -> ${s1?.fds}`,
      rssMiB: `${round(d0.rssKiB / 1024)} -> ${round(d1.rssKiB / 1024)}`,
    });
  });
});
