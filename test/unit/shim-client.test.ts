// The Node shim's hand-written HTTP answer parser (shim/src/client.ts): an answer cut off by the
// daemon dying mid-write must never be printed as a result, whether sized or chunked.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseResponse } from '../../shim/src/client.js';

const head = (extra: string) => `HTTP/1.1 200 OK\r\nx-steward-protocol: 2\r\n${extra}\r\n`;
const RESULT = '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}';

describe('parseResponse', () => {
  test('a whole sized answer is the body, extra bytes after it dropped', () => {
    const r = parseResponse(Buffer.from(`${head(`Content-Length: ${RESULT.length}\r\n`)}${RESULT}junk`));
    assert.deepEqual(r, { status: 200, body: RESULT, protocol: '2' });
  });

  test('a sized answer cut short throws, naming how much came', () => {
    const cut = Buffer.from(`${head(`Content-Length: ${RESULT.length}\r\n`)}${RESULT.slice(0, 30)}`);
    assert.throws(() => parseResponse(cut), new RegExp(`connection closed after 30 of ${RESULT.length} body bytes`));
  });

  test('a chunked answer is whole only with its zero-size chunk', () => {
    const chunks = `1e\r\n${RESULT.slice(0, 30)}\r\n${(RESULT.length - 30).toString(16)}\r\n${RESULT.slice(30)}\r\n`;
    const te = 'Transfer-Encoding: chunked\r\n';
    assert.equal(parseResponse(Buffer.from(`${head(te)}${chunks}0\r\n\r\n`)).body, RESULT);
    assert.throws(() => parseResponse(Buffer.from(`${head(te)}${chunks}`)), /before the last chunk/);
    assert.throws(() => parseResponse(Buffer.from(`${head(te)}1e\r\n${RESULT.slice(0, 10)}`)), /inside a chunk/);
    assert.throws(() => parseResponse(Buffer.from(`${head(te)}zz\r\n`)), /malformed chunk size/);
  });

  test('no head at all, or no status line, throws', () => {
    assert.throws(() => parseResponse(Buffer.from('HTTP/1.1 200 OK\r\n')), /before a complete HTTP response/);
    assert.throws(() => parseResponse(Buffer.from('garbage\r\n\r\n')), /malformed HTTP status line/);
  });
});
