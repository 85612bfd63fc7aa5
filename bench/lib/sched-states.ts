// Where a process's time went, from the scheduler's own tracepoints: between two instants, how long
// some thread of it (or of a process it started) was on a CPU, how long none was but one was ready to
// run and waited for a CPU, and how long all of them slept (a pipe, a lock, a child's exit). While it
// waited, the threads that held the CPUs are named, so a delegate slowed by the node's other work says
// whose. bench/tools/cri-phases.ts reads a delegate's exec → exit with it, steward's beside the plain
// chain's; sched-trace.ts finds the processes and the instants.

import { forkedChild, perfLine } from './sched-trace.js';

/**
 * The scheduler tracepoints this reads (`perf record -e`), beside sched-trace.ts's SCHED_EVENTS, whose
 * forks tell a reused thread id from the thread that held it before.
 */
export const STATE_EVENTS = ['sched:sched_switch', 'sched:sched_wakeup', 'sched:sched_wakeup_new'];

type Th = 'run' | 'ready' | 'sleep';

/** A thread entering a state at `t` (ms). */
interface Change {
  t: number;
  /** The thread, by its number in the timeline (not its kernel id, which is reused). */
  tid: number;
  to: Th;
  /** A wakeup (not a switch). */
  woken?: true;
}

export interface Timeline {
  /** Every state change, in time order. */
  changes: Change[];
  /** A thread's process id (its thread group), where any line showed it as the current task. */
  tgid: Map<number, number>;
  /** A thread's last name seen. */
  comm: Map<number, string>;
  /** A thread's kernel id. */
  kernelTid: Map<number, number>;
}

const SWITCH = /prev_comm=(.*?) prev_pid=(\d+) .*?prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)/;
const WAKEUP = /comm=(.*?) pid=(\d+) /;

/** The scheduler's view of every thread in a `perf script -F PERF_SCRIPT_FIELDS` (sched-trace.ts). */
export function parseStates(text: string): Timeline {
  const reader = stateReader();
  for (const line of text.split('\n')) reader.line(line);
  return reader.timeline();
}

/** parseStates a line at a time, for a trace too long to hold as one string. */
export function stateReader(): { line(line: string): void; timeline(): Timeline } {
  const changes: Change[] = [];
  const tgid = new Map<number, number>();
  const comm = new Map<number, string>();
  // The kernel reuses thread ids (pid_max is 32768 here, and a run starts thousands of threads): a
  // thread is known by its own number in the timeline, a new one each time its id is forked again.
  const threads = new Map<number, number>();
  const kernelTid = new Map<number, number>();
  let lastThread = 0;
  const newThread = (tid: number): number => {
    threads.set(tid, ++lastThread);
    kernelTid.set(lastThread, tid);
    return lastThread;
  };
  const thread = (tid: number): number => (tid <= 0 ? tid : (threads.get(tid) ?? newThread(tid)));
  // Who each CPU runs, where lines name their CPU: some switches never reach the trace (a thread of
  // the VM's own agent was seen switched in and never out), and a thread still counted on a CPU
  // another has taken has left it. Whether it then slept or waited is not known: it counts as asleep.
  const onCpu = new Map<number, number>();
  const leaveOtherCpus = (id: number, cpu: number) => {
    for (const [c, other] of onCpu) if (other === id && c !== cpu) onCpu.delete(c);
  };
  const line = (text: string) => {
    const l = perfLine(text);
    if (!l) return;
    const { t, event, fields, cpu } = l;
    const child = forkedChild(l);
    if (child !== undefined) newThread(child);
    if (l.tid > 0) tgid.set(thread(l.tid), l.pid);
    if (event === 'sched:sched_switch') {
      const s = SWITCH.exec(fields);
      if (!s) return;
      const [, prevComm, prevText, state, nextComm, nextText] = s as unknown as string[];
      const [prev, next] = [thread(Number(prevText)), thread(Number(nextText))];
      comm.set(prev, prevComm as string);
      comm.set(next, nextComm as string);
      if (cpu !== undefined) {
        const was = onCpu.get(cpu);
        if (was !== undefined && was !== prev && was !== 0) changes.push({ t, tid: was, to: 'sleep' });
        leaveOtherCpus(prev, cpu);
        leaveOtherCpus(next, cpu);
        onCpu.set(cpu, next);
      }
      // R (or R+): preempted, still ready to run; anything else (S, D, …): it gave the CPU up.
      changes.push({ t, tid: prev, to: (state as string).startsWith('R') ? 'ready' : 'sleep' });
      changes.push({ t, tid: next, to: 'run' });
    } else if (event === 'sched:sched_wakeup' || event === 'sched:sched_wakeup_new') {
      const w = WAKEUP.exec(fields);
      if (!w) return;
      const id = thread(Number(w[2]));
      comm.set(id, w[1] as string);
      changes.push({ t, tid: id, to: 'ready', woken: true });
    }
  };
  // perf script prints in time order; the sort is for whatever did not (a stable sort keeps a switch's pair).
  return { line, timeline: () => ({ changes: changes.sort((a, b) => a.t - b.t), tgid, comm, kernelTid }) };
}

export interface StateSplit {
  /** ms with at least one thread of the processes on a CPU. */
  onCpu: number;
  /** ms with none on a CPU and at least one ready to run: waiting for a CPU. */
  waiting: number;
  /** ms with every thread asleep. */
  asleep: number;
  /** While they waited: ms each other process (by name) held a CPU, shared among those holding one. */
  heldBy: Record<string, number>;
}

/** The processes `pids` (a delegate and what it started) between two instants (ms). */
export interface Window {
  pids: Set<number>;
  from: number;
  to: number;
}

interface Active {
  w: Window;
  split: StateSplit;
  running: number;
  ready: number;
  last: number;
}

/**
 * How each window's processes spent it, in one pass over the timeline; `name` says whose a thread
 * holding a CPU is (its name by default). A thread never seen before a window counts as asleep until
 * its first change (a new process's first thread is woken as it is forked, so it is seen ready
 * before it runs).
 */
export function splitStates(
  tl: Timeline,
  windows: Window[],
  name: (tid: number) => string = (tid) => tl.comm.get(tid) ?? String(tid),
): StateSplit[] {
  const out: StateSplit[] = windows.map(() => ({ onCpu: 0, waiting: 0, asleep: 0, heldBy: {} }));
  const order = windows.map((_, i) => i).sort((a, b) => (windows[a] as Window).from - (windows[b] as Window).from);
  const state = new Map<number, Th>();
  const running = new Set<number>();
  let next = 0;
  let active: Active[] = [];
  const mine = (a: Active, tid: number) => a.w.pids.has(tl.tgid.get(tid) ?? -1);
  const account = (a: Active, until: number) => {
    const ms = Math.min(until, a.w.to) - a.last;
    if (ms <= 0) return;
    a.last += ms;
    if (a.running > 0) a.split.onCpu += ms;
    else if (a.ready === 0) a.split.asleep += ms;
    else {
      a.split.waiting += ms;
      const others = [...running].filter((tid) => !mine(a, tid));
      for (const tid of others) {
        const who = name(tid);
        a.split.heldBy[who] = (a.split.heldBy[who] ?? 0) + ms / others.length;
      }
    }
  };
  const advance = (t: number) => {
    for (; next < order.length && (windows[order[next] as number] as Window).from <= t; next++) {
      const i = order[next] as number;
      const w = windows[i] as Window;
      const a: Active = { w, split: out[i] as StateSplit, running: 0, ready: 0, last: w.from };
      for (const [tid, s] of state) {
        if (!mine(a, tid)) continue;
        if (s === 'run') a.running++;
        else if (s === 'ready') a.ready++;
      }
      active.push(a);
    }
    for (const a of active) account(a, t);
    active = active.filter((a) => a.w.to > t);
  };
  for (const c of tl.changes) {
    advance(c.t);
    // An idle CPU's swapper is tid 0 on every CPU: never tracked.
    if (c.tid === 0) continue;
    const was = state.get(c.tid);
    // A thread is woken on its CPU too (it had set itself asleep and not yet switched out): it runs on.
    if (c.woken && was === 'run') continue;
    state.set(c.tid, c.to);
    if (c.to === 'run') running.add(c.tid);
    else running.delete(c.tid);
    for (const a of active) {
      if (!mine(a, c.tid)) continue;
      if (was === 'run') a.running--;
      else if (was === 'ready') a.ready--;
      if (c.to === 'run') a.running++;
      else if (c.to === 'ready') a.ready++;
    }
  }
  advance(Infinity);
  return out;
}
