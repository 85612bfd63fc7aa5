// A readers-writer gate: ADD, DEL, CHECK and background teardown pass it shared; GC takes it
// exclusively, because the CNI spec forbids GC running alongside ADD or DEL for a network.
// Writers are preferred, so a steady stream of ADDs cannot postpone GC forever; a writer may bound
// its wait, so a plugin hanging inside a shared holder does not hold every ADD behind a waiting GC.

/** exclusive() with a wait: the gate was not free within it, and the writer withdrew. */
export class GateBusyError extends Error {
  constructor(readonly waitedMs: number) {
    super(`the gate was held by other work for ${waitedMs} ms`);
  }
}

export class Gate {
  private readers = 0;
  private writing = false;
  private readonly waitingWriters: Array<() => void> = [];
  private waitingReaders: Array<() => void> = [];

  async shared<T>(work: () => Promise<T>): Promise<T> {
    if (this.writing || this.waitingWriters.length > 0) {
      await new Promise<void>((resolve) => this.waitingReaders.push(resolve));
    } else {
      this.readers++;
    }
    try {
      return await work();
    } finally {
      this.readers--;
      this.wake();
    }
  }

  /**
   * Runs `work` alone. With `waitMs`, a writer still waiting after it withdraws: the shared holders
   * its wait kept out are let in, and it rejects with GateBusyError without running `work`.
   */
  async exclusive<T>(work: () => Promise<T>, waitMs?: number): Promise<T> {
    if (this.writing || this.readers > 0) {
      await new Promise<void>((resolve, reject) => {
        const admitted = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer =
          waitMs === undefined
            ? undefined
            : setTimeout(() => {
                this.waitingWriters.splice(this.waitingWriters.indexOf(admitted), 1);
                this.wake();
                reject(new GateBusyError(waitMs));
              }, waitMs);
        this.waitingWriters.push(admitted);
      });
    } else {
      this.writing = true;
    }
    try {
      return await work();
    } finally {
      this.writing = false;
      this.wake();
    }
  }

  private wake(): void {
    if (this.writing) return;
    if (this.readers === 0) {
      const writer = this.waitingWriters.shift();
      if (writer) {
        this.writing = true;
        writer();
        return;
      }
    }
    // Shared holders wait behind a waiting writer; with none left (one withdrew), they join those inside.
    if (this.waitingWriters.length > 0) return;
    const readers = this.waitingReaders;
    this.waitingReaders = [];
    this.readers += readers.length;
    for (const r of readers) r();
  }
}
