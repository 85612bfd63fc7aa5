// The deadline chain is ordered (issue 19 item 2): a --plugin-timeout that cannot fit under the
// shim's ADD bound is refused at start-up, an ADD's plugins share one answer budget below the shim's
// bound (the netconf's "timeouts.add" or its default), and the delegate list and chains are capped.
// The start-up refusal runs the built stewardd: it is in deadline-cli.test.ts, outside Stryker's list
// (the mutation sandbox has no dist/).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CniError, DEFAULT_SHIM_TIMEOUT_MS } from '@cni-steward/shared';
import { ANSWER_MARGIN_MS, answerBudgetMs } from '../../daemon/src/engine/add.js';
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
