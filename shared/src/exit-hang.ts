// A Node 24 process can hang for ever in process.exit(): the exit joins V8's worker threads while a
// concurrent Sparkplug compile job on one of them waits for a garbage collection only the exiting main
// thread could run (nodejs/node#64274, #54918). Seen here: `stewardd uninstall` stuck in
// WorkerThreadsTaskRunner::Shutdown with a V8Worker in CollectionBarrier::AwaitCollectionBackground under
// ConcurrentBaselineCompiler (gdb, 26 Nov 2026). Sparkplug then compiles its batches on the main thread,
// a few microseconds each. V8 reads the flag at each batch (BaselineBatchCompiler::concurrent()), so
// setting it at start-up is enough. Bun (the compiled shim) has no such threads: nothing to do there.

/** Turns concurrent Sparkplug off in this process (Node only); call first thing in an entry point. */
export function avoidExitHang(): void {
  if (process.versions.bun !== undefined) return;
  // getBuiltinModule, not an import: the Bun bundle of the shim never loads node:v8.
  process.getBuiltinModule('node:v8').setFlagsFromString('--no-concurrent-sparkplug');
}
