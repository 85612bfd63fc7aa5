// One audit pass: gather what is held on the node (gather.ts), ask the runtime who is alive, weigh its
// answer against what the node proves, decide (decide.ts), and, when asked to, release each orphan
// through its proper path (releases.ts). Every release is logged with its evidence.

import { existsSync } from 'node:fs';
import type { Attachment } from '../store/types.js';
import { decide, findingKey, runtimeDistrust, VERDICT_REASON, type Decision, type Finding } from './decide.js';
import { gather, leaseOwners, nodeProof } from './gather.js';
import { liveAttachments, owingTeardown, sandboxGuard } from './guard.js';
import { DEFAULT_PASS_DEADLINE_MS, DEFAULT_RELEASE_CAP } from './options.js';
import { DISTRUSTED, doneEarlier, release, view, type PassState } from './releases.js';
import type { AuditDeps, AuditOptions, AuditReport, OrphanView } from './types.js';

/** Findings that are nat rules, not files: their path names no file. */
const NAT_KINDS = new Set(['portmap', 'masquerade']);

export type { RuntimeInfo } from './runtime.js';
export type { AuditDeps, AuditOptions, AuditReport, OrphanView } from './types.js';
export { RELEASE_BATCH } from './releases.js';

export async function runAudit(deps: AuditDeps, opts: AuditOptions): Promise<AuditReport> {
  const now = deps.now ?? Date.now;
  const deadline = now() + (opts.deadlineMs ?? DEFAULT_PASS_DEADLINE_MS);
  const live = liveAttachments(deps.journal);
  const journalled = new Set(live.map((a) => a.containerId));
  const findings = await gather(deps, live, journalled, now());
  const { decisions, sandboxes, distrust, node, guard } = await judge(deps, opts, live, journalled, findings, now);

  // What its owner's own DEL freed while the pass ran (scanned before the DEL finished, unlisted after
  // RemovePodSandbox) is not reported: a pass during pod churn would list it otherwise.
  const owingNow = owingTeardown(deps.journal);
  const stillHeld = (f: Finding): boolean =>
    f.attachmentId !== undefined ? owingNow.has(f.attachmentId) : NAT_KINDS.has(f.kind) || existsSync(f.path);
  const pass: PassState = {
    runtimeLost: false,
    done: new Map(),
    deadline,
    now,
    batch: { listed: new Set(sandboxes ?? []), size: 0, owing: owingNow, starting: new Set() },
  };
  const orphans: OrphanView[] = [];
  for (const d of decisions) {
    // A finding its group's release freed earlier in this pass (the other lease of a dual-stack
    // interface, a container's lease after its teardown) is reported released, not taken for gone.
    if (!d.orphan || (doneEarlier(d, pass) === undefined && !stillHeld(d.finding))) continue;
    const out =
      d.verdict === 'release'
        ? await release(deps, d, live, guard, pass)
        : { released: false, reason: VERDICT_REASON[d.verdict] };
    orphans.push({ ...view(d), ...out });
  }
  const runtime = { ...deps.runtime(), ...(pass.runtimeLost ? { lostDuringPass: true } : {}) };
  const reportOnly = pass.stopped ?? distrust;
  return {
    orphans,
    runtime:
      (distrust ?? pass.distrusted) !== undefined ? { ...runtime, distrusted: distrust ?? pass.distrusted } : runtime,
    ...(reportOnly !== undefined && opts.release ? { reportOnly } : {}),
    ...(pass.deadlineReached ? { deadlineReached: true } : {}),
    node: 'addresses' in node ? { namespaces: node.namespaces, unread: node.unread } : node,
  };
}

/**
 * The verdicts: the journal read again after the scans (a container whose ADD began while they ran
 * is starting, not an orphan), the node's addresses, then the runtime's answer, cross-checked. The
 * sightings move on only with an answer that is trusted.
 */
async function judge(
  deps: AuditDeps,
  opts: AuditOptions,
  live: readonly Attachment[],
  journalled: ReadonlySet<string>,
  findings: Finding[],
  now: () => number,
) {
  const inFlight = new Set(live.filter((a) => a.state === 'adding').map((a) => a.containerId));
  const guard = sandboxGuard(deps, journalled, findings);
  for (const id of guard.startingNow()) inFlight.add(id);
  const node = await nodeProof(deps, live, findings);
  const sandboxes = await deps.listSandboxes();
  const sightings = deps.sightings?.load() ?? new Map<string, number>();
  const base = {
    findings,
    alive: sandboxes === null ? null : new Set(sandboxes),
    inFlight,
    netnsPresent: guard.netnsPresent(),
    nodeAddresses: 'addresses' in node ? { addresses: node.addresses, complete: node.unread.length === 0 } : null,
    addressOwners: leaseOwners(findings),
    sightings,
    nowMs: now(),
    graceMs: opts.graceMs,
    cap: opts.cap ?? DEFAULT_RELEASE_CAP,
    ...(opts.capFraction !== undefined ? { capFraction: opts.capFraction } : {}),
    release: opts.release,
  };
  let decisions = decide(base);
  const distrust =
    sandboxes === null ? undefined : (runtimeDistrust(sandboxes, guard.withNetns()) ?? nodeContradicts(decisions));
  if (distrust !== undefined) {
    deps.log.warn({ reason: distrust, runtime: deps.runtime() }, DISTRUSTED);
    decisions = decide({ ...base, distrust });
  }
  if (sandboxes !== null && distrust === undefined) deps.sightings?.save(nextSightings(decisions, sightings, now()));
  return { decisions, sandboxes, distrust, node, guard };
}

/**
 * Why the node contradicts the runtime's list, if it does: containers that never went through
 * steward, unlisted, yet holding an address on an interface or a network namespace that exists. A
 * list that misses a live pod cannot be trusted to say any other one is gone.
 */
function nodeContradicts(decisions: readonly Decision[]): string | undefined {
  const held = decisions.filter(
    (d) => !d.finding.journalled && (d.verdict === 'address-in-use' || d.verdict === 'netns-present'),
  );
  const ids = [...new Set(held.map((d) => d.finding.containerId))];
  if (ids.length === 0) return undefined;
  return `${ids.length} container(s) the runtime does not list still hold an address on an interface or a network namespace (e.g. ${ids[0]?.slice(0, 13)})`;
}

/**
 * The sightings after this pass: a finding found orphaned keeps its first sighting (or gets this
 * pass's), one found held by somebody or not found at all loses it.
 */
function nextSightings(decisions: readonly Decision[], before: ReadonlyMap<string, number>, nowMs: number) {
  const next = new Map<string, number>();
  for (const d of decisions) {
    if (!d.orphan) continue;
    const key = findingKey(d.finding);
    next.set(key, before.get(key) ?? nowMs);
  }
  return next;
}
