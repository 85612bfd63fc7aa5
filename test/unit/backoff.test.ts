import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  DEFAULT_RETRY_POLICY,
  HOLD_MAX_ATTEMPTS,
  backoffDelay,
  type RetryPolicy,
} from '../../daemon/src/engine/teardown.js';

const policy: RetryPolicy = { baseDelayMs: 1000, maxDelayMs: 60_000, maxAttempts: 50, maxAgeMs: 86_400_000 };
/** random() = 0.5 gives a jitter factor of exactly 1. */
const noJitter = () => 0.5;

describe('backoffDelay', () => {
  test('starts at the base delay for the first failure', () => {
    assert.equal(backoffDelay(policy, 1, noJitter), 1000);
  });

  test('doubles the delay with each further failure', () => {
    const delays = [1, 2, 3, 4, 5, 6].map((n) => backoffDelay(policy, n, noJitter));
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16_000, 32_000]);
  });

  test('is capped at the maximum delay however many failures there were', () => {
    assert.equal(backoffDelay(policy, 7, noJitter), 60_000);
    assert.equal(backoffDelay(policy, 20, noJitter), 60_000);
    assert.equal(backoffDelay(policy, 2000, noJitter), 60_000);
  });

  test('jitter stays within plus or minus 20% of the undisturbed delay', () => {
    for (const failures of [1, 3, 5]) {
      const exact = 1000 * 2 ** (failures - 1);
      for (let i = 0; i < 100; i++) {
        const r = i / 100;
        const d = backoffDelay(policy, failures, () => r);
        assert.ok(
          d >= Math.floor(exact * 0.8) && d <= Math.ceil(exact * 1.2),
          `failures=${failures} random=${r}: ${d} is outside ${exact} +-20%`,
        );
      }
    }
  });

  test('jitter reaches both ends of its range: random 0 gives -20%, random near 1 gives about +20%', () => {
    assert.equal(
      backoffDelay(policy, 3, () => 0),
      3200,
    );
    assert.equal(
      backoffDelay(policy, 3, () => 0.999999),
      4800,
    );
    assert.equal(
      backoffDelay(policy, 3, () => 0.25),
      3600,
    );
  });

  test('jitter never pushes the delay above the maximum, but may pull it below', () => {
    assert.equal(
      backoffDelay(policy, 30, () => 0.999999),
      60_000,
    );
    assert.equal(
      backoffDelay(policy, 30, () => 0),
      48_000,
    );
  });

  test('returns whole milliseconds', () => {
    const d = backoffDelay({ ...policy, baseDelayMs: 333 }, 1, () => 0.123);
    assert.ok(Number.isInteger(d), `${d} is not an integer`);
  });
});

describe('the daemon’s default retry policy (docs/teardown.md)', () => {
  test('1 s doubling to a 5 min cap; abandoned after 50 failures or 24 h; a holding step after 10 (about 14 min)', () => {
    const d = DEFAULT_RETRY_POLICY;
    assert.deepEqual(
      [d.baseDelayMs, d.maxDelayMs, d.maxAttempts, d.maxAgeMs, d.holdMaxAttempts],
      [1000, 5 * 60_000, 50, 24 * 3_600_000, HOLD_MAX_ATTEMPTS],
    );
    assert.equal(HOLD_MAX_ATTEMPTS, 10);
    const waits = Array.from({ length: HOLD_MAX_ATTEMPTS - 1 }, (_, i) => backoffDelay(d, i + 1, noJitter));
    assert.deepEqual(waits, [1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, 128_000, 256_000]);
    const minutes = waits.reduce((a, b) => a + b, 0) / 60_000;
    assert.ok(minutes > 8 && minutes < 15, `a holding step is given up on after ~${minutes.toFixed(1)} min of retries`);
    assert.equal(backoffDelay(d, 10, noJitter), 300_000, 'the tenth wait is capped at 5 min');
  });
});
