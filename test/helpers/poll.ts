// Polling what a real process (a daemon, a tracing backend, Prometheus) will show in time.

/**
 * Calls `probe` every `intervalMs` until it returns a value (not undefined) and returns it; a probe
 * that throws counts as not yet. Past `timeoutMs` it fails naming `what` and the probe's last error.
 */
export async function poll<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`,
  );
}
