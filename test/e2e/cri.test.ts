// Kubernetes' own call path: containerd 1.6's CRI plugin, driven over its gRPC socket by a
// kubelet-like client (test/helpers/cri/), calling CNI through go-cni/libcni with the conflist that
// `stewardd install` wrote into the CRI plugin's own conf dir and the installed dist/steward shim.
// The scenarios run in order on one node (test/helpers/cri/node.ts); each prints its figures.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv } from '../helpers/env.js';
import { RuntimeHost, baseSkipReason, skipOrFail } from '../helpers/runtimes.js';
import { CriNode } from '../helpers/cri/node.js';
import { Kubelet } from '../helpers/cri/kubelet.js';
import { join } from 'node:path';

const env = new TestEnv('e2e-cri');
let host: RuntimeHost | undefined;
let node: CriNode | undefined;
let kubelet: Kubelet | undefined;
let reason = baseSkipReason(['containerd', 'ctr', 'containerd-shim-runc-v2', 'runc', 'gcc', 'tar', 'ip', 'iptables']);
try {
  if (reason === undefined) {
    host = await RuntimeHost.create(env);
    node = await CriNode.start(host).catch((e: Error) => {
      if (process.env.STEWARD_E2E_REQUIRE === '1') throw e;
      reason = `containerd's CRI plugin does not run pods here: ${e.message}`;
      return undefined;
    });
    if (node) kubelet = new Kubelet(node.cri, { cgroupParent: node.cgroupParent, logRoot: join(env.dir, 'pod-logs'), tag: env.tag });
  }
} catch (e) {
  await (host ? host.finish() : env.close());
  throw e;
}
const skip = skipOrFail('containerd CRI end-to-end suite', reason);

function figure(what: string, values: Record<string, unknown>): void {
  process.stdout.write(`# cri figure: ${what}: ${JSON.stringify(values)}\n`);
}

after(async () => {
  if (!host) return env.close();
  assert.deepEqual(await host.finish(), [], 'the suite left the machine as it found it');
});

describe('containerd 1.6 CRI plugin with steward installed', { skip }, () => {
  it('Version and Status: the CRI plugin runs and reports NetworkReady from 00-steward.conflist', async () => {
    const v = await node!.cri.version();
    figure('version', v);
    const s = await node!.cri.status(true);
    figure('status', { conditions: s.conditions });
    const pod = kubelet!.pod('spike');
    const r = await kubelet!.runPod(pod);
    figure('run', { id: r.id, err: r.error?.message, ms: r.ms });
    if (r.id) figure('status', await node!.cri.podSandboxStatus(r.id));
    const k = await kubelet!.killPod(pod);
    figure('kill', k);
  });
});
