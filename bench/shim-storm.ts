// Benchmark: the storm as a runtime sends it. Kubelet-style retries of StopPodSandbox become DELs
// from many concurrent executions of the shipped shim (each a new process), while ADDs are sent one
// at a time through the shim too; ADD p50/p99 during the storm is reported against idle ADDs of the
// same run, with the CPU the shims burn (reaped by the driver process) apart from the daemon's.
// The delegate is the no-op one, so the figures are steward's own: shim execs, socket, engine.

import { fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Scratch } from './lib/scratch.js';
import { execCni } from './lib/exec.js';
import { BenchDaemon, daemonEnv } from './lib/daemon.js';
import { cniVars, noopConf, wireBody } from './lib/netconf.js';
import { shimExecutable } from './lib/paths.js';
import { n, type BenchContext, type Row } from './lib/report.js';
import { median, p99, round } from './lib/stats.js';
import type { ShimStormOrder, ShimStormReport } from './lib/shim-storm-driver.js';

const CONTAINERS = 60;
const RETRIES = 10;
const PARALLEL = 12;

function startDriver(env: Scratch, order: ShimStormOrder): Promise<() => Promise<ShimStormReport>> {
  const child = fork(new URL('./lib/shim-storm-driver.ts', import.meta.url).pathname, [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  env.defer(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.on('message', (m: { type: string; report?: ShimStormReport }) => {
      if (m.type !== 'ready') return;
      resolve(
        () =>
          new Promise((res, rej) => {
            child.once('exit', (code) => {
              if (code !== 0) rej(new Error(`shim storm driver exited with ${code}`));
            });
            child.on('message', (d: { type: string; report?: ShimStormReport }) => {
              if (d.type === 'done' && d.report) res(d.report);
            });
            child.send({ type: 'go' });
          }),
      );
    });
    child.send({ type: 'order', order });
  });
}

export async function benchShimStorm(env: Scratch, ctx: BenchContext): Promise<Row[]> {
  const shim = shimExecutable();
  const daemon = new BenchDaemon(env, 'shim-storm');
  await daemon.start();
  try {
    const baseEnv = { PATH: daemonEnv().PATH ?? '/usr/bin:/bin' };
    const containers = Array.from({ length: n(CONTAINERS, ctx, 10) }, (_, i) => `kubelet-${i}`);
    const logFile = join(daemon.stateDir, 'shim-storm.log');
    const conf = noopConf(daemon.socket, logFile);
    for (const cid of containers) await daemon.cni(wireBody('ADD', cid, conf));
    const stdin = JSON.stringify(conf);
    const addOnce = async (cid: string) => {
      const t0 = process.hrtime.bigint();
      const r = await execCni(shim.path, { ...baseEnv, ...cniVars('ADD', cid) }, stdin);
      if (r.code !== 0) throw new Error(`ADD through the shim failed: ${r.stdout}`);
      return Number(process.hrtime.bigint() - t0) / 1e6;
    };
    for (let i = 0; i < 5; i++) await addOnce(`warm-${i}`);

    const idleEach = n(30, ctx, 10);
    const idle: number[] = [];
    const during: number[] = [];
    for (let i = 0; i < idleEach; i++) idle.push(await addOnce(`idle-a-${i}`));
    const go = await startDriver(env, {
      shim: shim.path,
      env: { ...baseEnv, ...cniVars('DEL', '') },
      containers,
      retries: RETRIES,
      parallel: PARALLEL,
      stdin,
    });
    const cpu0 = daemon.cpu();
    let done = false;
    const report = go().then((r) => {
      done = true;
      return r;
    });
    let k = 0;
    while (!done) during.push(await addOnce(`during-${k++}`));
    const storm = await report;
    const cpu1 = daemon.cpu();
    for (let i = 0; i < idleEach; i++) idle.push(await addOnce(`idle-b-${i}`));

    const dels = existsSync(logFile)
      ? readFileSync(logFile, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('DEL '))
      : [];
    const perContainer = new Map<string, number>();
    for (const l of dels)
      perContainer.set(l.split(' ')[1] as string, (perContainer.get(l.split(' ')[1] as string) ?? 0) + 1);
    const wrong = containers.filter((c) => perContainer.get(c) !== 1);
    const failedExecs = storm.execs - (storm.exitCodes['0'] ?? 0);
    const ratio = p99(during) / p99(idle);
    ctx.log(`shim storm: ${storm.execs} shim DELs in ${round(storm.ms, 0)} ms, ${k} ADDs during it`);
    return [
      {
        id: 'shim-storm',
        title: `ADD through the shim during a kubelet-style storm: ${containers.length} pods × ${RETRIES} DEL execs, ${PARALLEL} at a time`,
        unit: 'ms',
        candidate: {
          label: 'ADD (shim exec, no-op delegate) during the storm',
          median: round(median(during)),
          p99: round(p99(during)),
          n: during.length,
        },
        floor: {
          label: 'ADD (shim exec) on the idle daemon',
          median: round(median(idle)),
          p99: round(p99(idle)),
          n: idle.length,
        },
        ratio: round(ratio),
        ratioOf: 'p99',
        target: 'p99 <= 2x, every DEL exits 0, 1 delegate DEL per pod',
        met: ratio <= 2 && failedExecs === 0 && wrong.length === 0,
        extra: {
          p50Ratio: round(median(during) / median(idle)),
          shimExecs: storm.execs,
          failedExecs,
          podsWithWrongDelCount: wrong.length,
          stormMs: round(storm.ms, 0),
          shimDelsPerSec: round(storm.execs / (storm.ms / 1000), 0),
          shimCpuMsPerExec: round(storm.shimCpuMs / storm.execs),
          daemonCpuMsPerDel: round((cpu1.self - cpu0.self) / Math.max(1, storm.execs + k)),
        },
        notes: [
          `shim: ${shim.kind}; shimCpuMsPerExec is the CPU of the shim processes alone (reaped by the driver), daemonCpuMsPerDel the daemon's (and its spawner's) per request during the storm`,
        ],
      },
    ];
  } finally {
    await daemon.stop();
  }
}
