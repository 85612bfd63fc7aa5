// A readers-writer gate: ADD, DEL, CHECK and background teardown pass it shared; GC takes it
// exclusively, because the CNI spec forbids GC running alongside ADD or DEL for a network.
// A waiting writer is preferred (new shared holders queue behind it), so a steady stream of ADDs
// cannot postpone GC forever; a writer may bound that preference: past it, it still waits for the
// gate, but lets shared holders pass it, so a plugin hanging inside one does not hold every ADD
// behind a waiting GC.

export class Gate {
  private readers = 0;
  private writing = false;
  /** Writers waiting with preference: shared holders queue behind them. */
  private readonly preferredWriters: Array<() => void> = [];
  /** Writers whose preference ran out: admitted whenever the gate is free and no preferred writer waits. */
  private readonly patientWriters: Array<() => void> = [];
  private waitingReaders: Array<() => void> = [];

  async shared<T>(work: () => Promise<T>): Promise<T> {
    if (this.writing || this.preferredWriters.length > 0) {
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
   * Runs `work` alone. With `preferMs`, a writer still waiting after that long gives up its
   * preference: the shared holders it kept out are let in, and so are later ones, and it runs at
   * the first moment nothing holds the gate.
   */
  async exclusive<T>(work: () => Promise<T>, preferMs?: number): Promise<T> {
    if (this.writing || this.readers > 0) {
      await new Promise<void>((resolve) => {
        const admitted = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer =
          preferMs === undefined
            ? undefined
            : setTimeout(() => {
                const i = this.preferredWriters.indexOf(admitted);
                if (i < 0) return;
                this.preferredWriters.splice(i, 1);
                this.patientWriters.push(admitted);
                this.wake();
              }, preferMs);
        this.preferredWriters.push(admitted);
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
      const writer = this.preferredWriters.shift() ?? this.patientWriters.shift();
      if (writer) {
        this.writing = true;
        writer();
        return;
      }
    }
    // Shared holders wait behind a preferred writer only; with none, they join those inside.
    if (this.preferredWriters.length > 0) return;
    const readers = this.waitingReaders;
    this.waitingReaders = [];
    this.readers += readers.length;
    for (const r of readers) r();
  }
}
