// The Go programs of bench/fixtures/ (go-floor: the floor of any Go plugin, writes {} and exits;
// status-ticker: containerd 2.x's STATUS loop; spawn-cost: os/exec's cost per plugin run; exec-runner:
// clients started and timed as a runtime starts a plugin, and the kubelet-style storm), built for
// this machine's CPU with the shipped shim's flags (scripts/build-shims.mjs), so a row's floor is built
// the way the shim it is compared with is.

import { join } from 'node:path';
import { compileFor, hostTarget } from '../../scripts/build-shims.mjs';
import { REPO } from './paths.js';

/** Builds bench/fixtures/`name` to `out` and returns `out`. */
export function buildGoFixture(name: 'go-floor' | 'status-ticker' | 'spawn-cost' | 'exec-runner', out: string): string {
  return compileFor(hostTarget(), out, undefined, join(REPO, 'bench/fixtures', name));
}
