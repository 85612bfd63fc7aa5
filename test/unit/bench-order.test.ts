// bench/lib/order.ts: the order a benchmark row runs its modes in. A mode's figure must not depend on
// which mode ran just before it, so over one cycle every mode follows every other equally often within
// an iteration and sits at every position equally often; a plain rotation (what the rows did before)
// has the second but always puts a mode right after the same one.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { balancedCycle, balancedOrder, wholeCycles } from '../../bench/lib/order.js';

const letters = (n: number) => Array.from({ length: n }, (_, k) => String.fromCharCode(97 + k));

/** Adjacent ordered pairs and positions over one cycle of `order`. */
function tally(order: (modes: string[], i: number) => string[], n: number, cycle: number) {
  const modes = letters(n);
  const follows = new Map<string, number>();
  const positions = new Map<string, number>();
  for (let i = 0; i < cycle; i++) {
    const row = order(modes, i);
    assert.deepEqual([...row].sort(), modes, `iteration ${i} runs every mode once`);
    row.forEach((m, p) => positions.set(`${m}@${p}`, (positions.get(`${m}@${p}`) ?? 0) + 1));
    for (let p = 1; p < n; p++) follows.set(row[p - 1] + row[p]!, (follows.get(row[p - 1] + row[p]!) ?? 0) + 1);
  }
  return { follows, positions };
}

test('every mode runs right after every other one equally often, and at every position equally often', () => {
  for (let n = 2; n <= 9; n++) {
    const cycle = balancedCycle(n);
    const { follows, positions } = tally(balancedOrder, n, cycle);
    assert.equal(follows.size, n * (n - 1), `n=${n}: every ordered pair occurs`);
    assert.equal(new Set(follows.values()).size, 1, `n=${n}: each ordered pair equally often`);
    assert.equal(positions.size, n * n, `n=${n}: every mode at every position`);
    assert.deepEqual(new Set(positions.values()), new Set([cycle / n]), `n=${n}: positions equally often`);
  }
});

test('a plain rotation is not balanced: each mode always follows the same one (why the rows changed)', () => {
  const rotation = (modes: string[], i: number) => modes.map((_, k) => modes[(k + i) % modes.length]!);
  const { follows } = tally(rotation, 4, 4);
  assert.equal(follows.size, 4, 'only the cyclic successors ever follow');
});

test('the cycle repeats and iteration counts round up to whole cycles', () => {
  const modes = letters(5);
  assert.deepEqual(balancedOrder(modes, 3), balancedOrder(modes, 3 + balancedCycle(5)));
  assert.equal(balancedCycle(4), 4);
  assert.equal(balancedCycle(5), 10);
  assert.equal(wholeCycles(60, 4), 60);
  assert.equal(wholeCycles(40, 6), 42);
  assert.equal(wholeCycles(1, 7), 14);
  assert.deepEqual(balancedOrder([], 0), []);
});
