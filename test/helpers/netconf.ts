// Netconf builders for tests: a steward network wrapping real Debian plugins and fixtures.

import { join } from 'node:path';
import { hintHeaders } from '@cni-steward/shared';

export interface BridgeOpts {
  bridge: string;
  subnet: string;
  dataDir: string;
  cniVersion?: string;
}

/** bridge + host-local IPAM, leases kept under dataDir so tests can count them. */
export function bridgePlugin(o: BridgeOpts) {
  return {
    type: 'bridge',
    bridge: o.bridge,
    isGateway: true,
    ipMasq: false,
    ipam: { type: 'host-local', dataDir: o.dataDir, ranges: [[{ subnet: o.subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
  };
}

export function fixturePlugin(stateDir: string, behaviour: Record<string, unknown> = {}) {
  return { type: 'steward-fixture', stateDir, ...behaviour };
}

export function stewardConf(
  socket: string,
  cniVersion: string,
  delegates: unknown[],
  extra: Record<string, unknown> = {},
) {
  return {
    cniVersion,
    name: 'steward',
    type: 'steward',
    socket,
    spoolDir: join(socket, '..', '..', 'state', 'spool'),
    delegates,
    ...extra,
  };
}

export function delegate(name: string, cniVersion: string, plugins: unknown[]) {
  return { cniVersion, name, plugins };
}

/** The body the shim POSTs for one call and its admission hint headers (shared/src/api.ts hintHeaders). */
export function hintedWire(
  command: string,
  containerId: string,
  netns: string,
  conf: Record<string, unknown>,
  cniPath = '/usr/lib/cni',
): { body: string; hints: Record<string, string> } {
  const e = {
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerId,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: cniPath,
  };
  return { body: JSON.stringify({ env: e, config: conf }), hints: hintHeaders(e, conf) };
}
