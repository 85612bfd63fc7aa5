// What the engine tells the daemon's tracing (tracing/tracing.ts implements it), and the default that
// tells nobody.

import type { Attachment } from '../store/types.js';

/**
 * What the engine tells the daemon's tracing (tracing.ts) that no plugin run or journal commit shows:
 * a request's wait in its container's queue, and a background teardown (a retry, the recovery's, the
 * audit's), which runs in no request and gets a trace of its own.
 */
export interface EngineTrace {
  queueWait(seconds: number): void;
  teardown<T extends TeardownDone>(a: Attachment, work: () => Promise<T>): Promise<T>;
}

/** What a teardown's outcome tells (teardown.ts TeardownOutcome): all done, or why not. */
export interface TeardownDone {
  done: boolean;
  error?: Error | undefined;
}

export const NO_TRACE: EngineTrace = { queueWait: () => undefined, teardown: (_a, work) => work() };
