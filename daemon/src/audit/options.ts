// The audit's knobs as every surface parses them (the route's query, the CLI's flags, `stewardd run
// --audit-*`): durations such as `90s`, `15m`, `2h` or `1h30m`, and the per-run release cap.

export const DEFAULT_GRACE_MS = 15 * 60_000;
export const DEFAULT_RELEASE_CAP = 1000;
/** The largest cap accepted: beyond it a cap protects nothing. */
export const MAX_RELEASE_CAP = 1_000_000;

/** A duration such as `90s`, `15m`, `2h` or `1h30m` in ms; undefined when it is not one. */
export function parseDuration(raw: string): number | undefined {
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(raw)) return undefined;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  for (const [, n, , u] of raw.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) total += Number(n) * (unit[u ?? 's'] ?? 0);
  return Math.round(total);
}

/** A release cap: a whole number from 0 to MAX_RELEASE_CAP; undefined when it is not one. */
export function parseCap(raw: string): number | undefined {
  if (!/^\d{1,7}$/.test(raw)) return undefined;
  const n = Number(raw);
  return n <= MAX_RELEASE_CAP ? n : undefined;
}

/**
 * A CRI runtime endpoint as crictl writes it, `unix:///ABSOLUTE/PATH` (a bare absolute path is accepted
 * too): the socket path; undefined when it is not one.
 */
export function parseRuntimeEndpoint(raw: string): string | undefined {
  const path = raw.startsWith('unix://') ? raw.slice('unix://'.length) : raw;
  return path.startsWith('/') && !path.includes('\0') ? path : undefined;
}
