/** The one table from outcome to HTTP status, the log level, and the messages beside it. */
import {
  DatabaseNotFoundError,
  describeThrown,
  loggableError,
} from '../core/errors.ts';
import { LEASE_LOSS_MESSAGES, type RunOutcome } from '../core/run-once.ts';
import type { RunKind } from '../core/run-record.ts';
import type { OverlapPolicy } from '../policy/job-declaration.ts';
import type { OverlapDecision } from '../policy/overlap.ts';
import type { RerunRefusal } from '../policy/rerun.ts';
import type { RunPlan, ScheduledRun } from '../policy/run-plan.ts';

/**
 * Status code per outcome. 409 for a live claim, never 503: App Engine targets treat 503 specially
 * (the Scheduler guide). Every non-2xx makes Cloud Scheduler retry under the job's retry config.
 */
export const STATUS_BY_OUTCOME = {
  processed: 200, // the job ran and its completion is recorded (or could not be: the message says)
  duplicate: 200, // the run already completed: the job was not run again
  in_progress: 409, // another attempt holds a live lease on the run: retry later
  skipped: 200, // not run: another run of the job still runs (overlap `skip`); recorded, final
  waiting: 409, // not run yet: another run of the job still runs (overlap `wait`); nothing written
  invalid_request: 400, // the request names no valid run (headers, body): nothing written
  body_too_large: 413, // larger than functions-framework's body parser takes
  unsupported_encoding: 415, // the body's Content-Encoding or charset
  unauthenticated: 401, // no valid credential (`AUTH_MODE=verify-oidc`)
  forbidden: 403, // a valid credential of a caller that may not invoke
  not_found: 404, // no such route
  unknown_job: 404, // a job not declared in `jobs.ts`: nothing written
  method_not_allowed: 405, // not the Scheduler job's method (`HTTP_METHOD`): nothing run
  failed: 500, // the job threw: the claim is released for a retry
  unreadable_record: 500, // a record this version cannot read: left as is, job not run
  unavailable: 500, // Firestore failed or the instance is shutting down: job not run
} as const;

/** Every outcome a response names. */
export type ResponseOutcome = keyof typeof STATUS_BY_OUTCOME;

/** An outcome's log level: `error` for a 5xx, `warn` for a refusal (4xx but 409), else `info`. */
export function logLevelOf(
  outcome: ResponseOutcome,
): 'info' | 'warn' | 'error' {
  const status: number = STATUS_BY_OUTCOME[outcome];
  if (status >= 500) {
    return 'error';
  }
  return status >= 400 && status !== 409 ? 'warn' : 'info';
}

/** The JSON body of every response; no `runId` when the request named no valid run. */
export type ResponseBody = Readonly<{
  outcome: ResponseOutcome;
  runId?: string;
  message: string;
}>;

/** What an answer says: its outcome, its message and the extra fields of its log line. */
export type Reply = Readonly<{
  outcome: ResponseOutcome;
  message: string;
  fields?: object;
}>;

/** The outcome of a re-run `rerun.ts` refuses. */
export const OUTCOME_BY_RERUN_REFUSAL = {
  invalid: 'invalid_request',
  running: 'in_progress',
  unreadable: 'unreadable_record',
} as const satisfies Record<RerunRefusal['refusal'], ResponseOutcome>;

/** The messages of the answers the handler writes itself (not a run's). */
export const MESSAGES = {
  shuttingDown:
    'This instance is shutting down; the job was not run. Retry later.',
  methodNotAllowed: (allowed: string, sent: string) =>
    `Cloud Scheduler delivers this job with ${allowed} (HTTP_METHOD); ${sent} runs nothing.`,
  internal: (detail: string) => `Internal error${detail}; retry later.`,
  noNextSlot: (jobId: string) =>
    `X-CloudScheduler-ScheduleTime is missing, and job ${jobId} has no next slot to key a Force run on: its schedule never fires again.`,
  forcedRunDone:
    'Run already completed: an earlier delivery of this slot was taken for a forced run (this run id), which is the slot’s run; the job was not run again.',
  forcedRunRunning:
    'An earlier delivery of this slot, taken for a forced run (this run id), is running it; retry later.',
  lockContended: (jobId: string, policy: OverlapPolicy, rounds: number) =>
    `Other runs of ${jobId} took its overlap lock ${rounds} times while this one tried (overlap policy "${policy}"); nothing was recorded; retry later.`,
  notFound: 'Not found.',
  unreadableBody:
    'The request body could not be read: check its Content-Type and Content-Encoding.',
  unhandledRejection:
    'unhandled rejection: a promise rejected with no handler (a fire-and-forget call in a job?); it does not change any run: each run ends as its job returned or threw. Await the promise, or catch it.',
  jobLeftError:
    'unhandled error left by the job (a fire-and-forget promise or a timer callback): it does not change the run, which ends as the job returned or threw; await or catch it',
} as const;

/** The messages of requests refused before the function ran, by body-parser error type: none quotes the body. */
export const BODY_MESSAGES: Readonly<Record<string, string>> = {
  'entity.parse.failed':
    'The request body is not valid for its Content-Type. Cloud Scheduler needs no body: send none, or send valid JSON.',
  'entity.too.large': 'The request body is too large.',
  'encoding.unsupported':
    'The Content-Encoding of the request body is not supported.',
  'charset.unsupported': 'The charset of the request body is not supported.',
  'request.aborted': 'The request was aborted before its body arrived.',
  'request.size.invalid':
    'The request body is shorter or longer than its Content-Length.',
};

/** A Firestore failure's message: a missing database's own (it names FIRESTORE_DATABASE), else generic. */
export function unavailableMessage(error: unknown, detail: string): string {
  if (error instanceof DatabaseNotFoundError) {
    return `${error.message}; the job was not run.`;
  }
  return `Firestore is unavailable${detail}; the job was not run. Retry later.`;
}

/** An undeclared job's message; `declared` only where error text is exposed (any caller reads it). */
export function unknownJobMessage(
  jobName: string,
  declared?: readonly { id: string }[],
): string {
  const ids = declared?.map((j) => j.id) ?? [];
  const shown = ids.length > 10 ? [...ids.slice(0, 10), '…'] : ids;
  return (
    `No job "${jobName.length > 60 ? `${jobName.slice(0, 60)}…` : jobName}" is declared in this function${declared === undefined ? '' : ` (declared: ${shown.join(', ')})`}. ` +
    'Declare it in src/jobs.ts, or point the Scheduler job at the function that runs it.'
  );
}

/** Per run kind: what a response says first about a run of it, and how a blocked one is named. */
const KIND_NOTES = {
  slot: ['', 'Not run'],
  forced: [
    'Forced run (it came well before its schedule time, so it is a run of its own; the slot still runs at its time). ',
    'Forced run not run',
  ],
  manual: ['Manual run. ', 'Manual run not run'],
  rerun: [
    "Re-run (a run of its own; the slot's record is unchanged). ",
    'Re-run not run',
  ],
} as const satisfies Record<RunKind, readonly [string, string]>;

/** What a response says first about a run of `kind`: nothing for a slot's. */
export function runNote(run: ScheduledRun, kind: RunKind): string {
  if (!run.withoutScheduleTime) {
    return KIND_NOTES[kind][0];
  }
  return `Forced run without X-CloudScheduler-ScheduleTime (the console's "Force run" may omit it): a run of its own, keyed on the slot ${run.scheduleTime}, whose own run is apart from it. `;
}

/** The outcome, message and log fields of what became of a run (`runOnce`). */
export function runReply(
  result: Exclude<RunOutcome, { outcome: 'guard_changed' }>,
  exposeErrors: boolean,
): Reply {
  const { outcome } = result;
  switch (outcome) {
    case 'processed':
      return processedReply(result);
    case 'duplicate':
      return duplicateReply(result.record);
    case 'in_progress': {
      const until = result.holder?.leaseExpires.toISOString();
      const message = `Another attempt is running this run${until ? ` (lease until ${until})` : ''}; retry later.`;
      return { outcome, message, fields: { heldBy: result.holder?.attemptId } };
    }
    case 'failed':
      return failedReply(result, exposeErrors);
    case 'unreadable_record': {
      const { field, problem } = result.record;
      const message =
        `The run's record cannot be read (field ${field} ${problem}); it was left as it is and ` +
        'the job was not run. Repair it: if no attempt of this run is running, delete the ' +
        'document (the next delivery runs the job), or set status to "completed" if the run is done.';
      return { outcome, message, fields: { field, problem } };
    }
    case 'unavailable': {
      const detail = errorDetail(result.error, exposeErrors);
      const message = unavailableMessage(result.error, detail);
      return { outcome, message, fields: { err: result.error } };
    }
  }
}

/** What a message says of a thrown error: its description where error text is exposed, else nothing. */
function errorDetail(error: unknown, exposeErrors: boolean): string {
  return exposeErrors ? ` (${describeThrown(error)})` : '';
}

/** The reply of a run whose job ran: whether its completion is recorded. */
function processedReply(
  result: Extract<RunOutcome, { outcome: 'processed' }>,
): Reply {
  const { outcome, attempt, completion, leaseLoss } = result;
  const fields = {
    attemptId: attempt.attemptId,
    takeover: attempt.takeover,
    completion,
  };
  const message = {
    recorded: 'Run processed: the job ran and its completion is recorded.',
    lease_lost: `The job ran, but ${LEASE_LOSS_MESSAGES[leaseLoss ?? 'unknown']}.`,
    unrecorded:
      'The job ran, but Firestore did not record its completion; a later delivery may run it again.',
  }[completion];
  return { outcome, message, fields };
}

/** The reply of a run whose job failed: whether its claim was released for a retry. */
function failedReply(
  result: Extract<RunOutcome, { outcome: 'failed' }>,
  exposeErrors: boolean,
): Reply {
  const then = {
    recorded: 'the claim is released so a retry can run it.',
    lease_lost: `${LEASE_LOSS_MESSAGES[result.leaseLoss ?? 'unknown']}.`,
    unrecorded:
      'its claim could not be released: a retry reaching this instance runs it at once, one on another instance gets 409 until the lease lapses.',
  }[result.release];
  const { outcome, attempt, release, error } = result;
  const fields = {
    attemptId: attempt.attemptId,
    release,
    err: loggableError(error),
  };
  return {
    outcome,
    message: `The job failed${errorDetail(error, exposeErrors)}; ${then}`,
    fields,
  };
}

/** The answer of a run that already has a final record (completed, skipped, reported). */
function duplicateReply(
  record: Extract<RunOutcome, { outcome: 'duplicate' }>['record'],
): Reply {
  const outcome = 'duplicate';
  if (record.status === 'skipped') {
    const message =
      'Run skipped earlier: another run of the job was still running (overlap policy "skip"); the job was not run.';
    return { outcome, message, fields: { blockedBy: record.blockedBy } };
  }
  if (record.status === 'missed' || record.status === 'failed') {
    const message = `Run reported ${record.status === 'missed' ? 'missed' : 'failed after retries'} at ${record.reportedAt?.toISOString()}, so this late delivery does not run it; to run it, backfill it (npm run runs -- --backfill) or re-run it (npm run trigger -- JOB --rerun --slot T).`;
    return { outcome, message, fields: { reportedBy: record.reportedBy } };
  }
  const at = record.completedAt?.toISOString();
  const message = `Run already completed${at ? ` at ${at}` : ''}; the job was not run again.`;
  return { outcome, message, fields: { completedBy: record.attemptId } };
}

/** What a run that may not claim yet is told to do, by why it waits. */
const WAIT_ADVICE = {
  by_hand:
    'run it again once that run ends, or with --allow-overlap to run it beside it',
  backfill: 'the slot stays missed: backfill it again once that run ends',
  policy: 'retry later',
} as const;

type Blocked = Exclude<OverlapDecision, { action: 'run' }>;

/** The answer of a run the overlap policy keeps from running (`decideOverlap`), naming the holder. */
export function blockedReply(
  decision: Blocked,
  jobId: string,
  plan: RunPlan,
): Reply {
  const { by } = decision;
  const { kind, overlap: policy } = plan;
  const fields = { blockedBy: by };
  const [, notRun] = KIND_NOTES[kind];
  switch (decision.action) {
    case 'unreadable': {
      const { field, problem } = decision.record;
      if (decision.lock === true) {
        const message =
          `${notRun}: ${jobId}'s overlap lock ${by} cannot be read (field ${field} ${problem}), so which run holds it is unknown (overlap policy "${policy}"); nothing was recorded. ` +
          `Repair it: delete the lock document ${by} (in the runs collection's _jobs collection); the next delivery takes the lock afresh.`;
        return {
          outcome: 'unreadable_record',
          message,
          fields: { ...fields, field, problem },
        };
      }
      const message =
        `${notRun}: the run holding ${jobId}'s overlap lock, ${by}, has a record this version cannot read ` +
        `(field ${field} ${problem}), so whether it still runs is unknown (overlap policy "${policy}"); nothing was recorded. ` +
        `Repair that record: if no attempt of run ${by} is running, delete it, or set its status to "completed" if it is done; then retry.`;
      return {
        outcome: 'unreadable_record',
        message,
        fields: { ...fields, field, problem },
      };
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
