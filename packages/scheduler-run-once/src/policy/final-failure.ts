/** A run's final failure, reported by its failing attempt (docs/how-it-works.md, "Missed runs"). */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/logger.ts';
import type { Attempt } from '../core/run-once.ts';
import { MAX_ERROR_LENGTH } from '../core/run-record.ts';
import { errorEventFields } from './error-report.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES } from './missed-runs.ts';
import { lastRetrySentMs } from './retry-policy.ts';

/**
 * `runOnce`'s `finalFailure` for `job`'s `slot` (`deliveredAt`: Firestore's time at delivery;
 * `forcedRunToleranceMs`: how long before a slot a Force run is taken for it, `FORCED_RUN_TOLERANCE_SECONDS`;
 * `slotWasForced`: whether a Force run carrying the slot's schedule time ran as a forced run, its
 * record read, true when unknown): when no Scheduler retry of the slot can still be sent
 * ({@link retryMayStillCome}), logs ERROR {@link FAILED_AFTER_RETRIES} and returns a fresh reporter
 * id for the release to write; otherwise the missed-run check reports the slot once it closed.
 * @throws {LedgerUnavailableError} if the clock cannot be read (runOnce then releases unreported).
 */
export function finalFailureReporter(
  job: DeclaredJob,
  slot: Date,
  deliveredAt: Date,
  clock: () => Promise<Date>,
  logger: Logger,
  forcedRunToleranceMs = Number.POSITIVE_INFINITY,
  slotWasForced: () => Promise<boolean> = async () => false,
): (attempt: Attempt, failure: string) => Promise<string | undefined> {
  return async (attempt, failure) => {
    // Before its slot (a Force run taken for it), Scheduler's own delivery of the slot is to come.
    if (deliveredAt.getTime() < slot.getTime()) {
      return undefined;
    }
    const now = (await clock()).getTime();
    const claimedAt = attempt.firstClaimedAt;
    const claimedEarly = claimedBeforeSlot(
      slot,
      claimedAt,
      forcedRunToleranceMs,
    );
    if (retryMayStillCome(job, slot, claimedAt, now, claimedEarly)) {
      return undefined;
    }
    // The forced run's record is read only for a report about to be made: a failure costs no read.
    const forcedFirst = !claimedEarly && (await slotWasForced());
    if (forcedFirst && retryMayStillCome(job, slot, claimedAt, now, true)) {
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

/** Whether a Force run within the forced-run tolerance before the slot, taken for it, claimed it. */
function claimedBeforeSlot(
  slot: Date,
  firstClaimedAt: Date,
  forcedRunToleranceMs: number,
): boolean {
  const earliestForcedClaim = slot.getTime() - forcedRunToleranceMs;
  return (
    firstClaimedAt.getTime() < slot.getTime() &&
    firstClaimedAt.getTime() >= earliestForcedClaim
  );
}

/**
 * Whether Scheduler may still send a retry of `slot` after `nowMs` (Firestore's time), by the
 * latest reading of what the product can know (docs/how-it-works.md, "Missed runs"; issue 40).
 * Neither the record's attempt count nor this attempt's own timing says where Scheduler's retries
 * stand: attempts that met a live lease (409) or a duplicate's run are Scheduler's but not the
 * record's, and Scheduler decides a retry when an attempt's answer comes, which may be long before
 * this attempt fails (or before a frozen instance reads the time). What bounds them: every retry
 * is sent within {@link lastRetrySentMs} of its execution's first attempt. That attempt came at or
 * before the first claim, unless a Force run made it (`forcedFirst`: it claimed before the slot,
 * or ran as a forced run with the slot's schedule time and a retry of it came after the slot):
 * Scheduler's own execution of the slot then starts at the slot or, waiting behind the execution
 * outstanding then, at most one whole execution later.
 */
function retryMayStillCome(
  job: DeclaredJob,
  slot: Date,
  firstClaimedAt: Date,
  nowMs: number,
  forcedFirst: boolean,
): boolean {
  const lastSentMs = lastRetrySentMs(job);
  const longestExecutionMs = lastSentMs + job.attemptDeadlineSeconds * 1000;
  // Scheduler's first attempt came at or before the first claim (taken no earlier than the slot).
  const claimedMs = Math.max(slot.getTime(), firstClaimedAt.getTime());
  const ownFirstAttemptMs = forcedFirst
    ? Math.max(claimedMs, slot.getTime() + longestExecutionMs)
    : claimedMs;
  return nowMs < ownFirstAttemptMs + lastSentMs;
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
