// A failed teardown step's schedule: when it is retried (exponential backoff with jitter, from the
// retry policy) and when retrying is no use (a permanent failure). teardown.ts runs the steps.

import { CniError, ErrorCode, isUncodedPluginFailure } from '@cni-steward/shared';
import { storedErrorText } from '../store/store.js';

export interface RetryPolicy {
  /** First retry delay; doubles per attempt up to maxDelayMs, with +-20% jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** Abandon a step after this many failed DELs... */
  maxAttempts: number;
  /**
   * ...or once it has been pending this long while a daemon ran (monotonic time, Step.pendingMs):
   * a wall-clock step forward does not age it.
   */
  maxAgeMs: number;
  /**
   * A confirmed step (its ADD succeeded) whose DEL keeps failing halts the steps before it, as the
   * spec orders; after this many failed DELs it is abandoned (loudly) and they are torn down, so one
   * broken plugin holds an earlier plugin's lease for minutes, not hours. Default HOLD_MAX_ATTEMPTS.
   */
  holdMaxAttempts?: number;
}

/** 10 failed DELs: about 14 minutes with the default schedule (1 s doubling to 5 min). */
export const HOLD_MAX_ATTEMPTS = 10;

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  baseDelayMs: 1000,
  maxDelayMs: 5 * 60_000,
  maxAttempts: 50,
  maxAgeMs: 24 * 3600_000,
  holdMaxAttempts: HOLD_MAX_ATTEMPTS,
};

/**
 * CNI error codes that say the input itself is wrong (spec, "Error codes"): incompatible version,
 * unsupported field, invalid environment, decoding failure, invalid network config. The stored
 * config and env are what a retry would send again, so such a DEL can never succeed.
 */
export const PERMANENT_CODES: ReadonlySet<number> = new Set([
  ErrorCode.IncompatibleVersion,
  ErrorCode.UnsupportedField,
  ErrorCode.InvalidEnv,
  ErrorCode.DecodeFailure,
  ErrorCode.InvalidConfig,
]);

/** A permanently failing step gets this many DELs before it is abandoned. */
export const PERMANENT_MAX_ATTEMPTS = 3;

/**
 * How soon retrying a failed DEL is given up: 'bad-input' after PERMANENT_MAX_ATTEMPTS (a spec code
 * for bad input, see PERMANENT_CODES, or exactly the error the step's ADD failed with); 'silent' after
 * the hold bound (a plugin that prints no CNI error and fails exactly as its previous DEL did, same
 * status or signal: it may be broken, or waiting on a backend that is down, so minutes, not
 * seconds); undefined: the whole budget. A code 11 and a timeout are transient by definition, even
 * when the ADD failed with the same words (a backend down through both: its lease must come back).
 */
export type Permanence = 'bad-input' | 'silent' | undefined;

export function permanenceOf(err: CniError, addError: string | null, lastDelError: string | null = null): Permanence {
  if (PERMANENT_CODES.has(err.code)) return 'bad-input';
  if (err.code === ErrorCode.TryAgainLater || err.code === ErrorCode.PluginTimeout) return undefined;
  const text = storedErrorText(err.message);
  if (addError !== null && text === addError) return 'bad-input';
  return isUncodedPluginFailure(err) && lastDelError !== null && text === lastDelError ? 'silent' : undefined;
}

export function backoffDelay(policy: RetryPolicy, failures: number, random: () => number = Math.random): number {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, failures - 1));
  const jitter = 1 + (random() * 0.4 - 0.2);
  return Math.round(Math.min(policy.maxDelayMs, exp * jitter));
}
