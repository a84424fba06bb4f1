/** A run's final failure, reported by its failing attempt (docs/how-it-works.md, "Missed runs"). */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.ts';
import type { Attempt } from '../core/run-once.ts';
import { MAX_ERROR_LENGTH } from '../core/run-record.ts';
import { errorEventFields } from './error-report.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES } from './missed-runs.ts';
import { lastRetrySentMs, longestExecutionMs } from './retry-policy.ts';

/**
 * `runOnce`'s `finalFailure` for `job`'s `slot` (`deliveredAt`: Firestore's time at delivery): when
 * no Scheduler retry of the slot can still be sent ({@link retryMayStillCome}), logs ERROR
 * {@link FAILED_AFTER_RETRIES} and returns a fresh reporter id for the release to write; otherwise
 * the missed-run check reports the slot once it closed.
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
    if (deliveredAt.getTime() < slot.getTime()) {
      return undefined;
    }
    const now = (await clock()).getTime();
    if (retryMayStillCome(job, slot, attempt.firstClaimedAt, now)) {
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
 * Whether Scheduler may still send a retry of `slot` after `nowMs` (Firestore's time), by the
 * latest reading of what the product can know (docs/how-it-works.md, "Missed runs"; issue 40).
 * Neither the record's attempt count nor this attempt's own timing says where Scheduler's retries
 * stand: attempts that met a live lease (409) or a duplicate's run are Scheduler's but not the
 * record's, and Scheduler decides a retry when an attempt's answer comes, which may be long before
 * this attempt fails (or before a frozen instance reads the time). What bounds them: every retry
 * is sent within {@link lastRetrySentMs} of its execution's first attempt. Scheduler's own
 * execution of the slot began at the first claim if that claim was its own; but a Force run's
 * retry after the slot may have made it (a Force run carries the next slot's schedule time, and
 * its attempts before the slot may have reached nothing), and Scheduler's own execution then
 * began at the slot or, waiting behind the execution outstanding then, at most one whole
 * execution later. Nothing tells the two apart, so the later bound holds.
 */
function retryMayStillCome(
  job: DeclaredJob,
  slot: Date,
  firstClaimedAt: Date,
  nowMs: number,
): boolean {
  const ownFirstAttemptMs = Math.max(
    firstClaimedAt.getTime(),
    slot.getTime() + longestExecutionMs(job),
  );
  return nowMs < ownFirstAttemptMs + lastRetrySentMs(job);
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
