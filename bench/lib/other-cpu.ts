// How busy the rest of the machine was while the benchmarks ran: CPU time the whole machine spent
// (/proc/stat) minus what this run spent itself, its waited-for children and theirs included
// (/proc/self/stat utime + stime + cutime + cstime), in cores. The load average cannot say this: the
// storm and throughput benchmarks load both cores on their own.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second: the unit of every CPU time in /proc (proc(5)). */
export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** Busy jiffies of all CPUs: user, nice, system, irq, softirq, steal (idle and iowait left out). */
function machineBusy(): number {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = f;
  return user + nice + system + irq + softirq + steal;
}

/** This process's jiffies and those of every child it has waited for (and theirs, recursively). */
function ownBusy(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  // Fields 14–17 of proc(5) (utime, stime, cutime, cstime); f starts at field 3.
  return (f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0);
}

/** Starts counting; the function returned gives the other processes' mean CPU since, in cores. */
export function otherCpu(): () => number {
  const t0 = performance.now();
  const [machine0, own0] = [machineBusy(), ownBusy()];
  return () => {
    const seconds = (performance.now() - t0) / 1000;
    const jiffies = machineBusy() - machine0 - (ownBusy() - own0);
    return seconds > 0 ? Math.max(0, Math.round((jiffies / CLK_TCK / seconds) * 100) / 100) : 0;
  };
}
