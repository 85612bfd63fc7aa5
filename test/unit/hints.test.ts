// The admission hints read from a request's raw headers (daemon/src/routes/hints.ts): each hint with
// every value it was given, so a hint repeated (which node would join as "ADD, ADD") is refused as
// given twice, and a header name that is an Object property is only a header.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ErrorCode, HINT_HEADERS } from '@cni-steward/shared';
import { hintValues, readHints } from '../../daemon/src/routes/hints.js';

describe('hintValues', () => {
  test('keeps the hint headers only, by lower-case name, each with every value in order', () => {
    const v = hintValues([
      'Host',
      'localhost',
      'X-CNI-Command',
      'DEL',
      'x-cni-containerid',
      'c1',
      'X-Cni-Command',
      'ADD',
      'constructor',
      'x',
      '__proto__',
      'y',
    ]);
    assert.deepEqual({ ...v }, { 'x-cni-command': ['DEL', 'ADD'], 'x-cni-containerid': ['c1'] });
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
  });

  test('a hint given twice is refused with code 4, naming it; once, it is read and decoded', () => {
    assert.throws(() => readHints(hintValues(['X-CNI-Command', 'ADD', 'x-cni-command', 'ADD'])), {
      name: 'CniError',
      code: ErrorCode.InvalidEnv,
      message: `request header ${HINT_HEADERS.command} is given 2 times`,
    });
    const once = readHints(
      hintValues(['X-CNI-Command', 'ADD', 'X-CNI-Network', 'pod%20net', 'constructor', 'x', 'toString', 'y']),
    );
    assert.deepEqual(once, {
      command: 'ADD',
      containerId: undefined,
      ifname: undefined,
      network: 'pod net',
      statusKey: undefined,
    });
  });

  test('no X-CNI-Command: no hints (an older shim, curl), whatever else is given', () => {
    assert.equal(readHints(hintValues(['X-CNI-ContainerID', 'c1', 'content-type', 'application/json'])), undefined);
  });
});
