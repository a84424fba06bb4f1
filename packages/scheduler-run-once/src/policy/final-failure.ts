/** A run's final failure, reported by its failing attempt (docs/how-it-works.md, "Missed runs"). */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.ts';
import type { Attempt } from '../core/run-once.ts';
import { MAX_ERROR_LENGTH } from '../core/run-record.ts';
import { errorEventFields } from './error-report.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES } from './missed-runs.ts';
import { makesRetry, retryWindowMs } from './retry-policy.ts';

/** How long before it reached the function an attempt's request may have begun, ms. */
const REQUEST_SLACK_MS = 10_000;

/**
 * `runOnce`'s `finalFailure` for `job`'s `slot` (`deliveredAt`: Firestore's time at delivery;
 * `forcedRunToleranceMs`: how long before a slot a Force run is taken for it, `FORCED_RUN_TOLERANCE_SECONDS`):
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
  forcedRunToleranceMs = Number.POSITIVE_INFINITY,
): (attempt: Attempt, failure: string) => Promise<string | undefined> {
  return async (attempt, failure) => {
    // Before its slot (a Force run taken for it), Scheduler's own delivery of the slot is to come.
    if (deliveredAt.getTime() < slot.getTime()) {
      return undefined;
    }
    // Scheduler's first attempt came at or after the slot, and at or before the first claim.
    const firstAttempt = Math.max(
      slot.getTime(),
      attempt.firstClaimedAt.getTime(),
    );
    // Scheduler decides on a retry at the failure or at the attempt deadline, whichever is first.
    const deadline =
      deliveredAt.getTime() -
      REQUEST_SLACK_MS +
      job.attemptDeadlineSeconds * 1000;
    const now = (await clock()).getTime();
    const decidedAt = Math.min(now, deadline);
    // Retry n follows attempt n + 1 (why that is sound: docs/how-it-works.md, "Missed runs").
    if (makesRetry(job, attempt.attempts - 1, decidedAt - firstAttempt)) {
      return undefined;
    }
    const claimedAt = attempt.firstClaimedAt;
    if (retryMayBePending(job, slot, claimedAt, now, forcedRunToleranceMs)) {
      return undefined;
    }
    const { runId, attempts } = attempt;
    const lastError = failure.slice(0, MAX_ERROR_LENGTH);
    const fields = {
      jobName: job.id,
      slot: slot.toISOString(),
      runId,
      state: 'failed',
      attempts,
    };
    const reporter = randomUUID();
    const event = errorEventFields('failed', job.id, fields.slot);
    logger.error(
      { ...fields, lastError, reportedBy: 'attempt', reporter, ...event },
      FAILED_AFTER_RETRIES,
    );
    return reporter;
  };
}

/**
 * Whether a retry Scheduler decided on before `nowMs` may still be on its way. A duplicate delivery
 * of an earlier attempt can run the job while Scheduler's own later attempts met its lease and
 * failed, so neither the record's attempt count nor this attempt's timing says where Scheduler's
 * retries stand. What bounds them: every retry arrives before the first attempt (at or before the
 * first claim) plus `maxRetryDuration` when `retryCount` is 0, and within the retry window
 * otherwise (found by the simulator's Scheduler model, issue 40). A run first claimed before its
 * slot was claimed by a Force run taken for it: Scheduler's own execution of the slot starts at
 * the slot or, waiting behind the execution outstanding then, up to a retry window later, and
 * retries for a window more (found by the simulator, `npm run simulate -- --seed 7`, history 316).
 */
function retryMayBePending(
  job: DeclaredJob,
  slot: Date,
  firstClaimedAt: Date,
  nowMs: number,
  forcedRunToleranceMs: number,
): boolean {
  // Only a Force run within the forced-run tolerance before the slot is taken for the slot.
  const earliestForcedClaim = slot.getTime() - forcedRunToleranceMs;
  const claimedByForcedRun =
    firstClaimedAt.getTime() < slot.getTime() &&
    firstClaimedAt.getTime() >= earliestForcedClaim;
  if (claimedByForcedRun) {
    return nowMs < slot.getTime() + 2 * retryWindowMs(job);
  }
  const sinceFirstClaimMs = nowMs - firstClaimedAt.getTime();
  if (job.retryCount === 0) {
    const durationMs = job.maxRetryDurationSeconds * 1000;
    return durationMs > 0 && sinceFirstClaimMs < durationMs;
  }
  return sinceFirstClaimMs < retryWindowMs(job);
}

/** Logged (WARN) when a final failure's release, its report logged, found the lease lost. */
export const REPORT_WITHDRAWN =
  'the failure report logged above did not land: this attempt had lost its lease, so another attempt or a missed-run check holds the run and decides it';

/**
 * Logged after an attempt's failure report when its release (which writes the report) went
 * unanswered: the report may not have landed, and a missed-run check then reports the run again.
 */
export const REPORT_UNCONFIRMED =
  'the failure report logged above may not have landed (Firestore did not answer the release): if it did not, a missed-run check reports this run again once its lease lapses';
