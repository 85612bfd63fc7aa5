// The value checks every stewardd subcommand's parser shares: each appends a sentence naming the
// flag to `problems` instead of throwing, so that `fail` reports every bad value at once, followed
// by the subcommand's usage.

import { DEFAULT_RESTART_GRACE_S, MAX_RESTART_GRACE_S } from '@cni-steward/shared';
import { parseRuntimeEndpoint } from './audit/options.js';
import { DEFAULT_NICE } from './priority.js';

/** An integer flag >= min; the fallback when absent or bad (the bad value is reported). */
/** Decimal digits, an optional minus: Number() alone would also take "0x10", "1e3", " 8 " and "". */
const INTEGER = /^-?\d+$/;

export function int(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  problems: string[],
  max?: number,
): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!INTEGER.test(raw) || !Number.isSafeInteger(n) || n < min || (max !== undefined && n > max)) {
    const range = max === undefined ? `>= ${min}` : `from ${min} to ${max}`;
    problems.push(`--${name} must be an integer ${range}, got "${raw}"`);
    return fallback;
  }
  return n;
}

/** --nice N|off (run): a nice value, -20 to 19, DEFAULT_NICE when absent; undefined for off (left as started). */
export function niceValue(raw: string | undefined, problems: string[]): number | undefined {
  if (raw === 'off') return undefined;
  if (raw === undefined) return DEFAULT_NICE;
  const n = Number(raw);
  if (!INTEGER.test(raw) || n < -20 || n > 19) {
    problems.push(`--nice must be an integer from -20 to 19, or off, got "${raw}"`);
    return DEFAULT_NICE;
  }
  return n;
}

/**
 * --restart-grace SEC (run and install): 0 to MAX_RESTART_GRACE_S, the longest a shim believes a
 * restart record. undefined when absent.
 */
export function restartGraceSeconds(raw: string | undefined, problems: string[]): number | undefined {
  if (raw === undefined) return undefined;
  const s = int('restart-grace', raw, DEFAULT_RESTART_GRACE_S, 0, problems);
  if (s > MAX_RESTART_GRACE_S) {
    problems.push(
      `--restart-grace must be at most ${MAX_RESTART_GRACE_S} (the shim believes a restart record no longer), got "${raw}"`,
    );
    return undefined;
  }
  return s;
}

/** --log-level: a pino level, info when absent. */
export function level(raw: string | undefined, problems: string[]): string {
  const l = raw ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(l))
    problems.push(`--log-level "${l}" is not a pino level`);
  return l;
}

/** --runtime-endpoint unix:///PATH (crictl's form; a bare absolute path too): the socket path. */
export function runtimeEndpoint(raw: string | undefined, problems: string[]): string | undefined {
  if (raw === undefined) return undefined;
  const path = parseRuntimeEndpoint(raw);
  if (path === undefined) problems.push(`--runtime-endpoint must be unix:///ABSOLUTE/PATH, got "${raw}"`);
  return path;
}

/** Throws one error listing every problem, then the usage; does nothing when there are none. */
export function fail(problems: string[], usage: string): void {
  if (problems.length > 0) throw new Error(`invalid options:\n  ${problems.join('\n  ')}\n\n${usage}`);
}
