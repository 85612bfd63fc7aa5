// scripts/mutation-summary.ts: the per-directory totals `npm run mutate` prints from Stryker's JSON report.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  coveringTestFiles,
  formatTable,
  originalOf,
  summarize,
  survivors,
  type Report,
} from '../../scripts/mutation-summary.js';

function mutant(status: string, line = 1, mutatorName = 'BooleanLiteral', replacement = 'false') {
  return { id: `${status}-${line}`, mutatorName, replacement, status, location: { start: { line, column: 1 } } };
}

const report: Report = {
  files: {
    'daemon/src/engine/add.ts': {
      mutants: [mutant('Killed'), mutant('Killed'), mutant('Timeout'), mutant('Survived', 7), mutant('CompileError')],
    },
    'daemon/src/engine/del.ts': { mutants: [mutant('NoCoverage', 3, 'StringLiteral', '""'), mutant('Ignored')] },
    'daemon/src/store/store.ts': { mutants: [mutant('Killed'), mutant('RuntimeError')] },
    'shim/src/x.ts': { mutants: [mutant('Survived')] },
  },
};

describe('mutation summary', () => {
  test('totals each directory; the score is (killed + timeout) over valid mutants, errors and ignored left out', () => {
    const [engine, store, cni, audit, admission, other] = summarize(report);
    assert.deepEqual(engine, {
      scope: 'daemon/src/engine/',
      killed: 2,
      survived: 1,
      noCoverage: 1,
      timeout: 1,
      errors: 1,
      score: 60,
    });
    assert.equal(store!.score, 100);
    assert.equal(store!.errors, 1);
    assert.deepEqual(cni, {
      scope: 'shared/src/cni/',
      killed: 0,
      survived: 0,
      noCoverage: 0,
      timeout: 0,
      errors: 0,
      score: null,
    });
    assert.deepEqual(
      [audit!.scope, audit!.score, admission!.scope],
      ['daemon/src/audit/', null, 'daemon/src/routes/admission.ts'],
    );
    assert.equal(other!.scope, 'other');
    assert.equal(other!.score, 0);
  });

  test('lists survivors and uncovered mutants by file and line', () => {
    assert.deepEqual(
      survivors(report).map((s) => `${s.file}:${s.line} ${s.status} ${s.mutator} ${s.replacement}`),
      [
        'daemon/src/engine/add.ts:7 Survived BooleanLiteral false',
        'daemon/src/engine/del.ts:3 NoCoverage StringLiteral ""',
        'shim/src/x.ts:1 Survived BooleanLiteral false',
      ],
    );
  });

  test('prints one aligned row per directory with the score to two decimals', () => {
    const lines = formatTable(summarize(report)).split('\n');
    assert.equal(lines.length, 7);
    assert.match(lines[1]!, /^daemon\/src\/engine\/\s+2\s+1\s+1\s+1\s+1\s+60\.00%$/);
    assert.equal(new Set(lines.map((l) => l.length)).size, 1, 'columns aligned');
    assert.match(lines[3]!, /^shared\/src\/cni\/\s+0\s+0\s+0\s+0\s+0\s+n\/a$/, 'no mutants: no score');
  });

  test('a survivor records its column and the original text of its range (from the report’s source)', () => {
    const source = 'const a = 1;\nif (x > 0) {\n  go();\n}\n';
    const r: Report = {
      files: {
        'a.ts': {
          source,
          mutants: [
            {
              id: '1',
              mutatorName: 'ConditionalExpression',
              replacement: 'true',
              status: 'Survived',
              location: { start: { line: 2, column: 5 }, end: { line: 2, column: 10 } },
            },
          ],
        },
      },
    };
    const [s] = survivors(r);
    assert.equal(s?.column, 5);
    assert.deepEqual(s?.original, originalOf('x > 0'));
    assert.equal(s?.original?.text, 'x > 0');
  });

  test("the test files covering or killing a report's mutants, by the tap runner's test ids", () => {
    const r: Report = {
      testFiles: {
        'test/unit/a.test.ts': { tests: [{ id: 'test/unit/a.test.ts', name: 'test/unit/a.test.ts' }] },
        '': { tests: [{ id: '7', name: '/sandbox/x/test/unit/b.test.ts' }] },
      },
      files: {
        'x.ts': {
          mutants: [
            { ...mutant('Killed'), coveredBy: ['test/unit/a.test.ts'], killedBy: ['7'] },
            { ...mutant('NoCoverage'), coveredBy: [] },
          ],
        },
      },
    };
    assert.deepEqual(coveringTestFiles(r), ['test/unit/a.test.ts', 'test/unit/b.test.ts']);
  });
});
