import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { httpStatusFor } from '../../daemon/src/server.js';

describe('httpStatusFor', () => {
  for (const code of [1, 2, 4, 6, 7]) {
    test(`maps the caller's mistake, CNI code ${code}, to 400`, () => {
      assert.equal(httpStatusFor(code), 400);
    });
  }

  test('maps an unknown container (code 3) to 404', () => {
    assert.equal(httpStatusFor(3), 404);
  });

  test('maps try-again-later (code 11) to 503', () => {
    assert.equal(httpStatusFor(11), 503);
  });

  test('maps a plugin timeout (code 101) to 504', () => {
    assert.equal(httpStatusFor(101), 504);
  });

  test('maps attachment conflicts (102, 106) to 409 and shutting down / unavailable plugins (103, 50, 51) to 503', () => {
    assert.deepEqual([102, 106].map(httpStatusFor), [409, 409]);
    assert.deepEqual([103, 50, 51].map(httpStatusFor), [503, 503, 503]);
  });

  test('maps unknown codes and the internal-error code (104) to 500', () => {
    for (const code of [0, 8, 99, 104, 999, -1]) {
      assert.equal(httpStatusFor(code), 500, `code ${code}`);
    }
  });
});
