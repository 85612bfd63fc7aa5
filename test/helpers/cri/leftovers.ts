// What containerd's CRI path leaves machine-wide that no pod's teardown removes: portmap's top-level
// nat chains (CNI-HOSTPORT-*) and the pods' cgroup parent. CriNode (node.ts) removes both at close
// when this run made them; the suite's residue check reports anything still left.

import { existsSync, readdirSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import type { TestEnv } from '../env.js';
import { quiet } from '../runtimes/exec.js';

const CGROUP_ROOT = '/sys/fs/cgroup';

/** portmap's top-level chains (CNI-HOSTPORT-*) outlive every pod: removed at close if this run made them and no pod's rule is left. */
export function removePortmapChainsAtClose(env: TestEnv): void {
  const had = new Set(natChains());
  env.defer(() => {
    const made = natChains().filter((c) => c.startsWith('CNI-HOSTPORT-') && !had.has(c));
    if (made.length === 0) return;
    const dnat = quiet('iptables', ['-w', '-t', 'nat', '-S', 'CNI-HOSTPORT-DNAT']) ?? '';
    if (dnat.split('\n').some((l) => l.startsWith('-A '))) return; // a pod's rule is still there: residue() reports it
    const rules = (quiet('iptables', ['-w', '-t', 'nat', '-S']) ?? '').split('\n');
    for (const r of rules) {
      const m = /^-A (\S+) (.*)-j (CNI-HOSTPORT-\S+)$/.exec(r.trim());
      if (m && made.includes(m[3]!) && !m[1]!.startsWith('CNI-HOSTPORT-')) {
        const args = r
          .trim()
          .replace(/^-A /, '-D ')
          .match(/"[^"]*"|\S+/g)!
          .map((a) => a.replace(/^"(.*)"$/, '$1'));
        quiet('iptables', ['-w', '-t', 'nat', ...args]);
      }
    }
    for (const c of made) quiet('iptables', ['-w', '-t', 'nat', '-F', c]);
    for (const c of made) quiet('iptables', ['-w', '-t', 'nat', '-X', c]);
  });
}

function natChains(): string[] {
  return (quiet('iptables', ['-w', '-t', 'nat', '-S']) ?? '')
    .split('\n')
    .filter((l) => l.startsWith('-N '))
    .map((l) => l.slice(3).trim());
}

/** A cgroup parent (`/name`) in each hierarchy where it exists. */
export function cgroupDirs(parent: string): string[] {
  const name = parent.slice(1);
  const found: string[] = [];
  for (const top of readdirSync(CGROUP_ROOT)) {
    for (const p of [join(CGROUP_ROOT, top, name), join(CGROUP_ROOT, name)]) {
      if (existsSync(p) && !found.includes(p)) found.push(p);
    }
  }
  return found;
}

/** Removes the parent's (empty) cgroup dirs, deepest first; a busy one stays for the residue check. */
export function removeCgroupDirs(parent: string): void {
  for (const dir of cgroupDirs(parent)) {
    const rm = (d: string): void => {
      try {
        for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) rm(join(d, e.name));
        rmdirSync(d);
      } catch {
        /* busy: reported by the suite's residue check */
      }
    };
    rm(dir);
  }
}
