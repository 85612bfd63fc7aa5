// Order statistics for benchmark samples. Medians and percentiles use the nearest-rank method, so
// every reported figure is a value that was actually measured.

export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
export const median = (xs: readonly number[]): number => quantile(xs, 0.5);
export const p99 = (xs: readonly number[]): number => quantile(xs, 0.99);

/** Median of per-pair ratios a[i]/b[i]: pairs were measured back to back, so noise mostly cancels. */
export function pairedRatio(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  const r: number[] = [];
  for (let i = 0; i < n; i++) r.push((a[i] as number) / (b[i] as number));
  return median(r);
}

/** Median of per-pair differences a[i] - b[i]. */
export function pairedDiff(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  const d: number[] = [];
  for (let i = 0; i < n; i++) d.push((a[i] as number) - (b[i] as number));
  return median(d);
}

export function round(x: number, digits = 2): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Wall-clock milliseconds of an async function. */
export async function timeMs(fn: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}
