/**
 * `npm run simulate -- [--histories N] [--seed S] [--path P] [--small] [--strict] [--broken-fencing]`: plays N
 * generated histories (default 1000) in the deterministic simulator and checks the invariants
 * after each; a failure shrinks to a minimal history and prints the seed and path that replay it
 * (`--seed S --path P`). `--strict` turns off every known gap (`KNOWN_GAPS` in model.ts);
 * `--gap NAME` turns off one. `--broken-fencing` plays a product whose updates drop their
 * `lastUpdateTime` precondition. `--first-failure` stops at the first failing history without
 * shrinking it (mutation testing needs only the exit code). `--faults` draws fault-biased histories
 * (`FAULT_BIASED` in model.ts): the mutation runs' second pass. `--regressions` first plays every
 * history a fixed finding was found in (`FIXED` in regressions.ts, strict invariants) and stops at
 * the first that breaks one (`--histories 0`: those alone). `--small` draws the smaller histories
 * `npm test` plays (test/sim/simulation.test.ts): its failures replay with it.
 */
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { violations } from './invariants.ts';
import {
  type GapName,
  type Gaps,
  historyArbitrary,
  KNOWN_GAPS,
  NO_GAPS,
} from './model.ts';
import { FIXED } from './regressions.ts';
import { simulate } from './simulator.ts';

const { values } = parseArgs({
  options: {
    histories: { type: 'string', default: '1000' },
    seed: { type: 'string' },
    path: { type: 'string' },
    strict: { type: 'boolean', default: false },
    gap: { type: 'string', multiple: true, default: [] },
    'broken-fencing': { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
    small: { type: 'boolean', default: false },
    faults: { type: 'boolean', default: false },
    'first-failure': { type: 'boolean', default: false },
    regressions: { type: 'boolean', default: false },
  },
});
let gaps: Gaps =
  values.strict || process.env.SIM_STRICT === '1' ? NO_GAPS : KNOWN_GAPS;
for (const name of values.gap as string[]) {
  if (!(name in KNOWN_GAPS)) {
    throw new Error(
      `--gap ${name}: not one of ${Object.keys(KNOWN_GAPS).join(', ')}`,
    );
  }
  gaps = { ...gaps, [name as GapName]: false };
}
const started = performance.now();
if (values.regressions && !(await regressionsHold())) {
  process.exit(1);
}
const details = await fc.check(
  fc.asyncProperty(
    historyArbitrary({
      size: values.small ? 'small' : 'large',
      profile: values.faults ? 'faults' : 'default',
    }),
    async (history) => {
      const found = violations(
        await simulate(history, {
          gaps,
          brokenFencing: values['broken-fencing'],
        }),
      );
      if (found.length > 0) {
        throw new Error(found.slice(0, 8).join('\n'));
      }
    },
  ),
  {
    numRuns: Number(values.histories),
    ...(values.seed === undefined ? {} : { seed: Number(values.seed) }),
    ...(values.path === undefined ? {} : { path: values.path }),
    verbose: values.verbose ? 1 : 0,
    endOnFailure: values['first-failure'],
  },
);
const seconds = ((performance.now() - started) / 1000).toFixed(1);
if (details.failed) {
  console.error(fc.defaultReportMessage(details));
  const error = details.errorInstance;
  console.error(
    `\nviolations:\n${error instanceof Error ? error.message : String(error)}`,
  );
  console.error(
    `\nreplay: npm run simulate -- --seed=${details.seed} --path ${details.counterexamplePath}${values.small ? ' --small' : ''}${values.faults ? ' --faults' : ''}${values.strict ? ' --strict' : ''}${values['broken-fencing'] ? ' --broken-fencing' : ''}`,
  );
  console.error(`(${details.numRuns} histories in ${seconds} s)`);
  process.exitCode = 1;
} else {
  console.log(
    `simulate: ${details.numRuns} histories, every invariant held (${seconds} s, seed ${details.seed})`,
  );
}
// A history may leave a real timer behind (a Firestore call's deadline that its virtual clock never
// reached); the verdict is in, so the process ends now instead of waiting seconds for it: the
// mutation run (stryker.config.mjs) pays that wait once a mutant.
process.exit();

/**
 * `--regressions`: plays every history a fixed finding was found in (`FIXED`, regressions.ts) with
 * the strict invariants, as `npm test` does; false, after printing the first that breaks one.
 */
async function regressionsHold(): Promise<boolean> {
  for (const { finding, history } of FIXED) {
    const found = violations(await simulate(history, { gaps: NO_GAPS }));
    if (found.length > 0) {
      console.error(
        `regression: the history where ${finding}\nviolations:\n${found.slice(0, 8).join('\n')}`,
      );
      return false;
    }
  }
  console.log(`simulate: ${FIXED.length} regression histories held`);
  return true;
}
