// A small tmpfs for a test's full-disk case: mounted at `dir` (made first), unmounted (lazily, so a
// daemon still holding a file there does not keep it) when the test env closes, even on failure.

import { mkdirSync } from 'node:fs';
import { sh, type TestEnv } from './env.js';

export function mountTmpfs(env: TestEnv, dir: string, size: string): void {
  mkdirSync(dir, { recursive: true });
  sh('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir]);
  env.defer(() => {
    try {
      sh('umount', ['-l', dir]);
    } catch {
      /* not mounted */
    }
  });
}

/** Fills the file system holding `dir` (writes `dir`/fill until ENOSPC, then to the last 512 bytes); returns the file. */
export function fillDisk(dir: string): string {
  const file = `${dir}/fill`;
  sh('sh', ['-c', `cat /dev/zero > '${file}' 2>/dev/null; true`]);
  return file;
}
