// Running a plugin chain directly, the way a runtime's libcni does without steward: ADD in order
// passing prevResult; on failure, DEL the chain in reverse, halting at the first DEL error, and
// swallowing that error (as containerd does when setup failed: seed 002). The baseline that
// proves a steward test can fail.

import { join } from 'node:path';
import { FIXTURE_BIN, SYSTEM_CNI_BIN } from './env.js';
import { execPlugin, type ShimAnswer } from './shim.js';

export interface DirectCall {
  containerId: string;
  netns: string;
  ifname?: string;
}

interface Net {
  name: string;
  cniVersion: string;
  plugins: Array<Record<string, unknown> & { type: string }>;
}

const CNI_PATH = `${SYSTEM_CNI_BIN}:${FIXTURE_BIN}`;

function pluginFile(type: string): string {
  return type.startsWith('steward-') ? join(FIXTURE_BIN, type) : join(SYSTEM_CNI_BIN, type);
}

function run(
  command: string,
  net: Net,
  plugin: Net['plugins'][number],
  call: DirectCall,
  prev?: unknown,
): Promise<ShimAnswer> {
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: call.containerId,
    CNI_NETNS: call.netns,
    CNI_IFNAME: call.ifname ?? 'eth0',
    CNI_PATH,
  };
  const stdin = { ...plugin, name: net.name, cniVersion: net.cniVersion, ...(prev ? { prevResult: prev } : {}) };
  return execPlugin(pluginFile(plugin.type), env, JSON.stringify(stdin));
}

/** ADD the chain; returns the final result, or the error after the (failing-fast) teardown. */
export async function directAdd(
  net: Net,
  call: DirectCall,
): Promise<{ ok: boolean; result?: unknown; error?: unknown }> {
  let prev: unknown;
  for (const plugin of net.plugins) {
    const r = await run('ADD', net, plugin, call, prev);
    if (r.code !== 0) {
      await directDel(net, call, prev); // the runtime's teardown; its error is swallowed
      return { ok: false, error: r.json };
    }
    prev = r.json;
  }
  return { ok: true, result: prev };
}

/** DEL the chain in reverse, halting at the first failure (libcni's DelNetworkList). */
export async function directDel(net: Net, call: DirectCall, prev?: unknown): Promise<boolean> {
  for (const plugin of [...net.plugins].reverse()) {
    const r = await run('DEL', net, plugin, call, prev);
    if (r.code !== 0) return false;
  }
  return true;
}
