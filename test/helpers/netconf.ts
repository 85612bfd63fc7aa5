// Netconf builders for tests: a steward network wrapping real Debian plugins and fixtures.

import { join } from 'node:path';

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
