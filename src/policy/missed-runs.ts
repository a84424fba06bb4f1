/**
 * Missed-run detection without a new service: each processed delivery of a job also checks the
 * job's earlier slots (one batched read) and reports each that was missed, or failed after every
 * retry, once across all instances, as an ERROR line that a log-based metric counts.
 *
 * Only slots after the oldest one that has a record count: before it, the job may not have existed
 * yet. "Once" is a conditional write: a missed slot's report `create()`s its record as `missed` (it
 * fails if anything wrote the record first), a failed run's report sets `reported_at` fenced on the
 * update time just read. Only the instance whose write lands logs. No write happens when there is
 * nothing to report.
 */

import type { Logger } from '../core/logger.ts';
import type { Scope } from '../core/run-key.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, readHistory, type SlotRow, sinceFirstRecord } from './run-history.ts';
import { previousSlots } from './schedule.ts';

/** The log messages, for log-based metrics (`deploy.sh` creates them). */
export const MISSED_RUN = 'missed run';
export const FAILED_AFTER_RETRIES = 'run failed after retries';

/** What {@link reportEarlierSlots} needs. */
export interface EarlierSlotsCheck {
  readonly history: Pick<RunHistory, 'getMany' | 'reportMissed' | 'markReported'>;
  readonly job: DeclaredJob;
  /** The run id's scope, as the delivery's. */
  readonly scope: Scope;
  /** The slot of the delivery being processed: the slots before it are checked. */
  readonly before: Date;
  /** How many earlier slots to check (`MISSED_CHECK_SLOTS`). */
  readonly count: number;
  readonly logger: Logger;
}

function fields(row: SlotRow) {
  return {
    jobName: row.job,
    slot: row.slot.toISOString(),
    runId: row.runId,
    state: row.state,
    attempts: row.attempts,
    lastError: row.lastError,
  };
}

/**
 * Checks the `count` slots of the job before `before` and reports each missed or finally failed one
 * that nobody reported yet: ERROR `missed run` / `run failed after retries` with job, slot, run id
 * and state.
 *
 * @returns how many slots this call reported.
 * @throws {LedgerUnavailableError} if the read or a report fails; the caller logs it and goes on:
 *   a failed check must never fail the run.
 * @example void reportEarlierSlots({ history, job, scope, before: slot, count: 5, logger }).catch(warn);
 */
export async function reportEarlierSlots(check: EarlierSlotsCheck): Promise<number> {
  const { history, job, scope, logger } = check;
  const slots = previousSlots(job, check.before, check.count);
  if (slots.length === 0) return 0;
  const { rows, updateTimes } = await readHistory(history, job, slots, scope);
  // Only after the oldest slot with a record: the slots before a new job's first run (or before
  // `npm run dev` started) were never expected to run. A gap longer than the window is left to
  // `npm run runs -- --check` and the absence alert.
  let reported = 0;
  for (const row of sinceFirstRecord(rows)) {
    if (!row.final || row.reported) continue;
    if (row.state === 'missed') {
      const details = { jobName: job.id, scheduleTime: row.slot.toISOString() };
      if ((await history.reportMissed(row.runId, details)) === 'reported') {
        logger.error(fields(row), MISSED_RUN);
        reported++;
      }
    } else if (row.state === 'failed') {
      const updateTime = updateTimes.get(row.runId);
      if (updateTime && (await history.markReported(row.runId, updateTime)) === 'reported') {
        logger.error(fields(row), FAILED_AFTER_RETRIES);
        reported++;
      }
    }
  }
  return reported;
}
