// Mutation testing (`npm run mutate`, docs/mutation.md): StrykerJS mutates the engine, the store, the
// CNI contract code, the audit (what it releases on a live node) and the admission of CNI requests, and counts a mutant killed only when a root-free unit test (test/unit) fails on it.
// - Runner: the tap runner starts one `node --import tsx` per test file; node:test prints TAP with
//   --test-reporter=tap. A "test" for Stryker is therefore one file, and coverage is recorded per
//   file (coverageAnalysis perTest), so a mutant only re-runs the files that reach it.
// - Only test/unit: the integration and e2e suites need root, real netns and runtimes. And only the
//   unit files that exercise the scope, listed by name (add new ones here): the others reach no
//   mutated code, or only load store.ts on the way to lifecycle/ (lifecycle-crash alone takes ~27 s a
//   run), and one full run already takes the better part of an hour on a busy 2-core machine.
// - Logger calls are not mutated (stryker-ignore-logging.mjs): the tests run with a silent logger.
// - concurrency 2: the machine has 2 cores shared with other work; incremental: re-runs test only the
//   mutants whose code or covering tests changed (the state file sits under the ignored reports/).
// - No TypeScript checker: tsx strips types, so a mutant tsc would refuse still runs and is judged by
//   the tests like any other; the checker would double the run time for a handful of mutants.
// - dist/ (the built shim) is not copied to the sandbox: no unit test executes it.
// - The daemon imports the shared package as @cni-steward/shared, i.e. shared/dist (built, not
//   mutated): shared/src/cni mutants are killed by the tests that import shared/src directly.

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'tap',
  plugins: ['@stryker-mutator/tap-runner', './stryker-ignore-logging.mjs'],
  ignorers: ['LogCalls'],
  tap: {
    testFiles: [
      'test/unit/admission-release.test.ts',
      'test/unit/audit-auditor.test.ts',
      'test/unit/audit-cache.test.ts',
      'test/unit/audit-decide.test.ts',
      'test/unit/audit-leases.test.ts',
      'test/unit/audit-masquerade.test.ts',
      'test/unit/audit-pass.test.ts',
      'test/unit/audit-portmap.test.ts',
      'test/unit/audit-proof.test.ts',
      'test/unit/audit-release.test.ts',
      'test/unit/audit-run.test.ts',
      'test/unit/audit-runtime.test.ts',
      'test/unit/backoff.test.ts',
      'test/unit/cni-contract.test.ts',
      'test/unit/convert.test.ts',
      'test/unit/convert-proto.test.ts',
      'test/unit/deadline-chain.test.ts',
      'test/unit/del-budget.test.ts',
      'test/unit/del-final-commit.test.ts',
      'test/unit/engine.test.ts',
      'test/unit/engine-commands.test.ts',
      'test/unit/engine-teardown.test.ts',
      'test/unit/engine-trace.test.ts',
      'test/unit/engine-tombstones.test.ts',
      'test/unit/engine-journal-order.test.ts',
      'test/unit/engine-result-version.test.ts',
      'test/unit/env.test.ts',
      'test/unit/gate.test.ts',
      'test/unit/interface-holders.test.ts',
      'test/unit/keyed-queue.test.ts',
      'test/unit/limiter.test.ts',
      'test/unit/masquerade.test.ts',
      'test/unit/netconf.test.ts',
      'test/unit/netns-bind-mount.test.ts',
      'test/unit/netns-kind-cache.test.ts',
      'test/unit/owner.test.ts',
      'test/unit/owner-describe.test.ts',
      'test/unit/plugin-processes.test.ts',
      'test/unit/pod.test.ts',
      'test/unit/recovery.test.ts',
      'test/unit/recovery-shutdown.test.ts',
      'test/unit/retry-clock.test.ts',
      'test/unit/scheduler.test.ts',
      'test/unit/spool-batches.test.ts',
      'test/unit/spool-log.test.ts',
      'test/unit/spool-scheduler.test.ts',
      'test/unit/status-single-flight.test.ts',
      'test/unit/scheduler-prune.test.ts',
      'test/unit/store.test.ts',
      'test/unit/store-open-error.test.ts',
      'test/unit/store-queries.test.ts',
      'test/unit/teardown-permanent.test.ts',
      'test/unit/validate.test.ts',
      // Slow ones last (waits of 0.2 to 6 s; 2 to 7 s a file): a mutant runs its covering files in this order and
      // stops at the first that fails, so most admission mutants are killed before these run.
      'test/unit/admission-edges.test.ts',
      'test/unit/admission-pace.test.ts',
      'test/unit/admission-counters.test.ts',
      'test/unit/admission-body-deadline.test.ts',
    ],
    nodeArgs: ['--import', 'tsx', '--test-reporter=tap', '-r', '{{hookFile}}', '{{testFile}}'],
    forceBail: true,
  },
  mutate: [
    'daemon/src/engine/**/*.ts',
    'daemon/src/store/**/*.ts',
    'shared/src/cni/**/*.ts',
    'daemon/src/audit/**/*.ts',
    'daemon/src/routes/admission.ts',
  ],
  coverageAnalysis: 'perTest',
  concurrency: 2,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  ignorePatterns: ['/dist', '/bench-results', '/.steward', '/.stryker-tmp-*'],
  tempDirName: '.stryker-tmp',
  reporters: ['clear-text', 'progress-append-only', 'json', 'html'],
  // STRYKER_REPORT: another JSON report path, for two runs side by side (with --tempDirName).
  jsonReporter: { fileName: process.env.STRYKER_REPORT ?? 'reports/mutation/mutation.json' },
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  clearTextReporter: { allowColor: false, logTests: false, reportTests: false, reportMutants: false },
};
