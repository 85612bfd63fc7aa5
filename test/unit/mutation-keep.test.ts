// `npm run mutate:report -- --parts … --keep` re-runs whole scopes and keeps the committed table's
// other scopes, each with the commit that measured it (scripts/mutation-report.ts keptFrom).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { PARTS, keptFrom } from '../../scripts/mutation-report.js';
import type { MutationResults } from '../../scripts/mutation-docs.js';

const REPO = new URL('../..', import.meta.url).pathname;

describe('keeping the scopes a partial run does not measure', () => {
  test("the other scopes' runs, tallies and survivors are kept with their own commit; the re-run scope's are dropped", () => {
    const dir = mkdtempSync(join(tmpdir(), 'stw-keep-'));
    try {
      const old = {
        commit: 'aaaaaaa',
        runs: PARTS.map((p) => ({
          part: p.name,
          scope: p.scope,
          command: `run ${p.name}`,
          concurrency: 1,
          seconds: 1,
        })),
        tallies: [...new Set(PARTS.map((p) => p.scope))].map((scope) => ({ scope })),
        survivors: [
          { file: 'daemon/src/audit/decide.ts', line: 1, mutator: 'M', replacement: 'x', status: 'Survived' },
          { file: 'daemon/src/store/store.ts', line: 2, mutator: 'M', replacement: 'y', status: 'Survived' },
        ],
      } as unknown as MutationResults;
      const file = join(dir, 'kept.json');
      writeFileSync(file, JSON.stringify(old));
      const k = keptFrom({ keep: relative(REPO, file), parts: ['audit'] });
      assert.deepEqual(
        k.runs.map((r) => [r.part, r.commit]),
        PARTS.filter((p) => p.name !== 'audit').map((p) => [p.name, 'aaaaaaa']),
      );
      assert.equal(
        k.tallies.some((t) => t.scope === 'daemon/src/audit/'),
        false,
      );
      assert.deepEqual(
        k.survivors.map((s) => s.file),
        ['daemon/src/store/store.ts'],
      );
      assert.deepEqual(keptFrom({ parts: ['audit'] }), { runs: [], tallies: [], survivors: [] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
