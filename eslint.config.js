// Lint rules, and the ownership rules of the tree as import restrictions (docs/architecture.md):
// better-sqlite3 only in daemon/src/store/, child_process only in daemon/src/plugins/, fastify only in
// daemon/src/server.ts and routes/, the engine never imports routes/ or fastify, nothing TypeScript
// imports from shim/ (the Go shim's source), shared/ nothing from the daemon, and bench/ nothing from test/ or a build output
// (bench/lib/ without exception; the CRI rows in bench/rows/ drive containerd through test/helpers/cri/).
// `npm run lint` runs it.

import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const SQLITE = { name: 'better-sqlite3', message: 'only daemon/src/store/ talks to SQLite' };
const CHILD = ['node:child_process', 'child_process'].map((name) => ({
  name,
  message: 'only daemon/src/plugins/ spawns processes',
}));
const FASTIFY = { name: 'fastify', message: 'only daemon/src/server.ts and daemon/src/routes/ know HTTP' };
const DAEMON = {
  group: ['**/daemon/**', '@cni-steward/daemon', '@cni-steward/daemon/**'],
  message: 'this package must not depend on the daemon',
};
const SHIM = {
  group: ['**/shim/**', '@cni-steward/shim', '@cni-steward/shim/**'],
  message: 'this package must not depend on the shim',
};
const TESTS = {
  group: ['**/test/**'],
  message: 'bench keeps its own helpers (bench/lib/): a benchmark must not change when a test helper does',
};
const BUILT = { group: ['**/dist/**'], message: 'import the sources (run by tsx), not a build output' };
const LIB_TESTS = {
  group: ['**/test/**'],
  message: "bench/lib/ is what every row shares: it imports no test helper (the CRI rows' exception is theirs alone)",
};
/** The benchmarks that drive containerd's CRI through test/helpers/cri/ (the one exception to TESTS). */
const CRI_BENCHES = ['bench/rows/cri-pod.ts', 'bench/rows/cri-burst.ts', 'bench/rows/cri-churn.ts'];
const ROUTES = {
  group: ['**/routes/**', '**/server.js'],
  message: 'the engine knows nothing of HTTP: routes call the engine, never the reverse',
};

/** One no-restricted-imports entry per area: ESLint replaces (never merges) a rule's options. */
const restrict = (files, { paths = [], patterns = [] }, ignores = []) => ({
  files,
  ignores,
  rules: { 'no-restricted-imports': ['error', { paths, patterns }] },
});

const DAEMON_AREAS = [
  'daemon/src/store/**',
  'daemon/src/plugins/**',
  'daemon/src/routes/**',
  'daemon/src/server.ts',
  'daemon/src/engine/**',
  'daemon/src/audit/**',
];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'bench-results/**', '.steward/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    // Tests and benchmarks read JSON answers whose shape they assert: `any` is the honest type there.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs', 'test/fixtures/bin/*'],
    languageOptions: { globals: globals.node },
  },
  restrict(['daemon/src/**/*.ts'], { paths: [SQLITE, ...CHILD, FASTIFY], patterns: [SHIM] }, DAEMON_AREAS),
  restrict(['daemon/src/store/**'], { paths: [...CHILD, FASTIFY], patterns: [SHIM] }),
  restrict(['daemon/src/plugins/**'], { paths: [SQLITE, FASTIFY], patterns: [SHIM] }),
  restrict(['daemon/src/routes/**', 'daemon/src/server.ts'], { paths: [SQLITE, ...CHILD], patterns: [SHIM] }),
  restrict(['daemon/src/engine/**'], { paths: [SQLITE, ...CHILD, FASTIFY], patterns: [SHIM, ROUTES] }),
  // The audit reads the journal through store/ and runs DELs through the engine and plugins/.
  restrict(['daemon/src/audit/**'], { paths: [SQLITE, ...CHILD, FASTIFY], patterns: [SHIM, ROUTES] }),
  restrict(['shared/src/**'], { paths: [SQLITE, ...CHILD, FASTIFY], patterns: [DAEMON, SHIM] }),
  restrict(['bench/**/*.ts'], { patterns: [TESTS, BUILT] }, CRI_BENCHES),
  // The one exception: the CRI rows drive containerd with the project's kubelet-like CRI driver
  // (test/helpers/cri/), the same component the e2e suite proves correct, rather than a second copy.
  restrict(CRI_BENCHES, { patterns: [BUILT] }),
  // bench/lib/ stays the rows' own: a shared helper that imported a test helper would carry it into every row.
  restrict(['bench/lib/**/*.ts'], { patterns: [LIB_TESTS, BUILT] }),
);
