// A bounded wait used while stopping: whatever the awaited work does, stopping goes on after `ms`
// (a frozen collector, a hung /run, a request that never ends). The timer never keeps the process up.

/** Resolves true once `work` settles (either way), or false when `ms` pass first. */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
