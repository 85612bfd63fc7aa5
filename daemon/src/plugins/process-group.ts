// A plugin's process group, named so that it can be found again after the daemon died: the group
// leader's pid, its start time (field 22 of /proc/PID/stat, clock ticks after boot), the kernel's
// boot id and the PID namespace. A pid alone can be reused; all four together cannot. Killing a
// group by that name (SIGKILL to -pid) and waiting until no member is left is what recovery does
// before it rolls back a step whose plugin was running when the daemon died, and what the daemon
// does when the spawner process dies with plugins in flight.

import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A plugin process as the journal keeps it (store/types.ts StepProcess has the same shape). */
export interface PluginProcess {
  /** The plugin's pid, which is also its process group id (it is started as a group leader). */
  pid: number;
  /** Field 22 of /proc/<pid>/stat: when it started, in clock ticks after boot. */
  startTime: number;
  /** /proc/sys/kernel/random/boot_id: a start time means nothing under another boot. */
  bootId: string;
  /** /proc/self/ns/pid of the process that started it: its pid means nothing in another namespace. */
  pidNamespace: string;
}

interface Stat {
  pid: number;
  state: string;
  pgrp: number;
  startTime: number;
}

/** One /proc/<pid>/stat, or undefined when there is no such process (or no /proc). */
function readStat(pid: number): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // comm (field 2) is in parentheses and may itself hold spaces and parentheses: fields 3 on
  // follow the last ')'.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const pgrp = Number(f[2]);
  const startTime = Number(f[19]);
  if (!Number.isSafeInteger(pgrp) || !Number.isSafeInteger(startTime)) return undefined;
  return { pid, state: f[0] ?? '?', pgrp, startTime };
}

let bootIdCache: string | undefined;

export function kernelBootId(): string {
  if (bootIdCache === undefined) {
    try {
      bootIdCache = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      bootIdCache = '';
    }
  }
  return bootIdCache;
}

function ownPidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}

/** Field 22 of /proc/<pid>/stat (clock ticks after boot), or undefined when there is no such process. */
export function processStartTime(pid: number): number | undefined {
  return readStat(pid)?.startTime;
}

/** The name of a process just started by this process; undefined when /proc cannot say. */
export function describeProcess(pid: number): PluginProcess | undefined {
  const st = readStat(pid);
  if (st === undefined) return undefined;
  return { pid, startTime: st.startTime, bootId: kernelBootId(), pidNamespace: ownPidNamespace() };
}

/** SIGKILL to a whole process group; false when there was no such group. */
export function killGroup(pgid: number): boolean {
  try {
    process.kill(-pgid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

/** Every process on this node as /proc lists it (pid, state, group, start time). */
function allProcesses(): Stat[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: Stat[] = [];
  for (const n of names) {
    if (!/^[0-9]+$/.test(n)) continue;
    const st = readStat(Number(n));
    if (st) out.push(st);
  }
  return out;
}

/**
 * The live (not zombie) members of the named group. None when the name is of another boot or PID
 * namespace (its processes are gone, or not ours to see), or when the pid now leads another
 * process, which proves the group is gone (a pid is never reused while a group of that id has a
 * member). A member started before the leader cannot be one of its children.
 */
function liveMembers(p: PluginProcess, procs: readonly Stat[]): number[] {
  if (p.bootId !== kernelBootId() || p.pidNamespace !== ownPidNamespace()) return [];
  const leader = procs.find((s) => s.pid === p.pid);
  if (leader !== undefined && leader.startTime !== p.startTime) return [];
  return procs.filter((s) => s.pgrp === p.pid && s.state !== 'Z' && s.startTime >= p.startTime).map((s) => s.pid);
}

export interface StopOutcome {
  /** Groups that had live members and were sent SIGKILL. */
  killed: PluginProcess[];
  /** Pids still alive when the wait ended (a process stuck in the kernel): empty when all are gone. */
  survivors: number[];
}

/**
 * Kills every named group that still has live members (SIGKILL to the group) and waits until none
 * is left, polling /proc, at most `timeoutMs`. A zombie counts as gone: it holds nothing.
 */
export async function stopGroups(
  list: readonly PluginProcess[],
  opts: { timeoutMs?: number; pollMs?: number } = {},
): Promise<StopOutcome> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const pollMs = opts.pollMs ?? 20;
  const killed: PluginProcess[] = [];
  if (list.length === 0) return { killed, survivors: [] };
  const deadline = Date.now() + timeoutMs;
  let first = true;
  for (;;) {
    const procs = allProcesses();
    const alive = list.map((p) => ({ p, members: liveMembers(p, procs) })).filter((x) => x.members.length > 0);
    if (alive.length === 0) return { killed, survivors: [] };
    // Again on every pass: a member forked between the scan and the kill gets it too.
    for (const { p } of alive) if (killGroup(p.pid) && first) killed.push(p);
    first = false;
    if (Date.now() >= deadline) return { killed, survivors: alive.flatMap((x) => x.members) };
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
