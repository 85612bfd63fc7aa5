// What a RuntimeHost puts in its temp dir for the runtimes to execute: the shim (dist/steward or
// bin/steward) and a static busybox rootfs.

import { accessSync, constants, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO } from '../env.js';

/**
 * The shim a runtime should execute: the Go binary dist/steward when it exists, else bin/steward (the
 * checkout's wrapper, which execs dist/steward or answers that it is not built; STEWARD_E2E_SHIM=bin/steward
 * forces it).
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
