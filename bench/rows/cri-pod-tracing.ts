// The cost of tracing per pod (issue 40; docs/tracing.md): the cri-pod row's pod (RunPodSandbox +
// StopPodSandbox + RemovePodSandbox through containerd 1.6's CRI plugin, the installed shim and
// stewardd) with stewardd exporting its spans to a collector that is down, against stewardd with
// tracing off. One daemon on one state dir, restarted between blocks with the mode's flags (the CRI
// plugin executes whatever conflist is installed, so modes cannot be chosen per pod); the blocks of
// the modes alternate, rotated per round, and each block starts with an untimed pod (the restart's
// cold caches). Every steward pod is paired with a pod through the plain chain (the same bridge +
// portmap, PLAIN_HANDLER) timed right after it, so the machine's drift between blocks cancels:
//   off       no endpoint (the shipped default)
//   offTwin   the same flags again: the floor of what two blocks of one mode differ by here
//   stopped   --otlp-endpoint at a loopback port nothing listens on: the target, <= 1.05x off

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TestEnv } from '../../test/helpers/env.js';
import { CriNode, PLAIN_HANDLER } from '../../test/helpers/cri/node.js';
import { Kubelet } from '../../test/helpers/cri/kubelet.js';
import { RuntimeHost } from '../../test/helpers/runtimes/host.js';
import { baseSkipReason } from '../../test/helpers/runtimes/skip.js';
import { CRI_TOOLS } from '../lib/cri-tools.js';
import type { Scratch } from '../lib/scratch.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, round } from '../lib/stats.js';
import { closedPort } from './tracing.js';

const LIMIT = 1.05;
const PODS_PER_BLOCK = 5;

export async function benchCriPodTracing(scratch: Scratch, ctx: BenchContext): Promise<Row[]> {
  const missing = baseSkipReason([...CRI_TOOLS]);
  if (missing !== undefined || !existsSync('/usr/lib/cni/bridge')) {
    ctx.log(`cri-pod-tracing skipped: ${missing ?? 'no Debian CNI plugins in /usr/lib/cni'}`);
    return [];
  }
  const env = new TestEnv('bench-cri-trace');
  let host: RuntimeHost | undefined;
  try {
    host = await RuntimeHost.create(env);
    const h = host;
    scratch.defer(() => h.finish());
    const node = await CriNode.start(host);
    const k = new Kubelet(node.cri, {
      cgroupParent: node.cgroupParent,
      logRoot: join(env.dir, 'pod-logs'),
      tag: env.tag,
    });
    const flags: Record<string, string[]> = {
      off: [],
      offTwin: [],
      stopped: ['--otlp-endpoint', `http://127.0.0.1:${await closedPort()}`],
    };
    const modes = Object.keys(flags);
    // Per mode: each timed steward pod's wall ms, and the plain pod's right after it.
    const wall: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
    const plain: Record<string, number[]> = Object.fromEntries(modes.map((m) => [m, []]));
    let seq = 0;
    const pod = async (handler: string): Promise<number> => {
      const p = k.pod(`trace-${handler || 'steward'}-${seq++}`);
      const t0 = performance.now();
      const r = await k.runPod(p, { handler });
      if (!r.id) throw new Error(`RunPodSandbox (${handler || 'steward'}): ${r.error?.message}`);
      await k.cri.stopPodSandbox(r.id);
      await k.cri.removePodSandbox(r.id);
      return performance.now() - t0;
    };
    const rounds = n(8, ctx, 2);
    for (let r = 0; r < rounds; r++) {
      for (let j = 0; j < modes.length; j++) {
        const mode = modes[(j + r) % modes.length] as string;
        await node.daemon.stop();
        node.daemon.extraArgs = flags[mode] as string[];
        await node.daemon.start();
        await pod('');
        for (let p = 0; p < PODS_PER_BLOCK; p++) {
          wall[mode]!.push(await pod(''));
          plain[mode]!.push(await pod(PLAIN_HANDLER));
        }
      }
    }
    const leftover = node.leases();
    if (leftover.length > 0) throw new Error(`leases left after the timed pods: ${leftover.join(', ')}`);
    const m = (x: string) => median(wall[x]!);
    // steward ÷ the plain pod timed right after it, per pair: the drift between blocks cancels.
    const rel = (x: string) => median(wall[x]!.map((w, i) => w / (plain[x]![i] as number)));
    const ratio = m('stopped') / m('off');
    const relRatio = rel('stopped') / rel('off');
    const extra: Record<string, number> = {};
    for (const x of modes) {
      extra[`${x}Ms`] = round(m(x));
      extra[`${x}PlainMs`] = round(median(plain[x]!));
      extra[`${x}OverPlain`] = round(rel(x), 3);
    }
    extra.offTwinRatio = round(m('offTwin') / m('off'), 3);
    extra.stoppedOverPlainRatio = round(relRatio, 3);
    ctx.log(`cri-pod-tracing: ${JSON.stringify(extra)}`);
    return [
      {
        id: 'cri-pod-tracing',
        title: "One pod through containerd's CRI: stewardd exporting traces to a stopped collector vs tracing off",
        unit: 'ms',
        candidate: {
          label: 'run + stop + remove sandbox, stewardd --otlp-endpoint (collector down)',
          median: round(m('stopped')),
          n: wall.stopped!.length,
        },
        floor: { label: 'the same pod, stewardd with tracing off', median: round(m('off')), n: wall.off!.length },
        ratio: round(ratio, 3),
        ratioOf: 'median',
        target: `<= ${LIMIT}x (issue 40)`,
        met: ratio <= LIMIT,
        extra,
        notes: [
          `one stewardd restarted with each mode's flags; ${rounds} rounds of one block a mode, rotated; a block is an untimed pod, then ${PODS_PER_BLOCK} steward pods each followed by a pod through the plain chain`,
          'offTwin: a second block of off (the noise floor between blocks); …OverPlain: median of each steward pod over the plain pod timed after it; stoppedOverPlainRatio: stopped over off in that measure',
        ],
      },
    ];
  } finally {
    const residue = host ? await host.finish() : (await env.close(), []);
    if (residue.length > 0) ctx.log(`cri-pod-tracing left residue: ${JSON.stringify(residue)}`);
  }
}
