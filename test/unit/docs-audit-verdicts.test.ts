// docs/audit.md's verdict table is the one the code reports: each verdict with its reason as written.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { VERDICT_REASON } from '../../daemon/src/audit/decide.js';

test('docs/audit.md lists every verdict with the reason audit -o json gives, word for word', () => {
  const doc = readFileSync(new URL('../../docs/audit.md', import.meta.url), 'utf8');
  for (const [verdict, reason] of Object.entries(VERDICT_REASON))
    assert.ok(doc.includes(`| \`${verdict}\` | ${reason} |`), `${verdict}: "${reason}" is not in the table`);
});
