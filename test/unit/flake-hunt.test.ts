// The flake hunt's reading of node:test's TAP report (scripts/flake-hunt.ts failedTests).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { failedTests, withoutTestContext } from '../../scripts/flake-hunt.js';

describe('flake-hunt reads which tests failed from a real node --test TAP report', () => {
  test('the failed tests by their suite path and first error line; passing tests and failing suites are not listed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'stw-flake-'));
    try {
      const file = join(dir, 'sample.test.mjs');
      writeFileSync(
        file,
        `import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
describe('outer', () => {
  it('passes', () => {});
  describe('inner', () => {
    it('fails here', () => assert.equal(1, 2, 'one is not two'));
  });
});
it('top-level fails', () => { throw new Error('boom'); });
`,
      );
      let tap = '';
      try {
        execFileSync(process.execPath, ['--test', '--test-reporter=tap', file], {
          encoding: 'utf8',
          stdio: 'pipe',
          env: withoutTestContext(),
        });
      } catch (e) {
        tap = (e as { stdout: string }).stdout;
      }
      const f = failedTests(tap, 'sample');
      assert.deepEqual(
        f.map((x) => x.test),
        ['sample > outer > inner > fails here', 'sample > top-level fails'],
      );
      assert.match(f[0]!.message, /one is not two/);
      assert.match(f[1]!.message, /boom/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
