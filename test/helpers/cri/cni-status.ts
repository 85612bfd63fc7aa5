// containerd 2.x's network readiness, played where containerd 1.6 (the one here) never calls CNI
// STATUS. As read in containerd/go-cni and containerd's CRI plugin (v2.0.1+):
// - the CRI `Status` call (the kubelet's runtime status sync, every 5 s) asks go-cni `Status()`
//   for each network plugin it loaded; go-cni holds its lock, checks the networks are loaded, then
//   runs libcni's `GetStatusNetworkList` on each loaded network: its loopback (cniVersion 0.3.1,
//   so nothing runs) and the first file of the conf dir (libcni `ConfFiles`: .conf, .conflist,
//   .json, sorted by name; cni_max_conf_num 1), with context.Background(): no deadline;
// - libcni runs nothing for a list below cniVersion 1.1.0; otherwise each plugin of the list in
//   order, its conf with the list's `name` and `cniVersion` injected, environment CNI_COMMAND=STATUS,
//   CNI_PATH the bin dirs joined by ':', every other CNI_* variable empty; the first error stops;
// - an error makes the CRI condition NetworkReady false, reason NetworkPluginNotReady, message
//   "Network plugin returns error: <err>" (the kubelet then stops new pods and, if it lasts, taints
//   the node not-ready).

import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execPlugin } from '../shim.js';

/** The file containerd's CRI plugin loads: the first .conf/.conflist/.json of the conf dir by name. */
export function firstConfFile(confDir: string): string {
  const files = readdirSync(confDir)
    .filter((f) => /\.(conf|conflist|json)$/.test(f))
    .sort();
  if (files.length === 0) throw new Error(`no network config in ${confDir}`);
  return join(confDir, files[0]!);
}

function atLeast110(v: unknown): boolean {
  const [a = 0, b = 0] = String(v ?? '')
    .split('.')
    .map(Number);
  return a > 1 || (a === 1 && b >= 1);
}

export interface NetworkCondition {
  ready: boolean;
  reason?: string;
  message?: string;
  /** Not ready: the failing plugin's CNI error code (50: not ready), or its exit code without one. */
  code?: number | null;
  /** Plugins executed (0 below cniVersion 1.1.0). */
  execs: number;
  ms: number;
}

/** One CRI `Status`'s NetworkReady for `list` (a parsed conflist), as containerd 2.x computes it. */
export async function networkCondition(list: any, binDirs: string[], killAfterMs = 60_000): Promise<NetworkCondition> {
  const t0 = performance.now();
  let execs = 0;
  const done = (c: Omit<NetworkCondition, 'execs' | 'ms'>) => ({ ...c, execs, ms: performance.now() - t0 });
  if (!atLeast110(list.cniVersion)) return done({ ready: true });
  for (const plugin of list.plugins as Array<Record<string, unknown>>) {
    const file = binDirs.map((d) => join(d, String(plugin.type))).find((f) => existsSync(f));
    if (file === undefined)
      return done({
        ready: false,
        reason: 'NetworkPluginNotReady',
        message: `Network plugin returns error: failed to find plugin "${String(plugin.type)}" in path ${binDirs.join(':')}`,
      });
    const conf = { ...plugin, name: list.name, cniVersion: list.cniVersion };
    const env = {
      ...(process.env as Record<string, string>),
      CNI_COMMAND: 'STATUS',
      CNI_CONTAINERID: '',
      CNI_NETNS: '',
      CNI_IFNAME: '',
      CNI_ARGS: '',
      CNI_PATH: binDirs.join(':'),
    };
    execs++;
    const r = await execPlugin(file, env, JSON.stringify(conf), { timeoutMs: killAfterMs });
    if (r.code !== 0) {
      const msg = r.json?.msg ?? (r.signal ? `killed by ${r.signal} after ${killAfterMs} ms (no answer)` : r.stdout);
      return done({
        ready: false,
        reason: 'NetworkPluginNotReady',
        message: `Network plugin returns error: plugin type="${String(plugin.type)}" failed (status): ${String(msg)} (code ${String(r.json?.code)})`,
        code: typeof r.json?.code === 'number' ? r.json.code : r.code,
      });
    }
  }
  return done({ ready: true });
}

export interface Tick extends NetworkCondition {
  /** When the tick started, performance.now() ms. */
  at: number;
}

/**
 * The kubelet's 5 s runtime status sync as a Go ticker: a tick every `periodMs` from the start, each
 * a CRI Status computing NetworkReady; a tick due while one still runs is dropped (as a ticker
 * drops it), so a STATUS that hangs shows as missing ticks.
 */
export class StatusLoop {
  readonly ticks: Tick[] = [];
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(
    private readonly periodMs: number,
    private readonly condition: () => Promise<NetworkCondition>,
  ) {}

  start(): void {
    const t0 = performance.now();
    this.running = (async () => {
      while (!this.stopped) {
        const at = performance.now();
        this.ticks.push({ at, ...(await this.condition()) });
        const next = Math.floor((performance.now() - t0) / this.periodMs) + 1;
        const wait = t0 + next * this.periodMs - performance.now();
        await new Promise((r) => setTimeout(r, Math.max(0, wait)));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** The first tick starting at or after `t` whose NetworkReady is `ready`, waiting up to `timeoutMs`. */
  async waitFor(ready: boolean, t: number, timeoutMs: number): Promise<Tick | undefined> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const hit = this.ticks.find((x) => x.at >= t && x.ready === ready);
      if (hit) return hit;
      if (performance.now() > deadline) return undefined;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
