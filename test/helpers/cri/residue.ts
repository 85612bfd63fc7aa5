// What pods of a CRI node leave behind after their StopPodSandbox + RemovePodSandbox, counted the
// same way by the burst and churn e2e tests (test/e2e/cri-burst.test.ts, cri-churn.test.ts) and the
// cri-burst / cri-churn benchmark rows: host-local leases of the node's network, interfaces still on
// its bridge (the pods' host-side veths), pod network namespaces under containerd's state dir, libcni
// result-cache files of the pods' sandboxes, per-pod iptables chains (portmap's CNI-DN-*, any CNI-*
// chain but portmap's three shared top-level ones) and rules naming a sandbox, and containerd shims
// still running for the node. And the resources of stewardd and its plugin spawner a soak samples.

import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { quiet } from '../runtimes/exec.js';
import { CNI_CACHE, listDir, processesMentioning } from '../runtimes/machine.js';
import type { CriNode } from './node.js';

/** portmap's top-level chains: made once per node, shared by every pod, never deleted by portmap. */
const SHARED_CHAINS = new Set(['CNI-HOSTPORT-DNAT', 'CNI-HOSTPORT-SETMARK', 'CNI-HOSTPORT-MASQ']);

export interface PodResidue {
  leases: number;
  /** Interfaces enslaved to the node's bridge (each pod's host-side veth). */
  veths: number;
  /** Pod netns files under containerd's state dir (netns_mounts_under_state_dir). */
  netns: number;
  /** /var/lib/cni/results files naming one of the sandboxes. */
  cacheFiles: number;
  /** CNI-* chains (nat and filter) absent at `iptablesBaseline()` time, portmap's shared ones aside. */
  cniChains: number;
  /** iptables rules naming one of the sandboxes (portmap's and bridge's comments carry the id). */
  rules: number;
  /** containerd-shim processes of this node's containerd. */
  shims: number;
}

export type IptablesBaseline = Set<string>;

function iptablesLines(): string[] {
  const out: string[] = [];
  for (const table of ['nat', 'filter'])
    for (const l of (quiet('iptables', ['-w', '-t', table, '-S']) ?? '').split('\n'))
      if (l !== '') out.push(`${table} ${l}`);
  return out;
}

function cniChains(lines: string[]): string[] {
  return lines
    .map((l) => /^(\w+) -N (CNI-\S+)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && !SHARED_CHAINS.has(m[2]!))
    .map((m) => `${m[1]} ${m[2]}`);
}

/** The CNI-* chains that exist now (before the first pod), so only the pods' own are counted. */
export function iptablesBaseline(): IptablesBaseline {
  return new Set(cniChains(iptablesLines()));
}

/** The netns dir of the CRI plugin with netns_mounts_under_state_dir = true. */
export function podNetnsDir(node: CriNode): string {
  return join(node.containerd.dir, 'state', 'io.containerd.grpc.v1.cri', 'netns');
}

/** Everything the node's pods left; all zero once every pod of `sandboxIds` is stopped and removed. */
export function podResidue(node: CriNode, sandboxIds: Iterable<string>, baseline: IptablesBaseline): PodResidue {
  const ids = [...sandboxIds];
  const idSet = new Set(ids);
  const links = quiet('ip', ['-o', 'link', 'show', 'master', node.net.bridge]) ?? '';
  const lines = iptablesLines();
  return {
    leases: node.leases().length,
    veths: links.split('\n').filter((l) => l.trim() !== '').length,
    netns: (listDir(podNetnsDir(node)) ?? []).length,
    cacheFiles: (listDir(CNI_CACHE) ?? []).filter((f) => {
      const m = /-([0-9a-f]{64})-/.exec(f);
      return m !== null && idSet.has(m[1]!);
    }).length,
    cniChains: cniChains(lines).filter((c) => !baseline.has(c)).length,
    rules: lines.filter((l) => l.includes(' -A ') && ids.some((id) => l.includes(id))).length,
    shims: processesMentioning(node.containerd.address).length,
  };
}

export const residueTotal = (r: PodResidue): number => Object.values(r).reduce((a, b) => a + b, 0);

/** Polls `podResidue` until it is all zero or `timeoutMs` passed; the last reading and when. */
export async function settledResidue(
  node: CriNode,
  sandboxIds: Iterable<string>,
  baseline: IptablesBaseline,
  timeoutMs = 10_000,
): Promise<{ residue: PodResidue; ms: number }> {
  const ids = [...sandboxIds];
  const t0 = performance.now();
  for (;;) {
    const residue = podResidue(node, ids, baseline);
    const ms = performance.now() - t0;
    if (residueTotal(residue) === 0 || ms > timeoutMs) return { residue, ms };
    await new Promise((r) => setTimeout(r, 250));
  }
}

export interface ProcUsage {
  pid: number;
  rssKiB: number;
  /** Of VmRSS: anonymous memory (heaps, malloc arenas) and file-backed pages (the binary, libraries). */
  rssAnonKiB: number;
  rssFileKiB: number;
  fds: number;
}

/** VmRSS and open fds of a process, or undefined when it is gone. */
export function procUsage(pid: number): ProcUsage | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? NaN);
    return {
      pid,
      rssKiB: kib('VmRSS'),
      rssAnonKiB: kib('RssAnon'),
      rssFileKiB: kib('RssFile'),
      fds: readdirSync(`/proc/${pid}/fd`).length,
    };
  } catch {
    return undefined;
  }
}

/** stewardd's plugin spawner: its child running plugins/spawner-child. */
export function spawnerPid(daemonPid: number): number | undefined {
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== daemonPid) continue;
      if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('spawner-child')) return Number(p);
    } catch {
      /* exited */
    }
  }
  return undefined;
}

/** Bytes of the journal: the SQLite file and its WAL (and shm), as they are now. */
export function journalBytes(stateDir: string): { db: number; wal: number } {
  const size = (f: string) => {
    try {
      return statSync(join(stateDir, f)).size;
    } catch {
      return 0;
    }
  };
  return { db: size('steward.db'), wal: size('steward.db-wal') };
}
