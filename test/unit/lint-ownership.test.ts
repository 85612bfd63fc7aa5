// The ownership rules in eslint.config.js must fire: each case is one deliberate violation, linted
// as if it were a file at that path, and must be refused by no-restricted-imports; the same import
// where it belongs must pass.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ESLint } from 'eslint';

const REPO = new URL('../..', import.meta.url).pathname;
const eslint = new ESLint({ cwd: REPO });

async function restricted(path: string, code: string): Promise<boolean> {
  const [result] = await eslint.lintText(`${code}\nexport const used = x;\n`, { filePath: `${REPO}${path}` });
  return (result?.messages ?? []).some((m) => m.ruleId === 'no-restricted-imports');
}

const cases: Array<[string, string, string, string]> = [
  [
    'better-sqlite3 only in store/',
    "import x from 'better-sqlite3';",
    'daemon/src/engine/lint-case.ts',
    'daemon/src/store/lint-case.ts',
  ],
  [
    'child_process only in plugins/',
    "import * as x from 'node:child_process';",
    'daemon/src/lifecycle/lint-case.ts',
    'daemon/src/plugins/lint-case.ts',
  ],
  [
    'fastify only in server and routes',
    "import x from 'fastify';",
    'daemon/src/engine/lint-case.ts',
    'daemon/src/routes/lint-case.ts',
  ],
  [
    'the engine never imports routes',
    "import { x } from '../routes/cni.js';",
    'daemon/src/engine/lint-case.ts',
    'daemon/src/lint-case.ts',
  ],
  [
    'the audit never spawns (plugins/ does)',
    "import * as x from 'node:child_process';",
    'daemon/src/audit/lint-case.ts',
    'daemon/src/plugins/lint-case.ts',
  ],
  [
    'the audit never talks SQL (store/ does)',
    "import x from 'better-sqlite3';",
    'daemon/src/audit/lint-case.ts',
    'daemon/src/store/lint-case.ts',
  ],
  [
    'the audit never imports routes',
    "import { x } from '../routes/cni.js';",
    'daemon/src/audit/lint-case.ts',
    'daemon/src/lint-case.ts',
  ],
  [
    'shared imports nothing from the shim',
    "import { x } from '../../shim/vectors.js';",
    'shared/src/lint-case.ts',
    'test/unit/lint-case.ts',
  ],
  [
    'bench imports nothing from test/',
    "import { x } from '../test/helpers/env.js';",
    'bench/lint-case.ts',
    'test/lint-case.ts',
  ],
  [
    'a bench row imports nothing from test/',
    "import { x } from '../../test/helpers/env.js';",
    'bench/rows/lint-case.ts',
    'test/lint-case.ts',
  ],
  [
    'bench/lib imports no test helper',
    "import { x } from '../../test/helpers/cri/node.js';",
    'bench/lib/lint-case.ts',
    'bench/rows/cri-pod.ts',
  ],
  [
    'bench imports sources, not a build output',
    "import { x } from '../daemon/dist/store/store.js';",
    'bench/lint-case.ts',
    'test/lint-case.ts',
  ],
];

describe('ownership rules', () => {
  for (const [rule, code, violating, allowed] of cases) {
    test(`${rule}: refused in ${violating}, allowed in ${allowed}`, async () => {
      assert.equal(await restricted(violating, code), true);
      assert.equal(await restricted(allowed, code), false);
    });
  }
});
