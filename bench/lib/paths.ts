// Where things are: the checkout, plugin dirs, and which shim executable to benchmark.

import { accessSync, constants, readdirSync } from 'node:fs';
import { join } from 'node:path';

export const REPO = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');
export const SYSTEM_CNI_BIN = '/usr/lib/cni';
export const FIXTURE_BIN = join(REPO, 'test/fixtures/bin');
export const BENCH_BIN = join(REPO, 'bench/fixtures/bin');
/** The no-op delegate (POSIX sh builtins only): bench/fixtures/bin/steward-bench-noop. */
export const NOOP_TYPE = 'steward-bench-noop';

/**
 * The shim the image ships for an x64 node (dist/shims/steward-linux-x64, `npm run build:shims`),
 * else the checkout's own dist/steward, else the Node one.
 */
export function shimExecutable(): { path: string; kind: string } {
  const candidates: Array<[string, string]> = [
    [join(REPO, 'dist/shims/steward-linux-x64'), 'dist/shims/steward-linux-x64 (shipped x64 binary, Bun baseline)'],
    [join(REPO, 'dist/steward'), "dist/steward (this checkout's build)"],
  ];
  for (const [path, kind] of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return { path, kind };
    } catch {
      /* next */
    }
  }
  return { path: join(REPO, 'bin/steward'), kind: 'bin/steward (Node, bundled; no binary built yet)' };
}

/** Every shim binary `npm run build:shims` made: dist/shims/steward-<target>. */
export function shimBinaries(): string[] {
  try {
    return readdirSync(join(REPO, 'dist/shims'))
      .filter((f) => f.startsWith('steward-') && !f.endsWith('.tmp'))
      .sort()
      .map((f) => join(REPO, 'dist/shims', f));
  } catch {
    return [];
  }
}
