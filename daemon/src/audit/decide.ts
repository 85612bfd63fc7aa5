// The audit's decision, pure: given what is held on the node (findings), who the runtime says is alive,
// which ADDs the journal has in flight, whose network namespace still exists, which addresses are on an
// interface anywhere on the node, since when each finding has looked orphaned, the clock and the grace,
// say for each finding whether it may be released and why not. No I/O here: the caller gathers the
// inputs (runtime, store/, the file system) and asks the runtime again right before acting.
//
// One wrong answer from the runtime is never enough to release anything: a finding is released only
// when the node itself shows its address unused (past the grace from its file's mtime), or when passes
// at least the grace apart have both found it orphaned (its sighting), and never while the runtime's
// answer contradicts what the node proves (`distrust`).

import { dirname } from 'node:path';

export type OrphanKind = 'lease' | 'cache' | 'portmap' | 'masquerade' | 'attachment';

export interface Finding {
  kind: OrphanKind;
  containerId: string;
  network: string;
  ifname: string;
  ip: string | null;
  path: string;
  /**
   * What the age (and the grace) is measured from, ms since epoch: the lease/cache file's modification
   * time, an attachment's last journal change, a nat rule's evidence (gather.ts scanNat); null when none.
   */
  mtimeMs: number | null;
  /** Whether steward's journal knows this container id. */
  journalled: boolean;
  /** For an attachment finding: its journal id. */
  attachmentId?: number;
  /** The sandbox's network namespace, when the finding names it (a libcni cache entry's `netns`). */
  netns?: string;
  /**
   * The addresses it holds, canonical (node-addresses.ts canonicalIp): a lease's IP, a cache entry's or
   * an attachment's result IPs, a portmap chain's DNAT targets, a masquerade chain's sources. Empty:
   * nothing to look for on the node.
   */
  addresses?: string[];
}

/** A finding's identity across passes and restarts (its sighting's key). */
export function findingKey(f: Pick<Finding, 'kind' | 'path' | 'containerId'>): string {
  return `${f.kind}\0${f.path}\0${f.containerId}`;
}

export interface DecideInput {
  findings: Finding[];
  /** Sandbox ids the runtime lists, whatever their state; null when no runtime answered. */
  alive: ReadonlySet<string> | null;
  /** Container ids with a journalled ADD in flight. */
  inFlight: ReadonlySet<string>;
  /**
   * Container ids whose network namespace still exists on the node: a sandbox the runtime does not
   * list yet (containerd lists it only after network setup, container create and task start) or not
   * any more, whose interface still holds the address.
   */
  netnsPresent?: ReadonlySet<string>;
  /**
   * Every address on an interface of any network namespace on the node; `complete` false when some
   * namespace could not be read (then no finding is proven unused, though what was found still keeps).
   * Null: not looked (no proof either way).
   */
  nodeAddresses?: { addresses: ReadonlySet<string>; complete: boolean } | null;
  /**
   * Who holds each address by host-local's leases (address -> container ids). An address on the node
   * that only other containers' leases name is theirs: it neither keeps nor clears this finding (a
   * stale cache entry or portmap rule whose address host-local gave to a new pod).
   */
  addressOwners?: ReadonlyMap<string, ReadonlySet<string>>;
  /** When each finding (findingKey) was first found orphaned by a pass, kept across passes and restarts. */
  sightings?: ReadonlyMap<string, number>;
  /** Why the runtime's answer is not trusted this pass (it contradicts the node): report only. */
  distrust?: string;
  nowMs: number;
  graceMs: number;
  /** Releases allowed this run. */
  cap: number;
  /**
   * At most this fraction of one network's leases released in one pass (never fewer than
   * MIN_NETWORK_CAP): a pass cannot empty a pool, whatever it was told.
   */
  capFraction?: number;
  /** Whether the caller asked to release at all. */
  release: boolean;
}

export type Verdict =
  | 'release'
  | 'alive'
  | 'in-flight'
  | 'netns-present'
  | 'address-in-use'
  | 'runtime-distrusted'
  | 'foreign-owner'
  | 'young'
  | 'unconfirmed'
  | 'owner-unknown'
  | 'group-held'
  | 'group-waits'
  | 'capped'
  | 'report-only';

/**
 * What each verdict means, as the report's `reason` says it (a release that did not complete says its
 * own: releases.ts). The verdicts of what is held (alive … group-held) are never reported as orphans.
 */
export const VERDICT_REASON: Record<Verdict, string> = {
  release: 'orphaned past the grace, confirmed by the node or an earlier pass, within the caps',
  alive: 'the runtime lists its sandbox',
  'in-flight': 'an ADD or DEL of its container is running',
  'netns-present': "its container's network namespace still exists",
  'address-in-use': 'an interface on the node has its address',
  'runtime-distrusted': "the runtime's answer contradicts the node this pass: report only",
  'foreign-owner':
    "its owner is no sandbox id of the runtime's form (a hand-made reservation, ctr's names): the runtime's list cannot say it is gone, so it is never released",
  young: 'younger than the grace, or of no known age',
  unconfirmed: 'only the runtime says it is dead: an earlier pass at least the grace before must agree',
  'owner-unknown': 'the runtime did not answer: nothing is released without its list',
  'group-held': 'what its release would free with it is held',
  'group-waits': 'what its release would free with it is not releasable yet',
  capped: "over this pass's release cap (--cap, --cap-fraction)",
  'report-only': 'a report: the pass was not asked to release',
};

/** Leases of one network a pass may always release, whatever the fraction (a small pool's leftovers). */
export const MIN_NETWORK_CAP = 10;
export const DEFAULT_CAP_FRACTION = 0.5;

export interface Decision {
  finding: Finding;
  /** The finding is held by nobody: it is an orphan (reported). */
  orphan: boolean;
  verdict: Verdict;
  ageSeconds: number | null;
}

export function decide(input: DecideInput): Decision[] {
  const verdicts = input.findings.map((f) => verdictOf(input, f));
  return capped(input, heldTogether(verdicts));
}

/** One finding's verdict on its own, before what one release frees with it and the caps. */
function verdictOf(input: DecideInput, finding: Finding): Decision {
  const ageSeconds = finding.mtimeMs === null ? null : Math.max(0, Math.floor((input.nowMs - finding.mtimeMs) / 1000));
  const d = (verdict: Verdict, orphan = true): Decision => ({ finding, orphan, verdict, ageSeconds });
  const inUse = input.nodeAddresses?.addresses;
  const addresses = ownAddresses(finding, input.addressOwners);
  if (input.alive === null) return d('owner-unknown');
  if (input.alive.has(finding.containerId)) return d('alive', false);
  if (input.netnsPresent?.has(finding.containerId)) return d('netns-present', false);
  if (input.inFlight.has(finding.containerId)) return d('in-flight', false);
  // An interface on the node has its address: a pod holds it, listed or not.
  if (inUse !== undefined && addresses.some((a) => inUse.has(a))) return d('address-in-use', false);
  if (input.distrust !== undefined) return d('runtime-distrusted');
  // host-local's lease of "reserved" or "router" (an address kept from the pool by hand), a `ctr run
  // --cni` container's: no runtime list ever names it, so its absence there proves nothing.
  if (!finding.journalled && !RUNTIME_ID.test(finding.containerId)) return d('foreign-owner');
  if (!input.release) return d('report-only');
  // No evidence of its age at all: it cannot be shown to be past the grace, so it is never released.
  if (finding.mtimeMs === null || input.nowMs - finding.mtimeMs < input.graceMs) return d('young');
  // Only the runtime says it is dead: an earlier pass at least the grace before must have agreed.
  if (!provenUnused(input, finding) && !sightedLongEnough(input, finding)) return d('unconfirmed');
  return d('release');
}

/**
 * What one release frees together: a journalled container's findings (its teardown frees them all),
 * an unjournalled container's leases on one interface of one network (host-local's DEL frees every
 * lease of that container and interface there, IPv4 and IPv6 alike), its portmap rules of one network
 * (portmap's DEL removes both families' chains), its masquerade chain of one network (removed in both
 * families). A cache file is its own.
 */
export function releaseGroup(f: Finding): string {
  if (f.journalled && f.kind !== 'cache') return `container\0${f.containerId}`;
  if (f.kind === 'lease') return `lease\0${dirname(f.path)}\0${f.containerId}\0${f.ifname === '' ? 'eth0' : f.ifname}`;
  if (f.kind === 'portmap') return `portmap\0${f.network}\0${f.containerId}`;
  if (f.kind === 'masquerade') return `masquerade\0${f.network}\0${f.containerId}`;
  return `file\0${f.path}`;
}

/**
 * A release frees its whole group, so a finding is released only when every finding of its group may
 * be: one held by a pod (its IPv4 address on an interface while its IPv6 one is gone, say) keeps the
 * group, and one that must wait (young, unconfirmed) holds the others back with it.
 */
function heldTogether(verdicts: Decision[]): Decision[] {
  const groups = new Map<string, Decision[]>();
  for (const d of verdicts) {
    const key = releaseGroup(d.finding);
    const group = groups.get(key);
    if (group) group.push(d);
    else groups.set(key, [d]);
  }
  return verdicts.map((d) => {
    if (d.verdict !== 'release') return d;
    const group = groups.get(releaseGroup(d.finding)) ?? [d];
    if (group.some((x) => !x.orphan)) return { ...d, verdict: 'group-held', orphan: false };
    if (group.some((x) => x.verdict !== 'release')) return { ...d, verdict: 'group-waits' };
    return d;
  });
}

/** The per-pass caps, a group at a time: a group that does not fit whole is capped whole. */
function capped(input: DecideInput, verdicts: Decision[]): Decision[] {
  const perNetwork = networkCaps(input);
  const releasedIn = new Map<string, number>();
  let released = 0;
  const decided = new Map<string, boolean>();
  // Each group's releases, gathered once: filtering every finding per group took a pass of 12,000
  // findings 30 s of stewardd's loop (STATUS 50 throughout).
  const groups = new Map<string, Decision[]>();
  for (const x of verdicts) {
    if (x.verdict !== 'release') continue;
    const key = releaseGroup(x.finding);
    const group = groups.get(key);
    if (group) group.push(x);
    else groups.set(key, [x]);
  }
  return verdicts.map((d) => {
    if (d.verdict !== 'release') return d;
    const key = releaseGroup(d.finding);
    let fits = decided.get(key);
    if (fits === undefined) {
      const group = groups.get(key) as Decision[];
      // A journalled container's group may hold leases of several networks: each counts in its own.
      const leases = new Map<string, number>();
      for (const { finding: f } of group)
        if (f.kind === 'lease') leases.set(f.network, (leases.get(f.network) ?? 0) + 1);
      fits =
        released + group.length <= input.cap &&
        [...leases].every(([net, n]) => (releasedIn.get(net) ?? 0) + n <= (perNetwork.get(net) ?? MIN_NETWORK_CAP));
      if (fits) {
        released += group.length;
        for (const [net, n] of leases) releasedIn.set(net, (releasedIn.get(net) ?? 0) + n);
      }
      decided.set(key, fits);
    }
    return fits ? d : { ...d, verdict: 'capped' };
  });
}

/** The finding's addresses that no lease gives to another container. */
function ownAddresses(f: Finding, owners: DecideInput['addressOwners']): string[] {
  return (f.addresses ?? []).filter((a) => {
    const holders = owners?.get(a);
    return holders === undefined || holders.has(f.containerId);
  });
}

/**
 * The node was read whole and none of the finding's own addresses is on it (one another container's
 * lease holds is that container's: releasing a stale cache file or portmap rule frees nothing
 * host-local gave it); for an attachment, whose
 * network namespace steward recorded and which is gone (else netnsPresent kept it), that is proof
 * enough even with no address (a chain without IPAM).
 */
function provenUnused(input: DecideInput, f: Finding): boolean {
  if (input.nodeAddresses?.complete !== true) return false;
  return (f.addresses ?? []).length > 0 || (f.kind === 'attachment' && (f.netns ?? '') !== '');
}

/**
 * Found orphaned by an earlier pass at least the grace ago. A first sighting never counts, grace 0
 * included: what the node cannot prove unused needs two passes that agree.
 */
function sightedLongEnough(input: DecideInput, f: Finding): boolean {
  const first = input.sightings?.get(findingKey(f));
  return first !== undefined && first < input.nowMs && input.nowMs - first >= input.graceMs;
}

/** Per network: how many of its leases one pass may release. */
function networkCaps(input: DecideInput): Map<string, number> {
  const fraction = input.capFraction ?? DEFAULT_CAP_FRACTION;
  const leases = new Map<string, number>();
  for (const f of input.findings) if (f.kind === 'lease') leases.set(f.network, (leases.get(f.network) ?? 0) + 1);
  const caps = new Map<string, number>();
  for (const [net, n] of leases) caps.set(net, Math.max(MIN_NETWORK_CAP, Math.floor(n * fraction)));
  return caps;
}

/** The form containerd and CRI-O give every sandbox id (32 random bytes, hex). */
export const RUNTIME_ID = /^[0-9a-f]{64}$/;

/**
 * Why a runtime's list cannot be trusted, if it cannot: an id not of the runtime's own form (ids are
 * compared exactly, so an upper-case, shortened or prefixed id matches nothing and would make every
 * pod look dead), or journalled attachments whose network namespace exists (pods steward set up that
 * are still there) missing from it. Undefined: nothing contradicts it.
 */
export function runtimeDistrust(listed: readonly string[], withNetns: readonly string[]): string | undefined {
  const odd = listed.find((id) => !RUNTIME_ID.test(id));
  if (odd !== undefined)
    return `the runtime listed a sandbox id that is not 64 lower-case hex digits (${JSON.stringify(odd.slice(0, 80))}): its list cannot be matched`;
  const ids = new Set(listed);
  const missing = [...new Set(withNetns)].filter((id) => !ids.has(id));
  if (missing.length === 0) return undefined;
  if (listed.length === 0)
    return `the runtime listed no sandbox while ${missing.length} journalled pod(s) still have their network namespace`;
  return `${missing.length} journalled pod(s) whose network namespace exists are missing from the runtime's list (e.g. ${missing[0]?.slice(0, 13)})`;
}
