// Benchmark: a burst of pods through containerd's CRI, as the kubelet sends one when many pods land
// on a node at once (issue 39, item 1). containerd 1.6's CRI plugin, driven by the project's
// kubelet-like client (test/helpers/cri/, as bench/cri-pod.ts), gets 100 RunPodSandbox at once
// through steward (the conflist `stewardd install` wrote), then the same 100 through the runtime
// handler PLAIN_HANDLER whose conflist is the same bridge + portmap chain without steward, the order
// alternating per round; each burst's pods are then stopped and removed at once (timed too), and
// what they left is counted (leases, veths on the bridge, pod netns, libcni cache files, per-pod
// iptables chains and rules, containerd shims: all must be 0). Per steward pod, stewardd's
// histograms split the ADD and DEL into its answers, the delegates' runs, the journal's commits and
// the per-container queue wait; /v1/status is polled for the plugin slots in use and queued (the
// wait for one of --max-parallel slots has no histogram of its own: it is in the answer minus the
// delegates). Target (issue 39): steward's per-pod p99 of RunPodSandbox and its time until the last
// pod is ready <= 1.10x the plain chain's, no failure, nothing left.
//
// CRI_BURST_PODS (default 100 × --scale, at least 10), CRI_BURST_ROUNDS (default 3 × --scale, at
// least 1) and CRI_BURST_MAX_PARALLEL (stewardd's --max-parallel; default: stewardd's own, 8).

import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { TestEnv } from '../test/helpers/env.js';
import { CriNode, PLAIN_HANDLER } from '../test/helpers/cri/node.js';
import { Kubelet } from '../test/helpers/cri/kubelet.js';
import { runAtOnce, sandboxAddresses, stopRemoveAtOnce } from '../test/helpers/cri/burst.js';
import {
  iptablesBaseline,
  residueTotal,
  settledResidue,
  spawnerPid,
  type PodResidue,
} from '../test/helpers/cri/residue.js';
import { histogramSums, perPod, type Sums } from '../test/helpers/cri/timing.js';
import { RuntimeHost } from '../test/helpers/runtimes/host.js';
import { baseSkipReason } from '../test/helpers/runtimes/skip.js';
import type { Scratch } from './lib/scratch.js';
import { n, type BenchContext, type Row } from './lib/report.js';
import { mean, median, p99, quantile, round } from './lib/stats.js';

const LIMIT = 1.1;
const WARMUP_PODS = 10;

type Kind = 'steward' | 'plain';

function envInt(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  const x = Number(v);
  if (!Number.isInteger(x) || x < 1) throw new Error(`${name} must be a positive integer, got ${v}`);
  return x;
}

/** Adds after − before of every histogram sum/count into `total`. */
function accumulate(total: Sums, before: Sums, after: Sums): void {
  for (const [k, v] of after) total.set(k, (total.get(k) ?? 0) + v - (before.get(k) ?? 0));
}

/** CPU jiffies (user+nice+system+irq+softirq+steal, and all) of the whole machine, /proc/stat. */
function machineJiffies(): { busy: number; all: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const all = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: all - (f[3] ?? 0) - (f[4] ?? 0), all };
}

/** utime + stime of a process, ms (100 Hz ticks). */
function procCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return 0;
  }
}

/** Polls stewardd's /v1/status every 100 ms: plugin slots in use and requests queued for one. */
function slotPoller(get: (path: string) => Promise<{ json: any }>) {
  const inUse: number[] = [];
  const queued: number[] = [];
  let on = true;
  const loop = (async () => {
    while (on) {
      try {
        const s = (await get('/v1/status')).json;
        inUse.push(Number(s?.executions?.inUse ?? 0));
        queued.push(Number(s?.executions?.queued ?? 0));
      } catch {
        /* a missed sample */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return { inUse, queued };
    },
  };
}

export async function benchCriBurst(_scratch: Scratch, ctx: BenchContext): Promise<Row[]> {
  const missing = baseSkipReason([
    'containerd',
    'ctr',
    'containerd-shim-runc-v2',
    'runc',
    'gcc',
    'tar',
    'ip',
    'iptables',
  ]);
  if (missing !== undefined) {
    ctx.log(`cri-burst skipped: ${missing}`);
    return [];
  }
  const pods = envInt('CRI_BURST_PODS') ?? n(100, ctx, 10);
  const rounds = envInt('CRI_BURST_ROUNDS') ?? n(3, ctx, 1);
  const cap = envInt('CRI_BURST_MAX_PARALLEL');
  const env = new TestEnv('bench-burst');
  let host: RuntimeHost | undefined;
  try {
    host = await RuntimeHost.create(env);
    // As a node runs it: info logs (the test helper's default is debug), the journal as shipped.
    const node = await CriNode.start(host, {
      daemonArgs: () => ['--log-level', 'info', ...(cap !== undefined ? ['--max-parallel', String(cap)] : [])],
    });
    const k = new Kubelet(node.cri, {
      cgroupParent: node.cgroupParent,
      logRoot: join(env.dir, 'pod-logs'),
      tag: env.tag,
    });
    const baseline = iptablesBaseline();
    const prefix = node.net.subnet.replace(/0\/24$/, '');
    const metrics = async () => histogramSums((await node.daemon.get('/metrics')).text);
    const daemonPid = node.daemon.proc?.pid;

    const runMs: Record<Kind, number[]> = { steward: [], plain: [] };
    const lastReady: Record<Kind, number[]> = { steward: [], plain: [] };
    const downMs: Record<Kind, number[]> = { steward: [], plain: [] };
    const downWall: Record<Kind, number[]> = { steward: [], plain: [] };
    const busyCores: Record<Kind, number[]> = { steward: [], plain: [] };
    const failures: string[] = [];
    const left: Record<Kind, PodResidue[]> = { steward: [], plain: [] };
    let stopRetries = 0;
    let badAddresses = 0;
    let daemonCpuMs = 0;
    const addSums: Sums = new Map();
    const delSums: Sums = new Map();
    const slots = { inUse: [] as number[], queued: [] as number[] };

    // One burst of `count` pods of `kind`: up at once, addresses checked, down at once, residue counted.
    const burst = async (kind: Kind, label: string, count: number, timed: boolean) => {
      const ps = Array.from({ length: count }, (_, i) => k.pod(`burst-${kind}-${label}-${i}`));
      const handler = kind === 'plain' ? PLAIN_HANDLER : '';
      const m0 = kind === 'steward' ? await metrics() : undefined;
      const poller = kind === 'steward' && timed ? slotPoller((p) => node.daemon.get(p)) : undefined;
      const cpu0 = procCpuMs(daemonPid) + procCpuMs(spawnerPid(daemonPid ?? -1));
      const j0 = machineJiffies();
      const up = await runAtOnce(k, ps, handler);
      const j1 = machineJiffies();
      const cpu1 = procCpuMs(daemonPid) + procCpuMs(spawnerPid(daemonPid ?? -1));
      const polled = await poller?.stop();
      const m1 = kind === 'steward' ? await metrics() : undefined;
      const ids = up.runs.filter((r) => r.id).map((r) => r.id!);
      const addrs = await sandboxAddresses(k.cri, ids);
      const bad = addrs.filter((a) => a.state !== 'SANDBOX_READY' || !a.ip.startsWith(prefix)).length;
      const distinct = new Set(addrs.map((a) => a.ip)).size;
      const down = await stopRemoveAtOnce(k, ids);
      const m2 = kind === 'steward' ? await metrics() : undefined;
      const { residue } = await settledResidue(node, ids, baseline, 10_000);
      ctx.log(
        `cri-burst ${label} ${kind}: ${ids.length}/${count} up, last ready ${round(up.lastReadyMs, 0)} ms, ` +
          `p50 ${round(median(up.runs.map((r) => r.ms)), 0)} p99 ${round(p99(up.runs.map((r) => r.ms)), 0)} ms; ` +
          `down ${round(down.wallMs, 0)} ms; left ${JSON.stringify(residue)}`,
      );
      if (!timed) return;
      runMs[kind].push(...up.runs.filter((r) => r.id).map((r) => r.ms));
      lastReady[kind].push(up.lastReadyMs);
      downMs[kind].push(...down.ms);
      downWall[kind].push(down.wallMs);
      busyCores[kind].push(((j1.busy - j0.busy) / (j1.all - j0.all)) * cpus().length);
      failures.push(...up.failures.map((f) => `${kind} run ${f}`), ...down.failures.map((f) => `${kind} ${f}`));
      badAddresses += bad + (ids.length - distinct);
      stopRetries += down.stopRetries;
      left[kind].push(residue);
      if (m0 && m1 && m2) {
        accumulate(addSums, m0, m1);
        accumulate(delSums, m1, m2);
        daemonCpuMs += cpu1 - cpu0;
      }
      if (polled) {
        slots.inUse.push(...polled.inUse);
        slots.queued.push(...polled.queued);
      }
    };

    // Warm-up: the plugins, the shim and both handlers' paths once, not counted.
    await burst('steward', 'warmup', WARMUP_PODS, false);
    await burst('plain', 'warmup', WARMUP_PODS, false);
    for (let r = 0; r < rounds; r++) {
      const order: Kind[] = r % 2 === 0 ? ['steward', 'plain'] : ['plain', 'steward'];
      for (const kind of order) await burst(kind, `r${r}`, pods, true);
    }

    const total = pods * rounds;
    const add = perPod(new Map(), addSums, total);
    const del = perPod(new Map(), delSums, total);
    const prefixed = (p: string, o: Record<string, number>) =>
      Object.fromEntries(Object.entries(o).map(([key, v]) => [`${p}${key[0]!.toUpperCase()}${key.slice(1)}`, v]));
    const sumResidue = (rs: PodResidue[]) => rs.reduce((s, x) => s + residueTotal(x), 0);
    const leftSteward = sumResidue(left.steward);
    const leftPlain = sumResidue(left.plain);
    const p99s = { steward: p99(runMs.steward), plain: p99(runMs.plain) };
    const lr = { steward: median(lastReady.steward), plain: median(lastReady.plain) };
    const p99Ratio = p99s.steward / p99s.plain;
    const lastReadyRatio = lr.steward / lr.plain;
    const met =
      p99Ratio <= LIMIT &&
      lastReadyRatio <= LIMIT &&
      failures.length === 0 &&
      badAddresses === 0 &&
      leftSteward + leftPlain === 0;
    if (failures.length > 0) ctx.log(`cri-burst failures: ${failures.slice(0, 5).join('; ')}`);
    return [
      {
        id: 'cri-burst',
        title: `${pods} RunPodSandbox at once through containerd's CRI with steward vs the same chain direct (per pod)`,
        unit: 'ms',
        candidate: {
          label: `RunPodSandbox, ${pods} at once, conflist from stewardd install (shim + stewardd${cap !== undefined ? `, --max-parallel ${cap}` : ''})`,
          median: round(median(runMs.steward)),
          p99: round(p99s.steward),
          n: runMs.steward.length,
        },
        floor: {
          label: `the same ${pods} at once through a runtime handler whose conflist is the same bridge + portmap chain`,
          median: round(median(runMs.plain)),
          p99: round(p99s.plain),
          n: runMs.plain.length,
        },
        ratio: round(p99Ratio),
        ratioOf: 'p99',
        target: `p99 and time to the last pod ready <= ${LIMIT}x the plain chain's; 0 failures; 0 left (issue 39)`,
        met,
        extra: {
          pods,
          rounds,
          maxParallel: cap ?? 'default (8)',
          lastReadyMs: round(lr.steward),
          plainLastReadyMs: round(lr.plain),
          lastReadyRatio: round(lastReadyRatio),
          lastReadyEachMs: lastReady.steward.map((x) => round(x, 0)).join('/'),
          plainLastReadyEachMs: lastReady.plain.map((x) => round(x, 0)).join('/'),
          p90Ms: round(quantile(runMs.steward, 0.9)),
          plainP90Ms: round(quantile(runMs.plain, 0.9)),
          stopRemoveP50Ms: round(median(downMs.steward)),
          stopRemoveP99Ms: round(p99(downMs.steward)),
          plainStopRemoveP50Ms: round(median(downMs.plain)),
          plainStopRemoveP99Ms: round(p99(downMs.plain)),
          stopRemoveAllMs: round(median(downWall.steward)),
          plainStopRemoveAllMs: round(median(downWall.plain)),
          stopRetries,
          failures: failures.length,
          badAddresses,
          leftSteward,
          leftPlain,
          busyCores: round(mean(busyCores.steward)),
          plainBusyCores: round(mean(busyCores.plain)),
          daemonCpuMsPerPodAdd: round(daemonCpuMs / total),
          slotsInUseMean: round(mean(slots.inUse)),
          slotsQueuedMean: round(mean(slots.queued)),
          slotsQueuedMax: Math.max(0, ...slots.queued),
          ...prefixed('add', add),
          ...prefixed('del', del),
        },
        notes: [
          `${rounds} rounds after a warm-up burst of ${WARMUP_PODS} each, the order alternating per round; per pod: RunPodSandbox's wall time as the client sees it (all ${pods} sent at once on one gRPC channel); lastReadyMs: first sent to last answered, median over rounds`,
          'stopRemove*: StopPodSandbox (kubelet retries, 1 s apart) + RemovePodSandbox of every pod at once; left*: leases, veths, pod netns, libcni cache files, CNI-* chains, rules naming a sandbox, containerd shims after each burst (summed)',
          'add*/del* per steward pod, from stewardd histograms over the timed bursts: add DaemonADDMs its answer, addExec_<plugin>_ADDMs the delegates, addJournal*, addQueueWaitMs (per-container queue: a burst is 100 containers, so ~0); addDaemonOwnMs = answer − delegates, which holds the wait for a plugin slot (no histogram of its own)',
          'slots*: /v1/status executions every 100 ms during the steward bursts (inUse of --max-parallel; queued = waiting for a slot); busyCores: the machine CPU in use during the bursts (of 2); daemonCpuMsPerPodAdd: stewardd + spawner CPU per pod during the up phase',
        ],
      },
    ];
  } finally {
    const residue = host ? await host.finish() : (await env.close(), []);
    if (residue.length > 0) ctx.log(`cri-burst left residue: ${JSON.stringify(residue)}`);
  }
}
