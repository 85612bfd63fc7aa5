// A burst of pods through Kubernetes' own path, scaled down from the cri-burst benchmark row
// (bench/rows/cri-burst.ts) to a correctness test: containerd 1.6's CRI plugin, driven by the kubelet-like
// client (test/helpers/cri/), gets 10 RunPodSandbox at once through steward and then 10 at once
// through the plain handler (PLAIN_HANDLER, the same chain without steward); every one succeeds,
// every pod has its own address from the range, and after Stop + Remove of all of them at once
// nothing is left: no lease, no veth on the bridge, no pod netns, no libcni cache file, no per-pod
// iptables chain or rule, no containerd shim. Not timed (issue 39; docs/runtimes.md).

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PLAIN_HANDLER } from '../helpers/cri/node.js';
import { startCriSuite } from '../helpers/cri/suite.js';
import { runAtOnce, sandboxAddresses, stopRemoveAtOnce } from '../helpers/cri/burst.js';
import { iptablesBaseline, podResidue, settledResidue } from '../helpers/cri/residue.js';
import { figure, round } from '../helpers/cri/scenario.js';

const PODS = 10;
const NOTHING = { leases: 0, veths: 0, netns: 0, cacheFiles: 0, cniChains: 0, rules: 0, shims: 0 };

const suite = await startCriSuite('e2e-cri-burst', 'containerd CRI burst end-to-end test');
const { node, kubelet, skip } = suite;

after(() => suite.finish());

describe('a burst of pods through containerd 1.6 CRI, with steward and on the plain chain', { skip }, () => {
  it(`${PODS} RunPodSandbox at once through steward, then ${PODS} through the plain handler: all succeed with distinct addresses; Stop + Remove all at once: nothing left`, async () => {
    const n = node!;
    const k = kubelet!;
    const baseline = iptablesBaseline();
    const prefix = n.net.subnet.replace(/0\/24$/, '');
    for (const kind of ['steward', 'plain'] as const) {
      const pods = Array.from({ length: PODS }, (_, i) => k.pod(`burst-${kind}-${i}`, `ns-${i % 3}`));
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

      const down = await stopRemoveAtOnce(k, ids);
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
