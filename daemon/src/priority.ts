// stewardd's CPU priority (`stewardd run --nice`). Its own work is small (about 10 ms of CPU a pod),
// but every pod's start waits on its answers and the node's NetworkReady on its STATUS answers: on a
// node saturated by a burst of pods, a daemon at the pods' priority waits its turn behind them (its
// event loop measured up to 350 ms late in a 100-pod burst on 2 cores; docs/performance.md). So its
// threads run at a higher priority (a lower nice value) than the work it starts: the delegate plugins
// it runs are the node's work and keep the priority stewardd was started with, as the plain chain's
// would — the spawner process they are started from puts itself back at that value
// (plugins/spawner-priority.ts, the spawner's first import, calls restoreBasePriority).

import { readFileSync, readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** `stewardd run`'s default --nice: ten steps above the default priority. */
export const DEFAULT_NICE = -10;

/** The nice value stewardd was started with, for its children that must not keep its own. */
export const BASE_NICE_ENV = 'STEWARD_BASE_NICE';

/**
 * Every thread of a process, this one by default (Linux keeps a nice value per thread; a new thread
 * takes its creator's). The bench sets stewardd's from outside with the same function.
 */
export function setAllThreads(nice: number, pid: number | 'self' = 'self'): void {
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      setPriority(Number(tid), nice);
    } catch (e) {
      // A thread that ended since the listing has nothing left to set.
      if ((e as { info?: { code?: string } }).info?.code !== 'ESRCH') throw e;
    }
  }
}

/**
 * Sets this process's threads to `nice` and records the value it had in BASE_NICE_ENV (inherited by
 * the processes it forks). Throws what setpriority(2) threw (EACCES without CAP_SYS_NICE).
 */
export function setOwnPriority(nice: number): { before: number } {
  const before = getPriority();
  process.env[BASE_NICE_ENV] = String(before);
  setAllThreads(nice);
  return { before };
}

/**
 * In a child forked by stewardd: back to the nice value stewardd was started with. Returns it, or
 * undefined when none is recorded or it cannot be set: from a --nice above the starting value,
 * going back down needs CAP_SYS_NICE, and without it the child keeps stewardd's value (applyNice
 * says so at start) rather than failing every plugin it would start.
 */
export function restoreBasePriority(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[BASE_NICE_ENV];
  const base = raw === undefined || raw === '' ? NaN : Number(raw);
  if (!Number.isInteger(base) || base < -20 || base > 19) return undefined;
  try {
    setAllThreads(base);
  } catch {
    return undefined;
  }
  return base;
}

/** CAP_SYS_NICE's bit in /proc/<pid>/status's CapEff (linux/capability.h). */
const CAP_SYS_NICE = 23n;

/** Whether this process may lower a nice value (CAP_SYS_NICE in its effective set; no if unreadable). */
export function canLowerNice(status: string | null = ownStatus()): boolean {
  const hex = status === null ? undefined : /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return hex !== undefined && ((BigInt(`0x${hex}`) >> CAP_SYS_NICE) & 1n) === 1n;
}

function ownStatus(): string | null {
  try {
    return readFileSync('/proc/self/status', 'utf8');
  } catch {
    return null;
  }
}
