// The engine's front door: dispatch of the CNI commands to add.ts, del.ts, check.ts and
// gc-status.ts, and the per-container FIFO queue that serialises ADD, DEL and CHECK of one
// container (different containers run in parallel, bounded by the plugin slots). Nothing here
// knows HTTP or SQL: requests come in as CniRequestBody, state goes through the Store, plugins
// through PluginSlots. Every step is journaled before its plugin runs.
// One concern: the engine's front door, many short entry points; the commands' logic is in add.ts,
// del.ts, check.ts, gc-status.ts and teardown.ts.

import type { Logger } from 'pino';
import { CniError, ErrorCode, versionAtLeast, type CniEnv, type CniRequestBody } from '@cni-steward/shared';
import type { Metrics } from '../metrics.js';
import type { PluginRunner } from '../plugins/executor.js';
import type { Store } from '../store/store.js';
import { attachmentLogFields, type AttachmentKey } from '../store/types.js';
import { addAttachment, checkCapabilities } from './add.js';
import { checkAttachment } from './check.js';
import type { DelPolicy, EngineContext } from './context.js';
import { Dels } from './del.js';
import { NO_TRACE, type EngineTrace } from './engine-trace.js';
import { Gate } from './gate.js';
import { runGc, runStatus, StatusCache } from './gc-status.js';
import { KeyedQueue } from './keyed-queue.js';
import { Limiter, Priority, type PriorityValue } from './limiter.js';
import { parseServedConf, refuseLongNames, refuseUnmakeableIfnames } from './netconf.js';
import { netnsProblem } from './netns.js';
import { PluginSlots } from './plugin-slots.js';
import type { RetryClock } from './clock.js';
import { Teardown, type RetryPolicy, type TeardownOptions, type TeardownOutcome } from './teardown.js';
import type { MasqueradeRelease } from './masquerade.js';

export type { DelPolicy } from './context.js';
export type { EngineTrace } from './engine-trace.js';

export interface EngineOptions {
  store: Store;
  run: PluginRunner;
  /** Resolves a plugin type to its executable, throwing a CniError when there is none. */
  locate: (type: string, cniPath: string) => string;
  log: Logger;
  metrics: Metrics;
  bootId: string;
  maxParallel: number;
  delPolicy: DelPolicy;
  retry: RetryPolicy;
  /** See EngineContext.answerBeforeFinalCommit (the daemon sets it; default off). */
  answerBeforeFinalCommit?: boolean;
  /** See EngineContext.hostNetns (the daemon sets it; default none). */
  hostNetns?: string;
  /** The retry schedule's clock (clock.ts), shared with the retry scheduler. */
  clock?: RetryClock;
  /** For tests without a clock: one time for wall and monotonic. */
  now?: () => number;
  /** The daemon's tracing; none by default. */
  trace?: EngineTrace;
  /** Removes what a bridge or ptp DEL without the netns left (masquerade.ts); none by default. */
  masquerade?: MasqueradeRelease;
}

/** When a queued teardown may start (recovery's pacing): asked when its container's turn comes, then again inside the gate. */
export interface Turn {
  start: () => Promise<boolean>;
  still: () => boolean;
}

export class Engine {
  readonly store: Store;
  readonly limiter: Limiter;
  readonly teardown: Teardown;
  readonly gate = new Gate();
  private readonly queue = new KeyedQueue();
  /** ADDs and CHECKs queued or running, per container (whether or not their requester still waits). */
  private readonly addsOrChecks = new Map<string, number>();
  private readonly ctx: EngineContext;
  private readonly dels: Dels;
  private readonly statusCache = new StatusCache();
  /** Netconf problems an operator must fix, keyed so each is logged once (shown in /v1/status). */
  private readonly warnings = new Map<string, string>();
  private readonly trace: EngineTrace;

  constructor(opts: EngineOptions) {
    this.store = opts.store;
    this.limiter = new Limiter(opts.maxParallel);
    this.trace = opts.trace ?? NO_TRACE;
    const slots = new PluginSlots(this.limiter, opts.run);
    this.teardown = new Teardown({
      store: opts.store,
      slots,
      log: opts.log,
      retry: opts.retry,
      metrics: opts.metrics,
      bootId: opts.bootId,
      ...(opts.hostNetns !== undefined ? { hostNetns: opts.hostNetns } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.masquerade ? { masquerade: opts.masquerade } : {}),
    });
    this.ctx = {
      store: opts.store,
      slots,
      teardown: this.teardown,
      gate: this.gate,
      log: opts.log,
      metrics: opts.metrics,
      bootId: opts.bootId,
      delPolicy: opts.delPolicy,
      answerBeforeFinalCommit: opts.answerBeforeFinalCommit ?? false,
      hostNetns: opts.hostNetns,
      locate: opts.locate,
      adding: new Set(),
      serialize: (containerId, work) => this.serialize(containerId, work),
      warn: (key, text, fields) => {
        if (this.warnings.has(key) || this.warnings.size >= 100) return;
        this.warnings.set(key, text);
        opts.log.warn(fields, text);
      },
    };
    this.dels = new Dels(this.ctx);
  }

  /**
   * See EngineContext.serialize: the answer settles first, held work keeps the container's queue.
   * `turn` (recovery's): waited for in the container's queue but outside the GC gate, so a teardown
   * waiting to be started holds its container and nothing else (inside the gate, a GC queued behind
   * it held every request of every container, and one more teardown of the same container deadlocked
   * the pool); false answers `skipped` without running `work`, and so does `still` asked again once
   * the gate is taken (a GC may hold it a while, and recovery may have been stopped meanwhile).
   */
  private serialize<T>(
    containerId: string,
    work: (hold: (after: Promise<unknown>) => void) => Promise<T>,
    turn?: Turn & { skipped: T },
  ): Promise<T> {
    let queued = performance.now();
    return new Promise<T>((resolve, reject) => {
      this.queue
        .run(containerId, async () => {
          if (turn) {
            const paced = performance.now();
            if (!(await turn.start())) return resolve(turn.skipped);
            queued += performance.now() - paced; // recovery's pacing is not the queue's wait
          }
          await this.gate.shared(async () => {
            if (turn && !turn.still()) return resolve(turn.skipped);
            const waited = (performance.now() - queued) / 1000;
            this.ctx.metrics.queueWaitSeconds.observe(waited);
            this.trace.queueWait(waited);
            const held: Promise<unknown>[] = [];
            try {
              resolve(await work((after) => held.push(after)));
            } catch (e) {
              reject(e);
            }
            await Promise.allSettled(held);
          });
        })
        .catch(reject);
    });
  }

  /** Resolves once everything queued for this container so far, held work included, is done. */
  idle(containerId: string): Promise<void> {
    return this.serialize(containerId, async () => undefined);
  }

  /**
   * Handles one CNI request; resolves with the text the shim prints, rejects with a CniError.
   * `clientGone` says whether the requester has stopped waiting (its connection closed): an ADD
   * nobody will hear is not started, or is rolled back once its chain is done (add.ts); such a GC
   * starts no further teardown and asks no delegate (gc-status.ts).
   */
  async handle(req: CniRequestBody, clientGone?: () => boolean): Promise<string> {
    // A container with spooled DELs not drained yet: the runtime sent those DELs before this ADD or
    // CHECK, so it waits for them (spool.ts); other containers are not held. A DEL is a repeat of the
    // spooled ones and needs no wait, unless an ADD or CHECK of the container is held: then it keeps
    // its place behind that request, as a DEL the runtime sent after an ADD always does.
    const { command, containerId } = req.env;
    const holds = command === 'ADD' || command === 'CHECK' || (command === 'DEL' && this.heldRequests.has(containerId));
    const hold = holds ? this.spoolHold?.(containerId) : undefined;
    if (hold) {
      this.heldRequests.set(containerId, (this.heldRequests.get(containerId) ?? 0) + 1);
      // A hold that fails (the container's spooled DELs could not be run: spool-dirs.ts) fails the
      // request, and is no longer held either way.
      const released = () => {
        const left = (this.heldRequests.get(containerId) ?? 1) - 1;
        if (left > 0) this.heldRequests.set(containerId, left);
        else this.heldRequests.delete(containerId);
      };
      return hold.finally(released).then(() => this.handleNow(req, clientGone));
    }
    return this.handleNow(req, clientGone);
  }

  /**
   * Set by the spool dirs (spool-dirs.ts, from before the socket opens): a promise to wait on for a
   * container with spooled DELs not run yet (the start-up drain's, or ones spooled since), undefined
   * for any other.
   */
  spoolHold: ((containerId: string) => Promise<void> | undefined) | undefined;
  /** Requests waiting on spoolHold, per container. */
  private readonly heldRequests = new Map<string, number>();

  /** A spooled DEL: coalesced like a runtime DEL, run at background priority, never held. */
  spooledDel(req: CniRequestBody): Promise<string> {
    return this.dels.del(req.env, req.config, Priority.Background);
  }

  /** Whether a spooled DEL that failed left its teardown in the journal, so its file may go (Dels.journaled). */
  spooledDelJournaled(req: CniRequestBody): boolean {
    return this.dels.journaled(req.env, req.config);
  }

  private handleNow(req: CniRequestBody, clientGone?: () => boolean): Promise<string> {
    const { env, config } = req;
    switch (env.command) {
      case 'ADD':
        return this.add(env, config, clientGone);
      case 'DEL':
        return this.dels.del(env, config);
      case 'CHECK':
        return this.check(env, config);
      case 'GC':
        return runGc(this.ctx, env, config, clientGone);
      case 'STATUS':
        return runStatus(this.ctx, env, config, this.statusCache);
      case 'VERSION':
        throw new CniError(ErrorCode.InvalidEnv, 'VERSION is answered by the steward shim, not the daemon');
    }
  }

  /**
   * Whether a DEL of this key would be answered from the tombstone set (already torn down, no ADD
   * queued for it since): the admission path then serves it without fastify. Only a hint: the DEL
   * itself still goes through handle(), which decides again.
   */
  isTombstoned(key: AttachmentKey): boolean {
    return this.dels.isTombstoned(key);
  }

  /**
   * Background teardown of one attachment (retries, recovery, reboot sweep), serialised with the
   * container's runtime requests so the same step is never DELed twice at once. `turn` (recovery's):
   * queued now, so the container's next request waits behind it; asked once its container's turn
   * comes, and started when it answers true; false leaves it to the journal (recovery stopped).
   */
  runTeardown(
    attachmentId: number,
    priority: PriorityValue,
    opts: TeardownOptions = {},
    turn?: Turn,
  ): Promise<TeardownOutcome> {
    const a = this.store.getAttachment(attachmentId);
    if (!a) return Promise.resolve({ done: true });
    return this.serialize(
      a.containerId,
      () => this.trace.teardown(a, () => this.teardown.run(attachmentId, priority, opts)),
      turn && { ...turn, skipped: { done: false } },
    );
  }

  /**
   * Finishes an attachment whose journal was cut off while the daemon kept running (a journal
   * write failed after a plugin ran: disk full): left `adding`, or with a step left `deleting`.
   * Checked again inside the container's queue, where no ADD or DEL of it can be running, so a
   * live request's rows are never mistaken for cut-off ones.
   */
  reclaimUnfinished(attachmentId: number): Promise<TeardownOutcome> {
    const a = this.store.getAttachment(attachmentId);
    if (!a) return Promise.resolve({ done: true });
    return this.ctx.serialize(a.containerId, async () => {
      const now = this.store.getAttachment(attachmentId);
      const cutOff =
        now !== undefined &&
        (now.state === 'adding' || this.store.stepsOf(now.id).some((st) => st.state === 'deleting'));
      if (!cutOff) return { done: true };
      this.ctx.log.warn(
        {
          containerId: now.containerId,
          network: now.network,
          ifname: now.ifname,
          attachment: now.id,
          state: now.state,
        },
        'reclaiming an attachment whose journal was cut off (a journal write failed); tearing it down',
      );
      return this.trace.teardown(now, () =>
        this.teardown.run(attachmentId, Priority.Background, { force: now.state === 'adding' }),
      );
    });
  }

  /**
   * `stewardd retry --abandoned`: every abandoned teardown step is re-armed (due now, attempts reset),
   * each in its container's queue so no request of that container is mid-flight. The retry scheduler
   * then runs them; a step whose plugin still fails is abandoned again by the usual rules. After an
   * operator released the resources by hand the DEL succeeds (the spec makes DEL of what is gone a
   * success), which clears the step. Steps of an attachment whose container has since been added
   * again on the same network and interface are left abandoned (`skipped`): plugins release by
   * container and interface (host-local), so their DEL would take the newer attachment's address.
   */
  async rearmAbandoned(): Promise<{ rearmed: number; skipped: number }> {
    let rearmed = 0;
    let skipped = 0;
    for (const id of this.store.abandonedAttachmentIds()) {
      const a = this.store.getAttachment(id);
      if (!a) continue;
      await this.ctx.serialize(a.containerId, async () => {
        const newer = this.store.currentAttachment(a);
        if (newer !== undefined && newer.id !== a.id && newer.state !== 'deleted') {
          skipped++;
          this.ctx.log.warn(
            { ...attachmentLogFields(a), newerAttachmentId: newer.id },
            'abandoned teardown steps left as they are: the container was added again on the same network and interface, and their DEL would release what the newer attachment holds; retry them once it is deleted',
          );
          return;
        }
        const n = this.store.rearmAbandoned(id, this.teardown.clock.now());
        if (n > 0) {
          this.dels.forgetTombstone(a);
          this.ctx.log.warn(
            { ...attachmentLogFields(a), steps: n },
            'abandoned teardown steps re-armed by an operator; retrying them',
          );
        }
        rearmed += n;
      });
    }
    return { rearmed, skipped };
  }

  /** True while a request of this process is working on the attachment (its rows are live, not cut off). */
  isBusy(attachmentId: number): boolean {
    return this.ctx.adding.has(attachmentId) || this.teardown.active.has(attachmentId);
  }

  /** Netconf problems seen in requests (capabilities the runtime will never pass, ...). */
  configWarnings(): string[] {
    return [...this.warnings.values()];
  }

  /**
   * Whether an ADD or CHECK of this container is queued or running in the engine. Admission lets a
   * DEL of such a container in at once (it waits in the container's queue, not in a DEL slot), also
   * when the runtime has given up on that ADD and closed its connection while the engine still runs it.
   */
  hasAddOrCheck(containerId: string): boolean {
    return this.addsOrChecks.has(containerId);
  }

  /** Counts `p` in addsOrChecks until it settles. */
  private tracked<T>(containerId: string, p: Promise<T>): Promise<T> {
    this.addsOrChecks.set(containerId, (this.addsOrChecks.get(containerId) ?? 0) + 1);
    const done = () => {
      const n = (this.addsOrChecks.get(containerId) ?? 1) - 1;
      if (n > 0) this.addsOrChecks.set(containerId, n);
      else this.addsOrChecks.delete(containerId);
    };
    p.then(done, done);
    return p;
  }

  private add(env: CniEnv, config: Record<string, unknown>, clientGone?: () => boolean): Promise<string> {
    const conf = parseServedConf(config, env.ifname);
    refuseUnmakeableIfnames(conf);
    refuseLongNames(conf);
    checkCapabilities(this.ctx, conf, config);
    const key = { containerId: env.containerId, network: conf.name, ifname: env.ifname };
    const settled = this.dels.addQueued(key);
    // The netns is checked in the container's turn, before anything is journaled: telling its kind
    // may read mountinfo (engine/netns.ts), and the request keeps its place in the queue meanwhile.
    const p = this.ctx.serialize(env.containerId, async (hold) => {
      const nsWhy = await netnsProblem(env.netns, this.ctx.hostNetns);
      if (nsWhy) throw new CniError(ErrorCode.InvalidEnv, nsWhy);
      return addAttachment(this.ctx, env, conf, key, hold, clientGone);
    });
    p.then(settled, settled);
    return this.tracked(env.containerId, p);
  }

  private check(env: CniEnv, config: Record<string, unknown>): Promise<string> {
    const conf = parseServedConf(config, env.ifname);
    refuseUnmakeableIfnames(conf);
    // As the reference plugins answer: CHECK came with 0.4.0.
    if (!versionAtLeast(conf.cniVersion, '0.4.0'))
      throw new CniError(
        ErrorCode.IncompatibleVersion,
        `CHECK needs cniVersion 0.4.0 or later, the netconf says ${conf.cniVersion}`,
      );
    const key = { containerId: env.containerId, network: conf.name, ifname: env.ifname };
    return this.tracked(
      env.containerId,
      this.ctx.serialize(env.containerId, () => checkAttachment(this.ctx, env, key)),
    );
  }
}
