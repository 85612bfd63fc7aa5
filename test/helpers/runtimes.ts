// Real container runtimes for the end-to-end suite (test/e2e): podman 4.3 with the CNI backend and
// containerd 1.6's `ctr run --cni`, set up as ../shared/runtimes.md measured them on these machines.
//
// Everything is the suite's own and is undone at TestEnv.close(): podman runs with --root/--runroot/
// --tmpdir in the env's temp dir; its drop-in is /etc/containers/containers.conf.d/99-steward-e2e.conf;
// conflists in /etc/cni/net.d are named *stw-e2e-<tag>*; containerd runs as a child process with
// root, state and socket in the temp dir (with its CRI plugin on for the CRI suite, configured by
// test/helpers/cri/node.ts); /opt/cni/bin/steward is a symlink made and removed here.
// Directories the runtimes create on first use (/run/runc, /var/lib/cni, /run/containerd, cni.lock)
// are removed when they did not exist before and hold nothing but empty dirs and lock files.
// `residue()` compares the machine with the snapshot taken at setup, so a test can assert it.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  constants,
  createWriteStream,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURE_BIN, REPO, SYSTEM_CNI_BIN, type TestEnv } from './env.js';

export const CNI_CONF_DIR = '/etc/cni/net.d';
export const OPT_CNI_BIN = '/opt/cni/bin';
export const DROP_IN_DIR = '/etc/containers/containers.conf.d';
export const DROP_IN = join(DROP_IN_DIR, '99-steward-e2e.conf');
const CNI_CACHE = '/var/lib/cni/results';
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

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command without a shell; never rejects on a non-zero exit (the caller asserts). */
export function run(cmd: string, args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.stdin.on('error', () => undefined);
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        ms: performance.now() - t0,
      });
    });
    child.stdin.end(opts.input ?? '');
  });
}

function quiet(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined;
  }
}

export function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/**
 * The shim a runtime should execute: the self-contained dist/steward when it exists, else bin/steward
 * (a Node script; STEWARD_E2E_SHIM=bin/steward forces it, to compare the two).
 */
export function shimExecutable(): { path: string; kind: 'dist/steward' | 'bin/steward' } {
  const dist = join(REPO, 'dist/steward');
  if (process.env.STEWARD_E2E_SHIM === 'bin/steward') return { path: join(REPO, 'bin/steward'), kind: 'bin/steward' };
  try {
    accessSync(dist, constants.X_OK);
    if (statSync(dist).isFile()) return { path: dist, kind: 'dist/steward' };
  } catch {
    /* not built */
  }
  return { path: join(REPO, 'bin/steward'), kind: 'bin/steward' };
}

/** Why this machine cannot run the e2e suite at all, or undefined. */
export function baseSkipReason(commands: string[]): string | undefined {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return 'not root: real runtimes need root (network namespaces, cgroups, mounts)';
  const missing = commands.filter((c) => which(c) === undefined);
  if (!existsSync('/bin/busybox')) missing.push('/bin/busybox (busybox-static)');
  for (const p of ['bridge', 'host-local'])
    if (!existsSync(join(SYSTEM_CNI_BIN, p))) missing.push(join(SYSTEM_CNI_BIN, p));
  if (missing.length > 0) return `missing ${missing.join(', ')}: run \`bash scripts/e2e-setup.sh\` as root`;
  return undefined;
}

/**
 * Turns a skip reason into a skip (printed on stderr, so it is never silent), or into a failure when
 * STEWARD_E2E_REQUIRE=1 (for CI machines that must run the suite).
 */
export function skipOrFail(what: string, reason: string | undefined): string | false {
  if (reason === undefined) return false;
  if (process.env.STEWARD_E2E_REQUIRE === '1')
    throw new Error(`e2e: ${what} cannot run and STEWARD_E2E_REQUIRE=1: ${reason}`);
  process.stderr.write(`\n*** e2e: SKIPPING ${what}: ${reason}\n\n`);
  return `${what}: ${reason}`;
}

// ---------------------------------------------------------------------------------------------
// The machine's state, to prove the suite leaves it as it found it.

interface MachineState {
  confDir: string[];
  optCniBin: string[] | null;
  dropIns: string[] | null;
  iptables: string[];
  ipForward: string;
  firstUse: Record<string, boolean>;
}

function listDir(dir: string): string[] | null {
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

function snapshot(): MachineState {
  return {
    confDir: listDir(CNI_CONF_DIR) ?? [],
    optCniBin: listDir(OPT_CNI_BIN),
    dropIns: listDir(DROP_IN_DIR),
    iptables: iptablesRules(),
    ipForward: readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim(),
    firstUse: Object.fromEntries(FIRST_USE_PATHS.map((p) => [p, existsSync(p)])),
  };
}

/** True when the tree holds nothing but directories, empty files and lock files. */
function onlyHusks(path: string): boolean {
  const st = lstatSync(path);
  if (st.isDirectory()) return readdirSync(path).every((e) => onlyHusks(join(path, e)));
  if (st.isFile()) return st.size === 0 || /(^|\.)lock$/.test(path.split('/').pop() ?? '');
  return false;
}

function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => (l.split(' ')[1] ?? '').replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

function processesMentioning(needle: string): string[] {
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

// ---------------------------------------------------------------------------------------------

export interface BridgeNet {
  /** The network name the runtime knows (the conflist's `name`). */
  name: string;
  bridge: string;
  subnet: string;
  gateway: string;
  /** host-local's dataDir; leases are in dataDir/<ipam network name>. */
  dataDir: string;
  file: string;
}

export function ipv4Of(text: string): { address: string; prefix: number } | undefined {
  const m = /inet (\d+\.\d+\.\d+\.\d+)\/(\d+)/.exec(text);
  return m ? { address: m[1]!, prefix: Number(m[2]) } : undefined;
}

export function defaultGatewayOf(text: string): string | undefined {
  return /default via (\d+\.\d+\.\d+\.\d+)/.exec(text)?.[1];
}

let seq = 0;

const LOCK_DIR = join(existsSync('/run/lock') ? '/run/lock' : tmpdir(), 'cni-steward-e2e.lock');

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One e2e run at a time per machine: the podman drop-in, /opt/cni/bin/steward and the lexically
 * first conflist are machine-wide, and the residue check compares the whole machine. A lock dir
 * (atomic mkdir) holding the owner's pid; a dead owner's lock is taken over.
 */
async function acquireMachineLock(timeoutMs = 15 * 60_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  let told = false;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(join(LOCK_DIR, 'pid'), String(process.pid));
      return () => rmSync(LOCK_DIR, { recursive: true, force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let owner = NaN;
    try {
      owner = Number(readFileSync(join(LOCK_DIR, 'pid'), 'utf8'));
    } catch {
      /* being written, or its writer died between mkdir and write */
    }
    const age = (() => {
      try {
        return Date.now() - statSync(LOCK_DIR).mtimeMs;
      } catch {
        return 0;
      }
    })();
    if ((Number.isInteger(owner) && !pidAlive(owner)) || (!Number.isInteger(owner) && age > 10_000)) {
      rmSync(LOCK_DIR, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`another e2e run (pid ${owner}) has held ${LOCK_DIR} for too long`);
    if (!told) process.stderr.write(`e2e: waiting for another e2e run (pid ${owner}) to finish\n`);
    told = true;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The shared part: temp bin dir with the shim, busybox rootfs, machine snapshot and cleanup. */
export class RuntimeHost {
  readonly tag: string;
  readonly binDir: string;
  readonly rootfs: string;
  readonly shim = shimExecutable();
  private readonly before: MachineState;
  private readonly bridges: string[] = [];
  private readonly networkNames: string[] = [];
  /** Cache entries (file names) matching these and absent when they were registered are ours. */
  private readonly cacheMatchers: Array<{ re: RegExp; before: Set<string> }> = [];

  private release: (() => void) | undefined;
  private finished: Promise<string[]> | undefined;

  /** Waits for the machine lock, then sets up; `finish()` undoes it all and releases the lock. */
  static async create(env: TestEnv): Promise<RuntimeHost> {
    const release = await acquireMachineLock();
    try {
      const h = new RuntimeHost(env);
      h.release = release;
      return h;
    } catch (e) {
      await env.close();
      release();
      throw e;
    }
  }

  private constructor(readonly env: TestEnv) {
    this.tag = env.tag;
    removeStaleFiles();
    this.before = snapshot();
    env.defer(() => this.restoreMachine());
    this.binDir = join(env.dir, 'cni-bin');
    mkdirSync(this.binDir, { recursive: true });
    symlinkSync(this.shim.path, join(this.binDir, 'steward'));
    symlinkSync(join(FIXTURE_BIN, 'steward-fixture'), join(this.binDir, 'steward-fixture'));
    this.rootfs = join(env.dir, 'rootfs');
    buildBusyboxRootfs(this.rootfs);
  }

  /** A bridge name (<= 15 bytes) deleted at close. */
  bridge(): string {
    const name = `se2e${this.tag}${(seq++).toString(36)}`.slice(0, 15);
    this.bridges.push(name);
    this.env.defer(() => void quiet('ip', ['link', 'del', name]));
    return name;
  }

  /** A /24 in 172.29.0.0/16 that no route on this machine uses yet. */
  subnet(): string {
    const routes = quiet('ip', ['-4', 'route', 'show', 'table', 'all']) ?? '';
    for (let i = 0; i < 256; i++) {
      const n = ((process.pid * 13 + seq++ * 7) % 250) + 2;
      const net = `172.29.${n}.`;
      if (!routes.includes(net)) return `${net}0/24`;
    }
    throw new Error('no free 172.29.x.0/24 for a test bridge');
  }

  /** Writes a conflist into /etc/cni/net.d (atomically) and removes it at close. */
  writeConflist(fileName: string, conflist: { name: string }): string {
    if (!fileName.includes(`${E2E_MARK}-${this.tag}`))
      throw new Error(`conflist ${fileName} must carry ${E2E_MARK}-${this.tag}`);
    mkdirSync(CNI_CONF_DIR, { recursive: true });
    const file = join(CNI_CONF_DIR, fileName);
    const tmp = join(CNI_CONF_DIR, `.${fileName}.tmp`);
    writeFileSync(tmp, `${JSON.stringify(conflist, null, 2)}\n`);
    renameSync(tmp, file);
    this.networkNames.push(conflist.name);
    this.env.defer(() => rmSync(file, { force: true }));
    return file;
  }

  /** Names for a network and its conflist, all carrying the suite's mark and tag. */
  netName(what: string): string {
    return `${E2E_MARK}-${this.tag}-${what}`;
  }

  /** A bridge + host-local network, wrapped by steward (`socket` given) or listed directly. */
  bridgeNetwork(
    what: string,
    cniVersion: string,
    opts: {
      steward?: { socket: string; spoolDir: string };
      /** Plugins chained after the bridge (e.g. the fault fixture). */
      chain?: unknown[];
      filePrefix?: string;
    } = {},
  ): BridgeNet {
    const name = this.netName(what);
    const bridge = this.bridge();
    const subnet = this.subnet();
    const gateway = subnet.replace(/0\/24$/, '1');
    const dataDir = join(this.env.dir, 'ipam', what);
    const plugins = [
      {
        type: 'bridge',
        bridge,
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
      },
      ...(opts.chain ?? []),
    ];
    const conflist = opts.steward
      ? {
          cniVersion,
          name,
          plugins: [
            {
              type: 'steward',
              socket: opts.steward.socket,
              spoolDir: opts.steward.spoolDir,
              delegates: [{ cniVersion, name, plugins }],
            },
          ],
        }
      : { cniVersion, name, plugins };
    const file = this.writeConflist(`${opts.filePrefix ?? '90-'}${name}.conflist`, conflist);
    return { name, bridge, subnet, gateway, dataDir, file };
  }

  /**
   * Claims libcni result-cache entries (/var/lib/cni/results/<network>-<container id>-<ifname>) whose
   * names match `re` and that do not exist yet: removed at close, reported by residue() if left.
   * For networks whose conflists are not written by writeConflist (the CRI suite's own conf dir).
   */
  claimCniCache(re: RegExp): void {
    this.cacheMatchers.push({ re, before: new Set(listDir(CNI_CACHE) ?? []) });
  }

  private ownsCacheEntry(f: string): boolean {
    return (
      this.networkNames.some((n) => f.startsWith(`${n}-`)) ||
      this.cacheMatchers.some((m) => m.re.test(f) && !m.before.has(f))
    );
  }

  /** host-local leases of a network (the IPAM network name is the conflist/delegate name). */
  leases(net: BridgeNet): string[] {
    const dir = join(net.dataDir, net.name);
    return (listDir(dir) ?? []).filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip'));
  }

  private restoreMachine(): void {
    // libcni leaves its result cache behind when a DEL fails (the leak case): ours carry the names.
    for (const f of listDir(CNI_CACHE) ?? []) {
      if (this.ownsCacheEntry(f)) rmSync(join(CNI_CACHE, f), { force: true });
    }
    for (const m of mountsUnder(this.env.dir)) quiet('umount', ['-l', m]);
    const now = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim();
    if (now !== this.before.ipForward) writeFileSync('/proc/sys/net/ipv4/ip_forward', this.before.ipForward);
    // Deepest first, so /var/lib/cni/results goes before /var/lib/cni.
    for (const p of [...FIRST_USE_PATHS].sort((a, b) => b.length - a.length)) {
      if (this.before.firstUse[p] || !existsSync(p)) continue;
      try {
        if (onlyHusks(p)) rmSync(p, { recursive: true, force: true });
      } catch {
        /* reported by residue() */
      }
    }
  }

  /**
   * Closes the env (every deferred cleanup), then lists what differs from the machine as it was
   * found, then releases the machine lock. Idempotent: [] means the run left the machine clean.
   */
  finish(): Promise<string[]> {
    this.finished ??= (async () => {
      try {
        this.keepLogs();
        await this.env.close();
        return this.residue();
      } finally {
        this.release?.();
      }
    })();
    return this.finished;
  }

  /** STEWARD_E2E_LOG_DIR=DIR keeps stewardd's and containerd's logs (the temp dir is removed). */
  private keepLogs(): void {
    const dest = process.env.STEWARD_E2E_LOG_DIR;
    if (!dest) return;
    mkdirSync(dest, { recursive: true });
    const walk = (dir: string): string[] =>
      (listDir(dir) ?? []).flatMap((e) => {
        const p = join(dir, e);
        try {
          const st = lstatSync(p);
          if (st.isDirectory()) return dir.includes('/podman/') || e === 'podman' || e === 'rootfs' ? [] : walk(p);
          return st.isFile() && e.endsWith('.log') ? [p] : [];
        } catch {
          return [];
        }
      });
    for (const f of walk(this.env.dir)) {
      const name = f.slice(this.env.dir.length + 1).replaceAll('/', '_');
      writeFileSync(join(dest, `${this.env.dir.split('/').pop()}_${name}`), readFileSync(f));
    }
  }

  /** Everything that differs from the machine as it was found; [] when the suite left it clean. */
  residue(): string[] {
    const now = snapshot();
    const out = [
      ...diff(CNI_CONF_DIR, this.before.confDir, now.confDir),
      ...diff(OPT_CNI_BIN, this.before.optCniBin ?? [], now.optCniBin ?? []),
      ...diff(DROP_IN_DIR, this.before.dropIns ?? [], now.dropIns ?? []),
      ...diff('iptables', this.before.iptables, now.iptables),
    ];
    if ((this.before.optCniBin === null) !== (now.optCniBin === null)) out.push(`${OPT_CNI_BIN}: existence changed`);
    if ((this.before.dropIns === null) !== (now.dropIns === null)) out.push(`${DROP_IN_DIR}: existence changed`);
    if (now.ipForward !== this.before.ipForward)
      out.push(`net.ipv4.ip_forward: ${this.before.ipForward} -> ${now.ipForward}`);
    for (const p of FIRST_USE_PATHS)
      if (!this.before.firstUse[p] && now.firstUse[p]) out.push(`${p}: created and left behind`);
    for (const b of this.bridges) if (quiet('ip', ['link', 'show', b]) !== undefined) out.push(`link ${b} left behind`);
    for (const f of listDir(CNI_CACHE) ?? []) {
      if (this.ownsCacheEntry(f)) out.push(`${CNI_CACHE}/${f} left behind`);
    }
    out.push(...processesMentioning(this.env.dir).map((p) => `process left running: ${p}`));
    out.push(...mountsUnder(this.env.dir).map((m) => `mount left: ${m}`));
    if (existsSync(this.env.dir)) out.push(`temp dir ${this.env.dir} left behind`);
    return out;
  }
}

/** Files of an earlier run of this suite that died before its cleanup (their temp dirs are gone). */
function removeStaleFiles(): void {
  const tmp = tmpdir();
  for (const f of listDir(CNI_CONF_DIR) ?? []) {
    if (!f.includes(`${E2E_MARK}-`)) continue;
    const text = (() => {
      try {
        return readFileSync(join(CNI_CONF_DIR, f), 'utf8');
      } catch {
        return '';
      }
    })();
    const paths = [...text.matchAll(/"(\/[^"]+)"/g)].map((m) => m[1]!).filter((p) => p.startsWith(`${tmp}/stw-`));
    if (paths.length > 0 && paths.every((p) => !existsSync(p))) rmSync(join(CNI_CONF_DIR, f), { force: true });
  }
  const link = join(OPT_CNI_BIN, 'steward');
  try {
    if (lstatSync(link).isSymbolicLink() && readlinkSync(link).startsWith(`${REPO}/`)) unlinkSync(link);
  } catch {
    /* none */
  }
}

/** A static busybox tree a runtime can run from: /bin/busybox, its applet links, passwd and group. */
export function buildBusyboxRootfs(dir: string): void {
  mkdirSync(join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'etc'), { recursive: true });
  for (const d of ['proc', 'sys', 'dev', 'tmp', 'root']) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'bin/busybox'), readFileSync('/bin/busybox'), { mode: 0o755 });
  const applets = execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' })
    .split('\n')
    .filter((a) => a !== '' && a !== 'busybox');
  for (const a of applets) symlinkSync('busybox', join(dir, 'bin', a));
  writeFileSync(join(dir, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
  writeFileSync(join(dir, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
}

async function hardLimits(): Promise<{ nofile: string; nproc: string }> {
  const r = await run('sh', ['-c', 'ulimit -Hn; ulimit -Hu']);
  const [n, u] = r.stdout.trim().split('\n');
  const nofile = n === undefined || n === 'unlimited' ? '1048576' : n;
  const nproc = u === undefined || u === 'unlimited' ? 32768 : Math.min(Number(u), 32768);
  return { nofile, nproc: String(nproc) };
}

// ---------------------------------------------------------------------------------------------
// podman

export class Podman {
  readonly root: string;
  readonly runroot: string;
  readonly tmp: string;

  private constructor(readonly host: RuntimeHost) {
    const base = join(host.env.dir, 'podman');
    this.root = join(base, 'root');
    this.runroot = join(base, 'runroot');
    this.tmp = join(base, 'tmp');
    for (const d of [this.root, this.runroot, this.tmp]) mkdirSync(d, { recursive: true });
  }

  /**
   * The drop-in runtimes.md requires (CNI backend, runc, cgroupfs, file events, ulimits), with the
   * temp bin dir holding `steward` first in cni_plugin_dirs (or `pluginDirs`); removed at close.
   */
  static async setup(host: RuntimeHost, opts: { pluginDirs?: string[] } = {}): Promise<Podman> {
    const p = new Podman(host);
    const { nofile, nproc } = await hardLimits();
    mkdirSync(DROP_IN_DIR, { recursive: true });
    host.env.defer(() => rmSync(DROP_IN, { force: true }));
    writeFileSync(
      DROP_IN,
      [
        "# Written by cni-steward's e2e suite (test/helpers/runtimes.ts) for one run; removed when it ends.",
        '[containers]',
        `default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]`,
        '',
        '[engine]',
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        '',
        '[network]',
        'network_backend = "cni"',
        `network_config_dir = "${CNI_CONF_DIR}"`,
        `cni_plugin_dirs = [${(opts.pluginDirs ?? [host.binDir, OPT_CNI_BIN, SYSTEM_CNI_BIN]).map((d) => `"${d}"`).join(', ')}]`,
        '',
      ].join('\n'),
    );
    // Registered after the drop-in, so it runs before its removal: no container of ours survives.
    host.env.defer(async () => {
      await p.cmd(['rm', '--all', '--force', '--time', '0'], 60_000).catch(() => undefined);
    });
    return p;
  }

  cmd(args: string[], timeoutMs = 120_000): Promise<Ran> {
    return run('podman', ['--root', this.root, '--runroot', this.runroot, '--tmpdir', this.tmp, ...args], {
      timeoutMs,
    });
  }

  /** `podman run --rm --network NET --rootfs ROOTFS:O [extra] CMD...` (foreground). */
  runRm(network: string, command: string[], extra: string[] = [], timeoutMs = 120_000): Promise<Ran> {
    return this.cmd(
      ['run', '--rm', '--network', network, ...extra, '--rootfs', `${this.host.rootfs}:O`, ...command],
      timeoutMs,
    );
  }

  /** Starts a detached container that sleeps; returns its id. */
  async runDetached(network: string, name: string): Promise<string> {
    const r = await this.cmd([
      'run',
      '-d',
      '--rm',
      '--name',
      name,
      '--network',
      network,
      '--rootfs',
      `${this.host.rootfs}:O`,
      '/bin/sleep',
      '600',
    ]);
    if (r.code !== 0) throw new Error(`podman run -d exited ${r.code}: ${r.stderr}`);
    return r.stdout.trim();
  }

  async exists(id: string): Promise<boolean> {
    const r = await this.cmd(['container', 'exists', id]);
    return r.code === 0;
  }

  /** Why podman cannot run a container here (after setup), or undefined. */
  async probe(): Promise<string | undefined> {
    const r = await this.runRm('none', ['/bin/true'], [], 60_000);
    if (r.code === 0) return undefined;
    return `podman cannot run a container here (exit ${r.code}): ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`;
  }

  /** A local image of the busybox rootfs, saved as an OCI archive (for ctr image import). */
  async ociArchive(ref: string): Promise<string> {
    const tar = join(this.host.env.dir, 'rootfs.tar');
    const archive = join(this.host.env.dir, 'image.oci.tar');
    const t = await run('tar', ['-C', this.host.rootfs, '-cf', tar, '.']);
    if (t.code !== 0) throw new Error(`tar failed: ${t.stderr}`);
    for (const args of [
      ['import', tar, ref],
      ['save', '--format', 'oci-archive', '-o', archive, ref],
    ]) {
      const r = await this.cmd(args);
      if (r.code !== 0) throw new Error(`podman ${args[0]} failed (${r.code}): ${r.stderr}`);
    }
    return archive;
  }
}

// ---------------------------------------------------------------------------------------------
// containerd + ctr

export class Containerd {
  readonly dir: string;
  readonly address: string;
  readonly logFile: string;
  private proc: ChildProcess | undefined;

  private constructor(
    readonly host: RuntimeHost,
    name = 'containerd',
  ) {
    this.dir = join(host.env.dir, name);
    this.address = join(this.dir, 'containerd.sock');
    this.logFile = join(this.dir, 'containerd.log');
  }

  /**
   * `containerd config default` with root, state, grpc.address and the opt plugin's path moved into
   * the temp dir (and the CRI plugin off: ctr does not need it), started as a background child;
   * stopped at close. `opts.configure` edits the config text further (the CRI suite keeps the CRI
   * plugin on: test/helpers/cri/node.ts); `opts.name` names the dir under the env's.
   */
  static async start(
    host: RuntimeHost,
    opts: { name?: string; configure?: (conf: string, dir: string) => string } = {},
  ): Promise<Containerd> {
    const c = new Containerd(host, opts.name);
    mkdirSync(c.dir, { recursive: true });
    const def = await run('containerd', ['config', 'default']);
    if (def.code !== 0) throw new Error(`containerd config default failed: ${def.stderr}`);
    let conf = def.stdout
      .replace(/^root = .*$/m, `root = "${join(c.dir, 'root')}"`)
      .replace(/^state = .*$/m, `state = "${join(c.dir, 'state')}"`)
      .replace(/^disabled_plugins = .*$/m, 'disabled_plugins = ["io.containerd.grpc.v1.cri"]');
    conf = conf.replace(/(\[grpc\][^[]*?\n\s*address = )"[^"]*"/, `$1"${c.address}"`);
    // The opt plugin would otherwise create /opt/containerd.
    conf = conf.replace(/path = "\/opt\/containerd"/, `path = "${join(c.dir, 'opt')}"`);
    if (!conf.includes(`"${c.address}"`)) throw new Error("could not set grpc.address in containerd's default config");
    if (opts.configure) conf = opts.configure(conf, c.dir);
    const confFile = join(c.dir, 'config.toml');
    writeFileSync(confFile, conf);
    const log = createWriteStream(c.logFile, { flags: 'a' });
    await new Promise((r) => log.once('open', r));
    const proc = spawn('containerd', ['--config', confFile], { stdio: ['ignore', log, log] });
    c.proc = proc;
    host.env.defer(() => c.stop());
    const exited = new Promise<string>((r) => proc.once('exit', (code) => r(`containerd exited with ${code}`)));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const early = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('wait'), 100))]);
      if (early !== 'wait') throw new Error(`${early}: ${readFileSync(c.logFile, 'utf8').slice(-500)}`);
      if (existsSync(c.address) && (await c.ctr(['version'], 10_000)).code === 0) return c;
    }
    throw new Error(`containerd did not answer on ${c.address}; see ${c.logFile}`);
  }

  ctr(args: string[], timeoutMs = 120_000): Promise<Ran> {
    return run('ctr', ['--address', this.address, ...args], { timeoutMs });
  }

  private async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    // Leftover containers of ours (a failed test), in every namespace (the CRI plugin's is k8s.io):
    // kill their tasks and delete them first.
    const nss = await this.ctr(['namespaces', 'list', '--quiet'], 20_000).catch(() => undefined);
    for (const ns of (nss?.stdout ?? '').split('\n').filter((l) => l !== '')) {
      const ls = await this.ctr(['-n', ns, 'containers', 'list', '--quiet'], 20_000).catch(() => undefined);
      for (const id of (ls?.stdout ?? '').split('\n').filter((l) => l !== '')) {
        await this.ctr(['-n', ns, 'task', 'kill', '--signal', 'SIGKILL', id], 20_000).catch(() => undefined);
        await this.ctr(['-n', ns, 'task', 'delete', '--force', id], 20_000).catch(() => undefined);
        await this.ctr(['-n', ns, 'containers', 'delete', id], 20_000).catch(() => undefined);
      }
    }
    const exited = new Promise<void>((r) => p.once('exit', () => r()));
    p.kill('SIGTERM');
    const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    this.proc = undefined;
    // Shims outlive containerd by design; ours are identified by our socket address.
    for (const line of processesMentioning(this.address)) {
      const pid = Number(line.split(':')[0]);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
}

/**
 * Installs the shim where go-cni looks (/opt/cni/bin/steward, a symlink to the shim) and removes it
 * at close, with /opt/cni/bin and /opt/cni if this made them. Refuses to replace a steward that is
 * not ours.
 */
export function installShimInOptCniBin(host: RuntimeHost): string | undefined {
  const target = join(OPT_CNI_BIN, 'steward');
  if (
    existsSync(target) ||
    (() => {
      try {
        lstatSync(target);
        return true;
      } catch {
        return false;
      }
    })()
  ) {
    return `${target} already exists and is not this suite's: not replacing it`;
  }
  const madeOpt = !existsSync('/opt/cni');
  const madeBin = !existsSync(OPT_CNI_BIN);
  mkdirSync(OPT_CNI_BIN, { recursive: true });
  symlinkSync(host.shim.path, target);
  host.env.defer(() => {
    rmSync(target, { force: true });
    try {
      if (madeBin) rmdirSync(OPT_CNI_BIN);
      if (madeOpt) rmdirSync('/opt/cni');
    } catch {
      /* something else was put there meanwhile: leave it */
    }
  });
  return undefined;
}

/** go-cni (ctr run --cni) loads the lexically first *.conf, *.conflist or *.json in the conf dir. */
export function lexicallyFirstConf(): string | undefined {
  return (listDir(CNI_CONF_DIR) ?? []).filter((f) => /\.(conf|conflist|json)$/.test(f)).sort()[0];
}
