/** Which re-runs the function refuses (docs/how-it-works.md, "Re-runs the function refuses"). */
import {
  isLeaseLive,
  RunStatus,
  type StoredRecord,
} from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { isSlotOf } from './missed-run-rules.ts';
import { isSlotsOwnDelivery, type RunHistory } from './run-history.ts';
import type { ScheduledRun } from './run-plan.ts';

/** Why a re-run is refused: `invalid` (the request must change), `running` (retry later), `unreadable`. */
export interface RerunRefusal {
  readonly refusal: 'invalid' | 'running' | 'unreadable';
  readonly message: string;
}

/**
 * Why a re-run of `job`'s slot (the run's schedule time) at Firestore's `now` is refused,
 * `undefined` if it may run: pure checks, then the slot's record (without one, its own delivery's as a forced run).
 * @throws {LedgerUnavailableError} if the read fails.
 */
export async function rerunRefusal(
  job: DeclaredJob,
  run: Pick<ScheduledRun, 'scheduleTime' | 'scheduledAt'>,
  slotRunId: string,
  now: Date,
  history: Pick<RunHistory, 'getMany'>,
  forced: { readonly runId: string; readonly toleranceMs: number },
): Promise<RerunRefusal | undefined> {
  const invalid = (why: string): RerunRefusal => ({
    refusal: 'invalid',
    message: `Re-run refused: ${why}; nothing was run.`,
  });
  const { scheduleTime, scheduledAt } = run;
  const t = scheduledAt.getTime();
  if (t > now.getTime()) {
    return invalid(
      `slot ${scheduleTime} of ${job.id} is in the future (Firestore's time is ${now.toISOString()}); a re-run runs a finished slot again. To run the job now, run npm run trigger -- ${job.id} (a manual run)`,
    );
  }
  if (!isSlotOf(job, t)) {
    return invalid(
      `${scheduleTime} is not a slot of ${job.id} ('${job.schedule}' in ${job.timeZone}); name one, e.g. from npm run runs -- ${job.id}`,
    );
  }
  const own = (await history.getMany([slotRunId])).records.get(slotRunId);
  if (own !== undefined) {
    return slotNotFinished(job, scheduleTime, own, now);
  }
  const forcedRecord = (await history.getMany([forced.runId])).records.get(
    forced.runId,
  );
  const delivered = isSlotsOwnDelivery(
    forcedRecord,
    scheduledAt,
    forced.toleranceMs,
  );
  return slotNotFinished(
    job,
    scheduleTime,
    delivered ? forcedRecord : undefined,
    now,
  );
}

/** Why the slot's record is not a finished run to re-run at Firestore's `now`, if it is not. */
function slotNotFinished(
  job: DeclaredJob,
  scheduleTime: string,
  record: StoredRecord | undefined,
  now: Date,
): RerunRefusal | undefined {
  const deliverIt = `deliver the slot itself with npm run trigger -- ${job.id} --slot ${scheduleTime} (without --rerun)`;
  switch (record?.status) {
    case undefined:
      return {
        refusal: 'invalid',
        message: `Re-run refused: slot ${scheduleTime} of ${job.id} has no record (it never ran, or its record passed RETENTION_SECONDS), so there is no finished run to re-run; if it never ran, ${deliverIt}. Nothing was run.`,
      };
    case 'unreadable':
      return {
        refusal: 'unreadable',
        message: `Re-run refused: the record of slot ${scheduleTime} of ${job.id} cannot be read (field ${record.field} ${record.problem}); repair it first. Nothing was run.`,
      };
    case RunStatus.Completed:
    case RunStatus.Skipped:
      return undefined;
    case RunStatus.InProgress:
      if (!isLeaseLive(record, now)) {
        // Its attempt died: nothing runs, and the slot's own run is still due.
        return {
          refusal: 'invalid',
          message: `Re-run refused: slot ${scheduleTime} of ${job.id} was left in progress by an attempt whose lease lapsed, not finished, so its own run is still due: ${deliverIt}. Nothing was run.`,
        };
      }
      return {
        refusal: 'running',
        message: `Re-run not started: slot ${scheduleTime} of ${job.id} is running now; re-run it after it finishes.`,
      };
    case RunStatus.Failed:
    case RunStatus.Missed:
      return {
        refusal: 'invalid',
        message: `Re-run refused: slot ${scheduleTime} of ${job.id} is ${record.status}, not finished, so its own run is still due: ${deliverIt}. Nothing was run.`,
      };
  }
}
