// A burst of pods through Kubernetes' own path, scaled down from the cri-burst benchmark row
// (bench/rows/cri-burst.ts) to a correctness test: containerd 1.6's CRI plugin, driven by the kubelet-like
// client (test/helpers/cri/), gets 10 RunPodSandbox at once through steward and then 10 at once
// through the plain handler (PLAIN_HANDLER, the same chain without steward); every one succeeds,
// every pod has its own address from the range, and after Stop + Remove of all of them at once
// nothing is left: no lease, no veth on the bridge, no pod netns, no libcni cache file, no per-pod
// iptables chain or rule, no containerd shim. Not timed (issue 39; docs/runtimes.md).
// Throughout the steward burst (up and down), CNI STATUS is run as containerd 2.x runs it (the installed
// conflist at cniVersion 1.1.0, through the installed shim: test/helpers/cri/cni-status.ts) every
// 200 ms: none may read not ready while stewardd stays alive (issue 37). How long STATUS takes under a
// burst is the bench's (cri-burst-status row), not asserted here.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PLAIN_HANDLER } from '../helpers/cri/node.js';
import { startCriSuite } from '../helpers/cri/suite.js';
import { runAtOnce, sandboxAddresses, stopRemoveAtOnce } from '../helpers/cri/burst.js';
import { iptablesBaseline, podResidue, settledResidue } from '../helpers/cri/residue.js';
import { figure, round } from '../helpers/cri/scenario.js';
import { StatusLoop, firstConfFile, networkCondition } from '../helpers/cri/cni-status.js';
import { readFileSync } from 'node:fs';

const PODS = 10;
const STATUS_PERIOD_MS = 200;
const NOTHING = { leases: 0, veths: 0, netns: 0, cacheFiles: 0, cniChains: 0, rules: 0, shims: 0 };

const suite = await startCriSuite('e2e-cri-burst', 'containerd CRI burst end-to-end test');
const { node, kubelet, skip } = suite;

after(() => suite.finish());

describe('a burst of pods through containerd 1.6 CRI, with steward and on the plain chain', { skip }, () => {
  it(`${PODS} RunPodSandbox at once through steward, then ${PODS} through the plain handler: all succeed with distinct addresses; Stop + Remove all at once: nothing left; containerd 2.x's STATUS every ${STATUS_PERIOD_MS} ms never reads not ready during the steward burst`, async () => {
    const n = node!;
    const k = kubelet!;
    const baseline = iptablesBaseline();
    const prefix = n.net.subnet.replace(/0\/24$/, '');
    const statusList = { ...JSON.parse(readFileSync(firstConfFile(n.confDir), 'utf8')), cniVersion: '1.1.0' };
    assert.equal(statusList.plugins[0].type, 'steward', 'STATUS goes through the installed shim');
    for (const kind of ['steward', 'plain'] as const) {
      const pods = Array.from({ length: PODS }, (_, i) => k.pod(`burst-${kind}-${i}`, `ns-${i % 3}`));
      const daemonPid = n.daemon.proc?.pid;
      const status =
        kind === 'steward'
          ? new StatusLoop(STATUS_PERIOD_MS, () => networkCondition(statusList, [n.binDir], 10_000))
          : undefined;
      status?.start();
      // Up, checks while they run, down; the STATUS loop stops however that ends.
      const { up, ids, down } = await (async () => {
        const up = await runAtOnce(k, pods, kind === 'plain' ? PLAIN_HANDLER : '');
        assert.deepEqual(up.failures, [], `${kind}: every RunPodSandbox succeeds`);
        const ids = up.runs.map((r) => r.id!);
        const addrs = await sandboxAddresses(k.cri, ids);
        for (const a of addrs) {
          assert.equal(a.state, 'SANDBOX_READY');
          assert.ok(a.ip.startsWith(prefix), `${kind}: address ${a.ip} not in ${n.net.subnet}`);
        }
        assert.equal(
          new Set(addrs.map((a) => a.ip)).size,
          PODS,
          `${kind}: distinct addresses ${addrs.map((a) => a.ip).join(' ')}`,
        );
        // What the residue counts is there while the pods run (so its zero afterwards means something).
        const live = podResidue(n, ids, baseline);
        assert.equal(live.leases, PODS, JSON.stringify(live));
        assert.equal(live.veths, PODS, JSON.stringify(live));
        assert.equal(live.netns, PODS, JSON.stringify(live));
        assert.ok(live.cacheFiles >= PODS, JSON.stringify(live));
        assert.equal(live.shims, PODS, JSON.stringify(live));
        const atts = (await n.daemon.get('/v1/attachments?state=added')).json as Array<{ containerId: string }>;
        const journaled = ids.filter((id) => atts.some((a) => a.containerId === id)).length;
        assert.equal(journaled, kind === 'steward' ? PODS : 0, `${kind}: pods journaled by stewardd`);
        return { up, ids, down: await stopRemoveAtOnce(k, ids) };
      })().finally(() => status?.stop());
      if (status) {
        assert.ok(
          n.daemon.proc?.pid === daemonPid && n.daemon.proc?.exitCode === null,
          'stewardd stayed the same live process throughout the burst',
        );
        assert.ok(status.ticks.length >= 3, `only ${status.ticks.length} STATUS ticks across the burst`);
        assert.ok(
          status.ticks.every((t) => t.execs === 1),
          'each STATUS executed the installed shim (and only it)',
        );
        assert.deepEqual(
          status.ticks.filter((t) => !t.ready).map((t) => ({ code: t.code, ms: round(t.ms), message: t.message })),
          [],
          'NetworkReady read false during the burst while stewardd was alive',
        );
        figure(`STATUS during the burst of ${PODS}`, {
          ticks: status.ticks.length,
          notReady: 0,
          maxMs: round(Math.max(...status.ticks.map((t) => t.ms))),
        });
      }
      assert.deepEqual(down.failures, [], `${kind}: every Stop + Remove succeeds`);
      const { residue, ms } = await settledResidue(n, ids, baseline, 10_000);
      assert.deepEqual(residue, NOTHING, `${kind}: nothing left after Stop + Remove`);
      if (kind === 'steward') {
        const st = await n.daemon.status();
        assert.equal(st.teardownQueue.depth, 0, 'no teardown pending');
        const still = (
          (await n.daemon.get('/v1/attachments?state=added')).json as Array<{ containerId: string }>
        ).filter((a) => ids.includes(a.containerId));
        assert.deepEqual(still, [], 'no attachment of the burst still added');
      }
      figure(`burst of ${PODS} (${kind})`, {
        lastReadyMs: round(up.lastReadyMs),
        stopRemoveAllMs: round(down.wallMs),
        stopRetries: down.stopRetries,
        residueSettledMs: round(ms),
      });
    }
  });
});
