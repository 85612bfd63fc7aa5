// The nat rules the audit reads from `iptables-save -t nat` (portmap's, portmap.ts; bridge's and
// ptp's masquerade chains, masquerade.ts) as findings: one per family and chain, named by the owner
// their comments carry, with the addresses they hold. A rule has no timestamp: its age comes from
// the caller (gather.ts scanNat).

import type { Finding } from './decide.js';

export type Family = 'iptables' | 'ip6tables';

export interface NatRule {
  family: Family;
  network: string;
  containerId: string;
  /** The per-container chain the commented rules jump to or sit in. */
  chain: string;
  /** The pod addresses the chain holds (portmap's DNAT targets, a masquerade jump's sources), canonical. */
  addresses: string[];
}

/**
 * The rules as findings of `kind`, their path written `iptables -t nat CNI-…`. `since(containerId,
 * path)` gives the evidence of their age (the container's oldest lease or cache file, else when this
 * daemon first saw the rule).
 */
export function natFindings(
  kind: 'portmap' | 'masquerade',
  rules: readonly NatRule[],
  journalled: ReadonlySet<string>,
  since: (containerId: string, path: string) => number,
): Finding[] {
  return rules
    .map((r): Finding => {
      const path = `${r.family} -t nat ${r.chain}`;
      return {
        kind,
        containerId: r.containerId,
        network: r.network,
        ifname: '',
        ip: null,
        path,
        mtimeMs: since(r.containerId, path),
        journalled: journalled.has(r.containerId),
        addresses: r.addresses,
      };
    })
    .sort((a, b) => a.path.localeCompare(b.path));
}
