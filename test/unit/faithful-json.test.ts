// daemon/src/faithful-json.ts: which numbers are kept as their source text, and that everything
// else parses as JSON.parse parses it.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { MAX_REVIVED_BYTES, isKeptNumber, parseJson, parseWireJson } from '../../daemon/src/faithful-json.js';

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
      '-0',
      '-0.0',
    ]) {
      const v = (parseJson(`{"n":${text}}`) as { n: unknown }).n;
      assert.ok(isKeptNumber(v), `${text} kept`);
      assert.equal(JSON.stringify({ n: v }), `{"n":${text}}`);
    }
  });

  test('every other number stays a number (the same double a plugin reads), at any depth', () => {
    const v = parseJson(
      '{"a":[1,1.0,1.5,0e-999,9007199254740991,9007199254740992,0.1000000000000000055511],"b":{"c":2}}',
    );
    assert.deepEqual(v, { a: [1, 1, 1.5, 0, 9007199254740991, 9007199254740992, 0.1], b: { c: 2 } });
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

  test('past MAX_REVIVED_BYTES of text numbers are read as doubles (the reviver costs the event loop ~0.8 µs a value)', () => {
    const padded = (n: number) => `{"n":9007199254740993,"pad":"${'x'.repeat(n)}"}`;
    const under = padded(MAX_REVIVED_BYTES - 40);
    assert.ok(under.length <= MAX_REVIVED_BYTES);
    assert.ok(isKeptNumber((parseJson(under) as { n: unknown }).n));
    assert.equal((parseJson(padded(MAX_REVIVED_BYTES)) as { n: unknown }).n, 9007199254740992);
  });

  test('a zero is taken for an underflow only when the text has a negative exponent or a run of zeros', () => {
    assert.equal((parseJson('{"a":0,"b":"1e5"}') as { a: unknown }).a, 0);
    assert.ok(isKeptNumber((parseJson('{"a":1e-400}') as { a: unknown }).a));
    assert.ok(isKeptNumber((parseJson(`{"a":0.${'0'.repeat(400)}1}`) as { a: unknown }).a));
    assert.equal(JSON.stringify(parseJson(`{"a":0.${'0'.repeat(400)}1}`)), `{"a":0.${'0'.repeat(400)}1}`);
  });
});

describe('parseWireJson', () => {
  test('where stewardd expects an object (the body, env, config, timeouts, runtimeConfig) a number is a double, refused as one', () => {
    assert.equal(parseWireJson('1e400'), Infinity);
    const b = parseWireJson(
      '{"env":1e400,"config":{"timeouts":9007199254740993,"runtimeConfig":-1e400,"delegates":[{"mtu":1e400}]}}',
    ) as { env: unknown; config: { timeouts: unknown; runtimeConfig: unknown; delegates: Array<{ mtu: unknown }> } };
    assert.equal(b.env, Infinity);
    assert.equal(b.config.timeouts, 9007199254740992);
    assert.equal(b.config.runtimeConfig, -Infinity);
    assert.ok(isKeptNumber(b.config.delegates[0]!.mtu), "a delegate's own number is kept");
    assert.equal((parseWireJson('{"config":1e400}') as { config: unknown }).config, Infinity);
  });

  test("numbers inside those objects are kept: timeouts' keys, runtimeConfig's values", () => {
    const b = parseWireJson(
      '{"config":{"timeouts":{"add":1e400},"runtimeConfig":{"bandwidth":{"rate":9007199254740993}}}}',
    ) as {
      config: { timeouts: { add: unknown }; runtimeConfig: { bandwidth: { rate: unknown } } };
    };
    assert.ok(isKeptNumber(b.config.timeouts.add));
    assert.ok(isKeptNumber(b.config.runtimeConfig.bandwidth.rate));
  });
});
