/**
 * A run's final failure, reported by the failing attempt itself: when the job's retry policy
 * proves no Scheduler retry can follow, the release writes `reported_at` and logs the same ERROR
 * line a missed-run check would, so no check has to judge the slot later.
 */
import { randomUUID } from 'node:crypto';
import { describeThrown } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { Attempt } from '../core/run-once.ts';
import { MAX_ERROR_LENGTH } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES } from './missed-runs.ts';
import { noRetryFollows } from './retry-policy.ts';

/** How long before it reached the function an attempt's request may have begun, ms. */
const REQUEST_SLACK_MS = 10_000;

/**
 * The `finalFailure` of `runOnce` for the run of `job`'s `slot`: a fresh reporter id when the job's
 * retry policy proves no Scheduler retry can follow the failed attempt ({@link noRetryFollows},
 * judged on Firestore's time), so the release reports it in the same write.
 *
 * @param deliveredAt - Firestore's time when the failing attempt's delivery reached this instance:
 *   Scheduler gives an attempt up at its deadline, and may decide on a retry then.
 *
 * @throws {LedgerUnavailableError} if the clock cannot be read (runOnce then releases unreported).
 */
export function finalFailureReporter(
  job: DeclaredJob,
  slot: Date,
  deliveredAt: Date,
  clock: () => Promise<Date>,
): (attempt: Attempt) => Promise<string | undefined> {
  return async (attempt) => {
    // Scheduler's first attempt came at or after the slot, and at or before the first claim.
    const firstAttempt = Math.max(slot.getTime(), attempt.firstClaimedAt.getTime());
    // Scheduler decides on a retry when it sees the failure or when the attempt deadline passes,
    // whichever comes first: a job running past its deadline was given up on earlier than now.
    // The attempt began at most REQUEST_SLACK_MS before its delivery reached this instance.
    const deadline = deliveredAt.getTime() - REQUEST_SLACK_MS + job.attemptDeadlineSeconds * 1000;
    const decidedAt = Math.min((await clock()).getTime(), deadline);
    const elapsedMs = decidedAt - firstAttempt;
    return noRetryFollows(job, attempt.attempts, elapsedMs) ? randomUUID() : undefined;
  };
}

/**
 * Logs the report of a slot's run that failed finally and reported itself (its release wrote
 * `reported_at`): the same ERROR line a check writes, once, by the failing attempt.
 */
export function reportFinalFailure(
  logger: Logger,
  job: DeclaredJob,
  scheduleTime: string,
  failed: { readonly attempt: Attempt; readonly error: unknown },
): void {
  logger.error(
    {
      jobName: job.id,
      slot: new Date(scheduleTime).toISOString(),
      runId: failed.attempt.runId,
      state: 'failed',
      attempts: failed.attempt.attempts,
      lastError: describeThrown(failed.error).slice(0, MAX_ERROR_LENGTH),
      reportedBy: 'attempt',
    },
    FAILED_AFTER_RETRIES,
  );
}
