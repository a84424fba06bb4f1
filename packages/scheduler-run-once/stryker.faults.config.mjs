/**
 * `npm run mutate:faults`: the simulator's second pass over the survivors of `npm run mutate` only
 * (read from its JSON report, as `stryker.survivors.config.mjs` does), on fault-biased histories
 * (`--faults`: `FAULT_BIASED` in test/sim/model.ts). Still the simulator alone: the code a lost lease
 * under a beating attempt, a fenced write's lease loss or an unrecorded completion runs is reached
 * in a few of these histories, where the first pass's reach it in hundreds.
 * `npm run mutate:score -- reports/mutation/simulator.json reports/mutation/faults.json` then
 * prints the first pass's score and the score of both passes.
 *
 * `MUTATE_FAULT_HISTORIES` overrides the history count (default 40).
 */

import {
  SIMULATOR_REPORT,
  survivorRanges,
} from './scripts/mutation-survivors.ts';
import base from './stryker.config.mjs';

/** Fault-biased histories per mutant: about as long to play as the first pass's 40. */
const HISTORIES = Number(process.env.MUTATE_FAULT_HISTORIES ?? 40);

const FAULTS_COMMAND = `node test/sim/cli.ts --faults --histories ${HISTORIES} --seed 1 --first-failure`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: survivorRanges(process.env.MUTATE_FIRST_REPORT ?? SIMULATOR_REPORT),
  commandRunner: { command: FAULTS_COMMAND },
  jsonReporter: { fileName: 'reports/mutation/faults.json' },
  htmlReporter: { fileName: 'reports/mutation/faults.html' },
};
