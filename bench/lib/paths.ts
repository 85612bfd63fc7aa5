// Where things are: the checkout, plugin dirs, and which shim executable to benchmark.

import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';

export const REPO = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');
export const SYSTEM_CNI_BIN = '/usr/lib/cni';
export const FIXTURE_BIN = join(REPO, 'test/fixtures/bin');
export const BENCH_BIN = join(REPO, 'bench/fixtures/bin');
/** The no-op delegate (POSIX sh builtins only): bench/fixtures/bin/steward-bench-noop. */
export const NOOP_TYPE = 'steward-bench-noop';

/** The shipped self-contained shim (issue 4) when it has been built, else the Node one. */
export function shimExecutable(): { path: string; kind: string } {
  const shipped = join(REPO, 'dist/steward');
  try {
    accessSync(shipped, constants.X_OK);
    return { path: shipped, kind: 'dist/steward (shipped binary)' };
  } catch {
    return { path: join(REPO, 'bin/steward'), kind: 'bin/steward (Node, bundled; dist/steward not built yet)' };
  }
}
