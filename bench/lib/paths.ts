// Where things are: the checkout, plugin dirs, and which shim executable to benchmark.

import { execFileSync } from 'node:child_process';
import { accessSync, constants, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const REPO = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');
export const SYSTEM_CNI_BIN = '/usr/lib/cni';
export const FIXTURE_BIN = join(REPO, 'test/fixtures/bin');
export const BENCH_BIN = join(REPO, 'bench/fixtures/bin');
/** The no-op delegate (POSIX sh builtins only): bench/fixtures/bin/steward-bench-noop. */
export const NOOP_TYPE = 'steward-bench-noop';

/**
 * The shim the image ships for an x64 node (dist/shims/steward-linux-x64, `npm run build:shims`),
 * else the checkout's own dist/steward (both the Go shim, built alike), else bin/steward.
 */
export function shimExecutable(): { path: string; kind: string } {
  const candidates: Array<[string, string]> = [
    [join(REPO, 'dist/shims/steward-linux-x64'), 'dist/shims/steward-linux-x64 (shipped x64 binary, Go static)'],
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
  return { path: join(REPO, 'bin/steward'), kind: 'bin/steward (no binary built yet: it will say so)' };
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

/**
 * Builds dist/shims (npm run build:shims) when a binary is missing or older than the Go source it is
 * built from (shim/*.go, go.mod), so that no benchmark times an older shim than the tree's. Run
 * before the first benchmark: the shim, chain and shim-storm rows all execute the x64 binary.
 */
export function ensureFreshShims(log: (m: string) => void): void {
  const src = join(REPO, 'shim');
  const newest = Math.max(
    ...readdirSync(src)
      .filter((f) => (f.endsWith('.go') && !f.endsWith('_test.go')) || f === 'go.mod')
      .map((f) => statSync(join(src, f)).mtimeMs),
  );
  const bins = shimBinaries();
  if (bins.length > 0 && bins.every((b) => statSync(b).mtimeMs >= newest)) return;
  log('building dist/shims (npm run build:shims): missing or older than shim/*.go');
  execFileSync(process.execPath, [join(REPO, 'scripts/build-shims.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] });
}
