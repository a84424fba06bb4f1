/**
 * The overlap policy's question: is an earlier slot of this job still running? One batched read of
 * the previous slot's record; if that slot was itself skipped, one more read of the slot that
 * blocked it (a skipped record names it in `blocked_by`), so a long run blocks every slot it
 * overlaps, not just the next. Judged on Firestore's clock (the read's time), like every lease.
 */

import type { Scope } from '../core/run-key.ts';
import { isLeaseLive, RunStatus, type StoredRecord } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, slotRunId } from './run-history.ts';
import { previousSlot } from './schedule.ts';

/**
 * The run id of an earlier slot of `job` that still holds a live lease at `slot`'s delivery, or
 * `undefined` when none does.
 *
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const running = await runningEarlierSlot(history, job, slot, scope);
 */
export async function runningEarlierSlot(
  history: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slot: Date,
  scope: Scope,
): Promise<string | undefined> {
  const previous = previousSlot(job, slot);
  if (previous === undefined) return undefined;
  let runId = slotRunId(job.id, previous, scope);
  for (let hop = 0; hop < 2; hop++) {
    const { records, readTime } = await history.getMany([runId]);
    const record: StoredRecord | undefined = records.get(runId);
    if (record === undefined) return undefined;
    if (isLeaseLive(record, readTime)) return runId;
    if (record.status !== RunStatus.Skipped || record.blockedBy === undefined) return undefined;
    runId = record.blockedBy;
  }
  return undefined;
}
