// Benchmark: what steward costs one pod on Kubernetes' own path. containerd 1.6's CRI plugin, driven
// by the project's kubelet-like client (test/helpers/cri/), runs RunPodSandbox + StopPodSandbox +
// RemovePodSandbox through the installed shim and stewardd, alternating with the same pod through a
// runtime handler whose conflist is the same chain without steward ("direct"). Per steward pod, the
// daemon's histograms split the cost: each command's answer, each delegate's execution, the
// daemon's own path (requests minus delegates: socket, queue, journal, conversion, response) and
// what lies outside it (shim exec, connect, containerd's side). One `curl --unix-socket` exec per
// round is the floor of any executed client, measured in the same run (issue 23).

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TestEnv } from '../../test/helpers/env.js';
import { CriNode, PLAIN_HANDLER } from '../../test/helpers/cri/node.js';
import { Kubelet } from '../../test/helpers/cri/kubelet.js';
import { RuntimeHost } from '../../test/helpers/runtimes/host.js';
import { baseSkipReason } from '../../test/helpers/runtimes/skip.js';
import { CRI_TOOLS } from '../lib/cri-tools.js';
import { curlExecMs, histogramSums, perPod } from '../../test/helpers/cri/timing.js';
import type { Scratch } from '../lib/scratch.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, round } from '../lib/stats.js';

/** Wall ms of one exec of the installed shim answering VERSION: what each of a pod's CNI calls pays to start it. */
function shimExecMs(shim: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = execFile(shim, [], { env: { CNI_COMMAND: 'VERSION', PATH: '/usr/bin:/bin' } }, (err) =>
      err ? reject(err) : resolve(performance.now() - t0),
    );
    child.stdin?.end('{"cniVersion":"1.0.0","name":"x","type":"steward"}');
  });
}

/** The bounds: steward's cost per pod in ms, and as a multiple of one curl exec. */
/** Issue 29: steward − direct per pod, paired median (issue 23 asked 15 ms). */
const COST_LIMIT_MS = 10;
const CURL_LIMIT = 1.5;

export async function benchCriPod(scratch: Scratch, ctx: BenchContext): Promise<Row[]> {
  const missing = baseSkipReason([...CRI_TOOLS, 'curl']);
  if (missing !== undefined || !existsSync('/usr/lib/cni/bridge')) {
    ctx.log(`cri-pod skipped: ${missing ?? 'no Debian CNI plugins in /usr/lib/cni'}`);
    return [];
  }
  // The CRI driver's own environment: it removes every pod, netns, rule, image and process it made.
  const env = new TestEnv('bench-cri');
  let host: RuntimeHost | undefined;
  try {
    host = await RuntimeHost.create(env);
    // On Ctrl-C run.ts closes the scratch: the node (pods, containerd, stewardd, netns, rules) goes with it.
    const h = host;
    scratch.defer(() => h.finish());
    const node = await CriNode.start(host);
    const k = new Kubelet(node.cri, {
      cgroupParent: node.cgroupParent,
      logRoot: join(env.dir, 'pod-logs'),
      tag: env.tag,
    });
    const pods = n(30, ctx, 3);
    const t = { steward: [] as number[], direct: [] as number[], curl: [] as number[], shim: [] as number[] };
    const shim = join(node.binDir, 'steward');
    let sums0 = histogramSums('');
    for (let i = -2; i < pods; i++) {
      // After two warm-up rounds the daemon's histograms cover exactly the timed steward pods.
      if (i === 0) sums0 = histogramSums((await node.daemon.get('/metrics')).text);
      const curlMs = await curlExecMs(node.daemon.socket);
      const shimMs = await shimExecMs(shim);
      if (i >= 0) {
        t.curl.push(curlMs);
        t.shim.push(shimMs);
      }
      for (const kind of ['steward', 'direct'] as const) {
        const pod = k.pod(`bench-${kind}-${i + 2}`);
        const t0 = performance.now();
        const r = await k.runPod(pod, { handler: kind === 'direct' ? PLAIN_HANDLER : '' });
        if (!r.id) throw new Error(`RunPodSandbox (${kind}): ${r.error?.message}`);
        await k.cri.stopPodSandbox(r.id);
        await k.cri.removePodSandbox(r.id);
        if (i >= 0) t[kind].push(performance.now() - t0);
      }
    }
    const breakdown = perPod(sums0, histogramSums((await node.daemon.get('/metrics')).text), pods);
    const leftover = node.leases();
    if (leftover.length > 0) throw new Error(`leases left after the timed pods: ${leftover.join(', ')}`);

    const s = median(t.steward);
    const d = median(t.direct);
    const c = median(t.curl);
    const paired = median(t.steward.map((x, j) => x - (t.direct[j] as number)));
    const overCurl = paired / c;
    ctx.log(
      `cri-pod: steward ${round(s)} ms, direct ${round(d)} ms, paired cost ${round(paired)} ms, curl exec ${round(c)} ms`,
    );
    return [
      {
        id: 'cri-pod',
        title: "One pod through containerd's CRI (run + stop + remove sandbox) with steward vs the same chain direct",
        unit: 'ms',
        candidate: {
          label: 'RunPodSandbox + StopPodSandbox + RemovePodSandbox, conflist from stewardd install (shim + stewardd)',
          median: round(s),
          n: t.steward.length,
        },
        floor: {
          label: 'the same pod through a runtime handler whose conflist is the same bridge + portmap chain',
          median: round(d),
          n: t.direct.length,
        },
        ratio: round(s / d),
        ratioOf: 'median',
        target: `steward − direct <= ${COST_LIMIT_MS} ms (paired median), and <= ${CURL_LIMIT}x one curl --unix-socket exec`,
        met: paired <= COST_LIMIT_MS && overCurl <= CURL_LIMIT,
        extra: {
          pairedCostMs: round(paired),
          curlExecMs: round(c),
          shimExecMs: round(median(t.shim)),
          costOverCurl: round(overCurl),
          ...breakdown,
          outsideDaemonMs: round(paired - (breakdown.daemonOwnMs ?? 0)),
        },
        notes: [
          `alternating rounds after 2 warm-ups: one curl exec against stewardd's /readyz, one exec of the installed shim answering VERSION (shimExecMs: what each CNI call of a pod pays to start the shim, no socket), one pod through steward, one direct; cost = median of per-round differences`,
          `per steward pod from stewardd's histograms: daemon<CMD>Ms its answer to each command, exec_<plugin>_<CMD>Ms each delegate run, daemonOwnMs the requests minus the delegates (socket, queue, journal, conversion, response); outsideDaemonMs = cost − daemonOwnMs (shim exec, connect, containerd's side)`,
        ],
      },
    ];
  } finally {
    const residue = host ? await host.finish() : (await env.close(), []);
    if (residue.length > 0) ctx.log(`cri-pod left residue: ${JSON.stringify(residue)}`);
  }
}
