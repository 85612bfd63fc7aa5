// The daemon's audit passes, one at a time: a manual audit (the route) that arrives while another
// pass runs, periodic or manual, waits for it to finish and then makes its own, so two passes never
// decide on, or release, the same findings at once. The periodic pass (stewardd run --audit-interval)
// is report-only unless --audit-release was given. Each pass's outcome goes to `onPass` (metrics).

import type { Logger } from 'pino';
import { DEFAULT_PASS_DEADLINE_MS } from './options.js';
import { runAudit, type AuditDeps, type AuditOptions, type AuditReport } from './run.js';
import type { RuntimeSource } from './runtime.js';

export interface PassOutcome {
  /** The report; undefined when the pass itself failed (`error`). */
  report?: AuditReport;
  error?: Error;
  /** When the pass finished (ms since epoch). */
  at: number;
  graceMs: number;
}

export interface PeriodicAudit {
  intervalMs: number;
  release: boolean;
  graceMs: number;
}

/**
 * Passes that may wait behind the one running. A client that sends GET /v1/audit and hangs up
 * still queued a whole pass (3,000 of them delayed the next answer by a minute): past this many
 * waiting, a new one is refused (AuditQueueFull, HTTP 503), and a waiting pass whose caller has
 * gone is not run when its turn comes.
 */
export const MAX_WAITING_PASSES = 8;

/** Refused: MAX_WAITING_PASSES passes already wait for their turn. */
export class AuditQueueFull extends Error {
  constructor() {
    super(`${MAX_WAITING_PASSES} audit passes are already waiting for the one running; try again when it is done`);
  }
}

/** Not run: its caller stopped waiting before its turn came. */
export class AuditCallerGone extends Error {
  constructor() {
    super('the caller of this audit pass left before its turn came; the pass was not run');
  }
}

export class Auditor {
  private tail: Promise<unknown> = Promise.resolve();

  /** Passes queued behind the one running, not yet started. */
  private waiting = 0;

  private timer: NodeJS.Timeout | undefined;

  private stopped = false;

  /**
   * runtimeAt: the runtime on another socket, for a pass given its own endpoint (stewardd audit
   * --runtime-endpoint); closed when that pass ends.
   */
  constructor(
    private readonly deps: AuditDeps,
    private readonly log: Logger,
    private readonly onPass: (o: PassOutcome) => void = () => undefined,
    private readonly runtimeAt?: (socket: string) => RuntimeSource,
  ) {}

  /**
   * One pass, after every pass already running or waiting. `callerGone`: the caller has stopped
   * waiting for the report (the route's client hung up), checked when the pass's turn comes.
   */
  run(opts: AuditOptions, callerGone?: () => boolean): Promise<AuditReport> {
    if (this.waiting >= MAX_WAITING_PASSES) return Promise.reject(new AuditQueueFull());
    this.waiting++;
    // The deadline counts from the request, not from its turn: a pass queued behind another one
    // still stops starting releases before its caller gives up on the answer.
    const deadlineAt = Date.now() + (opts.deadlineMs ?? DEFAULT_PASS_DEADLINE_MS);
    const pass = this.tail.then(async () => {
      this.waiting--;
      if (callerGone?.()) throw new AuditCallerGone();
      const other =
        opts.runtimeEndpoint !== undefined && this.runtimeAt ? this.runtimeAt(opts.runtimeEndpoint) : undefined;
      // Another runtime's view never becomes the sightings the daemon's own passes agree with.
      const deps: AuditDeps = other
        ? {
            ...this.deps,
            listSandboxes: () => other.listSandboxes(),
            runtime: () => other.info(),
            sightings: undefined,
          }
        : this.deps;
      try {
        const report = await runAudit(deps, { ...opts, deadlineMs: Math.max(0, deadlineAt - Date.now()) });
        this.onPass({ report, at: Date.now(), graceMs: opts.graceMs });
        return report;
      } catch (e) {
        this.onPass({ error: e as Error, at: Date.now(), graceMs: opts.graceMs });
        throw e;
      } finally {
        other?.close();
      }
    });
    this.tail = pass.catch(() => undefined);
    return pass;
  }

  /** A pass every intervalMs (the first one interval after this call) until stop(). */
  startPeriodic(p: PeriodicAudit): void {
    const next = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.run({ release: p.release, graceMs: p.graceMs })
          .then((r) => {
            const released = r.orphans.filter((o) => o.released).length;
            const fields = { orphans: r.orphans.length, released, runtime: r.runtime };
            if (r.orphans.length > released) this.log.warn(fields, 'periodic audit: orphans held on the node');
            else this.log.info(fields, 'periodic audit done');
          })
          .catch((e: unknown) => this.log.error({ err: (e as Error).message }, 'periodic audit failed'))
          .finally(next);
      }, p.intervalMs);
      this.timer.unref();
    };
    this.log.info(
      { intervalMs: p.intervalMs, release: p.release, graceMs: p.graceMs },
      p.release ? 'periodic audit on, releasing orphans past the grace' : 'periodic audit on, report only',
    );
    next();
  }

  /** No new periodic pass; resolves once the pass running now (if any) has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.tail;
  }
}
