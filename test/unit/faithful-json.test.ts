// daemon/src/faithful-json.ts: which numbers are kept as their source text, and that everything
// else parses as JSON.parse parses it.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { isKeptNumber, parseJson } from '../../daemon/src/faithful-json.js';

describe('parseJson', () => {
  test('a number a double cannot hold is kept as written, and written back as written', () => {
    for (const text of [
      '9007199254740993',
      '-9007199254740993',
      '12345678901234567890',
      '1e21',
      '1e400',
      '-1E+400',
      '1e-400',
    ]) {
      const v = (parseJson(`{"n":${text}}`) as { n: unknown }).n;
      assert.ok(isKeptNumber(v), `${text} kept`);
      assert.equal(JSON.stringify({ n: v }), `{"n":${text}}`);
    }
  });

  test('every other number stays a number (the same double a plugin reads), at any depth', () => {
    const v = parseJson(
      '{"a":[1,1.0,1.5,-0,0e-999,9007199254740991,9007199254740992,0.1000000000000000055511],"b":{"c":2}}',
    );
    assert.deepEqual(v, { a: [1, 1, 1.5, -0, 0, 9007199254740991, 9007199254740992, 0.1], b: { c: 2 } });
    assert.equal(isKeptNumber(1), false);
  });

  test('"__proto__" stays an own key; strings, nulls and booleans are untouched; bad JSON throws as JSON.parse does', () => {
    const v = parseJson('{"__proto__":{"x":1},"s":"9007199254740993","t":true,"n":null}') as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.ok(Object.hasOwn(v, '__proto__'));
    assert.deepEqual(Object.getOwnPropertyDescriptor(v, '__proto__')?.value, { x: 1 });
    assert.equal(v.s, '9007199254740993');
    assert.equal(v.t, true);
    assert.equal(v.n, null);
    for (const bad of ['', '{', '{"a":01}', '[1,]']) assert.throws(() => parseJson(bad), SyntaxError, bad);
  });

  test('nesting as deep as JSON.parse takes never overflows the stack (V8 revives recursively): past 1,000 levels numbers parse as doubles', () => {
    const deep = (n: number, inner: string) => '['.repeat(n) + inner + ']'.repeat(n);
    let v: unknown = parseJson(deep(100_000, '9007199254740993'));
    for (let i = 0; i < 100_000; i++) v = (v as unknown[])[0];
    assert.equal(v, 9007199254740992);
    let shallow: unknown = parseJson(deep(999, '9007199254740993'));
    for (let i = 0; i < 999; i++) shallow = (shallow as unknown[])[0];
    assert.ok(isKeptNumber(shallow));
  });
});
