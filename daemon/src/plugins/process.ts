// Running one executable to completion: no shell, the given environment only, stdin written
// then closed, stdout/stderr captured up to a cap, and its own process group (the child is a group
// leader), which is killed when the deadline passes and again as soon as the plugin exits: what it
// started and left behind (a grandchild holding stdout, say) dies with it. Groups still running
// are listed, so the spawner can kill them all when the daemon dies (killRunningGroups).

import { spawn } from 'node:child_process';
import { killGroup } from './process-group.js';

export interface ProcessJob {
  file: string;
  env: Record<string, string>;
  stdin: string;
  /** Arguments (plugins get none: CNI passes everything through the environment and stdin). */
  args?: string[];
  timeoutMs: number;
  maxOutputBytes: number;
}

export interface ProcessOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** stdout went past maxOutputBytes (what was kept is truncated). */
  overflow: boolean;
  /** The process could not be started at all. */
  spawnError?: string;
}

/**
 * After the process exits, how long its pipes may stay open. A helper that left the process group
 * (setsid) and kept stdout open would otherwise hold the call, its slot and its container's queue forever.
 */
const PIPE_GRACE_MS = 2000;

/** Process groups of the plugins started here and not yet exited. */
const running = new Set<number>();

/** SIGKILL to the process group of every plugin still running; returns how many were signalled. */
export function killRunningGroups(): number {
  let n = 0;
  for (const pid of running) if (killGroup(pid)) n++;
  running.clear();
  return n;
}

export interface ProcessHooks {
  /** Called once the process exists (before it is likely to have done anything), with its pid. */
  onStart?: (pid: number) => void;
}

/**
 * One plugin process, start to settle. Long on purpose: spawn, deadline, capped capture, exit, the
 * group kill and the pipe grace share one state, and the order of those events is the point (a
 * deadline kills only while the group is its own; the group goes at exit; settle once): one read.
 */
export function runProcess(job: ProcessJob, hooks: ProcessHooks = {}): Promise<ProcessOutcome> {
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let timedOut = false;
    let spawnError: string | undefined;
    let exit: { code: number | null; signal: NodeJS.Signals | null } = { code: null, signal: null };
    let settled = false;
    const timers: NodeJS.Timeout[] = [];
    const settle = () => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      resolve({
        ...exit,
        timedOut,
        overflow: outBytes > job.maxOutputBytes,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        ...(spawnError !== undefined ? { spawnError } : {}),
      });
    };

    let child;
    try {
      child = spawn(job.file, job.args ?? [], {
        env: job.env,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        shell: false,
      });
    } catch (e) {
      // Invalid arguments (a NUL in the environment, say) throw before any process exists.
      spawnError = (e as Error).message;
      settle();
      return;
    }
    const pid = child.pid;
    if (pid !== undefined) {
      running.add(pid);
      hooks.onStart?.(pid);
    }
    timers.push(
      setTimeout(() => {
        // Only while it runs: after its exit the group is already killed, and the id may be free.
        if (pid === undefined || !running.has(pid)) return;
        timedOut = true;
        killGroup(pid);
      }, job.timeoutMs),
    );
    child.stdout.on('data', (b: Buffer) => {
      if ((outBytes += b.length) <= job.maxOutputBytes) out.push(b);
    });
    child.stderr.on('data', (b: Buffer) => {
      if ((errBytes += b.length) <= job.maxOutputBytes) err.push(b);
    });
    child.stdin.on('error', () => {
      /* exited before reading stdin; its exit status says why */
    });
    child.on('error', (e) => {
      spawnError = e.message;
      if (child.pid === undefined) settle();
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      // The plugin is done: whatever it left in its group goes too. Its group id stays reserved
      // while any member lives, so this never reaches another process's group.
      if (pid !== undefined) {
        running.delete(pid);
        killGroup(pid);
      }
      timers.push(
        setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          settle();
        }, PIPE_GRACE_MS),
      );
    });
    child.on('close', settle);
    child.stdin.end(job.stdin);
  });
}
