import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { CniError, LATEST_VERSION } from '@cni-steward/shared';
import { cniErrorAnswer } from '../../daemon/src/routes/http-status.js';
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

describe('the cniVersion of an error answer', () => {
  const err = new CniError(7, 'bad netconf');
  const versionOf = (cniVersion: unknown) =>
    (cniErrorAnswer(err, { config: { cniVersion } }).json as { cniVersion: string }).cniVersion;

  test("is the request's when it has a version's shape, a supported one or not (the error may be about it)", () => {
    assert.equal(versionOf('1.0.0'), '1.0.0');
    assert.equal(versionOf('0.3.1'), '0.3.1');
    assert.equal(versionOf('0.2.0'), '0.2.0');
  });

  test('is the latest for anything else: a megabyte, control characters or a bidi override are never echoed', () => {
    for (const bad of [
      '1.0.0\u202e\u001b[31m' + 'x'.repeat(1 << 20),
      '',
      '1.0',
      'v1.0.0',
      ' 1.0.0',
      12,
      null,
      undefined,
    ])
      assert.equal(versionOf(bad), LATEST_VERSION, String(JSON.stringify(bad)).slice(0, 40));
    assert.equal((cniErrorAnswer(err, undefined).json as { cniVersion: string }).cniVersion, LATEST_VERSION);
  });
});
