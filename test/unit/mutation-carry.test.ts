// `npm run mutate:report -- --carry` (scripts/mutation-carry.ts): an old verdict moves to a new
// survivor only when it is the same mutant of the same code; everything else is left for a human.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { carry, describeCarry } from '../../scripts/mutation-carry.js';
import type { Classification } from '../../scripts/mutation-docs.js';
import { originalOf, textAt, type Survivor } from '../../scripts/mutation-summary.js';

const s = (file: string, line: number, column: number, text: string, over: Partial<Survivor> = {}): Survivor => ({
  file,
  line,
  column,
  mutator: 'ConditionalExpression',
  replacement: 'true',
  status: 'Survived',
  original: originalOf(text),
  ...over,
});
const v = (key: string, why = 'read'): Classification => ({ key, class: 'equivalent', why });

describe('carrying verdicts to a re-run', () => {
  test('same file, mutator, replacement and original text: carried to the new line and column, and printed', () => {
    const old = { survivors: [s('a.ts', 10, 5, 'x > 0')] };
    const next = { survivors: [s('a.ts', 12, 7, 'x > 0')] };
    const r = carry(old, [v('a.ts:10:5 ConditionalExpression true')], next);
    assert.deepEqual(r.classes, [v('a.ts:12:7 ConditionalExpression true')]);
    assert.deepEqual(r.carried, [
      { from: 'a.ts:10:5 ConditionalExpression true', to: 'a.ts:12:7 ConditionalExpression true', class: 'equivalent' },
    ]);
    assert.match(describeCarry(r), /a\.ts:10:5 .*\n {4}-> a\.ts:12:7/);
  });

  test('other original text, mutator or replacement: not carried; the survivor is left without a verdict', () => {
    const old = { survivors: [s('a.ts', 10, 5, 'x > 0')] };
    const verdict = [v('a.ts:10:5 ConditionalExpression true')];
    for (const next of [
      s('a.ts', 12, 7, 'x >= 0'),
      s('a.ts', 12, 7, 'x > 0', { mutator: 'EqualityOperator' }),
      s('a.ts', 12, 7, 'x > 0', { replacement: 'false' }),
    ]) {
      const r = carry(old, verdict, { survivors: [next] });
      assert.deepEqual(r.classes, []);
      assert.equal(r.unclassified.length, 1);
      assert.deepEqual(r.dropped, ['a.ts:10:5 ConditionalExpression true']);
    }
  });

  test('the same key over other code (moved there by a split) keeps no verdict: it is read again', () => {
    const old = { survivors: [s('a.ts', 10, 5, 'x > 0')] };
    const verdict = [v('a.ts:10:5 ConditionalExpression true')];
    const same = carry(old, verdict, { survivors: [s('a.ts', 10, 5, 'x > 0')] });
    assert.deepEqual(same.classes, verdict, 'the same code at the same place keeps its verdict');
    const other = carry(old, verdict, { survivors: [s('a.ts', 10, 5, 'y < 1')] });
    assert.deepEqual(other.classes, []);
    assert.deepEqual(other.unclassified, ['a.ts:10:5 ConditionalExpression true']);
  });

  test('a renamed file, or code moved to another file, carries; a survivor still in place keeps its own', () => {
    const old = { survivors: [s('a.ts', 10, 5, 'x > 0'), s('a.ts', 20, 5, 'y > 0')] };
    const verdicts = [
      v('a.ts:10:5 ConditionalExpression true', 'one'),
      v('a.ts:20:5 ConditionalExpression true', 'two'),
    ];
    const renamed = carry(old, verdicts, { survivors: [s('b.ts', 10, 5, 'x > 0')] }, new Map([['a.ts', 'b.ts']]));
    assert.deepEqual(renamed.classes, [v('b.ts:10:5 ConditionalExpression true', 'one')]);
    // a.ts:20:5 is still a survivor: its verdict stays where it is and is not copied to c.ts.
    const moved = carry(old, verdicts, { survivors: [s('a.ts', 20, 5, 'y > 0'), s('c.ts', 3, 1, 'y > 0')] });
    assert.deepEqual(moved.unclassified, ['c.ts:3:1 ConditionalExpression true']);
  });

  test('matching old verdicts that disagree are a conflict, not carried', () => {
    const old = { survivors: [s('a.ts', 10, 5, 'x > 0'), s('a.ts', 30, 5, 'x > 0')] };
    const verdicts = [
      v('a.ts:10:5 ConditionalExpression true', 'one'),
      { ...v('a.ts:30:5 ConditionalExpression true'), class: 'accepted' as const },
    ];
    const r = carry(old, verdicts, { survivors: [s('a.ts', 11, 5, 'x > 0')] });
    assert.deepEqual(r.classes, []);
    assert.equal(r.conflicts.length, 1);
  });

  test('the original text is read from the exact range (1-based, end exclusive)', () => {
    assert.equal(textAt('ab\ncdef\ng', { line: 2, column: 2 }, { line: 3, column: 1 }), 'def\n');
  });
});
