/**
 * A run's final failure, reported by the failing attempt itself: when the job's retry policy
 * proves no Scheduler retry can follow, it logs the same ERROR line a missed-run check would, then
 * its release writes `reported_at`, so no check has to judge the slot later. Logged first: an
 * instance killed before the write's answer (SIGKILL after a shutdown's grace) has still said it.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.ts';
import type { Attempt } from '../core/run-once.ts';
import { MAX_ERROR_LENGTH } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES } from './missed-runs.ts';
import { noRetryFollows } from './retry-policy.ts';

/** How long before it reached the function an attempt's request may have begun, ms. */
const REQUEST_SLACK_MS = 10_000;

/**
 * The `finalFailure` of `runOnce` for the run of `job`'s `slot`: when the job's retry policy
 * proves no Scheduler retry can follow the failed attempt ({@link noRetryFollows}, judged on
 * Firestore's time), it logs the report ({@link FAILED_AFTER_RETRIES}, ERROR) and returns a fresh
 * reporter id, so the release writes the report (unless it finds the lease lost: {@link REPORT_WITHDRAWN}).
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
  logger: Logger,
): (attempt: Attempt, failure: string) => Promise<string | undefined> {
  return async (attempt, failure) => {
    // Before its slot (a Force run taken for it), Scheduler's own delivery of the slot is to come.
    if (deliveredAt.getTime() < slot.getTime()) return undefined;
    // Scheduler's first attempt came at or after the slot, and at or before the first claim.
    const firstAttempt = Math.max(slot.getTime(), attempt.firstClaimedAt.getTime());
    // Scheduler decides on a retry when it sees the failure or when the attempt deadline passes,
    // whichever comes first: a job running past its deadline was given up on earlier than now.
    // The attempt began at most REQUEST_SLACK_MS before its delivery reached this instance.
    const deadline = deliveredAt.getTime() - REQUEST_SLACK_MS + job.attemptDeadlineSeconds * 1000;
    const decidedAt = Math.min((await clock()).getTime(), deadline);
    const elapsedMs = decidedAt - firstAttempt;
    if (!noRetryFollows(job, attempt.attempts, elapsedMs)) return undefined;
    const { runId, attempts } = attempt;
    const lastError = failure.slice(0, MAX_ERROR_LENGTH);
    const fields = { jobName: job.id, slot: slot.toISOString(), runId, state: 'failed', attempts };
    const reporter = randomUUID();
    logger.error({ ...fields, lastError, reportedBy: 'attempt', reporter }, FAILED_AFTER_RETRIES);
    return reporter;
  };
}

/** Logged (WARN) when a final failure's release, its report logged, found the lease lost. */
export const REPORT_WITHDRAWN =
  'the failure report logged above did not land: this attempt had lost its lease, so another attempt or a missed-run check holds the run and decides it';
