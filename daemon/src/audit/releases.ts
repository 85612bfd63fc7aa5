// An audit pass's releases, in batches: before each batch past the first the runtime is asked again
// (its answer cross-checked against the node) and the journal read again, once for the batch; no
// release starts after the pass's deadline. Each finding goes through its own kind's path, beside its
// scanner: a journalled container through the engine's teardown, a lease through host-local's DEL
// (leases.ts), a portmap rule through portmap's DEL (portmap.ts), a masquerade chain by the removal a
// DEL without the netns gets (deps.releaseMasquerade), a cache file by removal (cache.ts).
// Every release is logged with its evidence.

import type { Attachment } from '../store/types.js';
import { releaseCache } from './cache.js';
import { releaseGroup, runtimeDistrust, VERDICT_REASON, type Decision } from './decide.js';
import { owingTeardown, type SandboxGuard } from './guard.js';
import { releaseLease } from './leases.js';
import { releasePortmap } from './portmap.js';
import type { AuditDeps, OrphanView } from './types.js';

/** Releases between two asks of the runtime (and reads of the journal). */
export const RELEASE_BATCH = 32;

export const DISTRUSTED = "audit: the runtime's answer contradicts the node; this pass only reports";

/** What a report and a release's log line say of one finding. */
export function view(d: Decision): Omit<OrphanView, 'released' | 'reason'> {
  const f = d.finding;
  return {
    kind: f.kind,
    containerId: f.containerId,
    network: f.network,
    ifname: f.ifname,
    ip: f.ip,
    path: f.path,
    ageSeconds: d.ageSeconds,
    journalled: f.journalled,
    verdict: d.verdict,
  };
}

/** What one pass's releases learn as they go. */
export interface PassState {
  /** The runtime stopped answering a re-ask: no more releases (nor asks, each up to its deadline) this pass. */
  runtimeLost: boolean;
  /**
   * Release groups (decide.ts releaseGroup) this pass acted on: true once freed (a teardown, a
   * host-local DEL of every lease of the interface, a portmap DEL of both families), false while a
   * container's teardown runs or when it failed. The group's other findings are answered from it.
   */
  done: Map<string, boolean>;
  /** No release starts after this (ms since epoch). */
  deadline: number;
  now: () => number;
  deadlineReached?: boolean;
  /** Why the releases stopped before the decisions were done (reported as reportOnly). */
  stopped?: string;
  /** A later batch's ask was not trusted (the report's runtime.distrusted, and the metric, say so). */
  distrusted?: string;
  /**
   * What the current batch of releases acts on: the runtime's answer, the journal as read once for
   * the batch, and how many releases it has made. The first batch uses the pass's own ask.
   */
  batch: { listed: Set<string>; size: number; owing: Set<number>; starting: Set<string> };
}

/**
 * A new batch every RELEASE_BATCH releases: the runtime asked again and the journal read again, once
 * for the batch rather than once per release. Undefined while releases may go on; else why they stopped
 * (kept in pass.stopped: every later release of the pass says the same).
 */
async function nextBatch(deps: AuditDeps, guard: SandboxGuard, pass: PassState): Promise<string | undefined> {
  if (pass.stopped !== undefined) return pass.stopped;
  if (pass.now() >= pass.deadline) {
    pass.deadlineReached = true;
    deps.log.warn('audit: the pass reached its deadline; no more releases this pass');
    return (pass.stopped = 'the pass reached its deadline; what is left waits for the next pass');
  }
  if (pass.batch.size < RELEASE_BATCH) return undefined;
  const again = await deps.listSandboxes();
  if (again === null) {
    pass.runtimeLost = true;
    deps.log.warn({ runtime: deps.runtime() }, 'audit: the runtime stopped answering; no more releases this pass');
    return (pass.stopped = 'the runtime stopped answering during the pass');
  }
  const starting = guard.startingNow();
  const distrust = runtimeDistrust(again, guard.withNetns());
  if (distrust !== undefined) {
    pass.distrusted = distrust;
    deps.log.warn({ reason: distrust, runtime: deps.runtime() }, DISTRUSTED);
    return (pass.stopped = distrust);
  }
  pass.batch = { listed: new Set(again), size: 0, owing: owingTeardown(deps.journal), starting };
  return undefined;
}

/** Whether a finding was released, and why (or why not): the report's `released` and `reason`. */
export interface Released {
  released: boolean;
  reason: string;
}

const kept = (reason: string): Released => ({ released: false, reason });

export async function release(
  deps: AuditDeps,
  d: Decision,
  live: readonly Attachment[],
  guard: SandboxGuard,
  pass: PassState,
): Promise<Released> {
  const f = d.finding;
  const done: Released = { released: true, reason: VERDICT_REASON.release };
  const earlier = doneEarlier(d, pass);
  if (earlier === true) {
    deps.log.warn({ ...view(d), by: 'an earlier release of its container in this pass' }, RELEASED);
    return done;
  }
  if (earlier === false) return kept('its release group was tried earlier in this pass and did not finish');
  const stopped = await nextBatch(deps, guard, pass);
  if (stopped !== undefined) return kept(`releases stopped: ${stopped}`);
  // As of this batch's ask: a sandbox that appeared meanwhile keeps what it holds, and so does one
  // whose ADD began or whose network namespace is back.
  const { batch } = pass;
  if (batch.listed.has(f.containerId)) return kept('the runtime listed its sandbox when asked again');
  if (batch.starting.has(f.containerId)) return kept('an ADD of its container began during the pass');
  if (guard.hasNetns(f.containerId)) return kept("its container's network namespace came back during the pass");
  batch.size += 1;
  const evidence = { ...view(d), runtimeSandboxes: batch.listed.size };
  try {
    if (!(await releaseOne(deps, d, live, pass))) return kept('nothing was left to free');
    pass.done.set(releaseGroup(f), true);
  } catch (e) {
    const err = (e as Error).message;
    deps.log.warn({ ...evidence, err }, 'audit: release failed');
    return kept(`release failed: ${err}`);
  }
  deps.log.warn(evidence, RELEASED);
  return done;
}

/** Already freed (or failed) by this pass's release of another finding of its group; undefined: not yet. */
export function doneEarlier(d: Decision, pass: PassState): boolean | undefined {
  return pass.done.get(releaseGroup(d.finding));
}

/** The finding's own kind of release; false when there was nothing left to free. */
async function releaseOne(
  deps: AuditDeps,
  d: Decision,
  live: readonly Attachment[],
  pass: PassState,
): Promise<boolean> {
  const f = d.finding;
  const cniPath = deps.cniPath ?? '';
  if (f.journalled && f.kind !== 'cache') return releaseContainer(deps, d, live, pass);
  switch (f.kind) {
    case 'lease':
      return releaseLease(f, deps.run, cniPath);
    case 'portmap':
      await releasePortmap(f, deps.run, cniPath);
      return true;
    case 'masquerade':
      if (deps.releaseMasquerade === undefined) throw new Error('this daemon removes no masquerade chain');
      return (await deps.releaseMasquerade(f.network, f.containerId)) > 0;
    case 'cache':
      return releaseCache(f);
    default:
      return false;
  }
}

/**
 * Steward holds it: its own DEL path, once per container, frees the lease with everything else. Only
 * what still owes a teardown as of this batch: the runtime's own DEL may have finished it meanwhile.
 */
async function releaseContainer(
  deps: AuditDeps,
  d: Decision,
  live: readonly Attachment[],
  pass: PassState,
): Promise<boolean> {
  const containerId = d.finding.containerId;
  const targets = live.filter((x) => x.containerId === containerId && pass.batch.owing.has(x.id));
  if (targets.length === 0) return false;
  // Marked before the teardown runs: should it fail, the container's other findings are not tried again.
  pass.done.set(releaseGroup(d.finding), false);
  for (const a of targets) {
    const out = await deps.teardown(a.id);
    if (!out.done) throw out.error ?? new Error('teardown unfinished');
  }
  return true;
}

const RELEASED = 'audit: released an orphan: its sandbox is not listed by the runtime';
