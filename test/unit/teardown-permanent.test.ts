import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '../../shared/src/cni/errors.js';
import { permanenceOf, PERMANENT_CODES } from '../../daemon/src/engine/teardown.js';

describe('which DEL failures are permanent', () => {
  test("the spec's bad-input codes (1, 2, 4, 6, 7) are, whatever the message", () => {
    assert.deepEqual(
      [...PERMANENT_CODES].sort((a, b) => a - b),
      [1, 2, 4, 6, 7],
    );
    for (const code of [1, 2, 4, 6, 7])
      assert.equal(permanenceOf(new CniError(code, 'x'), null), 'bad-input', String(code));
  });
  test('other codes are not, unless the DEL failed with exactly the error its ADD failed with', () => {
    for (const code of [3, 5, 11, 100, 101, 999])
      assert.equal(permanenceOf(new CniError(code, 'flaky'), null), undefined, String(code));
    const msg = 'ARGS: unknown args ["Foo=1"]';
    assert.equal(permanenceOf(new CniError(999, msg), msg), 'bad-input');
    assert.equal(permanenceOf(new CniError(999, 'another message'), msg), undefined);
  });
  test('a code 11 or a timeout is not, even with exactly the words its ADD failed with (a backend down through both)', () => {
    const down = 'backend unavailable, try again later';
    assert.equal(permanenceOf(new CniError(11, down), down), undefined);
    const slow = 'plugin x did not finish within 60000 ms and was killed';
    assert.equal(permanenceOf(new CniError(101, slow), slow), undefined);
    assert.equal(permanenceOf(new CniError(101, slow), null, slow), undefined);
  });
  test('a long message matches the capped text the journal kept of the ADD error', () => {
    const long = `ARGS: unknown args ["${'v'.repeat(10_000)}"]`;
    const kept = `${long.slice(0, 2048)}… [${long.length - 2048} more characters cut]`;
    assert.equal(permanenceOf(new CniError(999, long), kept), 'bad-input');
  });
  test('a plugin that prints no CNI error is, silently (given the hold bound, not 3), once its DEL failed exactly that way before', () => {
    const silent = 'plugin steward-fixture exited with status 1 without a CNI error';
    const err = new CniError(100, silent);
    assert.equal(permanenceOf(err, null, null), undefined, 'the first failure is not');
    assert.equal(permanenceOf(err, null, silent), 'silent', 'the same failure again is');
    assert.equal(
      permanenceOf(err, null, 'plugin steward-fixture exited with status 2 without a CNI error'),
      undefined,
      'another status is not the same failure',
    );
    assert.equal(
      permanenceOf(new CniError(100, 'plugin x timed out after 60000 ms'), null, 'plugin x timed out after 60000 ms'),
      undefined,
      'a repeated timeout is not: the plugin may be slow, not broken',
    );
    assert.equal(
      permanenceOf(new CniError(11, 'busy'), null, 'busy'),
      undefined,
      'a repeated coded transient error is not',
    );
  });
});
