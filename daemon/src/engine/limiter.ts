// A global limit on concurrent plugin executions, with priorities: a waiting ADD or CHECK is
// always served before runtime DELs, and those before background teardown (retries, recovery,
// GC), and background work never holds the last slots (backgroundSlotsOf), so a DEL storm or a
// long retry queue of hanging plugins never starves pod creation.

export const Priority = { Add: 0, Del: 1, Background: 2 } as const;
export type PriorityValue = (typeof Priority)[keyof typeof Priority];

/** Slots background work may never take, so pods still start while every retry hangs (up to 2, one slot always left to it). */
export function backgroundSlotsOf(slots: number): number {
  return slots - Math.min(2, slots - 1);
}

export class Limiter {
  private active = 0;
  private background = 0;
  private readonly waiting: Array<Array<() => void>> = [[], [], []];
  /**
   * The most slots background work holds at once: priorities order who waits, but a slot taken is
   * held until its plugin exits, and twelve retries of DELs that hang until --plugin-timeout took
   * all 8, so an ADD waited 24 s for one (a hostile review).
   */
  readonly backgroundSlots: number;

  constructor(readonly slots: number) {
    if (!Number.isInteger(slots) || slots < 1) throw new Error(`limiter needs at least one slot, got ${slots}`);
    this.backgroundSlots = backgroundSlotsOf(slots);
  }

  async run<T>(priority: PriorityValue, work: () => Promise<T>): Promise<T> {
    await this.acquire(priority);
    try {
      return await work();
    } finally {
      this.release(priority);
    }
  }

  get inUse(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.reduce((n, q) => n + q.length, 0);
  }

  private fits(priority: PriorityValue): boolean {
    return this.active < this.slots && (priority !== Priority.Background || this.background < this.backgroundSlots);
  }

  private take(priority: PriorityValue): void {
    this.active++;
    if (priority === Priority.Background) this.background++;
  }

  private acquire(priority: PriorityValue): Promise<void> {
    if (this.fits(priority)) {
      this.take(priority);
      return Promise.resolve();
    }
    return new Promise((resolve) => (this.waiting[priority] as Array<() => void>).push(resolve));
  }

  /** The slot goes to the first waiter, by priority, that may take it. */
  private release(priority: PriorityValue): void {
    this.active--;
    if (priority === Priority.Background) this.background--;
    for (const [p, q] of this.waiting.entries()) {
      if (q.length === 0 || !this.fits(p as PriorityValue)) continue;
      this.take(p as PriorityValue);
      (q.shift() as () => void)();
      return;
    }
  }
}
