// Builds the shim, `steward` (shim/, Go's standard library only), with the Go toolchain on PATH
// (Debian's golang-go, 1.19, or newer): CGO_ENABLED=0, -trimpath, -ldflags "-s -w", so each is one
// static, stripped binary that runs on any Linux of its CPU, glibc or musl. No module is fetched
// (GOFLAGS=-mod=mod is never needed: shim/go.mod requires nothing; GOPROXY=off makes sure).
//
//   node scripts/build-shims.mjs --local       dist/steward, for this machine's CPU (npm run build).
//                                             Without Go it prints one line saying so and exits 0:
//                                             the daemon does not need the shim to serve.
//   node scripts/build-shims.mjs [--targets a,b,…|host] [--out DIR]
//                                             dist/shims/steward-linux-<x64|arm64> (npm run build:shims),
//                                             one JSON line per binary: target, path, bytes, `file`'s
//                                             description. Go is required.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

/** Node's CPU names (dist/shims/steward-linux-<arch>, as stewardd install looks for them) to Go's. */
export const TARGETS = {
  'linux-x64': { goos: 'linux', goarch: 'amd64' },
  'linux-arm64': { goos: 'linux', goarch: 'arm64' },
};
const DEFAULT_TARGETS = Object.keys(TARGETS);

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
export const SHIM_SRC = join(root, 'shim');

/** The flags of every shipped shim: no build paths in it, no symbol table or DWARF. */
export const GO_BUILD_FLAGS = ['-trimpath', '-ldflags', '-s -w'];

/** What to do when Go is missing, in one line. */
export const GO_MISSING =
  "Go is missing: the shim (dist/steward) is not built; install Debian's golang-go as root (apt-get install --no-install-recommends golang-go) or Go 1.19+ from https://go.dev/dl/, then run npm run build again";

/** The `go` command, or undefined when there is none. */
export function goCommand() {
  const r = spawnSync('go', ['version'], { encoding: 'utf8' });
  return r.status === 0 ? 'go' : undefined;
}

/**
 * Builds the shim (or another Go main package: `src`, as the bench's floor programs) for `target`
 * into `out` with `flags` (default GO_BUILD_FLAGS); written to a temp name and renamed, so `out` is
 * never half-written.
 */
export function compileFor(target, out, flags = GO_BUILD_FLAGS, src = SHIM_SRC) {
  const t = TARGETS[target];
  if (!t) throw new Error(`unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`);
  const go = goCommand();
  if (!go) throw new Error(GO_MISSING);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.tmp`;
  rmSync(tmp, { force: true });
  execFileSync(go, ['build', ...flags, '-o', tmp, '.'], {
    cwd: src,
    env: { ...process.env, CGO_ENABLED: '0', GOOS: t.goos, GOARCH: t.goarch, GOPROXY: 'off', GOFLAGS: '' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  renameSync(tmp, out);
  return out;
}

/** This machine's target. */
export function hostTarget() {
  return `linux-${process.arch === 'arm64' ? 'arm64' : 'x64'}`;
}

export function buildShim(target, outDir) {
  const out = compileFor(target, join(outDir, `steward-${target}`));
  let file = '';
  try {
    file = execFileSync('file', ['-b', out], { encoding: 'utf8' }).trim();
  } catch {
    /* no file(1) */
  }
  return { target, path: out, bytes: statSync(out).size, file };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { targets: { type: 'string' }, out: { type: 'string' }, local: { type: 'boolean' } },
  });
  if (values.local) {
    if (!goCommand()) {
      console.log(`build: ${GO_MISSING}`);
      process.exit(0);
    }
    compileFor(hostTarget(), join(root, 'dist', 'steward'));
  } else {
    const targets =
      values.targets === 'host' ? [hostTarget()] : values.targets ? values.targets.split(',') : DEFAULT_TARGETS;
    const outDir = resolve(values.out ?? join(root, 'dist', 'shims'));
    for (const target of targets) console.log(JSON.stringify(buildShim(target, outDir)));
  }
}
