/**
 * Plays generated histories in a worker thread for `simulation.test.ts` and posts back what
 * fast-check found ({@link HistoriesResult}).
 *
 * Why a thread: Node's test runner keeps an async hook on every promise of its own thread, to tie
 * an uncaught error to its test, and the simulator makes millions of promises. The same 120 small
 * histories take 14.7 s of CPU inside a test and 9.4 s outside one (docs/tests.md, "Where the
 * suite's time goes"); a worker thread has hooks of its own, and the runner installs none there.
 */
import { parentPort, workerData } from 'node:worker_threads';
import fc from 'fast-check';
import { violations } from './invariants.ts';
import { historyArbitrary } from './model.ts';
import { simulate } from './simulator.ts';

/** What the test asks the worker to play: small histories of `profile`, `numRuns` from `seed`. */
export interface HistoriesRequest {
  readonly profile: 'default' | 'faults';
  readonly numRuns: number;
  readonly seed: number;
}

/** What the worker posts back: every invariant held, or fast-check's report of the failure. */
export type HistoriesResult =
  | { readonly held: true }
  | { readonly held: false; readonly report: string };

/** Plays `request`'s histories; the report names the seed and path that replay a failure. */
async function play(request: HistoriesRequest): Promise<HistoriesResult> {
  const { profile, numRuns, seed } = request;
  try {
    await fc.assert(
      fc.asyncProperty(
        historyArbitrary({ size: 'small', profile }),
        async (history) => {
          const found = violations(await simulate(history));
          if (found.length > 0) {
            throw new Error(found.join('\n'));
          }
        },
      ),
      { numRuns, seed },
    );
    return { held: true };
  } catch (err) {
    return { held: false, report: String((err as Error).message ?? err) };
  }
}

parentPort?.postMessage(await play(workerData as HistoriesRequest));
