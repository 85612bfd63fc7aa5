// The kubelet-style DEL storm of bench/rows/shim-storm.ts, in its own process: for every container,
// `retries` executions of its client in a row (each a new process, as the kubelet's sync loop calls
// StopPodSandbox again), `parallel` containers at a time. The client is the shipped shim, or for the
// baseline one `curl --unix-socket` process per request (an executed C client). The clients' CPU is
// this process's reaped children's CPU (cutime + cstime in /proc/self/stat), kept apart from the
// daemon's.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { CLK_TCK } from './other-cpu.js';

/** One container's DEL: the process to execute, its environment and its stdin. */
export interface StormCall {
  id: string;
  file: string;
  args: string[];
  env: Record<string, string>;
  stdin: string;
}

export interface ShimStormOrder {
  calls: StormCall[];
  retries: number;
  parallel: number;
}

export interface ShimStormReport {
  ms: number;
  execs: number;
  exitCodes: Record<string, number>;
  /** CPU of the executed clients (shims or curls) alone. */
  shimCpuMs: number;
}

function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[13]) + Number(f[14])) * 1000) / CLK_TCK;
}

function exec(c: StormCall): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(c.file, c.args, { env: c.env, stdio: ['pipe', 'ignore', 'ignore'] });
    child.on('error', () => resolve(-1));
    child.on('close', (code) => resolve(code ?? -1));
    child.stdin.on('error', () => undefined);
    child.stdin.end(c.stdin);
  });
}

async function storm(o: ShimStormOrder): Promise<ShimStormReport> {
  const exitCodes: Record<string, number> = {};
  const cpu0 = childrenCpuMs();
  const t0 = process.hrtime.bigint();
  const queue = [...o.calls];
  await Promise.all(
    Array.from({ length: o.parallel }, async () => {
      for (let call = queue.shift(); call !== undefined; call = queue.shift()) {
        for (let i = 0; i < o.retries; i++) {
          const code = String(await exec(call));
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
