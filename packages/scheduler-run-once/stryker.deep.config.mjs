/**
 * `npm run mutate:deep`: the simulator's third pass, over the mutants that survived both earlier
 * passes only (read from the fault-biased pass's JSON report, `reports/mutation/faults.json`): the
 * histories of every fixed finding, then many more histories of both profiles on another seed:
 * what survives 40 histories for want of a rare history (a report refused or unconfirmed, a raced
 * cursor, a relog) meets one here. `MUTATE_DEEP_HISTORIES=0` plays the fixed findings' alone. The
 * survivors are few by now, so each may take the longer run. Still the simulator alone.
 * `npm run mutate:score -- reports/mutation/simulator.json reports/mutation/faults.json
 * reports/mutation/deep.json` then prints the score after each pass.
 *
 * `MUTATE_DEEP_HISTORIES` sets the histories of each profile (default 200).
 */

import { survivorRanges } from './scripts/mutation-survivors.ts';
import base from './stryker.config.mjs';

/** Histories of each profile per mutant: five times the earlier passes' 40. */
const HISTORIES = Number(process.env.MUTATE_DEEP_HISTORIES ?? 200);

/**
 * Every history a fixed finding was found in first (`--regressions`: a mutant that brings a fixed
 * bug back dies in seconds), then seed 2: other histories than the earlier passes' seed 1.
 */
const DEEP_COMMAND = [
  `node test/sim/cli.ts --regressions --histories ${HISTORIES} --seed 2 --first-failure`,
  `node test/sim/cli.ts --faults --histories ${HISTORIES} --seed 2 --first-failure`,
].join(' && ');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: survivorRanges(
    process.env.MUTATE_FIRST_REPORT ?? 'reports/mutation/faults.json',
  ),
  commandRunner: { command: DEEP_COMMAND },
  // Longer runs than the first pass's: a mutant that runs 3× the clean run's time is looping.
  timeoutMS: 60_000,
  jsonReporter: { fileName: 'reports/mutation/deep.json' },
  htmlReporter: { fileName: 'reports/mutation/deep.html' },
};
