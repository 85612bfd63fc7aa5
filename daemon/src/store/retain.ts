// Why no better-sqlite3 object may become garbage: on Node >= 24.19 (the image's runtime), better-sqlite3
// 12's Statement and Database destructors call RemoveEnvironmentCleanupHook, which aborts the process
// ("Assertion failed: (env) != nullptr", SIGABRT) when an idle GC finalises them outside any JS context.
// A daemon that prepared a statement per /healthz probe died minutes after start. So statements are
// prepared once per SQL text and kept, setting pragmas goes through exec (no Statement object), and
// every Database and Statement this process makes is referenced here until it exits.
// Still so on Node 24.21.0 with better-sqlite3 12.11.1 (a loop preparing throwaway statements, then idle:
// SIGABRT in Statement::~Statement; the unit suite's store.test.ts aborted 2 runs in 3). The project now
// uses better-sqlite3 13 (0 aborts in 5 such runs, on Node 24, which it needs: >= 22); this stays as
// cheap insurance.

const RETAINED: unknown[] = [];

/** Keeps `x` reachable for the life of the process; returns it. */
export function retain<T>(x: T): T {
  RETAINED.push(x);
  return x;
}
