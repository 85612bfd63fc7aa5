// Whether this machine can run an e2e suite at all, and what a suite does when it cannot: skip
// loudly, or fail when STEWARD_E2E_REQUIRE=1 (CI machines that must run it).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { SYSTEM_CNI_BIN } from '../env.js';
import { which } from './exec.js';

/** Why this machine cannot run the e2e suite at all, or undefined. */
export function baseSkipReason(commands: string[]): string | undefined {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return 'not root: real runtimes need root (network namespaces, cgroups, mounts)';
  const missing = commands.filter((c) => which(c) === undefined);
  if (!existsSync('/bin/busybox')) missing.push('/bin/busybox (busybox-static)');
  for (const p of ['bridge', 'host-local'])
    if (!existsSync(join(SYSTEM_CNI_BIN, p))) missing.push(join(SYSTEM_CNI_BIN, p));
  if (missing.length > 0) return `missing ${missing.join(', ')}: run \`bash scripts/e2e-setup.sh\` as root`;
  return undefined;
}

/**
 * Turns a skip reason into a skip (printed on stderr, so it is never silent), or into a failure when
 * STEWARD_E2E_REQUIRE=1 (for CI machines that must run the suite).
 */
export function skipOrFail(what: string, reason: string | undefined): string | false {
  if (reason === undefined) return false;
  if (process.env.STEWARD_E2E_REQUIRE === '1')
    throw new Error(`e2e: ${what} cannot run and STEWARD_E2E_REQUIRE=1: ${reason}`);
  process.stderr.write(`\n*** e2e: SKIPPING ${what}: ${reason}\n\n`);
  return `${what}: ${reason}`;
}
