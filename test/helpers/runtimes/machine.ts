// The machine-wide places the e2e suite touches, and the snapshot of them that proves the suite
// leaves the machine as it found it: /etc/cni/net.d, /opt/cni/bin, the podman drop-in dir,
// iptables' filter and nat tables, ip_forward, and the directories runtimes create on first use.
// `snapshot()` is taken at setup, `machineDiff()` compares it with now (RuntimeHost.residue adds
// what the host itself made), `restoreMachineState()` puts back what a run may have changed, and
// `removeStaleFiles()` removes what an earlier run that died before its cleanup left.

import {
  existsSync,
  lstatSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { readRecord, recordedFiles, recordPath, type InstallRecord } from '../../../daemon/src/lifecycle/record.js';
import { sha256 } from '../pod/observe.js';
import { quiet } from './exec.js';

export const CNI_CONF_DIR = '/etc/cni/net.d';
export const OPT_CNI_BIN = '/opt/cni/bin';
export const DROP_IN_DIR = '/etc/containers/containers.conf.d';
export const DROP_IN = join(DROP_IN_DIR, '99-steward-e2e.conf');
/** The drop-in's first line: what marks a drop-in as this suite's. */
export const DROP_IN_HEADER = "# Written by cni-steward's e2e suite";
export const CNI_CACHE = '/var/lib/cni/results';
/** Paths the runtimes (or this helper) create on first use; removed at close if absent at setup. */
const FIRST_USE_PATHS = [
  '/run/runc',
  '/run/containerd',
  '/run/libpod',
  '/run/containers',
  '/var/lib/cni',
  '/var/lib/containers',
  '/run/mount',
  '/opt/containerd',
  join(CNI_CONF_DIR, 'cni.lock'),
  DROP_IN_DIR,
  '/opt/cni',
  '/etc/cni',
];
/** Every name this suite writes into shared places carries it. */
export const E2E_MARK = 'stw-e2e';

export interface MachineState {
  confDir: string[];
  optCniBin: string[] | null;
  dropIns: string[] | null;
  iptables: string[];
  ipForward: string;
  firstUse: Record<string, boolean>;
}

export function listDir(dir: string): string[] | null {
  try {
    return readdirSync(dir).sort();
  } catch {
    return null;
  }
}

function iptablesRules(): string[] {
  const lines: string[] = [];
  for (const table of ['filter', 'nat']) {
    const out = quiet('iptables', ['-w', '-t', table, '-S']);
    if (out !== undefined)
      lines.push(
        ...out
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => `${table}: ${l}`),
      );
  }
  return lines.sort();
}

/**
 * Removes `path` if it holds only husks: a first-use path the suite made (at close), or one that work
 * done before the machine lock made (the image build's /var/lib/containers). What holds more is left
 * for residue().
 */
export function removeIfOnlyHusks(path: string): void {
  try {
    if (existsSync(path) && onlyHusks(path)) rmSync(path, { recursive: true, force: true });
  } catch {
    /* left to residue() */
  }
}

export function snapshot(): MachineState {
  return {
    confDir: listDir(CNI_CONF_DIR) ?? [],
    optCniBin: listDir(OPT_CNI_BIN),
    dropIns: listDir(DROP_IN_DIR),
    iptables: iptablesRules(),
    ipForward: readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim(),
    firstUse: Object.fromEntries(FIRST_USE_PATHS.map((p) => [p, existsSync(p)])),
  };
}

/**
 * containers/image's cache of blob digests: podman and skopeo running as root write it under
 * /var/lib/containers/cache whatever their --root says (ctr.test.ts's `podman save` made it on a fresh
 * machine). A cache of what this suite's own images held, so a husk once the suite is done.
 */
const BLOB_INFO_CACHE = 'blob-info-cache-v1.boltdb';

/** True when the tree holds nothing but directories, empty files, lock files and the blob-info cache. */
function onlyHusks(path: string): boolean {
  const st = lstatSync(path);
  if (st.isDirectory()) return readdirSync(path).every((e) => onlyHusks(join(path, e)));
  const name = path.split('/').pop() ?? '';
  if (st.isFile()) return st.size === 0 || /(^|\.)lock$/.test(name) || name === BLOB_INFO_CACHE;
  return false;
}

export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => (l.split(' ')[1] ?? '').replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

export function processesMentioning(needle: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      if (cmd.includes(needle)) found.push(`${pid}: ${cmd.slice(0, 200)}`);
    } catch {
      /* exited */
    }
  }
  return found;
}

function diff(label: string, before: readonly string[], after: readonly string[]): string[] {
  const b = new Set(before);
  const a = new Set(after);
  return [
    ...after.filter((x) => !b.has(x)).map((x) => `${label}: added ${x}`),
    ...before.filter((x) => !a.has(x)).map((x) => `${label}: removed ${x}`),
  ];
}

/** What differs in the machine-wide places between two snapshots; [] when nothing does. */
export function machineDiff(before: MachineState, now: MachineState): string[] {
  const out = [
    ...diff(CNI_CONF_DIR, before.confDir, now.confDir),
    ...diff(OPT_CNI_BIN, before.optCniBin ?? [], now.optCniBin ?? []),
    ...diff(DROP_IN_DIR, before.dropIns ?? [], now.dropIns ?? []),
    ...diff('iptables', before.iptables, now.iptables),
  ];
  if ((before.optCniBin === null) !== (now.optCniBin === null)) out.push(`${OPT_CNI_BIN}: existence changed`);
  if ((before.dropIns === null) !== (now.dropIns === null)) out.push(`${DROP_IN_DIR}: existence changed`);
  if (now.ipForward !== before.ipForward) out.push(`net.ipv4.ip_forward: ${before.ipForward} -> ${now.ipForward}`);
  for (const p of FIRST_USE_PATHS)
    if (!before.firstUse[p] && now.firstUse[p]) out.push(`${p}: created and left behind`);
  return out;
}

/** Puts ip_forward back and removes first-use paths that were absent and now hold only husks. */
export function restoreMachineState(before: MachineState): void {
  const now = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim();
  if (now !== before.ipForward) writeFileSync('/proc/sys/net/ipv4/ip_forward', before.ipForward);
  // Deepest first, so /var/lib/cni/results goes before /var/lib/cni.
  for (const p of [...FIRST_USE_PATHS].sort((a, b) => b.length - a.length))
    if (!before.firstUse[p]) removeIfOnlyHusks(p);
}

/**
 * Files of an earlier run of this suite that died before its cleanup (kill -9, a CI timeout): its
 * conflists, its shim links in /opt/cni/bin, its podman drop-in and the DaemonSet test's node install.
 * Called under the machine lock, before the snapshot: every run of this suite holds that lock while
 * its files exist, so what carries the mark now is a dead run's, and a run after one starts clean.
 */
export function removeStaleFiles(): void {
  for (const f of listDir(CNI_CONF_DIR) ?? [])
    if (f.includes(`${E2E_MARK}-`)) rmSync(join(CNI_CONF_DIR, f), { force: true });
  removeStaleNodeInstall();
  for (const f of listDir(OPT_CNI_BIN) ?? [])
    if (f.startsWith(`${E2E_MARK}-`)) rmSync(join(OPT_CNI_BIN, f), { force: true });
  // A plain `steward` linked into a checkout of this project (this one or another: the install refuses
  // to overwrite it) is a ctr run from before the shim's marked name; a node's own shim is a file.
  const link = join(OPT_CNI_BIN, 'steward');
  try {
    if (lstatSync(link).isSymbolicLink() && inCheckout(readlinkSync(link))) unlinkSync(link);
  } catch {
    /* none */
  }
  try {
    if (readFileSync(DROP_IN, 'utf8').startsWith(DROP_IN_HEADER)) rmSync(DROP_IN, { force: true });
  } catch {
    /* none */
  }
}

/** The DaemonSet test's node (test/e2e/image/pod.test.ts): the image's state and socket dirs. */
export const NODE_STATE_DIR = '/var/lib/steward';
export const NODE_RUN_DIR = '/run/steward';
/**
 * Beside the state dir, not in it (stewardd's purge leaves a state dir holding files not its own): it
 * says the install under NODE_STATE_DIR is this suite's. Written before the install, removed last.
 */
export const NODE_E2E_MARK = `${NODE_STATE_DIR}.${E2E_MARK}`;
/** What `stewardd install` puts on the node at the image's paths: the shim, the conflist, the record. */
export const NODE_INSTALL = [
  join(OPT_CNI_BIN, 'steward'),
  join(CNI_CONF_DIR, '00-steward.conflist'),
  recordPath(NODE_STATE_DIR),
];

/**
 * A dead DaemonSet test's install (NODE_E2E_MARK there), or one from before that mark: its record wraps
 * that test's own primary (`10-stw-e2e-<tag>-primary.conflist`) and nothing listens on its socket.
 * Never a node's own install, which a running stewardd serves and whose primary is the node's: a
 * node's watcher may wrap a test primary while the suite runs, so the primary's name alone is not
 * enough. What it installed goes (each file the record names, only while it is the file the record
 * wrote), and the dirs' contents.
 */
function removeStaleNodeInstall(): void {
  let rec: InstallRecord | undefined;
  try {
    rec = readRecord(NODE_STATE_DIR);
  } catch {
    rec = undefined; // not a record at all: nothing here to tell whose it is
  }
  if (rec === undefined) return void rmSync(NODE_E2E_MARK, { force: true });
  const primary = rec.conflist?.primary;
  const legacy =
    primary !== undefined &&
    new RegExp(`^10-${E2E_MARK}-[a-z0-9]+-primary\\.conflist$`).test(primary) &&
    !unixListener(rec.socket);
  if (!existsSync(NODE_E2E_MARK) && !legacy) return;
  for (const f of recordedFiles(rec)) {
    try {
      if (sha256(f.path) === f.sha256) rmSync(f.path);
    } catch {
      /* gone already */
    }
  }
  // Their contents, not the dirs: whether the node had them before that run is not known here.
  for (const dir of [NODE_STATE_DIR, NODE_RUN_DIR])
    for (const f of listDir(dir) ?? []) rmSync(join(dir, f), { recursive: true, force: true });
  rmSync(NODE_E2E_MARK, { force: true });
}

/** Whether `target` is `<checkout>/dist/steward` or `<checkout>/bin/steward` of this project. */
function inCheckout(target: string): boolean {
  if (!isAbsolute(target) || !/\/(dist|bin)\/steward$/.test(target)) return false;
  try {
    return JSON.parse(readFileSync(join(dirname(dirname(target)), 'package.json'), 'utf8')).name === 'cni-steward';
  } catch {
    return false;
  }
}

/** Whether a socket is bound at `path` in this network namespace (/proc/net/unix), i.e. a daemon listens there. */
function unixListener(path: string): boolean {
  try {
    return readFileSync('/proc/net/unix', 'utf8')
      .split('\n')
      .some((l) => l.endsWith(` ${path}`));
  } catch {
    return true; // cannot tell: leave it
  }
}
