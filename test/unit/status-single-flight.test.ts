// STATUS single flight (daemon/src/engine/gc-status.ts StatusCache.answer), its failure path: the
// one delegate STATUS pass in flight fails, and every caller waiting on it gets that failure (as a
// CNI error: a plain Error is 50, "plugin not available"), the pass having run once; the failure is
// the cached answer until the TTL; then the next caller runs a new pass (the failed one is not left
// in flight), and a success after it is cached as a success. engine-commands.test.ts covers the
// success path. Both are in Stryker's list (stryker.config.mjs).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { StatusCache } from '../../daemon/src/engine/gc-status.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('STATUS single flight: a failed pass', () => {
  test('the callers waiting on a failing pass all get its failure, as CNI error 50; the pass ran once', async () => {
    const cache = new StatusCache(5000, () => 1000);
    let passes = 0;
    const gate = deferred();
    const pass = async () => {
      passes++;
      await gate.promise;
    };
    const waiting = [1, 2, 3].map(() => cache.answer('net', pass));
    gate.reject(new Error('bridge STATUS: exit status 1'));
    const results = await Promise.allSettled(waiting);
    assert.equal(passes, 1, 'one pass for three concurrent callers');
    const errors = results.map((r) => (r.status === 'rejected' ? (r.reason as unknown) : 'resolved'));
    for (const e of errors) {
      assert.ok(e instanceof CniError, `a caller got ${String(e)}`);
      assert.equal(e.code, 50);
      assert.match(e.message, /bridge STATUS: exit status 1/);
    }
    assert.ok(
      errors.every((e) => e === errors[0]),
      'the one failure, shared',
    );
  });

  test("a delegate's own CNI error keeps its code", async () => {
    const cache = new StatusCache(5000, () => 1000);
    await assert.rejects(
      cache.answer('net', () => Promise.reject(new CniError(11, 'try again later'))),
      (e: unknown) => e instanceof CniError && e.code === 11,
    );
  });

  test('the failure is the answer until the TTL, without a new pass; then a new pass runs, and its success is cached', async () => {
    const clock = { t: 1000 };
    const cache = new StatusCache(5000, () => clock.t);
    let passes = 0;
    let fail = true;
    const pass = () => {
      passes++;
      return fail ? Promise.reject(new Error('down')) : Promise.resolve();
    };
    await assert.rejects(cache.answer('net', pass), /down/);
    clock.t += 5000;
    await assert.rejects(cache.answer('net', pass), /down/);
    assert.equal(passes, 1, 'answered from the cache within the TTL');
    assert.equal(cache.get('net')?.error?.code, 50);
    clock.t += 1;
    fail = false;
    await cache.answer('net', pass);
    assert.equal(passes, 2, 'expired: a new pass, not the failed one left in flight');
    await cache.answer('net', pass);
    assert.equal(passes, 2);
    assert.equal(cache.get('net')?.error, undefined, 'the success replaced the failure');
  });

  test('a failure under one netconf is not the answer of another', async () => {
    const cache = new StatusCache(5000, () => 1000);
    await assert.rejects(cache.answer('a', () => Promise.reject(new Error('a is down'))));
    await cache.answer('b', () => Promise.resolve());
    assert.equal(cache.get('b')?.error, undefined);
  });
});
