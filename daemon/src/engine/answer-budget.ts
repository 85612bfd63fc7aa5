// How long stewardd may take before it answers a request the shim bounds: the shim's bound (the
// netconf's "timeouts" key, or the shim's default) less a margin for the journal commit, the reply
// and the shim's exit, so stewardd's own answer reaches the runtime, not the shim's fallback.

import {
  DEFAULT_SHIM_TIMEOUT_MS,
  MAX_SHIM_ADD_TIMEOUT_MS,
  MAX_SHIM_DEL_TIMEOUT_MS,
  SHIM_DEL_BOUND_MS,
} from '@cni-steward/shared';

/** Answer margin kept under the shim's ADD bound: the journal commit, the reply, the shim's exit. */
export const ANSWER_MARGIN_MS = 5000;

/** The most the shim takes for each key; past it the shim uses its default (shared/src/api.ts). */
const MOST: Record<'add' | 'del', number> = { add: MAX_SHIM_ADD_TIMEOUT_MS, del: MAX_SHIM_DEL_TIMEOUT_MS };

/**
 * The netconf's own bound for `key`, when it sets one the shim would use (an integer from 1 up to
 * its most): a request from another client with `del` 1e10 would otherwise arm a timer Node fires at
 * once (past 2^31-1 ms).
 */
function ownBound(timeouts: unknown, key: 'add' | 'del'): number | undefined {
  const own =
    typeof timeouts === 'object' && timeouts !== null ? (timeouts as Record<string, unknown>)[key] : undefined;
  return typeof own === 'number' && Number.isInteger(own) && own > 0 && own <= MOST[key] ? own : undefined;
}

/**
 * How long an ADD's plugins may take in all: the shim's ADD bound less ANSWER_MARGIN_MS, and at
 * least 1 s. Each plugin's deadline is the smaller of --plugin-timeout and what is left of this, so
 * a failed ADD's answer (101) always reaches the shim inside its bound.
 */
export function answerBudgetMs(timeouts: unknown): number {
  return Math.max(1000, (ownBound(timeouts, 'add') ?? DEFAULT_SHIM_TIMEOUT_MS) - ANSWER_MARGIN_MS);
}

/**
 * How long a DEL may wait for its teardown before it is answered (engine/del.ts): the shim's DEL
 * bound less ANSWER_MARGIN_MS, or less a quarter of a bound too short for that margin. The teardown
 * goes on after the answer; only its plugins' deadlines (--plugin-timeout) bound it.
 */
export function delAnswerBudgetMs(timeouts: unknown): number {
  const bound = ownBound(timeouts, 'del') ?? SHIM_DEL_BOUND_MS;
  return bound - Math.min(ANSWER_MARGIN_MS, bound / 4);
}
