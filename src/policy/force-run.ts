/** Which forced run a Force run without schedule time is (docs/how-it-works.md, by that name). */
import type { BatchRead } from '../core/run-documents.ts';
import { computeRunId, type Scope } from '../core/run-key.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { retryWindowMs } from './retry-policy.ts';
import { nextSlots, previousSlot, toUtcRfc3339 } from './schedule.ts';

/** How many of the job's latest slots a Force run without schedule time reads (one batch). */
export const FORCE_RUN_LOOK_BACK_SLOTS = 100;

/**
 * The schedule time (RFC 3339 UTC) of `job`'s Force run without one, at Firestore's `now`: the
 * latest of its last {@link FORCE_RUN_LOOK_BACK_SLOTS} slots whose forced run was first claimed
 * within the retry window (its retry), else the next slot, if any. Throws what `readMany` throws.
 */
export async function untimedForceRun(
  job: DeclaredJob,
  scope: Scope,
  now: Date,
  readMany: (runIds: readonly string[]) => Promise<BatchRead>,
): Promise<string | undefined> {
  const windowStart = now.getTime() - retryWindowMs(job);
  const recent: string[] = [];
  // Newest first, back to the retry window's start.
  let slot = previousSlot(job, new Date(now.getTime() + 1));
  while (slot !== undefined && slot.getTime() > windowStart) {
    recent.push(toUtcRfc3339(slot));
    slot = recent.length < FORCE_RUN_LOOK_BACK_SLOTS ? previousSlot(job, slot) : undefined;
  }
  const idOf = (t: string) => computeRunId({ jobName: job.id, scheduleTime: t, scope }, ['forced']);
  if (recent.length > 0) {
    const { records } = await readMany(recent.map(idOf));
    for (const scheduleTime of recent) {
      const record = records.get(idOf(scheduleTime));
      if (record === undefined) continue;
      const claimed = record.status === 'unreadable' ? undefined : record.firstClaimedAt;
      if (claimed === undefined || claimed.getTime() > windowStart) return scheduleTime;
    }
  }
  const [next] = nextSlots(job, now, 1);
  return next === undefined ? undefined : toUtcRfc3339(next);
}
