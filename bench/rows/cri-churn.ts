// Benchmark: a churn soak through containerd's CRI (issue 39, item 2). 110 pods (the kubelet's
// default max-pods) run through steward on containerd 1.6's CRI plugin, driven by the project's
// kubelet-like client (test/helpers/cri/), and each is replaced in turn, one at a time: its sandbox
// stopped and removed, a new pod run in its place (every other slot with a hostPort, so portmap's
// per-pod chains come and go too). Every 10 s: stewardd's and its plugin spawner's RSS and open fds,
// the journal's size (db + wal) and RunPodSandbox's p50/p99 over those 10 s. At the end every pod is
// stopped and removed and what any of them left is counted: leases, veths, pod netns, libcni cache
// files, per-pod iptables chains and rules, containerd shims (all must be 0). Targets: RSS and fds of
// both processes in the last minute within 10 % of minute two; the journal bounded (its last minute
// within 10 % of the minute it should have levelled off by: tombstone TTL + two prune intervals);
// nothing left; no failed call.
//
// Length: CHURN_MINUTES (default 10 × --scale), e.g. `CHURN_MINUTES=60 npm run bench -- --only
// cri-churn`. CHURN_PODS (default 110). CHURN_TOMBSTONE_TTL (seconds; default 120, so the journal
// reaches its plateau inside a 10-minute soak; the shipped default is 3600, for which a soak must
// run well past an hour to see the plateau).

import { join } from 'node:path';
import { TestEnv } from '../../test/helpers/env.js';
import { CriNode } from '../../test/helpers/cri/node.js';
import { Kubelet } from '../../test/helpers/cri/kubelet.js';
import { Churn, type Replacement } from '../../test/helpers/cri/churn.js';
import {
  iptablesBaseline,
  journalBytes,
  procUsage,
  residueTotal,
  settledResidue,
  spawnerPid,
} from '../../test/helpers/cri/residue.js';
import { RuntimeHost } from '../../test/helpers/runtimes/host.js';
import { baseSkipReason } from '../../test/helpers/runtimes/skip.js';
import { CRI_TOOLS } from '../lib/cri-tools.js';
import type { Scratch } from '../lib/scratch.js';
import type { BenchContext, Row } from '../lib/report.js';
import { mean, median, p99, round } from '../lib/stats.js';

const SAMPLE_MS = 10_000;
/** stewardd's --prune-interval default: tombstones past the TTL go at the next prune. */
const PRUNE_INTERVAL_S = 60;
const FLAT = 0.1;

interface Sample {
  /** Seconds since the churn started. */
  t: number;
  rssMiB: number;
  fds: number;
  spawnerRssMiB: number;
  spawnerFds: number;
  journalBytes: number;
  walBytes: number;
  /** stewardd's V8 heap in use and its external memory (its own /metrics: prom-client's default metrics). */
  heapUsedMiB: number;
  /** V8's heap as committed (used + free pages it keeps), and stewardd's anonymous RSS. */
  heapTotalMiB: number;
  rssAnonMiB: number;
  externalMiB: number;
  addP50: number;
  addP99: number;
  adds: number;
}

function envNum(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  const x = Number(v);
  if (!(x > 0)) throw new Error(`${name} must be a positive number, got ${v}`);
  return x;
}

/** The smallest value of `key` in each minute of the soak (a heap's floor: what survived its collections). */
function minutes_(samples: Sample[], key: keyof Sample, seconds: number): string {
  const out: number[] = [];
  for (let m = 0; m * 60 < seconds; m++) {
    const xs = samples.filter((s) => s.t >= m * 60 && s.t < (m + 1) * 60).map((s) => s[key]);
    if (xs.length > 0) out.push(Math.min(...xs));
  }
  return out.join('/');
}

/** Mean of `key` over the samples with t in [from, to). */
function windowMean(samples: Sample[], key: keyof Sample, from: number, to: number): number {
  return mean(samples.filter((s) => s.t >= from && s.t < to).map((s) => s[key]));
}

export async function benchCriChurn(scratch: Scratch, ctx: BenchContext): Promise<Row[]> {
  const missing = baseSkipReason([...CRI_TOOLS, 'ip', 'iptables']);
  if (missing !== undefined) {
    ctx.log(`cri-churn skipped: ${missing}`);
    return [];
  }
  const minutes = envNum('CHURN_MINUTES') ?? 10 * ctx.scale;
  const size = Math.round(envNum('CHURN_PODS') ?? 110);
  const ttl = Math.round(envNum('CHURN_TOMBSTONE_TTL') ?? 120);
  const env = new TestEnv('bench-churn');
  let host: RuntimeHost | undefined;
  try {
    host = await RuntimeHost.create(env);
    // On Ctrl-C run.ts closes the scratch: the node (pods, containerd, stewardd, netns, rules) goes with it.
    const h = host;
    scratch.defer(() => h.finish());
    const node = await CriNode.start(host, {
      daemonArgs: () => ['--log-level', 'info', '--tombstone-ttl', String(ttl)],
    });
    const k = new Kubelet(node.cri, {
      cgroupParent: node.cgroupParent,
      logRoot: join(env.dir, 'pod-logs'),
      tag: env.tag,
    });
    const baseline = iptablesBaseline();
    const daemonPid = node.daemon.proc?.pid;
    if (daemonPid === undefined) throw new Error('stewardd has no pid');
    const churn = new Churn(k, size);
    const f0 = performance.now();
    await churn.fill();
    ctx.log(
      `cri-churn: ${churn.alive}/${size} pods up in ${round((performance.now() - f0) / 1000, 1)} s; churning ${minutes} min`,
    );

    const samples: Sample[] = [];
    const all: Replacement[] = [];
    let window: Replacement[] = [];
    let spawnerRestarts = 0;
    let spawner = spawnerPid(daemonPid);
    const t0 = performance.now();
    const heap = async () => {
      const text = (await node.daemon.get('/metrics').catch(() => ({ text: '' }))).text;
      const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
      return {
        used: read('steward_nodejs_heap_size_used_bytes'),
        total: read('steward_nodejs_heap_size_total_bytes'),
        external: read('steward_nodejs_external_memory_bytes'),
      };
    };
    const sample = async () => {
      const h = await heap();
      const now = spawnerPid(daemonPid);
      if (now !== spawner) spawnerRestarts++;
      spawner = now;
      const d = procUsage(daemonPid);
      const s = spawner === undefined ? undefined : procUsage(spawner);
      const j = journalBytes(node.daemon.stateDir);
      const ms = window.filter((r) => r.ok).map((r) => r.runMs);
      samples.push({
        t: round((performance.now() - t0) / 1000, 1),
        rssMiB: round((d?.rssKiB ?? NaN) / 1024, 1),
        fds: d?.fds ?? NaN,
        spawnerRssMiB: round((s?.rssKiB ?? NaN) / 1024, 1),
        spawnerFds: s?.fds ?? NaN,
        journalBytes: j.db + j.wal,
        walBytes: j.wal,
        heapUsedMiB: round(h.used, 1),
        heapTotalMiB: round(h.total, 1),
        rssAnonMiB: round((d?.rssAnonKiB ?? NaN) / 1024, 1),
        externalMiB: round(h.external, 1),
        addP50: round(median(ms), 1),
        addP99: round(p99(ms), 1),
        adds: ms.length,
      });
      window = [];
    };
    await sample();
    let nextSample = t0 + SAMPLE_MS;
    const end = t0 + minutes * 60_000;
    while (performance.now() < end) {
      const r = await churn.replaceNext();
      all.push(r);
      window.push(r);
      if (performance.now() >= nextSample) {
        await sample();
        nextSample += SAMPLE_MS;
        const last = samples[samples.length - 1]!;
        if (samples.length % 6 === 1)
          ctx.log(
            `cri-churn t=${last.t}s: ${all.length} replaced, RSS ${last.rssMiB} MiB (anon ${last.rssAnonMiB}, heap ${last.heapUsedMiB}/${last.heapTotalMiB}), fds ${last.fds}, spawner ${last.spawnerRssMiB} MiB/${last.spawnerFds} fds, journal ${last.journalBytes} B, ADD p99 ${last.addP99} ms`,
          );
      }
    }
    await sample();
    const churnS = (performance.now() - t0) / 1000;
    const st = (await node.daemon.get('/v1/status')).json;
    await churn.drain();
    const { residue, ms: settleMs } = await settledResidue(node, churn.everyId, baseline, 10_000);
    const teardownDepth = Number((await node.daemon.get('/v1/status')).json?.teardownQueue?.depth ?? NaN);
    ctx.log(`cri-churn: ${all.length} replacements in ${round(churnS, 0)} s; left ${JSON.stringify(residue)}`);

    // Minute two against the last minute; the journal against the minute it should have levelled off by.
    const m2 = [60, 120] as const;
    const last = [churnS - 60, churnS + 1] as const;
    const plateauEnd = ttl + 2 * PRUNE_INTERVAL_S;
    const journalFrom = [plateauEnd - 60, plateauEnd] as const;
    const assessed = churnS >= 180;
    const journalAssessed = churnS >= plateauEnd + 60;
    const growth = (key: keyof Sample, from: readonly [number, number] = m2) =>
      windowMean(samples, key, last[0], last[1]) / windowMean(samples, key, from[0], from[1]) - 1;
    const g = {
      rss: growth('rssMiB'),
      fds: growth('fds'),
      spawnerRss: growth('spawnerRssMiB'),
      spawnerFds: growth('spawnerFds'),
      journal: growth('journalBytes', journalFrom),
    };
    const flat = [g.rss, g.fds, g.spawnerRss, g.spawnerFds].every((x) => Math.abs(x) <= FLAT);
    const bounded = g.journal <= FLAT;
    const left = residueTotal(residue);
    const failures = churn.failures.length;
    const okMs = all.filter((r) => r.ok).map((r) => r.runMs);
    /** RunPodSandbox ms of the replacements answered with t in [from, to) seconds of the churn. */
    const addsBetween = (from: number, to: number) =>
      all.filter((r) => r.ok && (r.at - t0) / 1000 >= from && (r.at - t0) / 1000 < to).map((r) => r.runMs);
    const met = assessed
      ? flat && (!journalAssessed || bounded) && left === 0 && failures === 0 && teardownDepth === 0
      : null;
    const pct = (x: number) => round(x * 100, 1);
    const every = (key: keyof Sample, step = 1) =>
      samples
        .filter((_, i) => i % step === 0)
        .map((s) => (Number.isNaN(s[key]) ? '-' : s[key]))
        .join('/');
    return [
      {
        id: 'cri-churn',
        title: `Churn soak through containerd's CRI: ${size} pods kept alive, each replaced in turn, ${round(minutes, 1)} min (RunPodSandbox; stewardd RSS, fds, journal)`,
        unit: 'ms',
        candidate: {
          label: `RunPodSandbox of each replacement pod, through steward (conflist from stewardd install)`,
          median: round(median(okMs)),
          p99: round(p99(okMs)),
          n: okMs.length,
        },
        target: `RSS and fds of stewardd and its spawner: last minute within ${FLAT * 100} % of minute two; journal (db + wal) bounded; 0 left; 0 failures (issue 39)`,
        met,
        extra: {
          pods: size,
          minutes: round(churnS / 60, 1),
          replacements: all.length,
          replacementsPerSec: round(all.length / churnS),
          tombstoneTtlS: ttl,
          failures,
          stopRemoveP50Ms: round(median(all.map((r) => r.downMs))),
          stopRemoveP99Ms: round(p99(all.map((r) => r.downMs))),
          rssMiBMinute2: round(windowMean(samples, 'rssMiB', ...m2), 1),
          rssMiBLastMinute: round(windowMean(samples, 'rssMiB', ...last), 1),
          rssGrowthPct: pct(g.rss),
          fdsMinute2: round(windowMean(samples, 'fds', ...m2), 1),
          fdsLastMinute: round(windowMean(samples, 'fds', ...last), 1),
          fdsGrowthPct: pct(g.fds),
          spawnerRssMiBMinute2: round(windowMean(samples, 'spawnerRssMiB', ...m2), 1),
          spawnerRssMiBLastMinute: round(windowMean(samples, 'spawnerRssMiB', ...last), 1),
          spawnerRssGrowthPct: pct(g.spawnerRss),
          spawnerFdsMinute2: round(windowMean(samples, 'spawnerFds', ...m2), 1),
          spawnerFdsLastMinute: round(windowMean(samples, 'spawnerFds', ...last), 1),
          spawnerFdsGrowthPct: pct(g.spawnerFds),
          spawnerRestarts,
          journalBytesAtPlateau: journalAssessed
            ? round(windowMean(samples, 'journalBytes', ...journalFrom), 0)
            : 'n/a',
          journalBytesLastMinute: round(windowMean(samples, 'journalBytes', ...last), 0),
          journalGrowthPct: journalAssessed ? pct(g.journal) : 'n/a',
          journalMaxBytes: Math.max(...samples.map((s) => s.journalBytes)),
          walMaxBytes: Math.max(...samples.map((s) => s.walBytes)),
          journalAssessed: journalAssessed ? 'yes' : `no (needs ${plateauEnd + 60} s)`,
          addP99FirstMinuteMs: round(p99(addsBetween(0, 60))),
          addP99Minute2Ms: round(p99(addsBetween(...m2))),
          addP99LastMinuteMs: round(p99(addsBetween(...last))),
          attachmentsAtEnd: JSON.stringify(st?.attachments ?? {}),
          teardownQueueAfter: teardownDepth,
          left,
          leftDetail: JSON.stringify(residue),
          leftSettledMs: round(settleMs, 0),
          heapUsedMiBMinute2: round(windowMean(samples, 'heapUsedMiB', ...m2), 1),
          heapUsedMiBLastMinute: round(windowMean(samples, 'heapUsedMiB', ...last), 1),
          heapUsedMiBMinEveryMinute: minutes_(samples, 'heapUsedMiB', churnS),
          externalMiBLastMinute: round(windowMean(samples, 'externalMiB', ...last), 1),
          // RSS less V8's committed heap: what is left when V8's own sizing of its heap (which moves
          // RSS by 15-25 MiB at a time with the heap in use flat) is taken out.
          rssLessV8HeapMiBMinute2: round(
            windowMean(samples, 'rssMiB', ...m2) - windowMean(samples, 'heapTotalMiB', ...m2),
            1,
          ),
          rssLessV8HeapMiBLastMinute: round(
            windowMean(samples, 'rssMiB', ...last) - windowMean(samples, 'heapTotalMiB', ...last),
            1,
          ),
          heapTotalMiBEveryMinute: every('heapTotalMiB', 6),
          rssAnonMiBEveryMinute: every('rssAnonMiB', 6),
          rssMiBEveryMinute: every('rssMiB', 6),
          fdsEveryMinute: every('fds', 6),
          journalBytesEveryMinute: every('journalBytes', 6),
          addP99Every10s: every('addP99'),
        },
        notes: [
          `one replacement at a time: StopPodSandbox (kubelet retries) + RemovePodSandbox of the slot's sandbox, then RunPodSandbox of a new pod in it; slots round robin; every other slot maps a hostPort (portmap's per-pod chains); stewardd with --tombstone-ttl ${ttl} and --log-level info`,
          'sampled every 10 s: VmRSS and /proc/<pid>/fd of stewardd and of its spawner (its child running spawner-child), steward.db + steward.db-wal bytes, RunPodSandbox p50/p99 of the replacements answered in those 10 s; *Minute2 = mean over t in [60 s, 120 s), *LastMinute = mean over the last 60 s; the journal is compared with the minute ending at TTL + 2 prune intervals, when pruning has caught up',
          'left: after every pod is stopped and removed, leases + veths + pod netns + libcni cache files + CNI-* chains + rules naming any sandbox the soak had + containerd shims (leftDetail); met is null when the soak is shorter than 3 minutes',
        ],
      },
    ];
  } finally {
    const residue = host ? await host.finish() : (await env.close(), []);
    if (residue.length > 0) ctx.log(`cri-churn left residue: ${JSON.stringify(residue)}`);
  }
}
