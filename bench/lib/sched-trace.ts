// A node's process timeline from the kernel's own tracepoints, and the CNI calls in it. `perf record
// -a` of SCHED_EVENTS, read back with `perf script -F comm,pid,tid,time,event,trace`, says when each
// process was forked and by whom, when it exec'd what, when it exited and when it first called
// connect(2). bench/tools/cri-phases.ts splits the cri-pod row's CNI calls with it, which the row's own
// figures cannot: stewardd's histograms see only the daemon, the row only whole pods. A steward call
// is the shim the runtime execs, from its fork to its exit, and the delegates stewardd's spawner
// starts meanwhile; a plain-chain call is the same plugins the runtime execs itself, from the first
// one's fork to the last one's exit.

import { basename } from 'node:path';

/** The tracepoints the timeline is read from (`perf record -e`, comma-joined). */
export const SCHED_EVENTS = [
  'sched:sched_process_fork',
  'sched:sched_process_exec',
  'sched:sched_process_exit',
  'syscalls:sys_enter_connect',
];

/** The fields `perf script -F` prints for them, in the order perfLine reads. */
export const PERF_SCRIPT_FIELDS = 'comm,pid,tid,cpu,time,event,trace';

/** One process (a thread group) as the trace saw it; times in ms of the trace's clock. */
export interface Proc {
  pid: number;
  /** The process that forked it, and the name of the thread that did. */
  parent?: number;
  parentComm?: string;
  fork?: number;
  /** Its last exec, and the path it exec'd. */
  exec?: number;
  file?: string;
  /** Its main thread's exit. */
  exit?: number;
  /** Its first connect(2), from any of its threads. */
  connect?: number;
}

/** One event line of `perf script -F PERF_SCRIPT_FIELDS`; `t` in ms of the trace's clock. */
export interface PerfLine {
  comm: string;
  pid: number;
  tid: number;
  /** The CPU it happened on, where the line says (the `cpu` field). */
  cpu?: number;
  t: number;
  event: string;
  fields: string;
}

// "<comm> <pid>/<tid> [<cpu>] <seconds>: <event>: <fields>"; a thread's name may hold spaces, and a
// dying thread's last switch is printed as ":-1 <pid>/-1" (its fields still name it).
const LINE = /^\s*(.*?)\s+(-?\d+)\/(-?\d+)\s+(?:\[(\d+)\]\s+)?(\d+\.\d+):\s+(\S+):\s*(.*)$/;

/** A line's fields, or undefined for a line that is no event (a header, another format). */
export function perfLine(text: string): PerfLine | undefined {
  const m = LINE.exec(text);
  if (!m) return undefined;
  const [, comm, pid, tid, cpu, seconds, event, fields] = m as unknown as string[];
  return {
    comm: comm as string,
    pid: Number(pid),
    tid: Number(tid),
    ...(cpu !== undefined ? { cpu: Number(cpu) } : {}),
    t: Number(seconds) * 1000,
    event: event as string,
    fields: fields as string,
  };
}

/** The pid (or thread id) a `sched_process_fork` line made, else undefined. */
export function forkedChild(l: PerfLine): number | undefined {
  const child = l.event === 'sched:sched_process_fork' ? /\bchild_pid=(\d+)/.exec(l.fields) : null;
  return child ? Number(child[1]) : undefined;
}

/** Every process the trace shows, by pid. Lines of other events or formats are skipped. */
export function parsePerfScript(text: string): Map<number, Proc> {
  const reader = procReader();
  for (const line of text.split('\n')) reader.line(line);
  return reader.procs;
}

/** parsePerfScript a line at a time, for a trace too long to hold as one string. */
export function procReader(): { line(line: string): void; procs: Map<number, Proc> } {
  const procs = new Map<number, Proc>();
  let reused = 0;
  const proc = (pid: number): Proc => {
    let p = procs.get(pid);
    if (!p) procs.set(pid, (p = { pid }));
    return p;
  };
  const line = (text: string) => {
    const l = perfLine(text);
    if (!l) return;
    const { comm, pid, tid, t, event, fields } = l;
    switch (event) {
      case 'sched:sched_process_fork': {
        // A new thread is reported too; it never execs, so it never counts as a CNI call.
        const child = forkedChild(l);
        if (child === undefined) break;
        // The kernel reuses ids (pid_max is 32768 here): an earlier holder of this one is kept
        // under a key of its own, and lookups by pid find the latest.
        const earlier = procs.get(child);
        if (earlier) procs.set(-++reused, earlier);
        procs.set(child, { pid: child, fork: t, parent: pid, parentComm: comm });
        break;
      }
      case 'sched:sched_process_exec': {
        const file = /\bfilename=(\S+)/.exec(fields);
        Object.assign(proc(pid), { exec: t, file: file?.[1] });
        break;
      }
      case 'sched:sched_process_exit':
        if (tid === pid) proc(pid).exit = t;
        break;
      case 'syscalls:sys_enter_connect':
        proc(pid).connect ??= t;
        break;
    }
  };
  return { line, procs };
}

/** A process seen from its fork to its exit, with the path it ran. */
type Whole = Required<Pick<Proc, 'pid' | 'fork' | 'exec' | 'exit' | 'file'>> & Proc;

function whole(p: Proc): p is Whole {
  return p.fork !== undefined && p.exec !== undefined && p.exit !== undefined && p.file !== undefined;
}

export interface CallShape {
  /** The plugin chain in ADD order (the plain conflist's, and stewardd's delegate for it). */
  chain: string[];
  /** The name of the runtime's threads (perf's comm of the forking thread): containerd. */
  runtime: string;
  /** The file name of steward's shim as the runtime execs it. */
  shim: string;
}

/** One CNI call: what ran, its whole span and the parts of it, ms. */
export interface Call {
  /** ADD (the chain in order), DEL (reversed), or `none` (a steward call that ran no delegate). */
  kind: 'ADD' | 'DEL' | 'none';
  /** Among the calls after the container's ADD: 1 for the first, 2 for the second, … (0 for the ADD). */
  nth: number;
  start: number;
  total: number;
  /** Named parts of the span, in order; together they make `total`. */
  parts: [string, number][];
  /** The delegates it ran, in the order they ran. */
  delegates: Proc[];
}

/** ADD when `names` is the chain, DEL when it is the chain reversed, else undefined. */
function chainKind(names: string[], chain: string[]): 'ADD' | 'DEL' | undefined {
  if (names.length !== chain.length) return undefined;
  if (names.every((n, i) => n === chain[i])) return 'ADD';
  if (names.every((n, i) => n === chain[chain.length - 1 - i])) return 'DEL';
  return undefined;
}

/** Each plugin's fork to exec and exec to exit, and the gaps between one's exit and the next one's fork. */
function pluginParts(ds: Whole[]): [string, number][] {
  const parts: [string, number][] = [];
  ds.forEach((d, i) => {
    const name = basename(d.file);
    if (i > 0)
      parts.push([`${basename((ds[i - 1] as Whole).file)} exit → ${name} forked`, d.fork - (ds[i - 1] as Whole).exit]);
    parts.push([`${name} fork → exec`, d.exec - d.fork], [`${name} exec → exit`, d.exit - d.exec]);
  });
  return parts;
}

/** Numbers the calls after each ADD (1, 2, …) in time order. */
function numbered(calls: Omit<Call, 'nth'>[]): Call[] {
  let since = 0;
  return calls.sort((a, b) => a.start - b.start).map((c) => ({ ...c, nth: c.kind === 'ADD' ? (since = 0) : ++since }));
}

/**
 * Steward's calls: each shim the runtime forked, split into its start (fork → exec → connect), the
 * daemon and spawner before the first delegate (connect → its fork), the delegates and the gaps
 * between them, and what follows the last one (its exit → the shim's exit). A shim that ran no
 * delegate is `none`, split into its start and the rest.
 */
export function stewardCalls(procs: Map<number, Proc>, shape: CallShape): Call[] {
  const all = [...procs.values()].filter(whole);
  const shims = all.filter((p) => p.parentComm === shape.runtime && basename(p.file) === shape.shim);
  const delegates = all
    .filter((p) => p.parentComm !== shape.runtime && shape.chain.includes(basename(p.file)))
    .sort((a, b) => a.fork - b.fork);
  const calls: Omit<Call, 'nth'>[] = [];
  for (const s of shims) {
    const ds = delegates.filter((d) => d.fork >= s.fork && d.exit <= s.exit);
    const connect = s.connect ?? s.exec;
    const start: [string, number][] = [
      ['shim fork → exec', s.exec - s.fork],
      ['shim exec → connect', connect - s.exec],
    ];
    const total = s.exit - s.fork;
    if (ds.length === 0) {
      calls.push({
        kind: 'none',
        start: s.fork,
        total,
        parts: [...start, ['connect → shim exit', s.exit - connect]],
        delegates: [],
      });
      continue;
    }
    const kind = chainKind(
      ds.map((d) => basename(d.file)),
      shape.chain,
    );
    if (!kind) continue;
    const first = ds[0] as Whole;
    const last = ds[ds.length - 1] as Whole;
    calls.push({
      kind,
      start: s.fork,
      total,
      parts: [
        ...start,
        ['connect → first delegate forked', first.fork - connect],
        ...pluginParts(ds),
        ['last delegate exit → shim exit', s.exit - last.exit],
      ],
      delegates: ds,
    });
  }
  return numbered(calls);
}

/** The plain chain's calls: the chain's plugins the runtime forked itself, in order (ADD) or reversed (DEL). */
export function directCalls(procs: Map<number, Proc>, shape: CallShape): Call[] {
  const own = [...procs.values()]
    .filter(whole)
    .filter((p) => p.parentComm === shape.runtime && shape.chain.includes(basename(p.file)))
    .sort((a, b) => a.fork - b.fork);
  const calls: Omit<Call, 'nth'>[] = [];
  for (let i = 0; i + shape.chain.length <= own.length;) {
    const ds = own.slice(i, i + shape.chain.length);
    // One after the other: a plugin of another pod's call never starts while one of this call runs.
    const sequential = ds.every((d, j) => j === 0 || d.fork >= (ds[j - 1] as Whole).exit);
    const kind = sequential
      ? chainKind(
          ds.map((d) => basename(d.file)),
          shape.chain,
        )
      : undefined;
    if (!kind) {
      i++;
      continue;
    }
    const first = ds[0] as Whole;
    calls.push({
      kind,
      start: first.fork,
      total: (ds[ds.length - 1] as Whole).exit - first.fork,
      parts: pluginParts(ds),
      delegates: ds,
    });
    i += shape.chain.length;
  }
  return numbered(calls);
}

/**
 * For a process, it and every process it started, and they started, while it lived (a pid is reused
 * once its holder is gone), as the trace saw them fork.
 */
export function descendants(procs: Map<number, Proc>): (root: Proc) => Set<number> {
  // Forks come after their parent's: one pass in fork order finds children of children.
  const byFork = [...procs.values()]
    .filter((p) => p.fork !== undefined && p.parent !== undefined)
    .sort((a, b) => (a.fork as number) - (b.fork as number));
  return (root) => {
    const tree = new Set([root.pid]);
    const from = root.fork ?? -Infinity;
    const to = root.exit ?? Infinity;
    for (const p of byFork)
      if ((p.fork as number) >= from && (p.fork as number) <= to && tree.has(p.parent as number)) tree.add(p.pid);
    return tree;
  };
}

/**
 * The runtime's request a call answered, by its place after the container's ADD: `ADD`, `DEL 1`,
 * `DEL 2`, … (steward's second DEL of a pod runs no delegate, the plain chain's runs them all again).
 */
export function callLabel(c: Call): string {
  return c.nth === 0 ? 'ADD' : `DEL ${c.nth}`;
}

export interface PartSummary {
  label: string;
  /** Median ms of the steward calls with this label, of the plain chain's, and how many of each. */
  steward: number;
  direct: number;
  stewardCalls: number;
  directCalls: number;
  /** Median ms of each part, steward's and the plain chain's, in the order the calls have them. */
  stewardParts: [string, number][];
  directParts: [string, number][];
}

function medianOf(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Median of each part over calls (parts by name, in the order of the call that has the most). */
function partMedians(calls: Call[]): [string, number][] {
  const longest = calls.reduce<Call | undefined>((a, c) => (a && a.parts.length >= c.parts.length ? a : c), undefined);
  return (longest?.parts ?? []).map(([name]) => [
    name,
    medianOf(calls.flatMap((c) => c.parts.filter(([n]) => n === name).map(([, ms]) => ms))),
  ]);
}

/** Steward's calls against the plain chain's, label by label (ADD, DEL 1, …). */
export function summarise(steward: Call[], direct: Call[]): PartSummary[] {
  const labels = [...new Set([...steward, ...direct].map(callLabel))].sort((a, b) =>
    a === 'ADD' ? -1 : b === 'ADD' ? 1 : a.localeCompare(b, 'en', { numeric: true }),
  );
  return labels.map((label) => {
    const s = steward.filter((c) => callLabel(c) === label);
    const d = direct.filter((c) => callLabel(c) === label);
    return {
      label,
      steward: medianOf(s.map((c) => c.total)),
      direct: medianOf(d.map((c) => c.total)),
      stewardCalls: s.length,
      directCalls: d.length,
      stewardParts: partMedians(s),
      directParts: partMedians(d),
    };
  });
}
