// The deadline chain is ordered (issue 19 item 2): a --plugin-timeout that cannot fit under the
// shim's ADD bound is refused at start-up, an ADD's plugins share one answer budget below the shim's
// bound (the netconf's "timeouts.add" or its default), a DEL is answered within its own budget below
// the shim's DEL bound, and the delegate list and chains are capped.
// The start-up refusal runs the built stewardd: it is in deadline-cli.test.ts, outside Stryker's list
// (the mutation sandbox has no dist/).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  CniError,
  DEFAULT_SHIM_TIMEOUT_MS,
  MAX_SHIM_ADD_TIMEOUT_MS,
  MAX_SHIM_DEL_TIMEOUT_MS,
  SHIM_DEL_BOUND_MS,
} from '@cni-steward/shared';
import { ANSWER_MARGIN_MS, answerBudgetMs, delAnswerBudgetMs } from '../../daemon/src/engine/answer-budget.js';
import { MAX_DELEGATES, MAX_PLUGINS_PER_DELEGATE, parseStewardConf } from '../../daemon/src/engine/netconf.js';

function conf(delegates: number, plugins: number) {
  return {
    cniVersion: '1.0.0',
    name: 'steward',
    delegates: Array.from({ length: delegates }, (_, i) => ({
      name: `d${i}`,
      ifname: `net${i}`,
      plugins: Array.from({ length: plugins }, () => ({ type: 'bridge' })),
    })),
  };
}

describe('deadline chain', () => {
  it("an ADD's answer budget is the shim's ADD bound less the margin, from the netconf when it says", () => {
    assert.equal(answerBudgetMs(undefined), DEFAULT_SHIM_TIMEOUT_MS - ANSWER_MARGIN_MS);
    assert.equal(answerBudgetMs({ add: 30_000 }), 30_000 - ANSWER_MARGIN_MS);
    assert.equal(answerBudgetMs({ add: 10 }), 1000);
    assert.equal(answerBudgetMs({ add: 'x' }), DEFAULT_SHIM_TIMEOUT_MS - ANSWER_MARGIN_MS);
    // Only a positive whole number of ms is a bound; anything else is the default.
    for (const timeouts of [null, 'text', {}, { add: 0 }, { add: -5000 }, { add: 7000.5 }, { add: null }])
      assert.equal(answerBudgetMs(timeouts), DEFAULT_SHIM_TIMEOUT_MS - ANSWER_MARGIN_MS, JSON.stringify(timeouts));
    assert.equal(answerBudgetMs({ add: 7000 }), 2000);
    assert.equal(answerBudgetMs({ add: ANSWER_MARGIN_MS + 1000 }), 1000, 'never less than 1 s');
    assert.equal(answerBudgetMs({ add: MAX_SHIM_ADD_TIMEOUT_MS }), MAX_SHIM_ADD_TIMEOUT_MS - ANSWER_MARGIN_MS);
    assert.equal(answerBudgetMs({ add: MAX_SHIM_ADD_TIMEOUT_MS + 1 }), DEFAULT_SHIM_TIMEOUT_MS - ANSWER_MARGIN_MS);
  });

  it("a DEL's answer budget is the shim's DEL bound less the margin, or less a quarter of a short bound", () => {
    assert.equal(delAnswerBudgetMs(undefined), SHIM_DEL_BOUND_MS - ANSWER_MARGIN_MS);
    assert.equal(
      delAnswerBudgetMs({ add: 4000 }),
      SHIM_DEL_BOUND_MS - ANSWER_MARGIN_MS,
      'the ADD bound is not the DEL bound',
    );
    assert.equal(delAnswerBudgetMs({ del: 50_000 }), 45_000);
    assert.equal(delAnswerBudgetMs({ del: 20_000 }), 15_000, 'the whole margin from 20 s up');
    assert.equal(delAnswerBudgetMs({ del: 4000 }), 3000, 'a quarter of a bound under 20 s');
    assert.equal(delAnswerBudgetMs({ del: 1 }), 0.75);
    // Past the shim's most (50 s): the shim's default, as the shim does; 1e10 armed a timer Node fired at once.
    assert.equal(delAnswerBudgetMs({ del: MAX_SHIM_DEL_TIMEOUT_MS }), MAX_SHIM_DEL_TIMEOUT_MS - ANSWER_MARGIN_MS);
    for (const timeouts of [
      null,
      {},
      { del: 0 },
      { del: -1 },
      { del: 2.5 },
      { del: '4000' },
      { del: MAX_SHIM_DEL_TIMEOUT_MS + 1 },
      { del: 1e10 },
    ])
      assert.equal(delAnswerBudgetMs(timeouts), SHIM_DEL_BOUND_MS - ANSWER_MARGIN_MS, JSON.stringify(timeouts));
  });

  it('the delegate list and each chain are capped with code 7', () => {
    assert.equal(
      parseStewardConf(conf(MAX_DELEGATES, MAX_PLUGINS_PER_DELEGATE), 'eth0').delegates.length,
      MAX_DELEGATES,
    );
    for (const [d, p] of [
      [MAX_DELEGATES + 1, 1],
      [1, MAX_PLUGINS_PER_DELEGATE + 1],
      [1000, 1],
    ] as const) {
      assert.throws(
        () => parseStewardConf(conf(d, p), 'eth0'),
        (e: unknown) => e instanceof CniError && e.code === 7 && /must NOT have more than/.test(e.message),
      );
    }
  });
});
