/** Which forced run a Force run without schedule time is (docs/how-it-works.md, by that name). */
import type { BatchRead } from '../core/run-documents.ts';
import { computeRunId, type Scope } from '../core/run-key.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { longestExecutionMs } from './retry-policy.ts';
import { nextSlots, previousSlot, toUtcRfc3339 } from './schedule.ts';

/** How many of the job's slots one batched read of a Force run without schedule time holds. */
export const FORCE_RUN_BATCH_SLOTS = 100;

/**
 * The schedule time (RFC 3339 UTC) of `job`'s Force run without one, at Firestore's `now`: the
 * latest of its slots within the execution window whose forced run was last claimed within that
 * window (its retry), else the next slot, if any.
 *
 * The last claim, not the first: a click's first delivery may take over the failed forced run an
 * earlier click of the same slot left (both are that slot's forced run), and the record keeps the
 * earlier click's first claim. Judged by that, the click's own retry after the slot looked like a
 * new click and ran the job again as the next slot's forced run (the simulator, `npm run simulate
 * -- --seed=625370594 --path 225`: a click 104 s after a failed one, its retry 17 s later).
 *
 * The execution window is the job's longest execution ({@link longestExecutionMs}), not the retry
 * window: when attempts fail fast, Scheduler may send a retry up to `maxRetryDuration` after the
 * first attempt, later than the retry window, which assumes every attempt ran to its deadline
 * (fault-biased seed 5, history 23: a retry 51 s after its forced run, beyond a 46 s retry
 * window, ran the job again as the next slot).
 *
 * The slots are read newest first, in batched reads of {@link FORCE_RUN_BATCH_SLOTS}, stopping at
 * the batch that holds the retried run: a retry costs one read per slot back to its forced run; a
 * first click, one per slot of the window (a per-minute job with the default settings: 63, one
 * batch). Deliveries with a schedule time never come here. Throws what `readMany` throws.
 */
export async function forceRunScheduleTime(
  job: DeclaredJob,
  scope: Scope,
  now: Date,
  readMany: (runIds: readonly string[]) => Promise<BatchRead>,
): Promise<string | undefined> {
  const windowStart = now.getTime() - longestExecutionMs(job);
  const idOf = (t: string) =>
    computeRunId({ jobName: job.id, scheduleTime: t, scope }, ['forced']);
  const inWindow = (at: Date | undefined): at is Date =>
    at !== undefined && at.getTime() > windowStart;
  // Newest first, back to the execution window's start: a retry is most often of a recent slot.
  let slot = previousSlot(job, new Date(now.getTime() + 1));
  while (inWindow(slot)) {
    const batch: string[] = [];
    while (inWindow(slot) && batch.length < FORCE_RUN_BATCH_SLOTS) {
      batch.push(toUtcRfc3339(slot));
      slot = previousSlot(job, slot);
    }
    const { records } = await readMany(batch.map(idOf));
    for (const scheduleTime of batch) {
      const record = records.get(idOf(scheduleTime));
      if (record === undefined) {
        continue;
      }
      const claimed =
        record.status === 'unreadable'
          ? undefined
          : (record.claimedAt ?? record.firstClaimedAt);
      if (claimed === undefined || claimed.getTime() > windowStart) {
        return scheduleTime;
      }
    }
  }
  const [next] = nextSlots(job, now, 1);
  return next === undefined ? undefined : toUtcRfc3339(next);
}
