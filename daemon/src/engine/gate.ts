// A readers-writer gate: ADD, DEL, CHECK and background teardown pass it shared; GC takes it
// exclusively, because the CNI spec forbids GC running alongside ADD or DEL for a network.
// Writers are preferred, so a steady stream of ADDs cannot postpone GC forever.

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

  async exclusive<T>(work: () => Promise<T>): Promise<T> {
    if (this.writing || this.readers > 0) {
      await new Promise<void>((resolve) => this.waitingWriters.push(resolve));
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
    if (this.writing || this.readers > 0) return;
    const writer = this.waitingWriters.shift();
    if (writer) {
      this.writing = true;
      writer();
      return;
    }
    const readers = this.waitingReaders;
    this.waitingReaders = [];
    this.readers += readers.length;
    for (const r of readers) r();
  }
}
