/**
 * The HTTP adapter: decides what a Cloud Scheduler delivery is (refused, not a run, a run planned),
 * runs it through {@link runOnce}, and answers. Every step returns an {@link Answer}; one function
 * writes it, with the status and log level of its outcome (`outcomes.ts`).
 */
import type { HttpFunction, Request, Response } from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import {
  DatabaseNotFoundError,
  describeThrown,
  LedgerUnavailableError,
  loggableError,
} from '../core/errors.ts';
import type { JobContext } from '../core/job-context.ts';
import type { Ledger } from '../core/ledger.ts';
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { type Attempt, leaseLossMessage, type RunOutcome, runOnce } from '../core/run-once.ts';
import { isCompleted, isLeaseLive, RunStatus } from '../core/run-record.ts';
import { finalFailureReporter, reportFinalFailure } from '../policy/final-failure.ts';
import { untimedForceRun } from '../policy/force-run.ts';
import { type DeclaredJob, findJob, jobInfoOf } from '../policy/job-declaration.ts';
import { MissedRunCheck } from '../policy/missed-runs.ts';
import { checkOverlap, MAX_OVERLAP_ROUNDS } from '../policy/overlap.ts';
import { rerunRefusal } from '../policy/rerun.ts';
import { retryWindowMs } from '../policy/retry-policy.ts';
import { auditRun, isAuditJob } from '../policy/run-audit.ts';
import { forcedRunId, type RunHistory, slotsForcedRun } from '../policy/run-history.ts';
import { planRun, type RunPlan } from '../policy/run-plan.ts';
import { forcedRunToleranceMs, scheduleTimeProblem } from '../policy/schedule-time.ts';
import type { Authenticator } from './auth.ts';
import type { Config } from './config.ts';
import { InvalidRequestError, UnknownJobError } from './errors.ts';
import { routeRequestErrors } from './framework-workarounds.ts';
import { withTrace } from './logger.ts';
import {
  LOG_LEVEL_BY_OUTCOME,
  type ResponseBody,
  type ResponseOutcome,
  STATUS_BY_OUTCOME,
} from './outcomes.ts';
import {
  type DeliveryHeaders,
  missingScheduleTimeAdvice,
  readDeliveryHeaders,
  type ScheduledRun,
} from './scheduler-request.ts';
import type { GracefulShutdown } from './shutdown.ts';

export { type ResponseBody, type ResponseOutcome, STATUS_BY_OUTCOME } from './outcomes.ts';

/**
 * What the handler needs of run history, beside the lease protocol: the batched read of earlier
 * slots (overlap, missed runs), the missed and finally-failed reports, and the `skipped` record of
 * the overlap policy `skip`. {@link RunHistory} implements it.
 */
export type RunHistoryPort = Pick<
  RunHistory,
  'getMany' | 'reportMissed' | 'markReported' | 'recordSkipped'
>;

/** What {@link createScheduledJobHandler} needs. */
export interface HandlerDeps {
  /** Scope settings, `exposeErrors` and `jobTimeoutMs`. */
  readonly config: Pick<
    Config,
    | 'keyScope'
    | 'keyScopeHeaders'
    | 'keyScopeParams'
    | 'exposeErrors'
    | 'jobTimeoutMs'
    | 'httpMethod'
    | 'missedRunCheck'
    | 'forcedRunToleranceMs'
    | 'leaseMs'
    | 'retentionMs'
  >;
  /** The lease protocol each run goes through. */
  readonly ledger: Ledger;
  /** Where the overlap policy and missed-run detection read and report. */
  readonly history: RunHistoryPort;
  /** The per-job documents (`policy/job-state.ts`): a job's missed-run check progress, its overlap lock. */
  readonly jobDocuments: RunDocuments;
  /**
   * Firestore's time now (`() => ledger.serverTime()`), for forced-run detection and missed-run
   * windows: a delivery is judged early, and a slot closed, by the clock its lease is judged by,
   * never the instance's.
   */
  readonly clock: () => Promise<Date>;
  /** The declared jobs (`validateJobs(jobs)` from `jobs.ts`): a delivery runs the one it names. */
  readonly jobs: readonly DeclaredJob[];
  readonly logger: Logger;
  /** Checks the caller before anything else (`AUTH_MODE=verify-oidc`); none with `platform`. */
  readonly authenticate?: Authenticator;
  /** Tracks requests and aborts their jobs on SIGTERM. */
  readonly shutdown?: GracefulShutdown;
}

/** What is known of a delivery so far: what its answer and its log line name. */
interface Known {
  /** The delivery, once its headers are read. */
  readonly run?: ScheduledRun;
  /** The run it asks for, once planned. */
  readonly runId?: string;
  /** Extra fields of the log line (the caller, the run kind, why it was refused). */
  readonly fields: object;
}

/**
 * What the function answers one delivery: every step returns one, and {@link writeAnswer} turns it
 * into the response and the log line, with the status and level of its outcome.
 */
export interface Answer extends Known {
  readonly outcome: ResponseOutcome;
  readonly message: string;
  /** Headers the outcome calls for: `WWW-Authenticate` with a 401, `Allow` with a 405. */
  readonly headers?: Readonly<Record<string, string>>;
}

function isAnswer(value: object | undefined): value is Answer {
  return value !== undefined && 'outcome' in value && 'message' in value;
}

/** The message and extra log fields of a run outcome. */
function describe(
  result: Exclude<RunOutcome, { outcome: 'guard_changed' }>,
  exposeErrors: boolean,
): { message: string; fields: object } {
  const detail = (error: unknown) => (exposeErrors ? ` (${describeThrown(error)})` : '');
  switch (result.outcome) {
    case 'processed': {
      const { attempt, completion, leaseLoss } = result;
      const fields = { attemptId: attempt.attemptId, takeover: attempt.takeover, completion };
      const message = {
        recorded: 'Run processed: the job ran and its completion is recorded.',
        lease_lost: `The job ran, but ${leaseLossMessage(leaseLoss ?? 'unknown')}.`,
        unrecorded:
          'The job ran, but Firestore did not record its completion; a later delivery may run it again.',
      }[completion];
      return { message, fields };
    }
    case 'duplicate': {
      if (result.record.status === 'skipped') {
        return {
          message:
            'Run skipped earlier: another run of the job was still running (overlap policy "skip"); the job was not run.',
          fields: { blockedBy: result.record.blockedBy },
        };
      }
      const { status, reportedAt } = result.record;
      if (status === 'missed' || status === 'failed') {
        return {
          message: `Run reported ${status === 'missed' ? 'missed' : 'failed after retries'} at ${reportedAt?.toISOString()}, so this late delivery does not run it; to run it, backfill it (npm run runs -- --backfill) or re-run it (npm run trigger -- JOB --rerun --slot T).`,
          fields: { reportedBy: result.record.reportedBy },
        };
      }
      const at = result.record.completedAt?.toISOString();
      return {
        message: `Run already completed${at ? ` at ${at}` : ''}; the job was not run again.`,
        fields: { completedBy: result.record.attemptId },
      };
    }
    case 'in_progress': {
      const until = result.holder?.leaseExpires.toISOString();
      return {
        message: `Another attempt is running this run${until ? ` (lease until ${until})` : ''}; retry later.`,
        fields: { heldBy: result.holder?.attemptId },
      };
    }
    case 'failed':
      return {
        message: `The job failed${detail(result.error)}; ${
          {
            recorded: 'the claim is released so a retry can run it.',
            lease_lost: `${leaseLossMessage(result.leaseLoss ?? 'unknown')}.`,
            unrecorded:
              'its claim could not be released, so retries get 409 until the lease lapses.',
          }[result.release]
        }`,
        fields: {
          attemptId: result.attempt.attemptId,
          release: result.release,
          err: loggableError(result.error),
        },
      };
    case 'unreadable_record': {
      const { field, problem } = result.record;
      return {
        message:
          `The run's record cannot be read (field ${field} ${problem}); it was left as it is and ` +
          'the job was not run. Repair it: if no attempt of this run is running, delete the ' +
          'document (the next delivery runs the job), or set status to "completed" if the run is done.',
        fields: { field, problem },
      };
    }
    case 'unavailable':
      return {
        message:
          result.error instanceof DatabaseNotFoundError
            ? `${result.error.message}; the job was not run.`
            : `Firestore is unavailable${detail(result.error)}; the job was not run. Retry later.`,
        fields: { err: result.error },
      };
  }
}

/** What a response says first about a run that is not its slot's. */
const KIND_NOTES = {
  slot: '',
  forced:
    'Forced run (it came well before its schedule time, so it is a run of its own; the slot still runs at its time). ',
  manual: 'Manual run. ',
  rerun: "Re-run (a run of its own; the slot's record is unchanged). ",
} as const;

/** What a response says first about a Force run that came without its schedule time. */
function untimedNote(scheduleTime: string): string {
  return `Forced run without X-CloudScheduler-ScheduleTime (the console's "Force run" may omit it): a run of its own, keyed on the slot ${scheduleTime}, whose own run is apart from it. `;
}

/**
 * The refusal of a re-run the function may not run (`rerun.ts`): 400 `invalid_request`, 409
 * `in_progress` while the slot runs, 500 `unreadable_record`; `undefined` for any other plan.
 *
 * @throws {LedgerUnavailableError} if Firestore's time or the slot's record cannot be read.
 */
async function rerunAnswer(deps: HandlerDeps, delivery: Delivery, known: Known) {
  const { job, run, plan } = delivery;
  if (plan.kind !== 'rerun' || plan.details.rerunOf === undefined) return undefined;
  const now = await deps.clock();
  const refused = await rerunRefusal(
    job,
    run.scheduleTime,
    plan.details.rerunOf,
    now,
    deps.history,
    {
      runId: forcedRunId(job.id, new Date(run.scheduleTime), run.scope),
      toleranceMs: forcedRunToleranceMs(job, deps.config.forcedRunToleranceMs),
    },
  );
  if (refused === undefined) return undefined;
  const outcome = (
    { invalid: 'invalid_request', running: 'in_progress', unreadable: 'unreadable_record' } as const
  )[refused.refusal];
  const answer: Answer = {
    ...known,
    outcome,
    message: refused.message,
    fields: { ...known.fields, rerunOf: plan.details.rerunOf, reason: refused.refusal },
  };
  return answer;
}

/** How a run the overlap policy blocks is named in its answer. */
const BLOCKED_NOTES = {
  slot: 'Not run',
  forced: 'Forced run not run',
  manual: 'Manual run not run',
  rerun: 'Re-run not run',
} as const;

/**
 * The overlap step (`policy/overlap.ts`) for a job with `skip` or `wait`: the lock write to commit
 * with the claim when no other run holds the job's lock (`{ guard }`), or the answer while one
 * does, by the job's policy and the run's kind:
 * - `wait`: 409 `waiting`, nothing written (Scheduler retries).
 * - `skip`, a slot's or forced run: recorded `skipped` (final, 200), naming the holder.
 * - `skip`, a backfilled slot: 409 `waiting`, nothing written: the slot stays missed, and the
 *   backfill says it was not run.
 * - `skip`, a manual run or re-run: 409 `waiting`, nothing written: the person who asked sees it
 *   was not run (`npm run trigger` exits 1) and may ask again, or with `--allow-overlap`.
 * - the holder's record cannot be read: 500 `unreadable_record` naming it; nothing written.
 * `{}` for `allow` (no lock: no read, no write).
 *
 * @throws {LedgerUnavailableError} if the lock, the reads or the `skipped` record fail.
 */
async function overlapStep(
  deps: HandlerDeps,
  delivery: Delivery,
  known: Known,
): Promise<Answer | { guard?: GuardedWrite }> {
  const { job, run, plan } = delivery;
  const { history } = deps;
  if (plan.overlap === 'allow') return {};
  const checked = await checkOverlap(
    { history, jobDocuments: deps.jobDocuments, leaseMs: deps.config.leaseMs },
    job,
    plan.runId,
    new Date(run.scheduleTime),
    run.scope,
  );
  if (checked.state === 'free') return { guard: checked.guard };
  const blockedBy = checked.by;
  const fields = { ...known.fields, blockedBy };
  if (checked.state === 'unreadable') {
    const { field, problem } = checked.record;
    return {
      ...known,
      outcome: 'unreadable_record',
      message:
        `${BLOCKED_NOTES[plan.kind]}: the run holding ${job.id}'s overlap lock, ${blockedBy}, has a record this version cannot read ` +
        `(field ${field} ${problem}), so whether it still runs is unknown (overlap policy "${plan.overlap}"); nothing was recorded. ` +
        `Repair that record: if no attempt of run ${blockedBy} is running, delete it, or set its status to "completed" if it is done; then retry.`,
      fields: { ...fields, field, problem },
    };
  }
  const byHand = plan.kind === 'manual' || plan.kind === 'rerun';
  if (plan.overlap === 'wait' || byHand || run.backfill === true) {
    const then = byHand
      ? 'run it again once that run ends, or with --allow-overlap to run it beside it'
      : run.backfill === true
        ? 'the slot stays missed: backfill it again once that run ends'
        : 'retry later';
    return {
      ...known,
      outcome: 'waiting',
      message: `${BLOCKED_NOTES[plan.kind]}: another run of ${job.id} is still running (overlap policy "${plan.overlap}"); ${then} (nothing was recorded).`,
      fields,
    };
  }
  const recorded = await history.recordSkipped(plan.runId, plan.details, blockedBy);
  if (recorded === 'exists') {
    // The run has a record already (a retry of a failed attempt, a lapsed one, a reported miss).
    // A finished one answers as a duplicate; any other would be taken over and run beside the
    // lock's holder, so it waits instead, as the policy `wait` does.
    const record = (await history.getMany([plan.runId])).records.get(plan.runId);
    if (record !== undefined && record.status !== 'unreadable' && isCompleted(record)) {
      return {};
    }
    return {
      ...known,
      outcome: 'waiting',
      message: `Another run of ${job.id} is still running (overlap policy "skip") and this run already has a record (an earlier attempt), so it is not run beside it; retry later.`,
      fields,
    };
  }
  return {
    ...known,
    outcome: 'skipped',
    message: `${BLOCKED_NOTES[plan.kind]}: another run of ${job.id} is still running (overlap policy "skip"); recorded as skipped.`,
    fields,
  };
}

/**
 * A Scheduler retry of a slot (more than the job's forced-run tolerance after it, within its retry
 * window) whose delivery an instance earlier took for a forced run (`slotsForcedRun`) answers as
 * that run: a duplicate once it finished, 409 while its lease is live; after a failure, or a
 * lapsed lease, the slot runs (the retry it is). On-time deliveries skip the read, and so do those
 * past the window (a backfill, `trigger --slot`), which the history already keeps from a slot
 * whose forced run was its delivery (`readSlotRecords`), so a processed run costs what it did.
 *
 * @throws {LedgerUnavailableError} if Firestore's time or the records cannot be read.
 */
async function forcedRunAnswer(
  deps: HandlerDeps,
  delivery: Delivery,
  known: Known,
): Promise<Answer | undefined> {
  const { job, run, plan } = delivery;
  if (plan.kind !== 'slot') return undefined;
  const slot = new Date(run.scheduleTime);
  const toleranceMs = forcedRunToleranceMs(job, deps.config.forcedRunToleranceMs);
  const now = await deps.clock();
  const late = now.getTime() - slot.getTime();
  if (late <= toleranceMs || late > retryWindowMs(job)) return undefined;
  const standIn = await slotsForcedRun(deps.history, job, slot, run.scope, toleranceMs);
  if (standIn === undefined) return undefined;
  const { runId, record } = standIn;
  const fields = { ...known.fields, slotRunKind: 'forced' };
  if (isCompleted(record) || record.status === RunStatus.Skipped) {
    return {
      ...known,
      runId,
      fields,
      outcome: 'duplicate',
      message:
        'Run already completed: an earlier delivery of this slot was taken for a forced run (this run id), which is the slot’s run; the job was not run again.',
    };
  }
  if (record.status === RunStatus.InProgress && isLeaseLive(record, now)) {
    return {
      ...known,
      runId,
      fields,
      outcome: 'in_progress',
      message:
        'An earlier delivery of this slot, taken for a forced run (this run id), is running it; retry later.',
    };
  }
  return undefined;
}

/**
 * Missed-run detection of the job's closed slots (`missed-runs.ts`), when this delivery is due;
 * never throws: a failed check is a warning and never fails the run.
 */
async function checkClosedSlots(
  missedRuns: MissedRunCheck,
  job: DeclaredJob,
  run: ScheduledRun,
  logger: Logger,
): Promise<void> {
  try {
    if (!(await missedRuns.isDue(job, new Date(run.scheduleTime), run.scope))) return;
    await missedRuns.check(job, run.scope, logger);
  } catch (err) {
    logger.warn(
      { err: loggableError(err) },
      'the missed-run check of closed slots failed; the run is not affected',
    );
  }
}

/** A delivery the function will run: its job, its headers and its plan. */
interface Delivery {
  readonly job: DeclaredJob;
  readonly run: ScheduledRun;
  readonly plan: RunPlan;
}

/**
 * The answer for an error a step threw: `unavailable` for Firestore before the claim (forced-run
 * detection's read of Firestore's time, the overlap check), `unknown_job` / `invalid_request` for
 * a delivery that names no run, `failed` for anything else. Error text only with `exposeErrors`.
 */
function thrownAnswer(err: unknown, exposeErrors: boolean, known: Known): Answer {
  if (err instanceof LedgerUnavailableError) {
    return {
      ...known,
      outcome: 'unavailable',
      message: `Firestore is unavailable${exposeErrors ? ` (${err.message})` : ''}; the job was not run. Retry later.`,
      fields: { ...known.fields, err },
    };
  }
  if (err instanceof InvalidRequestError) {
    return {
      ...known,
      outcome: err instanceof UnknownJobError ? 'unknown_job' : 'invalid_request',
      message: err.message,
      fields: { ...known.fields, reason: err.message },
    };
  }
  return {
    ...known,
    outcome: 'failed',
    message: `Internal error${exposeErrors ? ` (${describeThrown(err)})` : ''}; retry later.`,
    fields: { ...known.fields, err: loggableError(err) },
  };
}

/**
 * The refusal of a request that may not run anything (credentials, method, shutdown), or the
 * log fields of an admitted one (the verified caller).
 */
async function admit(deps: HandlerDeps, req: Request): Promise<Answer | { caller?: string }> {
  const { config, authenticate, shutdown } = deps;
  const auth = authenticate ? await authenticate(req.get('authorization')) : undefined;
  if (auth?.ok === false) {
    return {
      outcome: auth.outcome,
      message: auth.message,
      fields: { reason: auth.message },
      // RFC 9110: a 401 names the scheme the caller should use.
      ...(auth.outcome === 'unauthenticated' ? { headers: { 'WWW-Authenticate': 'Bearer' } } : {}),
    };
  }
  if (req.method !== config.httpMethod) {
    return {
      outcome: 'method_not_allowed',
      message: `Cloud Scheduler delivers this job with ${config.httpMethod} (HTTP_METHOD); ${req.method} runs nothing.`,
      fields: {},
      headers: { Allow: config.httpMethod },
    };
  }
  if (shutdown?.signal.aborted) {
    return {
      outcome: 'unavailable',
      message: 'This instance is shutting down; the job was not run. Retry later.',
      fields: {},
    };
  }
  return auth === undefined ? {} : { caller: auth.email };
}

/**
 * The job a delivery names, and its headers. The declared ids are listed only with
 * `exposeErrors`: they tell any caller which jobs the function runs.
 *
 * @throws {InvalidRequestError} for headers that name no run (a job not declared here that sent
 *   no schedule time included: a groc schedule's, most likely); {@link UnknownJobError} for a job
 *   that is not declared.
 */
function readDelivery(
  deps: HandlerDeps,
  req: Request,
): { headers: DeliveryHeaders; job: DeclaredJob } {
  const headers = readDeliveryHeaders(req, deps.config);
  const job = findJob(deps.jobs, headers.jobName);
  if (job === undefined && headers.scheduleTime === undefined) {
    throw new InvalidRequestError(missingScheduleTimeAdvice(headers.jobName));
  }
  if (job === undefined) {
    throw new UnknownJobError(headers.jobName, deps.config.exposeErrors ? deps.jobs : undefined);
  }
  return { headers, job };
}

/**
 * The run a delivery names: as sent, or for a "Force run" without `X-CloudScheduler-ScheduleTime`
 * the forced run `policy/force-run.ts` chooses by Firestore's time (the job's next slot, or the
 * slot whose forced run it retries), marked `withoutScheduleTime`.
 *
 * @throws {InvalidRequestError} if the schedule never fires again; {@link LedgerUnavailableError}
 *   if Firestore's time or the records cannot be read.
 */
async function timedRun(
  deps: HandlerDeps,
  headers: DeliveryHeaders,
  job: DeclaredJob,
): Promise<ScheduledRun> {
  const { scheduleTime, ...rest } = headers;
  if (scheduleTime !== undefined) return { ...rest, scheduleTime };
  const forced = await untimedForceRun(job, headers.scope, await deps.clock(), (ids) =>
    deps.history.getMany(ids),
  );
  if (forced === undefined) {
    throw new InvalidRequestError(
      `X-CloudScheduler-ScheduleTime is missing, and job ${job.id} has no next slot to key a Force run on: its schedule never fires again.`,
    );
  }
  return { ...rest, scheduleTime: forced.scheduleTime, withoutScheduleTime: true };
}

/**
 * Refuses a schedule time Scheduler cannot have sent, or whose record the TTL may have deleted
 * (`schedule-time.ts`), judged on Firestore's clock.
 *
 * @throws {InvalidRequestError} saying what to fix; {@link LedgerUnavailableError} if the clock's
 *   one read fails.
 */
async function checkScheduleTime(
  deps: HandlerDeps,
  job: DeclaredJob,
  run: ScheduledRun,
  toleranceMs: number,
): Promise<object> {
  const now = await deps.clock();
  const limits = { now, retentionMs: deps.config.retentionMs, toleranceMs };
  const problem = scheduleTimeProblem(job, new Date(run.scheduleTime), limits);
  if (problem !== undefined) throw new InvalidRequestError(problem);
  return {};
}

/** The context a job's attempt runs with. */
function jobContext(delivery: Delivery, attempt: Attempt, logger: Logger): JobContext {
  const { job, run, plan } = delivery;
  return {
    runId: attempt.runId,
    jobName: run.jobName,
    job: jobInfoOf(job),
    kind: plan.kind,
    ...(plan.details.rerunOf === undefined ? {} : { rerunOf: plan.details.rerunOf }),
    scheduleTime: new Date(run.scheduleTime),
    attemptId: attempt.attemptId,
    firstClaimedAt: attempt.firstClaimedAt,
    get leaseExpires() {
      return attempt.leaseExpires;
    },
    signal: attempt.signal,
    note: attempt.note,
    logger: logger.child({ attemptId: attempt.attemptId }),
  };
}

/**
 * Runs the delivery's job once through {@link runOnce}, with the missed-run check of the job's
 * closed slots beside the job of a due slot's run (a run audit checks every job instead), and
 * answers with what became of the run.
 */
async function runDelivery(
  deps: HandlerDeps,
  missedRuns: MissedRunCheck,
  delivery: Delivery,
  known: Known,
  requestLogger: Logger,
  guard: GuardedWrite | undefined,
): Promise<Answer | 'guard_changed'> {
  const { config, shutdown } = deps;
  const { run, plan } = delivery;
  const logger = requestLogger.child({
    runId: plan.runId,
    jobName: run.jobName,
    scheduleTime: run.scheduleTime,
    ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
  });
  routeRequestErrors((err) => logger.error({ err: loggableError(err) }, JOB_LEFT_ERROR));
  const checks: Promise<void>[] = [];
  const ended = shutdown?.running(plan.runId);
  const audit = isAuditJob(delivery.job);
  const jobRun = audit
    ? auditRun(missedRuns, deps.jobs, run.scope, requestLogger.child({ auditRunId: plan.runId }))
    : delivery.job.run;
  // When this delivery reached the instance, by Firestore's clock: a final failure judges by it.
  const deliveredAt =
    plan.kind === 'slot' && config.missedRunCheck ? await deps.clock() : new Date(0);
  const result = await runOnce(
    deps.ledger,
    plan.runId,
    (attempt) => {
      // A due slot's check runs beside the job: it delays the answer by at most its reads.
      if (plan.kind === 'slot' && config.missedRunCheck && !audit) {
        checks.push(checkClosedSlots(missedRuns, delivery.job, run, logger));
      }
      return jobRun(jobContext(delivery, attempt, logger));
    },
    {
      details: plan.details,
      ...(guard === undefined ? {} : { guard }),
      // Only a backfill (`X-Run-Once-Backfill`) runs a slot after it was reported.
      reopenReported: run.backfill === true,
      logger,
      shutdown: shutdown?.signal,
      maxRunMs: config.jobTimeoutMs,
      // A slot's failure that no Scheduler retry can follow is reported by its own release write.
      ...(plan.kind === 'slot' && config.missedRunCheck
        ? {
            finalFailure: finalFailureReporter(
              delivery.job,
              new Date(run.scheduleTime),
              deliveredAt,
              deps.clock,
            ),
          }
        : {}),
    },
  ).finally(ended);
  await Promise.all(checks);
  if (result.outcome === 'guard_changed') return 'guard_changed';
  if (result.outcome === 'failed' && result.reported) {
    reportFinalFailure(logger, delivery.job, run.scheduleTime, result);
  }
  const described = describe(result, config.exposeErrors);
  return {
    ...known,
    outcome: result.outcome,
    message: `${run.withoutScheduleTime ? untimedNote(run.scheduleTime) : KIND_NOTES[plan.kind]}${described.message}`,
    fields: { ...known.fields, ...described.fields },
  };
}

/**
 * Decides what the delivery is and runs it: admit → read → plan → overlap → run. Each step either
 * answers (a refusal, or the error it threw) or hands on what it learnt.
 */
async function answerDelivery(
  deps: HandlerDeps,
  missedRuns: MissedRunCheck,
  req: Request,
  logger: Logger,
): Promise<Answer> {
  const { config } = deps;
  /** Runs one step; an error it throws becomes the answer, naming what is known so far. */
  const step = <T>(known: Known, run: () => T | Promise<T>): Promise<T | Answer> =>
    Promise.resolve()
      .then(run)
      .catch((err: unknown) => thrownAnswer(err, config.exposeErrors, known));

  const admitted = await step({ fields: {} }, () => admit(deps, req));
  if (isAnswer(admitted)) return admitted;
  const fields = admitted.caller === undefined ? {} : { caller: admitted.caller };
  const read = await step({ fields }, () => readDelivery(deps, req));
  if (isAnswer(read)) return read;
  const { job } = read;
  const run = await step({ fields }, () => timedRun(deps, read.headers, job));
  if (isAnswer(run)) return run;
  const toleranceMs = forcedRunToleranceMs(job, config.forcedRunToleranceMs);
  const inRange = await step({ run, fields }, () => checkScheduleTime(deps, job, run, toleranceMs));
  if (isAnswer(inRange)) return inRange;
  const plan = await step({ run, fields }, () => planRun(run, job, deps.clock, toleranceMs));
  if (isAnswer(plan)) return plan;
  const known: Known = {
    run,
    runId: plan.runId,
    fields: {
      ...fields,
      ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
      ...(run.withoutScheduleTime ? { scheduleTimeSent: false } : {}),
    },
  };
  const delivery: Delivery = { job, run, plan };
  const rerunRefused = await step(known, () => rerunAnswer(deps, delivery, known));
  if (rerunRefused !== undefined) return rerunRefused;
  const standIn = await step(known, () => forcedRunAnswer(deps, delivery, known));
  if (standIn !== undefined) return standIn;
  // Overlap, then the claim with the lock write: a lost round (another run's claim with the lock
  // landed between our read and our claim) judges the lock afresh.
  for (let round = 0; round < MAX_OVERLAP_ROUNDS; round++) {
    const overlap = await step(known, () => overlapStep(deps, delivery, known));
    if (isAnswer(overlap)) return overlap;
    const answer = await step(known, () =>
      runDelivery(deps, missedRuns, delivery, known, logger, overlap.guard),
    );
    if (answer !== 'guard_changed') return answer;
  }
  return {
    ...known,
    outcome: 'waiting',
    message: `Other runs of ${job.id} took its overlap lock ${MAX_OVERLAP_ROUNDS} times while this one tried (overlap policy "${plan.overlap}"); nothing was recorded; retry later.`,
  };
}

/**
 * Writes the answer, unless a response was already sent, and its one log line: the status and
 * level of its outcome ({@link STATUS_BY_OUTCOME}, {@link LOG_LEVEL_BY_OUTCOME}), never a header
 * or the body.
 */
function writeAnswer(
  req: Request,
  res: Response,
  logger: Logger,
  answer: Answer,
  startedAt: number,
): void {
  const { outcome, message, runId, run } = answer;
  const status = STATUS_BY_OUTCOME[outcome];
  const body: ResponseBody =
    runId === undefined ? { outcome, message } : { outcome, runId, message };
  if (!res.headersSent)
    res
      .set(answer.headers ?? {})
      .status(status)
      .json(body);
  const durationMs = Math.round(performance.now() - startedAt);
  logger[LOG_LEVEL_BY_OUTCOME[outcome]](
    {
      outcome,
      status,
      runId,
      jobName: run?.jobName,
      scheduleTime: run?.scheduleTime,
      durationMs,
      ...answer.fields,
      httpRequest: {
        requestMethod: req.method,
        status,
        latency: `${(durationMs / 1000).toFixed(3)}s`,
        userAgent: req.get('user-agent'),
      },
    },
    `scheduled run: ${outcome}`,
  );
}

const JOB_LEFT_ERROR =
  'unhandled error left by the job (a fire-and-forget promise or a timer callback): it does not change the run, which ends as the job returned or threw; await or catch it';

/**
 * Creates the HTTP function that runs each declared job once per scheduled run: the delivery's
 * `X-CloudScheduler-JobName` (the short id, or `projects/P/locations/L/jobs/ID`) selects the job, and
 * the run id is computed from the short id, so both forms name the same run.
 *
 * Responses (JSON {@link ResponseBody}, statuses from {@link STATUS_BY_OUTCOME}): 200 `processed`
 * or `duplicate`, or `skipped` (overlap policy `skip`: a slot or forced run, recorded); 409
 * `in_progress`, or `waiting` (overlap: policy `wait`, or a blocked manual run, re-run or
 * backfilled slot; nothing recorded); 400 `invalid_request` (nothing written); 401
 * `unauthenticated` / 403 `forbidden` with `deps.authenticate` (checked before anything else); 405
 * `method_not_allowed` with an `Allow` header; 404 `unknown_job` for a job that is not declared
 * (nothing written; the declared ids are listed only with `exposeErrors`); 500 `failed` (claim
 * released), `unreadable_record` (record left as is, job not run) or `unavailable` (job not run).
 * Logs one line per request with outcome, runId, jobName, scheduleTime, attemptId and duration; never
 * a header or the body.
 *
 * @example
 * functions.http('handleScheduledJob', createScheduledJobHandler({
 *   config, ledger, history: new RunHistory(documents), clock: () => ledger.serverTime(), jobs: validateJobs(jobs), logger,
 * }));
 */
export function createScheduledJobHandler(deps: HandlerDeps): HttpFunction {
  // One per instance: it remembers where its checks left each job's cursor.
  const missedRuns = new MissedRunCheck({
    ...deps,
    forcedRunToleranceMs: deps.config.forcedRunToleranceMs,
  });
  const handle: HttpFunction = async (req, res) => {
    const startedAt = performance.now();
    const logger = withTrace(deps.logger, req.headers);
    // Before the run is known; runDelivery routes them to the run's logger once it is.
    routeRequestErrors((err) => logger.error({ err: loggableError(err) }, JOB_LEFT_ERROR));
    writeAnswer(req, res, logger, await answerDelivery(deps, missedRuns, req, logger), startedAt);
  };
  const { shutdown } = deps;
  return shutdown ? (req, res) => shutdown.track(Promise.resolve(handle(req, res))) : handle;
}
