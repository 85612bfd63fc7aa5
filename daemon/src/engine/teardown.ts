// One concern: the order and the journaling of one attachment's DELs (long: those rules are its promise).
//
// Tearing down one attachment: DEL every step that may hold resources, with the stored ADD-time
// config and the delegate's stored final result as prevResult. Used by runtime DELs, ADD rollback,
// the retry scheduler, crash recovery, the reboot sweep and GC. The order rules (docs/teardown.md):
//
//  - Each delegate network is torn down on its own: a failure in one never holds back another.
//  - Within a delegate, steps go in reverse chain order. A step whose ADD succeeded ("confirmed")
//    halts the steps before it when its DEL fails, as the spec orders; it is retried with backoff,
//    and past the bound it is abandoned (loudly) so the steps before it can proceed.
//  - A step whose ADD failed or never finished ("unconfirmed") gets its DEL too, but a failure does
//    not hold back the steps before it: such a plugin often cannot DEL what it never set up (seed
//    000's "server_socket is required"), and waiting on it pinned the bridge's lease for hours. It is
//    retried on its own schedule.
//  - A DEL that fails permanently (the spec's codes for bad input, or exactly the error the step's
//    ADD failed with, never a code 11 or a timeout: the stored config or env is what the plugin
//    rejects) is abandoned after PERMANENT_MAX_ATTEMPTS; one failing silently the same way each time
//    after the hold bound; either at once when a new ADD of the same attachment is waiting for it.
//
// When a failed step is retried, and when retrying is no use, is retry-policy.ts's.

import type { Logger } from 'pino';
import { CniError, ErrorCode, versionAtLeast, type CniResult } from '@cni-steward/shared';
import { storedErrorText, type Store } from '../store/store.js';
import { attachmentLogFields, type Attachment, type Step } from '../store/types.js';
import type { PriorityValue } from './limiter.js';
import type { PluginSlots } from './plugin-slots.js';
import type { Metrics } from '../metrics.js';
import { teardownNetns } from './netns.js';
import { journalProcess } from './plugin-processes.js';
import { chainShared, leavesMasquerade, masqueradeChain, type MasqueradeRelease } from './masquerade.js';
import { clockFromNow, RetryClock, systemClock } from './clock.js';
import { pluginCall } from '../plugins/call.js';
import { parseJson } from '../faithful-json.js';
import {
  backoffDelay,
  HOLD_MAX_ATTEMPTS,
  permanenceOf,
  PERMANENT_MAX_ATTEMPTS,
  type Permanence,
  type RetryPolicy,
} from './retry-policy.js';

export {
  backoffDelay,
  DEFAULT_RETRY_POLICY,
  HOLD_MAX_ATTEMPTS,
  permanenceOf,
  PERMANENT_CODES,
  PERMANENT_MAX_ATTEMPTS,
  type RetryPolicy,
} from './retry-policy.js';

export interface TeardownOptions {
  /** Run steps whose retry is not yet due (a runtime DEL, an explicit retry request). */
  force?: boolean;
  /** With force: these steps still wait for their retry (a retry asked while they were being DELed). */
  keepBackoff?: ReadonlySet<number>;
  /** Pass an empty CNI_NETNS whatever was stored (the netns died with a reboot). */
  emptyNetns?: boolean;
  /** Abandon a permanently failing step at once (a new ADD of this attachment is waiting). */
  abandonPermanent?: boolean;
  /**
   * When every step is torn down, leave the last commit (the last step `deleted`, the attachment
   * `deleted`) to the caller: the outcome's `commit`, which a runtime DEL runs right after its
   * answer is written. Every DEL still ran after its `deleting` row was on disk; should the daemon
   * die before `commit`, the last step is still `deleting` and is DELed again (harmless by the spec).
   */
  deferFinalCommit?: boolean;
}

export interface TeardownOutcome {
  done: boolean;
  /**
   * Steps this run abandoned (past their bound), when any: a `done` teardown with one is finished, not clean,
   * and a retry must not report it torn down (hostile run, 1 Dec: "1 torn down" for an abandoned step).
   */
  abandoned?: number;
  /**
   * Not done: the steps whose DEL this run started, when any. A retry that follows this run leaves
   * their backoff alone (they were just tried); a run that is done left nothing to retry.
   */
  tried?: number[];
  /** The failure that halted teardown, when not done. */
  error?: CniError;
  /** With deferFinalCommit: the final commit, still owed (synchronous; throws like any journal write). */
  commit?: () => void;
}

export interface TeardownDeps {
  store: Store;
  slots: PluginSlots;
  log: Logger;
  retry: RetryPolicy;
  metrics: Metrics;
  /** The retry schedule's clock (clock.ts); shared with the retry scheduler. */
  clock?: RetryClock;
  /**
   * The kernel boot this daemon runs in. A `planned` step (never started) of an attachment added in
   * this boot is skipped; one of another boot is DELed like an unfinished step, since its `adding`
   * commit (relaxed, not synced) may have been lost with that boot's kernel after its plugin ran.
   * Unset: every `planned` step is DELed.
   */
  bootId?: string;
  /** The host's network namespace (EngineContext.hostNetns): never handed to a teardown DEL. */
  hostNetns?: string;
  /** For tests without a clock: one time for wall and monotonic. */
  now?: () => number;
  random?: () => number;
  /** Removes the masquerade chain a bridge or ptp DEL without the netns left (masquerade.ts); unset: none is. */
  masquerade?: MasqueradeRelease;
}

const DONE_STATES = new Set(['deleted', 'abandoned']);

/** The step's ADD succeeded: it holds what it reported, and its DEL failing halts the steps before it. */
function confirmed(step: Step): boolean {
  return step.result !== null;
}

export class Teardown {
  private readonly d: TeardownDeps;
  readonly clock: RetryClock;
  readonly policy: RetryPolicy;
  /**
   * Per step, the monotonic instant up to which its pending time is journaled (pending_ms): the
   * start of its first DEL, or this run's start for a step already pending when the run began.
   */
  private readonly pendingMark = new Map<number, number>();
  /** Attachments being torn down right now (their steps may be `deleting` without being cut off). */
  readonly active = new Set<number>();

  constructor(deps: TeardownDeps) {
    this.d = deps;
    this.policy = deps.retry;
    this.clock = deps.clock ?? new RetryClock(deps.now ? clockFromNow(deps.now) : systemClock());
  }

  async run(attachmentId: number, priority: PriorityValue, opts: TeardownOptions = {}): Promise<TeardownOutcome> {
    this.active.add(attachmentId);
    try {
      return await this.runSteps(attachmentId, priority, opts);
    } finally {
      this.active.delete(attachmentId);
    }
  }

  /**
   * The teardown of one attachment, its steps last first. Long on purpose: which step is DELed, in
   * which journal commit its `deleting` and its predecessor's `deleted` land, and when a failure
   * halts the chain are the teardown's promise (docs/teardown.md), read in one place.
   */
  private async runSteps(
    attachmentId: number,
    priority: PriorityValue,
    opts: TeardownOptions,
  ): Promise<TeardownOutcome> {
    const { store, log } = this.d;
    const a = store.getAttachment(attachmentId);
    if (!a) return { done: true };
    if (a.state === 'deleted') return { done: true };

    // Before the steps are read: nothing read of the journal waits across this await.
    const netns = opts.emptyNetns ? '' : await teardownNetns(a.netns, this.d.hostNetns, a.netnsId);
    const steps = store.stepsOf(a.id);
    const finals = finalResults(steps);
    const alog = log.child(attachmentLogFields(a));
    // A step whose DEL succeeded is journaled `deleted` in the same commit as the next step's
    // `deleting` (or the attachment's `deleted`): one commit per plugin. Should the daemon die in
    // between, the step is still `deleting` and recovery DELs it again, which the spec makes harmless.
    // These commits are relaxed (no fsync): each step's row has been on disk since its ADD, and one
    // lost with the kernel leaves the step in an earlier state that the reboot sweep DELs again.
    let succeeded: Step | undefined;
    let attachmentMarked = a.state === 'deleting';
    // Within this boot a `planned` step never started its plugin (see TeardownDeps.bootId).
    const plannedMayHaveRun = this.d.bootId === undefined || a.bootId !== this.d.bootId;
    const flush = (then?: () => void) =>
      store.relaxed(() => {
        if (succeeded) store.setStepDeleted(succeeded.id);
        succeeded = undefined;
        if (!attachmentMarked) {
          store.setAttachmentState(a.id, 'deleting');
          attachmentMarked = true;
        }
        then?.();
      });

    let firstFailure: CniError | undefined;
    let unfinished = false;
    let abandoned = 0;
    const tried: number[] = [];
    for (const chain of chainsLastFirst(steps)) {
      for (const step of [...chain].reverse()) {
        if (DONE_STATES.has(step.state)) continue;
        if (step.state === 'planned' && !plannedMayHaveRun) continue;
        const waits = !opts.force || opts.keepBackoff?.has(step.id) === true;
        if (step.state === 'del_failed' && waits && (step.nextAttemptAt ?? 0) > this.clock.now()) {
          unfinished = true;
          firstFailure ??= new CniError(
            ErrorCode.TeardownPending,
            `teardown of ${step.pluginType} is waiting for its next retry`,
          );
          if (confirmed(step)) break;
          continue;
        }
        if (!this.pendingMark.has(step.id))
          this.pendingMark.set(step.id, step.teardownAt !== null ? this.clock.startedMono : this.clock.mono());
        flush(() => store.setStepDeleting(step.id));
        tried.push(step.id);
        const failure = await this.delStep(a, step, finals.get(step.delegateIndex), netns, priority);
        if (!failure) {
          this.pendingMark.delete(step.id);
          succeeded = step;
          continue;
        }
        if (this.failed(a, step, chain, failure, opts, alog) === 'abandoned') {
          abandoned++;
          continue;
        }
        unfinished = true;
        firstFailure ??= failure;
        if (confirmed(step)) break;
      }
    }
    if (unfinished) {
      flush();
      const more = { ...(abandoned > 0 && { abandoned }), ...(tried.length > 0 && { tried }) };
      return { done: false, error: firstFailure as CniError, ...more };
    }
    const commit = () => {
      flush(() => store.setAttachmentState(a.id, 'deleted'));
      alog.info('attachment torn down');
    };
    const finished = { done: true, ...(abandoned > 0 && { abandoned }) };
    if (opts.deferFinalCommit) return { ...finished, commit };
    commit();
    return finished;
  }

  /**
   * A step's DEL failed (journaled `del_failed` by delStep): abandoned, loudly, when past the retry
   * bound (or permanent, when asked), so the steps before it go on; else left for its retry.
   */
  private failed(
    a: Attachment,
    step: Step,
    chain: readonly Step[],
    failure: CniError,
    opts: TeardownOptions,
    alog: Logger,
  ): 'abandoned' | 'pending' {
    const { store } = this.d;
    const again = store.getStep(step.id) as Step;
    const permanence = permanenceOf(failure, a.error, step.state === 'del_failed' ? step.error : null);
    const permanent = permanence !== undefined;
    const holding = confirmed(step) && chain.some((s) => s.pluginIndex < step.pluginIndex && !DONE_STATES.has(s.state));
    if (this.pastBound(again, permanence, holding) || (permanent && opts.abandonPermanent)) {
      store.setStepAbandoned(step.id, failure.message);
      this.pendingMark.delete(step.id);
      this.d.metrics.abandonedSteps.inc({ plugin: step.pluginType });
      alog.error(
        { step: step.id, plugin: step.pluginType, attempts: again.attempts, permanent, err: failure.message },
        'teardown step abandoned; resources it holds may be leaked; continuing with the steps before it',
      );
      return 'abandoned';
    }
    alog.warn(
      {
        step: step.id,
        plugin: step.pluginType,
        attempts: again.attempts,
        nextAttemptAt: again.nextAttemptAt,
        permanent,
        confirmed: confirmed(step),
        err: failure.message,
      },
      confirmed(step)
        ? 'teardown step failed; queued for retry, the steps before it wait'
        : 'DEL of a step whose ADD never succeeded failed; retried on its own',
    );
    return 'pending';
  }

  /**
   * Runs one step's DEL (journaled `deleting` by the caller); returns the failure (journaled) or
   * undefined: done, or never needed (a plugin of NETNS_ONLY_PLUGINS without the netns, refusedItsVersion).
   */
  private async delStep(
    a: Attachment,
    step: Step,
    prev: CniResult | undefined,
    netns: string,
    priority: PriorityValue,
  ): Promise<CniError | undefined> {
    const { store, slots } = this.d;
    if (netns === '' && NETNS_ONLY_PLUGINS.has(step.pluginType)) {
      this.d.log.info(
        { ...attachmentLogFields(a), step: step.id, plugin: step.pluginType },
        "teardown step needs no DEL: its plugin set up nothing outside the pod's network namespace, which is gone",
      );
      return undefined;
    }
    // Not in the namespace where the interface of the step's name is another's (foundTaken).
    // The attachment's error is written after the step's: one cut off between them has only the step's.
    if (foundTaken(step, a.error ?? (step.state === 'add_failed' ? step.error : null))) netns = '';
    const stdin = parseJson(step.config) as Record<string, unknown>;
    // libcni passes the cached result on DEL from 0.4.0 on.
    if (prev && versionAtLeast(String(stdin.cniVersion ?? '0.0.0'), '0.4.0')) stdin.prevResult = prev;
    try {
      const target = { containerId: a.containerId, netns, ifname: step.ifname, args: a.cniArgs, cniPath: a.cniPath };
      await slots.run(
        priority,
        pluginCall('DEL', step.pluginType, stdin, target, { onStart: journalProcess(store, this.d.log, step.id) }),
      );
      const retried = step.attempts > 0;
      await this.masqueradeLeft({ containerId: a.containerId, stdin, netns, priority, attachmentId: a.id, retried });
      return undefined;
    } catch (e) {
      const err = CniError.from(e, ErrorCode.PluginExecFailed);
      if (refusedItsVersion(step, err, a.error)) {
        this.d.log.info(
          { ...attachmentLogFields(a), step: step.id, plugin: step.pluginType, err: err.message },
          'teardown step needs no DEL: its plugin refuses this cniVersion, as it refused the ADD, so it set up nothing',
        );
        return undefined;
      }
      const failures = step.attempts + 1;
      const mono = this.clock.mono();
      const pendingMs = mono - (this.pendingMark.get(step.id) ?? mono);
      this.pendingMark.set(step.id, mono);
      const next = this.clock.now() + backoffDelay(this.d.retry, failures, this.d.random);
      store.setStepDelFailed(step.id, err.message, next, pendingMs);
      this.d.metrics.teardownFailures.inc({ plugin: step.pluginType });
      return err;
    }
  }

  /**
   * The plugin's DEL ran without the pod's netns on an ipMasq network, or again after a failed one
   * (`retried`), so it may have left its masquerade chain: removed now, in a plugin slot at the DEL's
   * priority (its iptables runs count like a plugin's), unless another live attachment of the
   * container shares it. Throws a CniError (11) when the removal fails: the step is then retried
   * like a failed DEL.
   */
  async masqueradeLeft(del: {
    containerId: string;
    stdin: Record<string, unknown>;
    netns: string;
    priority: PriorityValue;
    attachmentId?: number;
    retried?: boolean;
  }): Promise<void> {
    const { containerId, stdin } = del;
    const release = this.d.masquerade;
    if (release === undefined || !leavesMasquerade(stdin, del.netns, del.retried)) return;
    const network = String(stdin.name);
    const fields = { containerId, network, plugin: stdin.type, chain: masqueradeChain(network, containerId) };
    if (chainShared(this.d.store, containerId, network, del.attachmentId)) {
      this.d.log.info(fields, 'masquerade chain kept: another attachment of the container, added, uses it');
      return;
    }
    try {
      const removed = await this.d.slots.limiter.run(del.priority, () => release(network, containerId));
      if (removed > 0)
        this.d.log.info({ ...fields, removed }, "removed the masquerade chain the plugin's DEL without a netns left");
    } catch (e) {
      throw new CniError(
        ErrorCode.TryAgainLater,
        `${String(stdin.type)}'s DEL left its masquerade chain ${fields.chain} (run without the pod's netns, or after a failed DEL); removing it failed: ${(e as Error).message}`,
      );
    }
  }

  /** Past its bound: attempts (fewer when permanent, or when it holds the steps before it) or age. */
  private pastBound(step: Step, permanence: Permanence, holding: boolean): boolean {
    const { maxAttempts, maxAgeMs, holdMaxAttempts = HOLD_MAX_ATTEMPTS } = this.d.retry;
    let bound = maxAttempts;
    if (permanence === 'bad-input') bound = Math.min(bound, PERMANENT_MAX_ATTEMPTS);
    if (holding || permanence === 'silent') bound = Math.min(bound, holdMaxAttempts);
    if (step.attempts >= bound) return true;
    // Pending time while a daemon ran, on the monotonic clock: not the wall-clock age since
    // teardownAt, which a clock step forward would inflate.
    return step.pendingMs >= maxAgeMs;
  }
}

/**
 * Plugins whose DEL only undoes what they did inside the pod's network namespace, and which fail a
 * DEL without one, every time: sbr (its rules and routes are the namespace's; Debian's answers "no
 * such file or directory" to an empty CNI_NETNS). Once the namespace is gone (teardown then passes an
 * empty one) what they set up went with it. Run, such a step held the bridge before it, lease and
 * masquerade chain, for --retry-hold-attempts (about 14 minutes), and was then abandoned: an alert
 * per pod for nothing (hostile probe, 3 Dec). Not run: its step is torn down.
 */
const NETNS_ONLY_PLUGINS: ReadonlySet<string> = new Set(['sbr']);

/**
 * The step's ADD failed because an interface of its name was in the namespace already, in the words
 * of the reference plugins: bridge and ptp "container veth name provided (eth0) already exists";
 * macvlan, ipvlan, vlan 'failed to rename macvlan to "eth0": file exists'; host-device 'failed to
 * rename device "x" to "eth0": file exists'. That interface is not this step's: another pod's in a
 * shared namespace, or one made by hand. The plugin's DEL in the namespace removed it, address, peer
 * and all (a hostile probe: a second container's failed ADD took the first one's eth0). Its DEL runs
 * without the namespace, which still releases what it may hold outside it.
 */
export function foundTaken(step: Step, addError: string | null): boolean {
  if (confirmed(step) || addError === null) return false;
  return (
    addError.includes(`container veth name provided (${step.ifname}) already exists`) ||
    (addError.includes(` to "${step.ifname}": file exists`) &&
      /failed to rename (?:macvlan|ipvlan|vlan|device "[^"]*") to "/.test(addError))
  );
}

/**
 * The step's ADD never succeeded and failed exactly as this DEL did, with code 1: its plugin does not
 * speak the stored config's cniVersion, and the spec has a plugin check that before it does anything,
 * so the ADD set up nothing to DEL. Retrying could only end in an abandoned step (and `status --check`
 * failing) for a pod whose ADD the runtime was told failed (hostile run, 1 Dec: a delegate at 1.1.0
 * on plugins that speak up to 1.0.0 left one abandoned step per ADD).
 */
function refusedItsVersion(step: Step, failure: CniError, addError: string | null): boolean {
  return (
    !confirmed(step) &&
    failure.code === ErrorCode.IncompatibleVersion &&
    addError !== null &&
    storedErrorText(failure.message) === addError
  );
}

/** Each delegate's final result: the result of its last step that produced one. */
export function finalResults(steps: readonly Step[]): Map<number, CniResult> {
  const out = new Map<number, CniResult>();
  for (const s of steps) {
    if (s.result !== null) out.set(s.delegateIndex, JSON.parse(s.result) as CniResult);
  }
  return out;
}

/** Delegates in reverse order, each on its own; within one, its steps in chain order (walked reversed). */
function chainsLastFirst(steps: readonly Step[]): Step[][] {
  const byDelegate = new Map<number, Step[]>();
  for (const step of steps) byDelegate.set(step.delegateIndex, [...(byDelegate.get(step.delegateIndex) ?? []), step]);
  return [...byDelegate.values()].reverse();
}
