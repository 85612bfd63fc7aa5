// The audit's knobs as every surface parses them (the route's query, the CLI's flags, `stewardd run
// --audit-*`): durations such as `90s`, `15m`, `2h` or `1h30m`, and the per-run release cap.

export const DEFAULT_GRACE_MS = 15 * 60_000;
export const DEFAULT_RELEASE_CAP = 1000;
/** The largest cap accepted: beyond it a cap protects nothing. */
export const MAX_RELEASE_CAP = 1_000_000;
/**
 * How long a pass may go on starting releases (each release is then bounded by its plugin's own
 * deadline). The CLI gives its own, a little under its --timeout, so it never gives up on a pass that
 * is still releasing.
 */
export const DEFAULT_PASS_DEADLINE_MS = 5 * 60_000;
/** The longest deadline a pass is given (the periodic pass's longest interval). */
export const MAX_PASS_DEADLINE_MS = 596 * 3_600_000;

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

/** A per-network release fraction: a number above 0 and at most 1; undefined when it is not one. */
export function parseCapFraction(raw: string): number | undefined {
  if (!/^(0(\.\d{1,6})?|1(\.0{1,6})?)$/.test(raw)) return undefined;
  const n = Number(raw);
  return n > 0 && n <= 1 ? n : undefined;
}

/** A pass deadline: a duration from 1 s to MAX_PASS_DEADLINE_MS; undefined when it is not one. */
export function parseDeadline(raw: string): number | undefined {
  const ms = parseDuration(raw);
  return ms !== undefined && ms >= 1000 && ms <= MAX_PASS_DEADLINE_MS ? ms : undefined;
}

/**
 * A CRI runtime endpoint as crictl writes it, `unix:///ABSOLUTE/PATH` (a bare absolute path is accepted
 * too): the socket path; undefined when it is not one.
 */
export function parseRuntimeEndpoint(raw: string): string | undefined {
  const path = raw.startsWith('unix://') ? raw.slice('unix://'.length) : raw;
  return path.startsWith('/') && !path.includes('\0') ? path : undefined;
}
