// CNI clients started from a Go process (bench/fixtures/exec-runner), as containerd starts a plugin,
// for the rows that time a client's execution under load: a Node process forks itself for every
// child, and the bench's and a tsx driver's 100+ MiB make that fork cost milliseconds of CPU each
// (bench/tools/spawn-cost.ts), load that no node's runtime makes. `GoExec` runs calls one at a time
// and times each in Go; `startGoStorm` is the kubelet-style DEL storm of the shim-storm and
// status-storm rows, its clients' CPU (their reaped rusage) kept apart from the runner's.

import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import { buildGoFixture } from './go-fixtures.js';
import type { Scratch } from './scratch.js';
import { join } from 'node:path';

/** One client execution: the program, its arguments, its whole environment and its stdin. */
export interface StormCall {
  id: string;
  file: string;
  args: string[];
  env: Record<string, string>;
  stdin: string;
}

export interface StormOrder {
  calls: StormCall[];
  /** Executions in a row per call (the kubelet retrying StopPodSandbox). */
  retries: number;
  /** Calls at a time. */
  parallel: number;
}

export interface StormReport {
  ms: number;
  execs: number;
  exitCodes: Record<string, number>;
  /** CPU of the executed clients (shims or curls) alone. */
  clientCpuMs: number;
}

export interface GoExecuted {
  /** The exit code; -1 if it could not start (then `error` says why) or was killed by a signal. */
  code: number;
  error?: string;
  /** Wall time of the execution as the Go runner saw it (start to reaped). */
  ms: number;
  /** Its user + system CPU, from the rusage wait4 reported for it (microseconds; what it reaped included). */
  cpuMs: number;
  stdout: string;
}

/** Builds the runner once per scratch dir. */
export function execRunner(env: Scratch): string {
  return buildGoFixture('exec-runner', join(env.dir, 'exec-runner'));
}

/** A runner process, its answer lines in order, and why it is gone once it is. */
interface Runner {
  proc: ChildProcess;
  lines: Interface;
  gone?: string;
  /** Answers awaited: each is told when the runner is gone. */
  waiting: Set<(why: string) => void>;
}

/** Starts a runner; killed at env.close() if still running. */
function startRunner(env: Scratch, runner: string, mode: 'serve' | 'storm', nice?: number): Runner {
  // Its children inherit the runner's nice value (`nice -n` adds to this process's).
  const [file, args] = nice === undefined ? [runner, [mode]] : ['nice', ['-n', String(nice), runner, mode]];
  const proc = spawn(file, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const r: Runner = { proc, lines: createInterface({ input: proc.stdout! }), waiting: new Set() };
  const end = (why: string) => {
    r.gone ??= why;
    for (const tell of r.waiting) tell(r.gone);
    r.waiting.clear();
  };
  // A runner that cannot start fails its row, never the bench process (an 'error' without a listener throws).
  proc.on('error', (e) => end(`could not run (${e.message})`));
  // 'close' comes after the last line of its stdout was read.
  proc.on('close', (code, signal) => end(`exited ${code ?? signal}`));
  env.defer(() => {
    if (proc.exitCode === null) proc.kill('SIGKILL');
  });
  proc.stdin!.on('error', () => undefined);
  return r;
}

/** The next line the runner prints; rejects if it is gone first, or already was. */
function nextLine(r: Runner): Promise<string> {
  if (r.gone !== undefined) return Promise.reject(new Error(`exec-runner ${r.gone} before answering`));
  return new Promise((resolve, reject) => {
    const onGone = (why: string) => {
      r.lines.off('line', onLine);
      reject(new Error(`exec-runner ${why} before answering`));
    };
    const onLine = (l: string) => {
      r.waiting.delete(onGone);
      resolve(l);
    };
    r.lines.once('line', onLine);
    r.waiting.add(onGone);
  });
}

/** Executes calls one at a time from one Go process (`run` calls may overlap: they queue). */
export class GoExec {
  private readonly runner: Runner;
  private last: Promise<unknown> = Promise.resolve();

  constructor(env: Scratch, runner: string) {
    this.runner = startRunner(env, runner, 'serve');
  }

  run(file: string, env: Record<string, string>, stdin: string, args: string[] = []): Promise<GoExecuted> {
    const answer = this.last.then(() => {
      const line = nextLine(this.runner);
      this.runner.proc.stdin!.write(`${JSON.stringify({ file, args, env, stdin })}\n`);
      return line.then((l) => JSON.parse(l) as GoExecuted);
    });
    this.last = answer.catch(() => undefined);
    return answer;
  }

  close(): void {
    this.runner.proc.stdin!.end();
  }
}

/**
 * Hands the storm its order and resolves once it is ready; the function returned starts it. `nice`:
 * the storm's clients start at that nice value (as from a runtime that ran its teardowns at a lower
 * priority than its sandbox starts), not at this process's.
 */
export async function startGoStorm(
  env: Scratch,
  runner: string,
  order: StormOrder,
  nice?: number,
): Promise<() => Promise<StormReport>> {
  const r = startRunner(env, runner, 'storm', nice);
  const ready = nextLine(r);
  r.proc.stdin!.write(`${JSON.stringify(order)}\n`);
  await ready;
  return async () => {
    const report = nextLine(r);
    r.proc.stdin!.end('go\n');
    return JSON.parse(await report) as StormReport;
  };
}
