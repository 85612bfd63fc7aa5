import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError } from '../../shared/src/cni/errors.js';
import { isPermanentFailure, PERMANENT_CODES } from '../../daemon/src/engine/teardown.js';

describe('which DEL failures are permanent', () => {
  test("the spec's bad-input codes (1, 2, 4, 6, 7) are, whatever the message", () => {
    assert.deepEqual(
      [...PERMANENT_CODES].sort((a, b) => a - b),
      [1, 2, 4, 6, 7],
    );
    for (const code of [1, 2, 4, 6, 7])
      assert.equal(isPermanentFailure(new CniError(code, 'x'), null), true, String(code));
  });
  test('other codes are not, unless the DEL failed with exactly the error its ADD failed with', () => {
    for (const code of [3, 5, 11, 100, 101, 999])
      assert.equal(isPermanentFailure(new CniError(code, 'flaky'), null), false, String(code));
    const msg = 'ARGS: unknown args ["Foo=1"]';
    assert.equal(isPermanentFailure(new CniError(999, msg), msg), true);
    assert.equal(isPermanentFailure(new CniError(999, 'another message'), msg), false);
  });
  test('a long message matches the capped text the journal kept of the ADD error', () => {
    const long = `ARGS: unknown args ["${'v'.repeat(10_000)}"]`;
    const kept = `${long.slice(0, 2048)}… [${long.length - 2048} more characters cut]`;
    assert.equal(isPermanentFailure(new CniError(999, long), kept), true);
  });
  test('a plugin that prints no CNI error is, once its DEL failed exactly that way before', () => {
    const silent = 'plugin steward-fixture exited with status 1 without a CNI error';
    const err = new CniError(100, silent);
    assert.equal(isPermanentFailure(err, null, null), false, 'the first failure is not');
    assert.equal(isPermanentFailure(err, null, silent), true, 'the same failure again is');
    assert.equal(
      isPermanentFailure(err, null, 'plugin steward-fixture exited with status 2 without a CNI error'),
      false,
      'another status is not the same failure',
    );
    assert.equal(
      isPermanentFailure(
        new CniError(100, 'plugin x timed out after 60000 ms'),
        null,
        'plugin x timed out after 60000 ms',
      ),
      false,
      'a repeated timeout is not: the plugin may be slow, not broken',
    );
    assert.equal(
      isPermanentFailure(new CniError(11, 'busy'), null, 'busy'),
      false,
      'a repeated coded transient error is not',
    );
  });
});
