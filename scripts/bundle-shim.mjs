// Bundles the shim (shim/src + the parts of shared it uses) into one file, so a CNI call loads
// one script instead of resolving a module graph: shim/dist/steward.mjs.
import { build } from 'esbuild';

await build({
  entryPoints: ['shim/src/main.ts'],
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  outfile: 'shim/dist/steward.mjs',
  legalComments: 'none',
  logLevel: 'warning',
});
