// A global limit on concurrent plugin executions, with priorities: a waiting ADD or CHECK is
// always served before runtime DELs, and those before background teardown (retries, recovery,
// GC), so a DEL storm or a long retry queue never starves pod creation.

export const Priority = { Add: 0, Del: 1, Background: 2 } as const;
export type PriorityValue = (typeof Priority)[keyof typeof Priority];

export class Limiter {
  private active = 0;
  private readonly waiting: Array<Array<() => void>> = [[], [], []];

  constructor(readonly slots: number) {
    if (!Number.isInteger(slots) || slots < 1) throw new Error(`limiter needs at least one slot, got ${slots}`);
  }

  async run<T>(priority: PriorityValue, work: () => Promise<T>): Promise<T> {
    await this.acquire(priority);
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  get inUse(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.reduce((n, q) => n + q.length, 0);
  }

  private acquire(priority: PriorityValue): Promise<void> {
    if (this.active < this.slots) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => (this.waiting[priority] as Array<() => void>).push(resolve));
  }

  private release(): void {
    for (const q of this.waiting) {
      const next = q.shift();
      if (next) {
        next();
        return;
      } // the slot passes straight to the next waiter
    }
    this.active--;
  }
}
