/**
 * Mutation testing of the promise (docs/tests.md, "Mutation testing"): `npm run mutate` scores the
 * simulator alone over the mutants of the core and of the policies that decide runs. For occasional
 * runs (an evening), never part of `npm test`.
 *
 * - The `command` test runner runs `SIM_COMMAND` once per mutant, the mutant chosen by Stryker's
 *   `__STRYKER_ACTIVE_MUTANT__` environment variable; a non-zero exit kills the mutant. The seed is
 *   fixed so that two runs over the same code judge the same histories.
 * - No checker: TypeScript 7 has no compiler API for `@stryker-mutator/typescript-checker`. Node 24
 *   strips the types of the instrumented `.ts` files and runs them as they are; a mutant that would
 *   not type-check simply runs (and usually dies at once).
 * - `MUTATE_HISTORIES` and `MUTATE_CONCURRENCY` override the history count and the number of
 *   workers; `MUTATE_FILES` (comma-separated globs) narrows what is mutated, e.g. `src/core/**`.
 */

/**
 * Histories per mutant. One simulator process here takes ~1.1 s to start and ~20 ms a history
 * (60: 2.3 s, 200: 4.6 s), so the ~2,400 mutants take some 3 h at `concurrency: 1` on a quiet
 * machine, less as more of them die early: an evening. The baseline in docs/tests.md used 60.
 */
const HISTORIES = Number(process.env.MUTATE_HISTORIES ?? 200);

/** The core, and the policies that decide whether, when and how often a slot runs or is reported. */
export const PROMISE_FILES = [
  'src/core/**/*.ts',
  'src/policy/overlap.ts',
  'src/policy/run-plan.ts',
  'src/policy/force-run.ts',
  'src/policy/rerun.ts',
  'src/policy/final-failure.ts',
  'src/policy/retry-policy.ts',
  'src/policy/slot-verdict.ts',
  'src/policy/missed-run-rules.ts',
  'src/policy/missed-run-cursor.ts',
  'src/policy/missed-runs.ts',
  'src/policy/pauses.ts',
  'src/policy/schedule-time.ts',
];

const SIM_COMMAND = `node test/sim/cli.ts --histories ${HISTORIES} --seed 1 --first-failure`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'command',
  commandRunner: { command: SIM_COMMAND },
  checkers: [],
  // Stryker rewrites this tsconfig's out-of-sandbox paths with TypeScript's compiler API, which
  // TypeScript 7 lacks; ours has none to rewrite, so it points at a file that does not exist.
  tsconfigFile: 'tsconfig.stryker-skips-this.json',
  disableTypeChecks: 'src/**/*.ts',
  mutate: process.env.MUTATE_FILES?.split(',') ?? PROMISE_FILES,
  concurrency: Number(process.env.MUTATE_CONCURRENCY ?? 1),
  // The simulator's time is virtual: a mutant that runs 3× the clean run's time is looping.
  timeoutFactor: 3,
  timeoutMS: 20_000,
  ignorePatterns: [
    'build',
    '.emulator',
    '.deploy',
    'bench/results.json',
    'reports',
  ],
  tempDirName: '.stryker-tmp',
  reporters: ['clear-text', 'progress', 'json', 'html'],
  jsonReporter: { fileName: 'reports/mutation/simulator.json' },
  htmlReporter: { fileName: 'reports/mutation/simulator.html' },
  clearTextReporter: { reportMutants: false, reportScoreTable: true },
  thresholds: { high: 90, low: 80, break: null },
};
