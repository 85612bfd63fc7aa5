// The clocks of the retry schedule. Wall time (Date.now) can step: NTP corrections, VM restores, an
// operator's `date -s`. Retry timing must not follow such a step (issue 19 item 4), so inside a run it
// is kept on the monotonic clock: RetryClock.now() is the wall clock read once at start, advanced by
// the monotonic clock only. Journaled next-attempt times are in that frame; a schedule persisted by an
// earlier run (whose frame may be off by a wall-clock step made while no daemon ran) is clamped to
// at most the backoff cap from now (scheduler.ts). Injected for tests.

/** A wall clock (ms since the epoch, may step) and a monotonic one (ms, arbitrary origin, never steps). */
export interface Clock {
  wall(): number;
  mono(): number;
}

/**
 * The machine's clocks. `wallOffsetMs` shifts the wall clock: for tests only (the daemon reads
 * STEWARD_TEST_CLOCK_OFFSET_MS into it in daemon.ts, and nowhere else).
 */
export function systemClock(wallOffsetMs = 0): Clock {
  return { wall: () => Date.now() + wallOffsetMs, mono: () => performance.now() };
}

/** A clock from one `now` function, for tests that move one time: wall and monotonic move together. */
export function clockFromNow(now: () => number): Clock {
  return { wall: now, mono: now };
}

export class RetryClock {
  private readonly clock: Clock;
  private readonly wallAtStart: number;
  private readonly monoAtStart: number;

  constructor(clock: Clock = systemClock()) {
    this.clock = clock;
    this.wallAtStart = clock.wall();
    this.monoAtStart = clock.mono();
  }

  /** Now on the retry schedule: the wall clock at start plus monotonic time since. Never steps. */
  now(): number {
    return this.wallAtStart + (this.clock.mono() - this.monoAtStart);
  }

  /** The monotonic clock (ms). */
  mono(): number {
    return this.clock.mono();
  }

  /** The monotonic instant this run began: a step pending at start has been pending since then. */
  get startedMono(): number {
    return this.monoAtStart;
  }

  /** The wall clock (journal timestamps, tombstone pruning). */
  wall(): number {
    return this.clock.wall();
  }
}
