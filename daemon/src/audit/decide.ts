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

export type OrphanKind = 'lease' | 'cache' | 'portmap' | 'attachment';

export interface Finding {
  kind: OrphanKind;
  containerId: string;
  network: string;
  ifname: string;
  ip: string | null;
  path: string;
  /**
   * What the age (and the grace) is measured from, ms since epoch: the lease/cache file's modification
   * time, an attachment's last journal change, a portmap rule's evidence (portmap.ts); null when none.
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
   * an attachment's result IPs, a portmap chain's DNAT targets. Empty: nothing to look for on the node.
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
  | 'young'
  | 'unconfirmed'
  | 'owner-unknown'
  | 'capped'
  | 'report-only';

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
  let released = 0;
  const perNetwork = networkCaps(input);
  const releasedIn = new Map<string, number>();
  const inUse = input.nodeAddresses?.addresses;
  const out: Decision[] = [];
  for (const finding of input.findings) {
    const ageSeconds =
      finding.mtimeMs === null ? null : Math.max(0, Math.floor((input.nowMs - finding.mtimeMs) / 1000));
    const d = (verdict: Verdict, orphan = true): Decision => ({ finding, orphan, verdict, ageSeconds });
    const addresses = ownAddresses(finding, input.addressOwners);
    if (input.alive === null) {
      out.push(d('owner-unknown'));
    } else if (input.alive.has(finding.containerId)) {
      out.push(d('alive', false));
    } else if (input.netnsPresent?.has(finding.containerId)) {
      out.push(d('netns-present', false));
    } else if (input.inFlight.has(finding.containerId)) {
      out.push(d('in-flight', false));
    } else if (inUse !== undefined && addresses.some((a) => inUse.has(a))) {
      // An interface on the node has its address: a pod holds it, listed or not.
      out.push(d('address-in-use', false));
    } else if (input.distrust !== undefined) {
      out.push(d('runtime-distrusted'));
    } else if (!input.release) {
      out.push(d('report-only'));
    } else if (finding.mtimeMs === null || input.nowMs - finding.mtimeMs < input.graceMs) {
      // No evidence of its age at all: it cannot be shown to be past the grace, so it is never released.
      out.push(d('young'));
    } else if (!provenUnused(input, finding) && !sightedLongEnough(input, finding)) {
      // Only the runtime says it is dead: a second pass at least the grace later must agree.
      out.push(d('unconfirmed'));
    } else if (released >= input.cap || overNetworkCap(finding, perNetwork, releasedIn)) {
      out.push(d('capped'));
    } else {
      released += 1;
      if (finding.kind === 'lease') releasedIn.set(finding.network, (releasedIn.get(finding.network) ?? 0) + 1);
      out.push(d('release'));
    }
  }
  return out;
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

/** Orphaned since at least the grace (a finding first found now counts from now: grace 0 is at once). */
function sightedLongEnough(input: DecideInput, f: Finding): boolean {
  const first = input.sightings?.get(findingKey(f)) ?? input.nowMs;
  return input.nowMs - first >= input.graceMs;
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

function overNetworkCap(
  f: Finding,
  caps: ReadonlyMap<string, number>,
  releasedIn: ReadonlyMap<string, number>,
): boolean {
  if (f.kind !== 'lease') return false;
  return (releasedIn.get(f.network) ?? 0) >= (caps.get(f.network) ?? MIN_NETWORK_CAP);
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
