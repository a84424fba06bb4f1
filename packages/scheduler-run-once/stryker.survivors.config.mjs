/**
 * `npm run mutate:survivors`: the unit and emulator tests (`npm run build`, `test:unit`,
 * `test:e2e`) over the survivors of `npm run mutate` only, read from its JSON report
 * (`scripts/mutation-survivors.ts`). 4 to 6 minutes a mutant here; an evening holds
 * some 50.
 * `npm run mutate:score` then prints both scores and what survived both.
 */

import {
  SIMULATOR_REPORT,
  survivorRanges,
} from './scripts/mutation-survivors.ts';
import base from './stryker.config.mjs';

/**
 * `npm test` without type-check, lint and `test/unit/size.test.ts`: they judge the instrumented
 * copies (their switches, their line count), not the mutant.
 */
const SUITE_COMMAND = [
  'npm run build',
  "node --test $(find test/unit -name '*.test.ts' ! -name size.test.ts)",
  'npm run test:e2e',
].join(' && ');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: survivorRanges(process.env.MUTATE_FIRST_REPORT ?? SIMULATOR_REPORT),
  commandRunner: { command: SUITE_COMMAND },
  // The suite polls real processes and an emulator: a loaded machine slows it, a loop stops it.
  timeoutFactor: 2,
  timeoutMS: 120_000,
  dryRunTimeoutMinutes: 20,
  jsonReporter: { fileName: 'reports/mutation/suite.json' },
  htmlReporter: { fileName: 'reports/mutation/suite.html' },
};
