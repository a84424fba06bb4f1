/**
 * Every answer's outcome, its HTTP status, its log level and its words: the one table from outcome
 * to status, and the messages beside it. Modules return outcomes; only the HTTP adapter (and the
 * framework workarounds, for requests refused before the function runs) turn them into responses.
 */
import { DatabaseNotFoundError, describeThrown, loggableError } from '../core/errors.ts';
import { leaseLossMessage, type RunOutcome } from '../core/run-once.ts';
import type { RunKind } from '../core/run-record.ts';
import type { OverlapPolicy } from '../policy/job-declaration.ts';
import type { OverlapDecision } from '../policy/overlap.ts';
import type { RerunRefusal } from '../policy/rerun.ts';
import type { ScheduledRun } from '../policy/run-plan.ts';

/**
 * Status code per outcome. 409 for a live claim, never 503: App Engine targets treat 503 specially
 * (the Scheduler guide). Every non-2xx makes Cloud Scheduler retry under the job's retry config.
 */
export const STATUS_BY_OUTCOME = {
  /** The job ran and its completion is recorded (or could not be, see the message). */
  processed: 200,
  /** The run already completed: the job was not run again. */
  duplicate: 200,
  /** Another attempt holds a live lease on the run: retry later. */
  in_progress: 409,
  /** Not run: an earlier slot of the job still runs (overlap policy `skip`); recorded, not retried. */
  skipped: 200,
  /** Not run yet: an earlier slot of the job still runs (overlap policy `wait`): retry later. */
  waiting: 409,
  /** The request names no valid run (headers, body): nothing written. */
  invalid_request: 400,
  /** The request body is larger than functions-framework's body parser takes. */
  body_too_large: 413,
  /** The request body's Content-Encoding or charset is not supported. */
  unsupported_encoding: 415,
  /** No valid credential (`AUTH_MODE=verify-oidc`). */
  unauthenticated: 401,
  /** A valid credential of a caller that may not invoke. */
  forbidden: 403,
  /** No such route. */
  not_found: 404,
  /** The delivery names a job that is not declared in `jobs.ts`: nothing written. */
  unknown_job: 404,
  /** A method other than the Scheduler job's (`HTTP_METHOD`): nothing run. */
  method_not_allowed: 405,
  /** The job threw: the claim is released for a retry. */
  failed: 500,
  /** The run's record cannot be read by this version: not overwritten, job not run. */
  unreadable_record: 500,
  /** Firestore failed or the instance is shutting down: job not run. */
  unavailable: 500,
} as const;

/** Every response's outcome. */
export type ResponseOutcome = keyof typeof STATUS_BY_OUTCOME;

/** Log level per outcome: refusals warn, failures are errors. */
export const LOG_LEVEL_BY_OUTCOME = {
  processed: 'info',
  duplicate: 'info',
  in_progress: 'info',
  skipped: 'info',
  waiting: 'info',
  invalid_request: 'warn',
  body_too_large: 'warn',
  unsupported_encoding: 'warn',
  unauthenticated: 'warn',
  forbidden: 'warn',
  not_found: 'warn',
  unknown_job: 'warn',
  method_not_allowed: 'warn',
  failed: 'error',
  unreadable_record: 'error',
  unavailable: 'error',
} as const satisfies Record<ResponseOutcome, 'info' | 'warn' | 'error'>;

/** The JSON body of every response. */
export interface ResponseBody {
  readonly outcome: ResponseOutcome;
  /** Absent when the request named no valid run. */
  readonly runId?: string;
  readonly message: string;
}

/** What an answer says: its outcome, its message and the extra fields of its log line. */
export interface Said {
  readonly outcome: ResponseOutcome;
  readonly message: string;
  readonly fields?: object;
}

/** The outcome of a re-run `rerun.ts` refuses. */
export const OUTCOME_BY_RERUN_REFUSAL = {
  invalid: 'invalid_request',
  running: 'in_progress',
  unreadable: 'unreadable_record',
} as const satisfies Record<RerunRefusal['refusal'], ResponseOutcome>;

/** The messages of the answers the handler writes itself (not a run's). */
export const MESSAGES = {
  shuttingDown: 'This instance is shutting down; the job was not run. Retry later.',
  methodNotAllowed: (allowed: string, sent: string) =>
    `Cloud Scheduler delivers this job with ${allowed} (HTTP_METHOD); ${sent} runs nothing.`,
  unavailable: (detail: string) =>
    `Firestore is unavailable${detail}; the job was not run. Retry later.`,
  internal: (detail: string) => `Internal error${detail}; retry later.`,
  noNextSlot: (jobId: string) =>
    `X-CloudScheduler-ScheduleTime is missing, and job ${jobId} has no next slot to key a Force run on: its schedule never fires again.`,
  forcedRunDone:
    'Run already completed: an earlier delivery of this slot was taken for a forced run (this run id), which is the slot’s run; the job was not run again.',
  forcedRunRunning:
    'An earlier delivery of this slot, taken for a forced run (this run id), is running it; retry later.',
  lockContended: (jobId: string, policy: OverlapPolicy, rounds: number) =>
    `Other runs of ${jobId} took its overlap lock ${rounds} times while this one tried (overlap policy "${policy}"); nothing was recorded; retry later.`,
  jobLeftError:
    'unhandled error left by the job (a fire-and-forget promise or a timer callback): it does not change the run, which ends as the job returned or threw; await or catch it',
} as const;

/**
 * The message of a delivery for a job that is not declared: the id received, and the declared ids
 * when given (only where error text is exposed: they tell any caller which jobs the function runs).
 */
export function unknownJobMessage(jobName: string, declared?: readonly { id: string }[]): string {
  const ids = declared?.map((j) => j.id) ?? [];
  const shown = ids.length > 10 ? [...ids.slice(0, 10), '…'] : ids;
  return (
    `No job "${jobName.length > 60 ? `${jobName.slice(0, 60)}…` : jobName}" is declared in this function${declared === undefined ? '' : ` (declared: ${shown.join(', ')})`}. ` +
    'Declare it in src/jobs.ts, or point the Scheduler job at the function that runs it.'
  );
}

/** What a response says first about a run that is not its slot's. */
const KIND_NOTES = {
  slot: '',
  forced:
    'Forced run (it came well before its schedule time, so it is a run of its own; the slot still runs at its time). ',
  manual: 'Manual run. ',
  rerun: "Re-run (a run of its own; the slot's record is unchanged). ",
} as const satisfies Record<RunKind, string>;

/** What a response says first about a run of `kind`: nothing for a slot's. */
export function runNote(run: ScheduledRun, kind: RunKind): string {
  if (!run.withoutScheduleTime) return KIND_NOTES[kind];
  return `Forced run without X-CloudScheduler-ScheduleTime (the console's "Force run" may omit it): a run of its own, keyed on the slot ${run.scheduleTime}, whose own run is apart from it. `;
}

/** The outcome, message and log fields of what became of a run (`runOnce`). */
export function ranSaid(
  result: Exclude<RunOutcome, { outcome: 'guard_changed' }>,
  exposeErrors: boolean,
): Said {
  const detail = (error: unknown) => (exposeErrors ? ` (${describeThrown(error)})` : '');
  const { outcome } = result;
  switch (outcome) {
    case 'processed': {
      const { attempt, completion, leaseLoss } = result;
      const fields = { attemptId: attempt.attemptId, takeover: attempt.takeover, completion };
      const message = {
        recorded: 'Run processed: the job ran and its completion is recorded.',
        lease_lost: `The job ran, but ${leaseLossMessage(leaseLoss ?? 'unknown')}.`,
        unrecorded:
          'The job ran, but Firestore did not record its completion; a later delivery may run it again.',
      }[completion];
      return { outcome, message, fields };
    }
    case 'duplicate':
      return duplicateSaid(result.record);
    case 'in_progress': {
      const until = result.holder?.leaseExpires.toISOString();
      const message = `Another attempt is running this run${until ? ` (lease until ${until})` : ''}; retry later.`;
      return { outcome, message, fields: { heldBy: result.holder?.attemptId } };
    }
    case 'failed': {
      const then = {
        recorded: 'the claim is released so a retry can run it.',
        lease_lost: `${leaseLossMessage(result.leaseLoss ?? 'unknown')}.`,
        unrecorded: 'its claim could not be released, so retries get 409 until the lease lapses.',
      }[result.release];
      const { attempt, release, error } = result;
      const fields = { attemptId: attempt.attemptId, release, err: loggableError(error) };
      return { outcome, message: `The job failed${detail(error)}; ${then}`, fields };
    }
    case 'unreadable_record': {
      const { field, problem } = result.record;
      const message =
        `The run's record cannot be read (field ${field} ${problem}); it was left as it is and ` +
        'the job was not run. Repair it: if no attempt of this run is running, delete the ' +
        'document (the next delivery runs the job), or set status to "completed" if the run is done.';
      return { outcome, message, fields: { field, problem } };
    }
    case 'unavailable': {
      const { error } = result;
      const message =
        error instanceof DatabaseNotFoundError
          ? `${error.message}; the job was not run.`
          : MESSAGES.unavailable(detail(error));
      return { outcome, message, fields: { err: error } };
    }
  }
}

/** The answer of a run that already has a final record (completed, skipped, reported). */
function duplicateSaid(record: Extract<RunOutcome, { outcome: 'duplicate' }>['record']): Said {
  const outcome = 'duplicate';
  if (record.status === 'skipped') {
    const message =
      'Run skipped earlier: another run of the job was still running (overlap policy "skip"); the job was not run.';
    return { outcome, message, fields: { blockedBy: record.blockedBy } };
  }
  const { status, reportedAt } = record;
  if (status === 'missed' || status === 'failed') {
    const message = `Run reported ${status === 'missed' ? 'missed' : 'failed after retries'} at ${reportedAt?.toISOString()}, so this late delivery does not run it; to run it, backfill it (npm run runs -- --backfill) or re-run it (npm run trigger -- JOB --rerun --slot T).`;
    return { outcome, message, fields: { reportedBy: record.reportedBy } };
  }
  const at = record.completedAt?.toISOString();
  const message = `Run already completed${at ? ` at ${at}` : ''}; the job was not run again.`;
  return { outcome, message, fields: { completedBy: record.attemptId } };
}

/** How a run the overlap policy blocks is named in its answer. */
const BLOCKED_NOTES = {
  slot: 'Not run',
  forced: 'Forced run not run',
  manual: 'Manual run not run',
  rerun: 'Re-run not run',
} as const satisfies Record<RunKind, string>;

/** What a run that may not claim yet is told to do, by why it waits. */
const WAIT_ADVICE = {
  by_hand: 'run it again once that run ends, or with --allow-overlap to run it beside it',
  backfill: 'the slot stays missed: backfill it again once that run ends',
  policy: 'retry later',
} as const;

/**
 * The answer of a run the overlap policy keeps from running (`decideOverlap`): 409 `waiting`, 200
 * `skipped`, or 500 `unreadable_record` naming the lock's holder.
 */
export function blockedSaid(
  decision: Exclude<OverlapDecision, { action: 'run' }>,
  jobId: string,
  kind: RunKind,
  policy: OverlapPolicy,
): Said {
  const { by } = decision;
  const fields = { blockedBy: by };
  const notRun = BLOCKED_NOTES[kind];
  switch (decision.action) {
    case 'unreadable': {
      const { field, problem } = decision.record;
      const message =
        `${notRun}: the run holding ${jobId}'s overlap lock, ${by}, has a record this version cannot read ` +
        `(field ${field} ${problem}), so whether it still runs is unknown (overlap policy "${policy}"); nothing was recorded. ` +
        `Repair that record: if no attempt of run ${by} is running, delete it, or set its status to "completed" if it is done; then retry.`;
      return { outcome: 'unreadable_record', message, fields: { ...fields, field, problem } };
    }
    case 'skipped': {
      const message = `${notRun}: another run of ${jobId} is still running (overlap policy "skip"); recorded as skipped.`;
      return { outcome: 'skipped', message, fields };
    }
    case 'wait': {
      const message =
        decision.why === 'has_record'
          ? `Another run of ${jobId} is still running (overlap policy "skip") and this run already has a record (an earlier attempt), so it is not run beside it; retry later.`
          : `${notRun}: another run of ${jobId} is still running (overlap policy "${policy}"); ${WAIT_ADVICE[decision.why]} (nothing was recorded).`;
      return { outcome: 'waiting', message, fields };
    }
  }
}
