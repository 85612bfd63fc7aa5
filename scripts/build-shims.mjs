// Builds the shim for each kind of node: dist/shims/steward-linux-<arch>[-musl], one self-contained
// executable per CPU architecture and libc, from the same bundle as dist/steward
// (shim/dist/steward-bun.mjs, made by scripts/bundle-shim.mjs: run `npm run build` first).
//
// Each is compiled by the Bun of the `bun` devDependency with `--compile-executable-path` pointing at
// the Bun runtime of the target, taken from that runtime's own package on the npm registry
// (`npm pack @oven/bun-linux-…@<the bun devDependency's version>`, cached under
// node_modules/.cache/steward-bun-targets): Bun never downloads anything itself.
//
//   linux-x64        @oven/bun-linux-x64-baseline      x86-64 without AVX2 (what the image ships)
//   linux-x64-musl   @oven/bun-linux-x64-musl-baseline x86-64, musl libc (Alpine-like hosts)
//   linux-arm64      @oven/bun-linux-aarch64           arm64, glibc
//   linux-arm64-musl @oven/bun-linux-aarch64-musl      arm64, musl
// No separate AVX2 build: @oven/bun-linux-x64@1.4.5 and @oven/bun-linux-x64-baseline@1.4.5 hold the
// very same bun binary (same sha256), so the baseline one costs nothing (docs/packaging.md).
//
// usage: node scripts/build-shims.mjs [--targets a,b,…|host] [--out DIR]
//   host = the two libc variants of this machine's architecture (what one image of this arch carries).
// Prints one JSON line per binary: target, path, bytes, and `file`'s description.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

export const TARGETS = {
  'linux-x64': { pkg: '@oven/bun-linux-x64-baseline', bunTarget: 'bun-linux-x64-baseline' },
  'linux-x64-musl': { pkg: '@oven/bun-linux-x64-musl-baseline', bunTarget: 'bun-linux-x64-musl-baseline' },
  'linux-arm64': { pkg: '@oven/bun-linux-aarch64', bunTarget: 'bun-linux-arm64' },
  'linux-arm64-musl': { pkg: '@oven/bun-linux-aarch64-musl', bunTarget: 'bun-linux-arm64-musl' },
};
const DEFAULT_TARGETS = ['linux-x64', 'linux-x64-musl', 'linux-arm64', 'linux-arm64-musl'];

const require = createRequire(import.meta.url);
const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const bunVersion = JSON.parse(readFileSync(require.resolve('bun/package.json'), 'utf8')).version;

/** The bun that compiles: the devDependency's binary for this machine. */
function hostBun() {
  const arch = process.arch === 'arm64' ? 'aarch64' : process.arch;
  for (const pkg of [`@oven/bun-linux-${arch}`, `@oven/bun-linux-${arch}-baseline`]) {
    try {
      const bin = join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'bun');
      if (existsSync(bin) && statSync(bin).size > 1_000_000) return bin;
    } catch {
      /* not installed */
    }
  }
  const wrapper = join(dirname(require.resolve('bun/package.json')), 'bin', 'bun.exe');
  if (existsSync(wrapper) && statSync(wrapper).size > 1_000_000) return wrapper;
  throw new Error('no Bun binary in node_modules; run npm ci');
}

/** The target's Bun runtime, from its npm package (same version as the compiler). */
function targetRuntime(pkg) {
  const cache = join(root, 'node_modules', '.cache', 'steward-bun-targets', `${pkg.replace('/', '+')}@${bunVersion}`);
  const bin = join(cache, 'package', 'bin', 'bun');
  if (existsSync(bin)) return bin;
  rmSync(cache, { recursive: true, force: true });
  mkdirSync(cache, { recursive: true });
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', cache, `${pkg}@${bunVersion}`], {
    encoding: 'utf8',
  })
    .trim()
    .split('\n')
    .pop();
  execFileSync('tar', ['-xzf', join(cache, out), '-C', cache]);
  rmSync(join(cache, out));
  if (!existsSync(bin)) throw new Error(`${pkg}@${bunVersion} has no package/bin/bun`);
  chmodSync(bin, 0o755);
  return bin;
}

function hostTargets() {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  return [`linux-${arch}`, `linux-${arch}-musl`];
}

/**
 * The compile flags of every shipped shim (dist/steward and dist/shims/*). Measured one by one
 * against curl in docs/performance.md ("The shim call", `bench/tools/shim-variants.ts`): only
 * --bytecode changes the time per call (without it every start parses the bundle); --format=cjs,
 * --minify, --compile-exec-argv=--smol and --compile-jit-policy are within the noise. The two
 * --no-compile-autoload-* flags keep the shim from reading bunfig.toml (its `preload` scripts) and
 * .env from the working directory the runtime runs it in (test/integration/shim-targets.test.ts).
 */
export const COMPILE_FLAGS = [
  '--bytecode',
  '--format=esm',
  '--minify',
  '--no-compile-autoload-bunfig',
  '--no-compile-autoload-dotenv',
];

/**
 * Compiles `entry` (a bundled .mjs) into a self-contained executable for `target` with `flags`
 * (default COMPILE_FLAGS); written to a temp name and renamed, so `out` is never half-written.
 */
export function compileFor(target, entry, out, flags = COMPILE_FLAGS) {
  const t = TARGETS[target];
  if (!t) throw new Error(`unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.tmp`;
  execFileSync(
    hostBun(),
    [
      'build',
      '--compile',
      `--target=${t.bunTarget}`,
      `--compile-executable-path=${targetRuntime(t.pkg)}`,
      ...flags,
      entry,
      '--outfile',
      tmp,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  renameSync(tmp, out);
  return out;
}

export function buildShim(target, outDir) {
  const bundle = join(root, 'shim', 'dist', 'steward-bun.mjs');
  if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run npm run build first`);
  const out = compileFor(target, bundle, join(outDir, `steward-${target}`));
  const file = execFileSync('file', ['-b', out], { encoding: 'utf8' }).trim();
  return { target, path: out, bytes: statSync(out).size, file };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { targets: { type: 'string' }, out: { type: 'string' } } });
  const targets =
    values.targets === 'host' ? hostTargets() : values.targets ? values.targets.split(',') : DEFAULT_TARGETS;
  const outDir = resolve(values.out ?? join(root, 'dist', 'shims'));
  for (const target of targets) console.log(JSON.stringify(buildShim(target, outDir)));
}
