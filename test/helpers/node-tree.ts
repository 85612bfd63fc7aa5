// A temp directory laid out like a Kubernetes node's CNI paths (etc/cni/net.d, opt/cni/bin,
// var/lib/steward), a byte-level snapshot of it for "left exactly as it was" assertions,
// running the stewardd lifecycle subcommands as processes, and another process holding the
// install lock.

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { defaultShim } from '../../daemon/src/lifecycle/shim-path.js';
import { REPO } from './env.js';

/** The shim `stewardd install` copies by default: dist/shims/steward-linux-<arch> if built, else dist/steward. */
export const SHIM_EXE = defaultShim('glibc');

export interface NodeTree {
  root: string;
  confDir: string;
  binDir: string;
  stateDir: string;
}

export function nodeTree(root: string): NodeTree {
  const t = {
    root,
    confDir: join(root, 'etc/cni/net.d'),
    binDir: join(root, 'opt/cni/bin'),
    stateDir: join(root, 'var/lib/steward'),
  };
  mkdirSync(t.confDir, { recursive: true });
  mkdirSync(t.binDir, { recursive: true });
  return t;
}

export function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

/** The simplest primary a node can have: 10-podnet.conflist with loopback only. Returns its path. */
export function writeLoopbackPrimary(confDir: string): string {
  const path = join(confDir, '10-podnet.conflist');
  writeJson(path, { cniVersion: '1.0.0', name: 'podnet', plugins: [{ type: 'loopback' }] });
  return path;
}

/** Every entry under dir (files by sha256 and mode, dirs and sockets by kind), sorted. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = lstatSync(p);
      const key = relative(dir, p);
      if (st.isDirectory()) {
        out[key] = `dir ${(st.mode & 0o7777).toString(8)}`;
        walk(p);
      } else if (st.isFile()) {
        out[key] =
          `file ${(st.mode & 0o7777).toString(8)} ${createHash('sha256').update(readFileSync(p)).digest('hex')}`;
      } else {
        out[key] = st.isSocket() ? 'socket' : 'other';
      }
    }
  };
  walk(dir);
  return out;
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `onStderr`: told each piece of stderr as it comes (to see a line while the command still runs). */
export function stewardd(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  onStderr?: (text: string) => void,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(REPO, 'bin/stewardd'), ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => {
      err.push(b);
      onStderr?.(b.toString('utf8'));
    });
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
  });
}

/** The tree's paths, as install and uninstall take them. */
const treeFlags = (t: NodeTree) => ['--cni-bin-dir', t.binDir, '--cni-conf-dir', t.confDir, '--state-dir', t.stateDir];

/** install with the tree's paths and the daemon's socket. */
export function installInto(t: NodeTree, socket: string, extra: string[] = []): Promise<Run> {
  return stewardd(['install', ...treeFlags(t), '--socket', socket, ...extra]);
}

export function uninstallFrom(t: NodeTree, extra: string[] = [], onStderr?: (text: string) => void): Promise<Run> {
  return stewardd(['uninstall', ...treeFlags(t), '--drain-timeout', '2', ...extra], process.env, onStderr);
}

export interface LockHolder {
  pid: number;
  /** Releases the lock and exits, as a stewardd finishing its work would. */
  release(): Promise<void>;
  /** kill -9: the lock file stays behind, naming a dead pid, as after a crash or OOM kill. */
  kill9(): Promise<void>;
}

/** Another process that takes the install lock in stateDir (lifecycle/lock.ts) and holds it until told. */
export function holdLockInChild(stateDir: string, purpose = 'test'): Promise<LockHolder> {
  const lockTs = join(REPO, 'daemon/src/lifecycle/lock.ts');
  const script = `
    import { tryLock } from ${JSON.stringify(lockTs)};
    const r = tryLock(${JSON.stringify(stateDir)}, ${JSON.stringify(purpose)});
    if (!('held' in r)) { console.log('busy'); process.exit(1); }
    process.stdin.once('data', () => { r.held.release(); process.exit(0); });
    console.log('held');`;
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.stdout!.once('data', (b: Buffer) => {
      if (b.toString().trim() !== 'held') return reject(new Error(`the lock holder says ${b.toString().trim()}`));
      resolve({
        pid: child.pid!,
        release: async () => {
          child.stdin!.write('go\n');
          await exited;
        },
        kill9: async () => {
          child.kill('SIGKILL');
          await exited;
        },
      });
    });
  });
}
