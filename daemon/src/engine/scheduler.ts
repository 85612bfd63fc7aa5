// The retry scheduler: failed teardown steps are retried on their own, each at its journaled
// next-attempt time (exponential backoff with jitter, see teardown.ts). The queue lives in
// SQLite, so a restart resumes it where it was. It also prunes old tombstones.
//
// Due-ness is judged on the retry clock (clock.ts: monotonic inside a run), shared with the teardown
// that journals the next-attempt times, so a wall-clock step while the daemon runs moves nothing.
// A schedule journaled by an earlier run may be in a frame off by a step made while no daemon ran
// (a day back: every retry a day late): at start and on every tick, no next attempt is left later
// than the backoff cap (retry max delay) from now.

import type { Logger } from 'pino';
import type { Store } from '../store/store.js';
import type { RetryClock } from './clock.js';
import type { Engine } from './engine.js';
import type { TeardownOutcome } from './teardown.js';
import { Priority } from './limiter.js';
import { ingestSpool } from './spool.js';

/** Attachments with an abandoned step stay visible in /v1/teardowns at least this long. */
const ABANDONED_RETENTION_MS = 7 * 24 * 3600_000;

export interface SchedulerOptions {
  /** Runs the teardowns (through each container's queue). */
  engine: Engine;
  /** Where the retry schedule and the cut-off journals are read. */
  store: Store;
  log: Logger;
  /** How often to look for due retries (ms). The query is an indexed scan of failing steps. */
  pollMs: number;
  /** Finished attachments older than this are pruned (ms). */
  tombstoneTtlMs: number;
  pruneEveryMs: number;
  /**
   * DELs the shim spooled while the daemon was unreachable. Read at start and on every tick: the
   * shim also spools when the daemon died mid-request or was slow to answer.
   */
  spoolDir: string;
  /**
   * Whether spoolDir may be drained now (spool-dirs.ts: not when another user could write to it, or
   * it cannot be listed); always when not given.
   */
  spoolDirDrainable?: () => boolean;
  /** The retry clock; the engine's teardown clock when not given (they must share one frame). */
  clock?: RetryClock;
  /** Wall clock for pruning, for tests; the clock's wall when not given. */
  now?: () => number;
}

export interface RetryReport {
  attempted: number;
  /** Torn down, every step DELed. */
  done: number;
  /** Finished by abandoning a step this run (past its bound): what it holds may be leaked. */
  abandoned: number;
  pending: number;
  /** Steps this run abandoned, in every attachment: one still pending may have abandoned one too. */
  stepsAbandoned: number;
}

/** A teardown this scheduler is running: forced (a retry asked) or as the schedule has it. */
interface Run {
  outcome: Promise<TeardownOutcome>;
  forced: boolean;
}

export class RetryScheduler {
  private readonly o: SchedulerOptions;
  private readonly now: () => number;
  private readonly clock: RetryClock;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = true;
  private lastPrune = 0;
  /**
   * Each attachment's teardown this scheduler is running. A retry asked meanwhile joins a forced one:
   * run again right after, a failing step spent one more of its attempts for nothing.
   */
  private readonly inFlight = new Map<number, Run>();

  constructor(opts: SchedulerOptions) {
    this.o = opts;
    this.clock = opts.clock ?? opts.engine.teardown.clock;
    this.now = opts.now ?? (() => this.clock.wall());
  }

  start(): void {
    this.stopped = false;
    try {
      this.clampSchedule();
    } catch (e) {
      this.o.log.error({ err: (e as Error).message }, 'retry schedule could not be checked; retried on the next tick');
    }
    this.arm(0);
  }

  /**
   * No failed step waits longer than the backoff cap from now, whatever a clock step did to the
   * journaled times. Returns how many were pulled in (logged: it means the wall clock stepped).
   */
  clampSchedule(): number {
    const { teardown } = this.o.engine;
    const n = this.o.store.clampNextAttempts(this.clock.now() + teardown.policy.maxDelayMs);
    if (n > 0)
      this.o.log.warn(
        { steps: n, maxDelayMs: teardown.policy.maxDelayMs },
        'teardown retries scheduled beyond the backoff cap (the wall clock stepped back?); pulled in to the cap',
      );
    return n;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /**
   * Runs every failing teardown now, due or not (POST /v1/teardowns/retry). A forced run of it under
   * way is joined. One the schedule started (due steps only, or a cut-off journal's reclaim, whose
   * "done" may mean only "not cut off") is waited for, then a forced run follows, leaving out the
   * steps that run DELed: they were just tried. What it abandoned is counted with the retry's own,
   * so an attachment it finished by abandoning a step is never reported torn down.
   */
  async retryNow(): Promise<RetryReport> {
    const ids = [...new Set(this.o.store.pendingTeardownSteps().map((s) => s.attachmentId))];
    return this.report(ids.length, await Promise.all(ids.map((id) => this.forced(id))));
  }

  private forced(id: number): Promise<TeardownOutcome> {
    const running = this.inFlight.get(id);
    if (running?.forced) return running.outcome;
    const force = (keepBackoff?: number[]) =>
      this.o.engine.runTeardown(id, Priority.Background, {
        force: true,
        ...(keepBackoff && { keepBackoff: new Set(keepBackoff) }),
      });
    if (running === undefined) return this.runOne(id, true, () => force());
    return this.runOne(id, true, async () => {
      const first = await running.outcome;
      // What the first run abandoned is counted even when this one cannot run (a journal write refused).
      let next: TeardownOutcome;
      try {
        next = await force(first.tried);
      } catch (e) {
        next = this.couldNotRun(id)(e);
      }
      const abandoned = (first.abandoned ?? 0) + (next.abandoned ?? 0);
      return { ...next, ...(abandoned > 0 && { abandoned }) };
    });
  }

  private arm(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => this.arm(this.o.pollMs));
    }, delay);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const { engine, log } = this.o;
    try {
      if (this.o.spoolDirDrainable?.() !== false) {
        const spooled = await ingestSpool(engine, this.o.spoolDir, log);
        if (spooled.ingested + spooled.rejected > 0) log.info(spooled, 'spooled DELs ingested');
      }
      this.clampSchedule();
      const due = this.o.store.dueAttachmentIds(this.clock.now()).filter((id) => !this.inFlight.has(id));
      if (due.length > 0) {
        const report = await this.runAll(due, (id) =>
          this.o.engine.runTeardown(id, Priority.Background, { force: false }),
        );
        log.info(report, 'teardown retries ran');
      }
      // Journals cut off by a failed write while we ran (disk full) are ours to finish: nothing
      // else would look at them before the next restart. Each waits in its container's queue.
      const cutOff = this.o.store
        .unfinishedAttachmentIds()
        .filter((id) => !this.inFlight.has(id) && !engine.isBusy(id));
      if (cutOff.length > 0) {
        const report = await this.runAll(cutOff, (id) => engine.reclaimUnfinished(id));
        if (report.done > 0 || report.pending > 0) log.info(report, 'cut-off attachments reclaimed');
      }
      if (this.now() - this.lastPrune >= this.o.pruneEveryMs) {
        this.lastPrune = this.now();
        const ttl = this.o.tombstoneTtlMs;
        const pruned = this.o.store.pruneTombstones(
          this.now() - ttl,
          this.now() - Math.max(ttl, ABANDONED_RETENTION_MS),
        );
        if (pruned > 0) log.info({ pruned }, 'pruned finished attachments');
      }
    } catch (e) {
      log.error({ err: (e as Error).message }, 'retry scheduler tick failed');
    }
  }

  /** The schedule's runs: of attachments none is running (the tick leaves those out). */
  private async runAll(ids: number[], teardown: (id: number) => Promise<TeardownOutcome>): Promise<RetryReport> {
    return this.report(ids.length, await Promise.all(ids.map((id) => this.runOne(id, false, () => teardown(id)))));
  }

  private report(attempted: number, outcomes: TeardownOutcome[]): RetryReport {
    const done = outcomes.filter((o) => o.done && !o.abandoned).length;
    const abandoned = outcomes.filter((o) => o.done && (o.abandoned ?? 0) > 0).length;
    const stepsAbandoned = outcomes.reduce((n, o) => n + (o.abandoned ?? 0), 0);
    return { attempted, done, abandoned, pending: attempted - done - abandoned, stepsAbandoned };
  }

  /** A teardown that could not run: the journal write failed again (disk still full); the rows are unchanged. */
  private couldNotRun(id: number): (e: unknown) => TeardownOutcome {
    return (e) => {
      this.o.log.warn(
        { attachment: id, err: (e as Error).message },
        'teardown could not run; retried on the next tick',
      );
      return { done: false };
    };
  }

  private runOne(id: number, forced: boolean, teardown: () => Promise<TeardownOutcome>): Promise<TeardownOutcome> {
    // Started a microtask later, so that it is in inFlight before it can settle.
    const outcome: Promise<TeardownOutcome> = Promise.resolve()
      .then(teardown)
      .catch(this.couldNotRun(id))
      .finally(() => {
        // A forced run waiting on this one took its place already.
        if (this.inFlight.get(id)?.outcome === outcome) this.inFlight.delete(id);
      });
    this.inFlight.set(id, { outcome, forced });
    return outcome;
  }
}
