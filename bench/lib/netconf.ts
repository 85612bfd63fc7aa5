// Netconfs and wire bodies for daemon benchmarks. The no-op delegate carries a bridge-sized
// config (the plugin ignores it) so the rows the daemon journals are as large as real ones.

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Scratch } from './scratch.js';
import { NOOP_TYPE } from './paths.js';

export const CNI_VERSION = '1.0.0';
/**
 * The netns of every benchmark request. The no-op delegate never enters it, but stewardd refuses an
 * ADD whose CNI_NETNS is not a network namespace, so it is a real (empty) one: benchNetns() makes it.
 */
export const FAKE_NETNS = '/var/run/netns/steward-bench';

/** Creates FAKE_NETNS for the run (removed at env.close()) unless it exists already. */
export function benchNetns(env: Scratch): void {
  if (existsSync(FAKE_NETNS)) return;
  execFileSync('ip', ['netns', 'add', 'steward-bench'], { stdio: 'ignore' });
  env.defer(() => {
    try {
      execFileSync('ip', ['netns', 'del', 'steward-bench'], { stdio: 'ignore' });
    } catch {
      /* gone */
    }
  });
}

export function noopConf(socket: string, logFile?: string): Record<string, unknown> {
  const plugin: Record<string, unknown> = {
    type: NOOP_TYPE,
    bridge: 'cni0',
    isGateway: true,
    ipMasq: true,
    hairpinMode: true,
    ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.1.0/24' }]], routes: [{ dst: '0.0.0.0/0' }] },
  };
  if (logFile !== undefined) plugin.logFile = logFile;
  return {
    cniVersion: CNI_VERSION,
    name: 'bench',
    type: 'steward',
    socket,
    delegates: [{ cniVersion: CNI_VERSION, name: 'podnet', plugins: [plugin] }],
  };
}

/** The CNI_* variables of one call, in the order the shim forwards them (CNI_ENV_VARS). */
export function cniVars(command: string, containerId: string, netns = FAKE_NETNS): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerId,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  };
}

/** Exactly the body the shim POSTs for this call. */
export function wireBody(
  command: string,
  containerId: string,
  conf: Record<string, unknown>,
  netns = FAKE_NETNS,
): string {
  return JSON.stringify({ env: cniVars(command, containerId, netns), config: conf });
}

/** The bridge + host-local network the chain benchmarks run, as one plugin entry. */
export function bridgeHostLocal(bridge: string, subnet: string, dataDir: string): Record<string, unknown> {
  return {
    type: 'bridge',
    bridge,
    isGateway: true,
    ipMasq: false,
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
  };
}

/** The runtime's netconf for steward wrapping one delegate network `podnet` of these plugins. */
export function stewardOver(socket: string, plugins: unknown[], spoolDir?: string): Record<string, unknown> {
  return {
    cniVersion: CNI_VERSION,
    name: 'steward',
    type: 'steward',
    socket,
    ...(spoolDir === undefined ? {} : { spoolDir }),
    delegates: [{ cniVersion: CNI_VERSION, name: 'podnet', plugins }],
  };
}
