/** A run's final failure, reported by its failing attempt (docs/how-it-works.md, "Missed runs"). */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.ts';
import type { Attempt } from '../core/run-once.ts';
import { MAX_ERROR_LENGTH } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES } from './missed-runs.ts';
import { makesRetry } from './retry-policy.ts';

/** How long before it reached the function an attempt's request may have begun, ms. */
const REQUEST_SLACK_MS = 10_000;

/**
 * `runOnce`'s `finalFailure` for `job`'s `slot` (`deliveredAt`: Firestore's time at delivery):
 * when no retry can follow ({@link makesRetry}), logs ERROR {@link FAILED_AFTER_RETRIES} and
 * returns a fresh reporter id for the release to write.
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
    // Scheduler decides on a retry at the failure or at the attempt deadline, whichever is first.
    const deadline = deliveredAt.getTime() - REQUEST_SLACK_MS + job.attemptDeadlineSeconds * 1000;
    const decidedAt = Math.min((await clock()).getTime(), deadline);
    // Retry n follows attempt n + 1 (why that is sound: docs/how-it-works.md, "Missed runs").
    if (makesRetry(job, attempt.attempts - 1, decidedAt - firstAttempt)) return undefined;
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
