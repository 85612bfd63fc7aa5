// portmap's iptables rules as findings. For each container given port mappings, portmap (Debian's
// containernetworking-plugins 1.1.1 and its upstream) makes a nat chain CNI-DN-<hash of network and
// container id> and jumps to it from the shared CNI-HOSTPORT-DNAT chain, one jump per protocol, each
// commented `dnat name: "<network>" id: "<container id>"`. The chain's name is a hash, so the comment
// is what names the owner: one finding per (family, network, container id, CNI-DN-* chain). The
// shared chains (CNI-HOSTPORT-DNAT, -SETMARK, -MASQ) belong to nobody and are never findings.
// The rules are read from `iptables-save -t nat` (and ip6tables-save) by the caller, through plugins/.

import type { PluginRunner } from '../plugins/executor.js';
import { pluginCall } from '../plugins/call.js';
import type { Finding } from './decide.js';
import { canonicalIp } from './addresses.js';
import type { Family, NatRule } from './nat-rules.js';

export type { Family } from './nat-rules.js';

/** A CNI-DN-… chain and its owner; its addresses are where its DNAT rules send traffic. */
export type PortmapRule = NatRule;

/** `dnat name: "NET" id: "ID"` as iptables-save prints it: inside "…", its own quotes escaped. */
const COMMENT = /--comment "dnat name: \\"([^"\\]*)\\" id: \\"([^"\\]*)\\""/;
const JUMP = /(?:^|\s)-j (CNI-DN-\S+)/;
const APPEND = /^-A (\S+)/;
/** A DNAT target: `--to-destination 10.0.0.5:80` or `[fd00::5]:80` (a port range may follow). */
const DNAT_TO = /--to-destination (?:\[([0-9A-Fa-f:.]+)\]|(\d+\.\d+\.\d+\.\d+))/;
/** A double-quoted argument as iptables-save writes one, its inner quotes and backslashes escaped. */
const QUOTED = /"(?:[^"\\]|\\.)*"/g;

/** The portmap rules of one `iptables-save -t nat` output, one per chain and owner. */
export function parsePortmapRules(family: Family, save: string): PortmapRule[] {
  const seen = new Map<string, PortmapRule>();
  const targets = dnatTargets(save);
  for (const line of save.split('\n')) {
    const c = COMMENT.exec(line);
    if (c === null) continue;
    const [, network = '', containerId = ''] = c;
    if (containerId === '') continue;
    // The target and chain are read with every quoted string (comments) blanked: a comment's text
    // may say `-j CNI-DN-…` too.
    const bare = line.replace(QUOTED, '""');
    const own = APPEND.exec(bare)?.[1];
    const chain = JUMP.exec(bare)?.[1] ?? (own?.startsWith('CNI-DN-') ? own : undefined);
    if (chain === undefined) continue;
    const key = `${network}\0${containerId}\0${chain}`;
    if (!seen.has(key))
      seen.set(key, { family, network, containerId, chain, addresses: [...(targets.get(chain) ?? [])] });
  }
  return [...seen.values()];
}

/** Each CNI-DN-* chain's DNAT destinations. */
function dnatTargets(save: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const line of save.split('\n')) {
    const bare = line.replace(QUOTED, '""');
    const chain = APPEND.exec(bare)?.[1];
    if (chain === undefined || !chain.startsWith('CNI-DN-')) continue;
    const m = DNAT_TO.exec(bare);
    const ip = canonicalIp(m?.[1] ?? m?.[2] ?? '');
    if (ip === null) continue;
    let set = out.get(chain);
    if (set === undefined) out.set(chain, (set = new Set()));
    set.add(ip);
  }
  return out;
}

/**
 * The config of a portmap DEL for an unjournalled rule. portmap derives the chain from the network
 * name and CNI_CONTAINERID alone, but does nothing on DEL without port mappings in runtimeConfig,
 * so one placeholder mapping is given (the DEL removes the whole chain and every jump to it).
 */
export function portmapDelConfig(network: string): Record<string, unknown> {
  return {
    cniVersion: '0.4.0',
    name: network,
    type: 'portmap',
    capabilities: { portMappings: true },
    runtimeConfig: { portMappings: [{ hostPort: 1, containerPort: 1, protocol: 'tcp' }] },
  };
}

/**
 * Releases an unjournalled rule through portmap's own DEL: one per network and container removes its
 * chain in both families, with every jump to it.
 */
export async function releasePortmap(f: Finding, run: PluginRunner, cniPath: string): Promise<void> {
  await run(
    pluginCall('DEL', 'portmap', portmapDelConfig(f.network), { containerId: f.containerId, ifname: 'eth0', cniPath }),
  );
}
