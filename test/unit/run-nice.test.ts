// `stewardd run --nice N|off` (daemon/src/priority.ts): the value parsed, its bounds, and what the
// spawner reads to go back to the priority stewardd was started with. The threads themselves are
// read in test/integration/priority.test.ts (root).

import assert from 'node:assert/strict';
import { getPriority } from 'node:os';
import { test } from 'node:test';

import { parseRunConfig } from '../../daemon/src/config.js';
import { niceValue } from '../../daemon/src/flags.js';
import { BASE_NICE_ENV, DEFAULT_NICE, restoreBasePriority } from '../../daemon/src/priority.js';

test('--nice defaults to -10, takes -20..19, and off leaves the priority as started', () => {
  assert.equal(DEFAULT_NICE, -10);
  assert.equal(parseRunConfig([]).nice, -10);
  assert.equal(parseRunConfig(['--nice', '5']).nice, 5);
  assert.equal(parseRunConfig(['--nice=-20']).nice, -20);
  assert.equal(parseRunConfig(['--nice', '19']).nice, 19);
  assert.equal(parseRunConfig(['--nice', 'off']).nice, undefined);
});

test('a nice value out of range, fractional, empty or a word is reported, naming the flag', () => {
  for (const bad of ['-21', '20', '1.5', '', ' ', ' 5', 'high', '0x5', '1e1', '+5']) {
    const problems: string[] = [];
    niceValue(bad, problems);
    assert.deepEqual(problems, [`--nice must be an integer from -20 to 19, or off, got "${bad}"`], bad);
  }
  const none: string[] = [];
  assert.equal(niceValue('-3', none), -3);
  assert.deepEqual(none, []);
});

test('a spawner without a recorded base priority (or a bad one) changes nothing', () => {
  for (const raw of [undefined, '', 'x', '1.5', '-21', '20'])
    assert.equal(restoreBasePriority(raw === undefined ? {} : { [BASE_NICE_ENV]: raw }), undefined, String(raw));
});

test('a recorded base priority is set on every thread and said so; the same value as now needs no privilege', () => {
  const now = getPriority();
  assert.deepEqual(restoreBasePriority({ [BASE_NICE_ENV]: String(now) }), { base: now });
  assert.equal(getPriority(), now);
});

test('every integer flag takes decimal digits only: "0x10", "1e3", " 8" and "" are refused', () => {
  for (const bad of ['0x10', '1e3', ' 8', '8 ', '', '+8', '9007199254740993']) {
    assert.throws(() => parseRunConfig(['--max-parallel', bad]), /--max-parallel must be an integer >= 1/, bad);
  }
  assert.equal(parseRunConfig(['--max-parallel', '16']).maxParallel, 16);
});
