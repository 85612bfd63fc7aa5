// The child processes of a process, read from /proc (the spawner a daemon forked, say).

import { readdirSync, readFileSync } from 'node:fs';

/** Pids of the processes whose parent is `pid` and whose command line contains `match`. */
export function childrenOf(pid: number, match: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid && readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(match)) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}
