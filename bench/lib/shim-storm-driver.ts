// The kubelet-style DEL storm of bench/shim-storm.ts, in its own process: for every container,
// `retries` executions of the shipped shim in a row (each a new process, as the kubelet's sync loop
// calls StopPodSandbox again), `parallel` containers at a time. The shims' CPU is this process's
// reaped children's CPU (cutime + cstime in /proc/self/stat), kept apart from the daemon's.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { CLK_TCK } from './other-cpu.js';

export interface ShimStormOrder {
  shim: string;
  env: Record<string, string>;
  containers: string[];
  retries: number;
  parallel: number;
  stdin: string;
}

export interface ShimStormReport {
  ms: number;
  execs: number;
  exitCodes: Record<string, number>;
  shimCpuMs: number;
}

function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[13]) + Number(f[14])) * 1000) / CLK_TCK;
}

function exec(o: ShimStormOrder, containerId: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(o.shim, [], {
      env: { ...o.env, CNI_CONTAINERID: containerId },
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    child.on('error', () => resolve(-1));
    child.on('close', (code) => resolve(code ?? -1));
    child.stdin.on('error', () => undefined);
    child.stdin.end(o.stdin);
  });
}

async function storm(o: ShimStormOrder): Promise<ShimStormReport> {
  const exitCodes: Record<string, number> = {};
  const cpu0 = childrenCpuMs();
  const t0 = process.hrtime.bigint();
  const queue = [...o.containers];
  await Promise.all(
    Array.from({ length: o.parallel }, async () => {
      for (let cid = queue.shift(); cid !== undefined; cid = queue.shift()) {
        for (let i = 0; i < o.retries; i++) {
          const code = String(await exec(o, cid));
          exitCodes[code] = (exitCodes[code] ?? 0) + 1;
        }
      }
    }),
  );
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return {
    ms,
    execs: Object.values(exitCodes).reduce((a, b) => a + b, 0),
    exitCodes,
    shimCpuMs: childrenCpuMs() - cpu0,
  };
}

let order: ShimStormOrder | undefined;
process.on('message', (m: { type: string; order?: ShimStormOrder }) => {
  if (m.type === 'order' && m.order) {
    order = m.order;
    process.send?.({ type: 'ready' });
  } else if (m.type === 'go' && order) {
    void storm(order).then((report) => process.send?.({ type: 'done', report }, () => process.exit(0)));
  }
});
