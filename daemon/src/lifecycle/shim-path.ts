// Where `stewardd install` finds the shim it copies onto the node: the per-node build for this CPU
// in the image, or a checkout's own dist/steward. Used for --shim's default.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ShimLibc } from './options.js';

/** Where builds put the shims: <repo>/dist in a checkout, /app/dist in the image. */
export const DIST = fileURLToPath(new URL('../../../dist/', import.meta.url));

/** A checkout's own shim for this machine (npm run build): <repo>/dist/steward. */
export const DEFAULT_SHIM = join(DIST, 'steward');

/**
 * The shim built for a node of this CPU, as scripts/build-shims.mjs names it:
 * <dist>/shims/steward-linux-<x64|arm64>. The CPU is the one this daemon runs on (`uname -m`: an
 * image is built per architecture and runs natively). The shim is a static Go binary, so the host's
 * libc does not matter: --shim-libc is still accepted (glibc or musl) and names the same file.
 */
export function shimFor(_libc: ShimLibc, arch: string = process.arch, dist: string = DIST): string {
  return join(dist, 'shims', `steward-linux-${arch}`);
}

/** --shim's default: the per-node shim where the tree carries it (the image), else a checkout's dist/steward. */
export function defaultShim(libc: ShimLibc, arch: string = process.arch, dist: string = DIST): string {
  const perNode = shimFor(libc, arch, dist);
  return existsSync(perNode) ? perNode : join(dist, 'steward');
}
