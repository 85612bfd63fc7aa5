// `stewardd run`'s durations that become Node timers are bounded: Node fires a timer of more than
// 2^31-1 ms after 1 ms, so an over-long --shutdown-grace would mean no grace at all. And the retry
// schedule's longest delay cannot be shorter than its first.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseRunConfig } from '../../daemon/src/config.js';
import { MAX_TIMER_MS } from '../../daemon/src/config-checks.js';

const MAX_S = Math.floor(MAX_TIMER_MS / 1000);

test('the seconds flags that become timers take at most what a Node timer keeps', () => {
  for (const flag of ['shutdown-grace', 'drain-timeout', 'prune-interval']) {
    assert.throws(
      () => parseRunConfig([`--${flag}`, String(MAX_S + 1)]),
      new RegExp(`--${flag} must be an integer from \\d+ to ${MAX_S}, got "${MAX_S + 1}"`),
    );
    assert.throws(() => parseRunConfig([`--${flag}`, '4294968']), new RegExp(`--${flag} must be`), 'past 2^32 ms');
  }
  assert.equal(parseRunConfig(['--shutdown-grace', String(MAX_S)]).shutdownGraceMs, MAX_S * 1000);
  assert.ok(MAX_S * 1000 <= 2 ** 31 - 1);
});

test('the retry delays are at most a timer, and the longest is at least the first', () => {
  assert.throws(
    () => parseRunConfig(['--retry-base-ms', String(MAX_TIMER_MS + 1)]),
    /--retry-base-ms must be an integer from 1 to/,
  );
  // Below the first delay, the longest is taken as the first (accepted, as it was before the bound).
  const low = parseRunConfig(['--retry-base-ms', '2000', '--retry-max-ms', '1000']).retry;
  assert.deepEqual([low.baseDelayMs, low.maxDelayMs], [2000, 2000]);
  assert.equal(parseRunConfig(['--retry-max-ms', '500']).retry.maxDelayMs, 1000);
  const p = parseRunConfig(['--retry-base-ms', '100', '--retry-max-ms', '100']).retry;
  assert.deepEqual([p.baseDelayMs, p.maxDelayMs], [100, 100]);
});
