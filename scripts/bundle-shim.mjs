// Bundles the shim (shim/src + the parts of shared it uses) into one file, so a CNI call loads
// one script instead of resolving a module graph: shim/dist/steward.mjs (run by Node, bin/steward).
// Then the node's copy: dist/steward, one self-contained executable compiled by Bun (npm package
// `bun`, a devDependency) with its fetch-over-Unix-socket transport; see docs/packaging.md.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { COMPILE_FLAGS } from './build-shims.mjs';

const common = {
  entryPoints: ['shim/src/main.ts'],
  bundle: true,
  platform: 'node',
  format: 'esm',
  legalComments: 'none',
  logLevel: 'warning',
};

await build({ ...common, target: 'node20', outfile: 'shim/dist/steward.mjs' });

// main.ts's `./client.js` and `./stdio.js` imports become transport-bun.ts and stdio-bun.ts (Bun's own
// socket and file I/O); skel.ts keeps client.js (UnreachableError).
const BUN_SWAPS = { './client.js': 'shim/src/transport-bun.ts', './stdio.js': 'shim/src/stdio-bun.ts' };
const bunTransport = {
  name: 'bun-transport',
  setup(b) {
    b.onResolve({ filter: /^\.\/(client|stdio)\.js$/ }, (args) =>
      args.importer.endsWith(join('shim', 'src', 'main.ts')) ? { path: resolve(BUN_SWAPS[args.path]) } : undefined,
    );
  },
};
await build({ ...common, target: 'esnext', outfile: 'shim/dist/steward-bun.mjs', plugins: [bunTransport] });

/** The Bun binary from node_modules: the platform package itself, else the `bun` wrapper's copy. */
function bunBinary() {
  const require = createRequire(import.meta.url);
  const arch = process.arch === 'arm64' ? 'aarch64' : process.arch;
  for (const pkg of [`@oven/bun-${process.platform}-${arch}`, `@oven/bun-${process.platform}-${arch}-baseline`]) {
    try {
      const bin = join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'bun');
      if (existsSync(bin)) return bin;
    } catch {
      /* not installed for this platform */
    }
  }
  const wrapper = join(dirname(require.resolve('bun/package.json')), 'bin', 'bun.exe');
  if (existsSync(wrapper) && statSync(wrapper).size > 1_000_000) return wrapper;
  throw new Error('no Bun binary in node_modules (npm package "bun" and its @oven/bun-* platform package); run npm ci');
}

mkdirSync('dist', { recursive: true });
// The same flags as every shipped binary (scripts/build-shims.mjs COMPILE_FLAGS: --bytecode, no
// bunfig.toml or .env read from the working directory), for this machine's own Bun.
execFileSync(
  bunBinary(),
  ['build', '--compile', ...COMPILE_FLAGS, 'shim/dist/steward-bun.mjs', '--outfile', 'dist/steward'],
  {
    stdio: ['ignore', 'ignore', 'inherit'],
  },
);
