/**
 * A job's history at given slots, for `npm run runs`, the bench and the tests: each slot's row
 * from batched reads of its run id (`src/policy/run-history.ts`). The function never loads it.
 */
import type { BatchRead } from '../src/core/run-documents.ts';
import type { Scope } from '../src/core/run-key.ts';
import type { DeclaredJob } from '../src/policy/job-declaration.ts';
import {
  type RunHistory,
  readSlotRecords,
  type SlotRow,
  slotRow,
} from '../src/policy/run-history.ts';

/** A batched history read: the rows, and what a fenced report after the read needs. */
export interface History {
  readonly rows: readonly SlotRow[];
  /** Update times of the records read, by run id: fencing tokens for a report. */
  readonly updateTimes: BatchRead['updateTimes'];
  /** Firestore's time of the read: what the rows were judged at. */
  readonly readTime: Date;
}

/**
 * Reads the history of `job` at `slots`: batched reads of their run ids (`readSlotRecords`: a
 * slot whose delivery was misjudged a forced run shows that run as the slot's, `kind: slot`).
 *
 * @param now - judge windows at this time instead of the read's (for "as of" views and tests).
 * @param toleranceMs - the job's forced-run tolerance, ms (`forcedRunToleranceMs`), or a function
 *   giving it (called only when a forced run's record is found); by default 0: only a forced run
 *   first claimed at or after its slot counts as the slot's.
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const { rows } = await readHistory(history, job, slotsBetween(job, from, to).slots, scope);
 */
export async function readHistory(
  store: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slots: readonly Date[],
  scope: Scope,
  now?: Date,
  toleranceMs: number | (() => number) = 0,
): Promise<History> {
  const { runIds, records, updateTimes, readTime } = await readSlotRecords(
    store,
    job,
    slots,
    scope,
    toleranceMs,
  );
  const at = now ?? readTime;
  const rows = slots.map((slot, i) => {
    const runId = runIds[i] as string;
    return slotRow(job, slot, runId, records.get(runId), at);
  });
  return { rows, updateTimes, readTime };
}
