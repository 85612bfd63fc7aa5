// Benchmark: the storm as a runtime sends it. Kubelet-style retries of StopPodSandbox become DELs
// from many concurrent executions of the shipped shim (each a new process), while ADDs are sent one
// at a time through the shim too; ADD p50/p99 during the storm is reported against idle ADDs of the
// same run, with the CPU the shims burn (reaped by the driver process) apart from the daemon's.
// Its baseline, in the same run against the same daemon: the same storm and the same ADDs with each
// request sent by one `curl --unix-socket` process (an executed C client), so the shim storm's p99
// over the curl storm's is the shim's own cost under contention (issue 23).
// The delegate is the no-op one, so the figures are steward's own: client execs, socket, engine.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from '../lib/scratch.js';
import { curlCall, execCni } from '../lib/exec.js';
import { BenchDaemon, daemonEnv } from '../lib/daemon.js';
import { forkDriver } from '../lib/driver.js';
import { cniVars, noopConf, wireBody } from '../lib/netconf.js';
import { shimExecutable } from '../lib/paths.js';
import { n, type BenchContext, type Row } from '../lib/report.js';
import { median, p99, round } from '../lib/stats.js';
import type { ShimStormOrder, ShimStormReport, StormCall } from '../lib/shim-storm-driver.js';

const CONTAINERS = 60;
const RETRIES = 10;
const PARALLEL = 12;

export async function startDriver(env: Scratch, order: ShimStormOrder): Promise<() => Promise<ShimStormReport>> {
  const driver = await forkDriver<ShimStormOrder, ShimStormReport>(
    env,
    new URL('../lib/shim-storm-driver.ts', import.meta.url).pathname,
    order,
  );
  return () => driver.ask('go', 'done').then((m) => m.report as ShimStormReport);
}

/** How a request is sent: by the shim, or by one curl process. */
type Client = 'shim' | 'curl';

interface StormRun {
  idle: number[];
  during: number[];
  storm: ShimStormReport;
  containers: string[];
  /** The daemon's CPU (and its spawner's) per request during the storm. */
  daemonCpuMsPerReq: number;
}

async function runStorm(
  env: Scratch,
  ctx: BenchContext,
  daemon: BenchDaemon,
  client: Client,
  conf: Record<string, unknown>,
): Promise<StormRun> {
  const shim = shimExecutable();
  const baseEnv = { PATH: daemonEnv().PATH ?? '/usr/bin:/bin' };
  const tag = client === 'shim' ? 'kubelet' : 'curl-kubelet';
  const containers = Array.from({ length: n(CONTAINERS, ctx, 10) }, (_, i) => `${tag}-${i}`);
  for (const cid of containers) await daemon.cni(wireBody('ADD', cid, conf));
  const stdin = JSON.stringify(conf);
  const call = (command: string, cid: string): StormCall =>
    client === 'shim'
      ? { id: cid, file: shim.path, args: [], env: { ...baseEnv, ...cniVars(command, cid) }, stdin }
      : { id: cid, env: baseEnv, ...curlCall(daemon.socket, command, cid, conf) };
  const addOnce = async (cid: string) => {
    const c = call('ADD', cid);
    const t0 = process.hrtime.bigint();
    const r = await execCni(c.file, c.env, c.stdin, c.args);
    if (r.code !== 0) throw new Error(`ADD through ${client} failed: ${r.stdout}`);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  for (let i = 0; i < 5; i++) await addOnce(`${client}-warm-${i}`);

  const idleEach = n(30, ctx, 10);
  const idle: number[] = [];
  const during: number[] = [];
  for (let i = 0; i < idleEach; i++) idle.push(await addOnce(`${client}-idle-a-${i}`));
  const go = await startDriver(env, {
    calls: containers.map((cid) => call('DEL', cid)),
    retries: RETRIES,
    parallel: PARALLEL,
  });
  const cpu0 = daemon.cpu();
  let done = false;
  const report = go().then((r) => {
    done = true;
    return r;
  });
  let k = 0;
  while (!done) during.push(await addOnce(`${client}-during-${k++}`));
  const storm = await report;
  const cpu1 = daemon.cpu();
  for (let i = 0; i < idleEach; i++) idle.push(await addOnce(`${client}-idle-b-${i}`));
  ctx.log(`${client} storm: ${storm.execs} ${client} DELs in ${round(storm.ms, 0)} ms, ${k} ADDs during it`);
  return { idle, during, storm, containers, daemonCpuMsPerReq: (cpu1.self - cpu0.self) / Math.max(1, storm.execs + k) };
}

export async function benchShimStorm(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const shim = shimExecutable();
  const daemon = new BenchDaemon(env, 'shim-storm');
  await daemon.start();
  try {
    const logFile = join(daemon.stateDir, 'shim-storm.log');
    const conf = noopConf(daemon.socket, logFile);
    const s = await runStorm(env, ctx, daemon, 'shim', conf);
    const c = await runStorm(env, ctx, daemon, 'curl', conf);

    const dels = existsSync(logFile)
      ? readFileSync(logFile, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('DEL '))
      : [];
    const perContainer = new Map<string, number>();
    for (const l of dels) {
      const cid = l.split(' ')[1] as string;
      perContainer.set(cid, (perContainer.get(cid) ?? 0) + 1);
    }
    const wrongOf = (run: StormRun) => run.containers.filter((cid) => perContainer.get(cid) !== 1).length;
    const failedOf = (run: StormRun) => run.storm.execs - (run.storm.exitCodes['0'] ?? 0);
    const [wrong, failedExecs] = [wrongOf(s), failedOf(s)];
    const ratio = p99(s.during) / p99(s.idle);
    const curlRatio = p99(s.during) / p99(c.during);
    const stormTitle = `${s.containers.length} pods × ${RETRIES} DEL execs, ${PARALLEL} at a time`;
    return [
      {
        id: 'shim-storm',
        title: `ADD through the shim during a kubelet-style storm: ${stormTitle}`,
        unit: 'ms',
        candidate: {
          label: 'ADD (shim exec, no-op delegate) during the storm',
          median: round(median(s.during)),
          p99: round(p99(s.during)),
          n: s.during.length,
        },
        floor: {
          label: 'ADD (shim exec) on the idle daemon',
          median: round(median(s.idle)),
          p99: round(p99(s.idle)),
          n: s.idle.length,
        },
        ratio: round(ratio),
        ratioOf: 'p99',
        target: 'p99 <= 2x, every DEL exits 0, 1 delegate DEL per pod',
        met: ratio <= 2 && failedExecs === 0 && wrong === 0,
        extra: {
          p50Ratio: round(median(s.during) / median(s.idle)),
          shimExecs: s.storm.execs,
          failedExecs,
          podsWithWrongDelCount: wrong,
          stormMs: round(s.storm.ms, 0),
          shimDelsPerSec: round(s.storm.execs / (s.storm.ms / 1000), 0),
          shimCpuMsPerExec: round(s.storm.shimCpuMs / s.storm.execs),
          daemonCpuMsPerDel: round(s.daemonCpuMsPerReq),
        },
        notes: [
          `shim: ${shim.kind}; shimCpuMsPerExec is the CPU of the shim processes alone (reaped by the driver), daemonCpuMsPerDel the daemon's (and its spawner's) per request during the storm`,
        ],
      },
      {
        id: 'shim-storm-curl',
        title: `ADD during the same storm: through the shim vs each request one curl --unix-socket process (${stormTitle})`,
        unit: 'ms',
        candidate: {
          label: 'ADD (shim exec) during the shim storm (the shim-storm row)',
          median: round(median(s.during)),
          p99: round(p99(s.during)),
          n: s.during.length,
        },
        floor: {
          label: 'ADD (one curl exec) during the same storm sent by curl processes',
          median: round(median(c.during)),
          p99: round(p99(c.during)),
          n: c.during.length,
        },
        ratio: round(curlRatio),
        ratioOf: 'p99',
        target: '<= 1.0x (p99; issue 29), every curl DEL exits 0, 1 delegate DEL per pod',
        met: curlRatio <= 1.0 && failedOf(c) === 0 && wrongOf(c) === 0,
        extra: {
          p50Ratio: round(median(s.during) / median(c.during)),
          curlIdleP50: round(median(c.idle)),
          curlIdleP99: round(p99(c.idle)),
          curlStormP99OverIdle: round(p99(c.during) / p99(c.idle)),
          curlExecs: c.storm.execs,
          failedCurlExecs: failedOf(c),
          curlPodsWithWrongDelCount: wrongOf(c),
          curlStormMs: round(c.storm.ms, 0),
          curlDelsPerSec: round(c.storm.execs / (c.storm.ms / 1000), 0),
          curlCpuMsPerExec: round(c.storm.shimCpuMs / c.storm.execs),
          daemonCpuMsPerCurlDel: round(c.daemonCpuMsPerReq),
        },
        notes: [
          "the same storm, ADDs and daemon, one after the other in one run: the shim storm first, then the curl storm (as many pods of its own); the ratio is the shim storm ADD p99 over the curl storm ADD p99, the shim's own cost under contention",
        ],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
