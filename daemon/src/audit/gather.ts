// What one audit pass finds held on the node: host-local leases (under host-local's own lock),
// libcni cache files, portmap's and bridge's masquerade nat rules, steward's journalled attachments,
// each with the addresses it holds; and the node's own proof of which addresses are in use
// (node-addresses.ts).

import { dirname } from 'node:path';
import type { Attachment } from '../store/types.js';
import { scanCache } from './cache.js';
import type { Finding } from './decide.js';
import { hostLocalDataDirs, scanLeases } from './leases.js';
import { storedResultAddresses } from './addresses.js';
import type { NodeAddresses } from './node-addresses.js';
import { parseMasqueradeRules, type MasqueradeRule } from './masquerade.js';
import { natFindings } from './nat-rules.js';
import { parsePortmapRules, type Family, type PortmapRule } from './portmap.js';
import type { AuditDeps } from './types.js';

/** Where runtimes keep bind-mounted network namespaces (containerd, CRI-O, podman, ip netns). */
export const NETNS_DIRS = ['/run/netns', '/var/run/netns'] as const;

/** Everything held on the node, each finding with the addresses it holds. */
export async function gather(
  deps: AuditDeps,
  live: Attachment[],
  journalled: Set<string>,
  nowMs: number,
): Promise<Finding[]> {
  const dataDirs = new Set(deps.leaseDirs);
  for (const a of live)
    for (const s of deps.journal.stepsOf(a.id)) for (const d of hostLocalDataDirs(s.config)) dataDirs.add(d);
  const findings: Finding[] = [];
  for (const a of live) if (a.state !== 'adding') findings.push(attachmentFinding(a)); // in flight: never a finding
  const skipped = (dir: string, err: Error) =>
    deps.log.warn({ dir, err: err.message }, "audit: host-local's lock of a network not had; its leases skipped");
  // Appended one by one: a pool of 150,000 leases spread into one push() overflows the stack.
  const add = (more: readonly Finding[]) => {
    for (const f of more) findings.push(f);
  };
  for (const dir of [...dataDirs].sort()) add(await scanLeases(dir, journalled, deps.lockNetwork, skipped));
  add(await scanCache(deps.cacheDir, journalled));
  add(await scanNat(deps, journalled, findings, nowMs));
  return findings;
}

/** address -> the containers host-local's leases give it to. */
export function leaseOwners(findings: readonly Finding[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const f of findings) {
    if (f.kind !== 'lease') continue;
    for (const a of f.addresses ?? []) {
      let set = out.get(a);
      if (set === undefined) out.set(a, (set = new Set()));
      set.add(f.containerId);
    }
  }
  return out;
}

/**
 * The node's addresses: every network namespace, with a process in it or mounted anywhere (node-addresses.ts);
 * the runtimes' netns dirs and those the journal and cache name are entered at their own path too.
 */
export async function nodeProof(
  deps: AuditDeps,
  live: readonly Attachment[],
  findings: readonly Finding[],
): Promise<NodeAddresses | { error: string }> {
  if (deps.nodeAddresses === undefined) return { error: 'not looked for' };
  const dirs = new Set<string>(NETNS_DIRS);
  for (const p of [...live.map((a) => a.netns), ...findings.map((f) => f.netns ?? '')])
    if (p.startsWith('/') && !p.startsWith('/proc/')) dirs.add(dirname(p));
  try {
    const node = await deps.nodeAddresses([...dirs]);
    if (node.unread.length > 0)
      deps.log.warn({ unread: node.unread.slice(0, 10) }, 'audit: network namespaces not read; only sightings release');
    return node;
  } catch (e) {
    deps.log.warn({ err: (e as Error).message }, "audit: the node's addresses not read; only sightings release");
    return { error: (e as Error).message };
  }
}

/** A journalled attachment that is not in flight, as a finding: its stored result's addresses, its netns. */
function attachmentFinding(a: Attachment): Finding {
  return {
    kind: 'attachment',
    containerId: a.containerId,
    network: a.network,
    ifname: a.ifname,
    ip: null,
    path: `attachment/${a.id}`,
    mtimeMs: a.updatedAt,
    journalled: true,
    attachmentId: a.id,
    addresses: storedResultAddresses(a.result),
    netns: a.netns,
  };
}

/**
 * portmap's rules and the masquerade chains from both nat tables (one read of each), each aged by its
 * container's oldest file evidence, else by when first seen (exported for its unit test).
 */
export async function scanNat(
  deps: Pick<AuditDeps, 'readNat' | 'portmapNetworks' | 'firstSeen' | 'log'>,
  journalled: ReadonlySet<string>,
  files: readonly Finding[],
  nowMs: number,
): Promise<Finding[]> {
  if (deps.readNat === undefined) return [];
  const rules: PortmapRule[] = [];
  const chains: MasqueradeRule[] = [];
  const unread = new Set<Family>();
  for (const family of ['iptables', 'ip6tables'] as const) {
    try {
      const only = deps.portmapNetworks ?? [];
      const save = await deps.readNat(family);
      const found = parsePortmapRules(family, save);
      rules.push(...(only.length === 0 ? found : found.filter((r) => only.includes(r.network))));
      chains.push(...parseMasqueradeRules(family, save));
    } catch (e) {
      unread.add(family);
      deps.log.warn({ family, err: (e as Error).message }, 'audit: cannot read the nat table; its rules skipped');
    }
  }
  const oldest = new Map<string, number>();
  for (const f of files) {
    if ((f.kind !== 'lease' && f.kind !== 'cache') || f.mtimeMs === null) continue;
    oldest.set(f.containerId, Math.min(f.mtimeMs, oldest.get(f.containerId) ?? Infinity));
  }
  const firstSeen = deps.firstSeen ?? new Map<string, number>();
  const current = new Set<string>();
  const since = (id: string, path: string) => {
    const key = `${path}\0${id}`;
    current.add(key);
    if (!firstSeen.has(key)) firstSeen.set(key, nowMs);
    return oldest.get(id) ?? (firstSeen.get(key) as number);
  };
  const out = [
    ...natFindings('portmap', rules, journalled, since),
    ...natFindings('masquerade', chains, journalled, since),
  ];
  // A rule not seen this pass is gone, unless its table could not be read: then it keeps its age.
  for (const key of firstSeen.keys())
    if (!current.has(key) && !unread.has(key.split(' ', 1)[0] as Family)) firstSeen.delete(key);
  return out;
}
