// The audit's decision, pure: given what is held on the node (findings), who the runtime says is alive,
// which ADDs the journal has in flight, whose network namespace still exists, the clock and the grace, say for each finding whether it may be
// released and why not. No I/O here: the caller gathers the inputs (runtime, store/, the file system)
// and asks the runtime again right before acting on a "release" verdict.

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
  /** The sandbox's network namespace, when the finding names it (a libcni cache entry's `netns`). */
  netns?: string;
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
  nowMs: number;
  graceMs: number;
  /** Releases allowed this run. */
  cap: number;
  /** Whether the caller asked to release at all. */
  release: boolean;
}

export type Verdict =
  'release' | 'alive' | 'in-flight' | 'netns-present' | 'young' | 'owner-unknown' | 'capped' | 'report-only';

export interface Decision {
  finding: Finding;
  /** The finding is held by nobody: it is an orphan (reported). */
  orphan: boolean;
  verdict: Verdict;
  ageSeconds: number | null;
}

export function decide(input: DecideInput): Decision[] {
  let released = 0;
  const out: Decision[] = [];
  for (const finding of input.findings) {
    const ageSeconds =
      finding.mtimeMs === null ? null : Math.max(0, Math.floor((input.nowMs - finding.mtimeMs) / 1000));
    const d = (verdict: Verdict, orphan = true): Decision => ({ finding, orphan, verdict, ageSeconds });
    if (input.alive === null) {
      out.push(d('owner-unknown'));
    } else if (input.alive.has(finding.containerId)) {
      out.push(d('alive', false));
    } else if (input.netnsPresent?.has(finding.containerId)) {
      out.push(d('netns-present', false));
    } else if (input.inFlight.has(finding.containerId)) {
      out.push(d('in-flight', false));
    } else if (!input.release) {
      out.push(d('report-only'));
    } else if (finding.mtimeMs === null || input.nowMs - finding.mtimeMs < input.graceMs) {
      // No evidence of its age at all: it cannot be shown to be past the grace, so it is never released.
      out.push(d('young'));
    } else if (released >= input.cap) {
      out.push(d('capped'));
    } else {
      released += 1;
      out.push(d('release'));
    }
  }
  return out;
}
