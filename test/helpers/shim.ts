// Executing the steward shim as a process, the way a container runtime does: CNI_* variables
// and PATH in the environment, the netconf on stdin, the answer on stdout and the exit code.

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO } from './env.js';
import { DEFAULT_SHIM_TIMEOUT_MS } from '@cni-steward/shared';

export const SHIM = join(REPO, 'bin/steward');

export interface ShimCall {
  command: string;
  containerId?: string;
  netns?: string;
  ifname?: string;
  args?: string;
  path?: string;
  /** Replace the whole environment (for bad-env tests). */
  env?: Record<string, string>;
}

export interface ShimAnswer {
  code: number | null;
  stdout: string;
  json: any;
}

export function cniEnv(call: ShimCall): Record<string, string> {
  if (call.env) return { PATH: process.env.PATH ?? '/usr/bin:/bin', ...call.env };
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', CNI_COMMAND: call.command };
  if (call.containerId !== undefined) env.CNI_CONTAINERID = call.containerId;
  if (call.netns !== undefined) env.CNI_NETNS = call.netns;
  env.CNI_IFNAME = call.ifname ?? 'eth0';
  env.CNI_PATH = call.path ?? '/usr/lib/cni';
  if (call.args !== undefined) env.CNI_ARGS = call.args;
  return env;
}

/** Runs any CNI plugin executable (the shim, or a delegate directly), or `file args…`, with stdin. */
export interface ExecOptions {
  args?: string[];
  /** Kill the process after this long (ms); it then reports the signal. */
  timeoutMs?: number;
  /** Told the pid once the process exists. */
  onSpawn?: (pid: number) => void;
}

/**
 * Without timeoutMs, an exec that outlives the shim's longest default bound (the ADD bound, 120 s)
 * plus a margin is killed and its test fails, naming the exec: a regression that removes a bound
 * fails the test that hit it instead of hanging the run.
 */
export const EXEC_LIMIT_MS = DEFAULT_SHIM_TIMEOUT_MS + 30_000;

export function execPlugin(
  file: string,
  env: Record<string, string>,
  stdin: string | Buffer,
  opts: string[] | ExecOptions = {},
): Promise<ShimAnswer & { stderr: string; signal: NodeJS.Signals | null }> {
  const { args = [], timeoutMs, onSpawn } = Array.isArray(opts) ? { args: opts } : opts;
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    if (onSpawn) child.once('spawn', () => child.pid !== undefined && onSpawn(child.pid));
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    let overran = false;
    const timer = setTimeout(() => {
      overran = timeoutMs === undefined;
      child.kill('SIGKILL');
    }, timeoutMs ?? EXEC_LIMIT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (overran) {
        reject(
          new Error(
            `${file} ${args.join(' ')} (CNI_COMMAND=${env.CNI_COMMAND ?? '-'}) did not exit within ${EXEC_LIMIT_MS} ms: killed`,
          ),
        );
        return;
      }
      const stdout = Buffer.concat(out).toString('utf8');
      let json: unknown;
      try {
        json = stdout ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, signal, stdout, json, stderr: Buffer.concat(err).toString('utf8') });
    });
    child.stdin.end(stdin);
  });
}

/** `onSpawn` is told the shim's pid as soon as it runs (bounds measured from its own start). */
export function shim(call: ShimCall, conf: unknown, onSpawn?: (pid: number) => void): Promise<ShimAnswer> {
  return execPlugin(
    SHIM,
    cniEnv(call),
    typeof conf === 'string' || Buffer.isBuffer(conf) ? conf : JSON.stringify(conf),
    onSpawn ? { onSpawn } : {},
  );
}
