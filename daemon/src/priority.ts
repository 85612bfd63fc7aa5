// stewardd's CPU priority (`stewardd run --nice`). Its own work is small (about 10 ms of CPU a pod),
// but every pod's start waits on its answers and the node's NetworkReady on its STATUS answers: on a
// node saturated by a burst of pods, a daemon at the pods' priority waits its turn behind them (its
// event loop measured up to 350 ms late in a 100-pod burst on 2 cores; docs/performance.md). So its
// threads run at a higher priority (a lower nice value) than the work it starts: the delegate plugins
// it runs are the node's work and keep the priority stewardd was started with, as the plain chain's
// would — the spawner process they are started from puts itself back at that value
// (plugins/spawner-child.ts calls restoreBasePriority before it takes any job, and logs a failure).

import { readdirSync } from 'node:fs';
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

/** What restoreBasePriority did: the value it set, or why it could not. */
export interface Restore {
  base: number;
  /** Why it could not: from a --nice above the starting value, going back down needs CAP_SYS_NICE. */
  error?: string;
}

/**
 * In a child forked by stewardd: back to the nice value stewardd was started with (undefined when
 * none is recorded). Never throws: a child that cannot go back keeps stewardd's value and says so
 * (the spawner logs it) rather than failing every plugin it starts.
 */
export function restoreBasePriority(env: NodeJS.ProcessEnv = process.env): Restore | undefined {
  const raw = env[BASE_NICE_ENV];
  const base = raw === undefined || raw === '' ? NaN : Number(raw);
  if (!Number.isInteger(base) || base < -20 || base > 19) return undefined;
  try {
    setAllThreads(base);
    return { base };
  } catch (e) {
    return { base, error: (e as Error).message };
  }
}
