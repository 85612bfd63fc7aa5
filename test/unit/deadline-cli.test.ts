// The deadline chain's start-up refusal (issue 19 item 2): a --plugin-timeout that cannot fit under
// the shim's ADD bound is refused by the built stewardd, naming both. Kept apart from
// deadline-chain.test.ts because it runs bin/stewardd (dist/), which the mutation sandbox lacks.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { DEFAULT_SHIM_TIMEOUT_MS } from '@cni-steward/shared';
import { ANSWER_MARGIN_MS } from '../../daemon/src/engine/answer-budget.js';
import { REPO } from '../helpers/env.js';

describe('deadline chain at start-up', () => {
  it('stewardd refuses a --plugin-timeout above the shim bound less the answer margin, and names both', () => {
    const limit = (DEFAULT_SHIM_TIMEOUT_MS - ANSWER_MARGIN_MS) / 1000;
    const res = spawnSync(
      process.execPath,
      [join(REPO, 'bin/stewardd'), 'run', '--plugin-timeout', String(limit + 1)],
      {
        encoding: 'utf8',
        timeout: 20_000,
      },
    );
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, new RegExp(`does not fit under the shim's ADD bound: at most ${limit} s`));
  });
});
