/**
 * The HTTP adapter: reads a Cloud Scheduler delivery, runs it through {@link runOnce}, and owns the
 * mapping from outcome to status code and body, in one place.
 */
import type { HttpFunction } from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import {
  DatabaseNotFoundError,
  describeThrown,
  InvalidRequestError,
  LedgerUnavailableError,
  loggableError,
  UnknownJobError,
} from '../core/errors.ts';
import type { Ledger } from '../core/ledger.ts';
import { leaseLossMessage, type RunOutcome, runOnce } from '../core/run-once.ts';
import { type DeclaredJob, findJob, jobInfoOf } from '../policy/job-declaration.ts';
import { reportEarlierSlots } from '../policy/missed-runs.ts';
import { runningEarlierSlot } from '../policy/overlap.ts';
import type { RunHistory } from '../policy/run-history.ts';
import { jobRunId, planRun, type RunPlan } from '../policy/run-plan.ts';
import type { Authenticator } from './auth.ts';
import type { Config } from './config.ts';
import { routeRequestErrors } from './framework-workarounds.ts';
import { withTrace } from './logger.ts';
import {
  LOG_LEVEL_BY_OUTCOME,
  type ResponseBody,
  type ResponseOutcome,
  STATUS_BY_OUTCOME,
} from './outcomes.ts';
import { readScheduledRun, type ScheduledRun } from './scheduler-request.ts';
import type { GracefulShutdown } from './shutdown.ts';

export { type ResponseBody, type ResponseOutcome, STATUS_BY_OUTCOME } from './outcomes.ts';

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
    | 'missedCheckSlots'
    | 'forcedRunToleranceMs'
  >;
  readonly ledger: Ledger;
  /**
   * Where missed-run detection, the overlap policy and forced-run detection read (the project's
   * `RunLedger`); without it, none of them runs.
   */
  readonly history?: Pick<
    RunHistory,
    'getMany' | 'reportMissed' | 'markReported' | 'recordSkipped' | 'serverTime'
  >;
  /**
   * Firestore's time now, for forced-run detection: `history.serverTime()` unless given (tests
   * drive it).
   */
  readonly clock?: () => Promise<Date>;
  /** The declared jobs (`validateJobs(jobs)` from `jobs.ts`): a delivery runs the one it names. */
  readonly jobs: readonly DeclaredJob[];
  readonly logger: Logger;
  /** Checks the caller before anything else (`AUTH_MODE=verify-oidc`); none with `platform`. */
  readonly authenticate?: Authenticator;
  /** Tracks requests and aborts their jobs on SIGTERM. */
  readonly shutdown?: GracefulShutdown;
}

/** The message and extra log fields of a run outcome. */
function describe(result: RunOutcome, exposeErrors: boolean): { message: string; fields: object } {
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
            'Run skipped earlier: an earlier run of the job was still running (overlap policy "skip"); the job was not run.',
          fields: { blockedBy: result.record.blockedBy },
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
} as const;

/**
 * The overlap policy's answer for a slot whose earlier slot still runs: `skipped` (recorded, 200)
 * or `waiting` (409, nothing written); `undefined` when the slot runs as usual.
 */
async function overlapRefusal(
  deps: HandlerDeps,
  job: DeclaredJob,
  run: ScheduledRun,
  plan: RunPlan,
): Promise<{ outcome: 'skipped' | 'waiting'; message: string; blockedBy: string } | undefined> {
  if (plan.overlap === 'allow' || deps.history === undefined) return undefined;
  const slot = new Date(run.scheduleTime);
  const blockedBy = await runningEarlierSlot(deps.history, job, slot, run.scope);
  if (blockedBy === undefined) return undefined;
  if (plan.overlap === 'wait') {
    return {
      outcome: 'waiting',
      message: `An earlier run of ${job.id} is still running (overlap policy "wait"); retry later.`,
      blockedBy,
    };
  }
  const recorded = await deps.history.recordSkipped(plan.runId, plan.details, blockedBy);
  if (recorded === 'exists') return undefined; // a record appeared: claim as usual
  return {
    outcome: 'skipped',
    message: `Not run: an earlier run of ${job.id} is still running (overlap policy "skip"); recorded as skipped.`,
    blockedBy,
  };
}

/**
 * Missed-run detection for the job's earlier slots (`missed-runs.ts`); never throws: a failed check
 * is a warning and never fails the run.
 */
async function checkEarlierSlots(
  deps: HandlerDeps,
  job: DeclaredJob,
  run: ScheduledRun,
  logger: Logger,
): Promise<void> {
  const count = deps.config.missedCheckSlots;
  if (count === 0 || deps.history === undefined) return;
  try {
    await reportEarlierSlots({
      history: deps.history,
      job,
      scope: run.scope,
      before: new Date(run.scheduleTime),
      count,
      logger,
    });
  } catch (err) {
    logger.warn(
      { err: loggableError(err) },
      'the missed-run check of earlier slots failed; the run is not affected',
    );
  }
}

/**
 * Creates the HTTP function that runs each declared job once per scheduled run: the delivery's
 * `X-CloudScheduler-JobName` (the short id, or `projects/P/locations/L/jobs/ID`) selects the job, and
 * the run id is computed from the short id, so both forms name the same run.
 *
 * Responses (JSON {@link ResponseBody}, statuses from {@link STATUS_BY_OUTCOME}): 200 `processed`
 * or `duplicate`; 409 `in_progress`; 400 `invalid_request` (nothing written); 401
 * `unauthenticated` / 403 `forbidden` with `deps.authenticate` (checked before anything else); 405
 * `method_not_allowed` with an `Allow` header; 404 `unknown_job` for a job that is not declared
 * (nothing written) for any method but `HTTP_METHOD`; 500 `failed` (claim
 * released), `unreadable_record` (record left as is, job not run) or `unavailable` (job not run).
 * Logs one line per request with outcome, runId, jobName, scheduleTime, attemptId and duration; never
 * a header or the body.
 *
 * @example
 * functions.http('handleScheduledJob', createScheduledJobHandler({ config, ledger, jobs: validateJobs(jobs), logger }));
 */
export function createScheduledJobHandler(deps: HandlerDeps): HttpFunction {
  const { config, ledger, jobs, authenticate, shutdown } = deps;
  const handle: HttpFunction = async (req, res) => {
    const startedAt = performance.now();
    const logger = withTrace(deps.logger, req.headers);
    let run: ScheduledRun | undefined;
    let runId: string | undefined;
    let outcome: ResponseOutcome;
    let message: string;
    let fields: object = {};
    routeRequestErrors((err) =>
      logger.error(
        { err: loggableError(err), runId, jobName: run?.jobName },
        'unhandled error left by the job (a fire-and-forget promise or a timer callback): it does not change the run, which ends as the job returned or threw; await or catch it',
      ),
    );
    try {
      const auth = authenticate ? await authenticate(req.get('authorization')) : undefined;
      if (auth?.ok === false) {
        outcome = auth.outcome;
        message = auth.message;
        fields = { reason: auth.message };
        // RFC 9110: a 401 names the scheme the caller should use.
        if (auth.outcome === 'unauthenticated') res.set('WWW-Authenticate', 'Bearer');
      } else if (req.method !== config.httpMethod) {
        outcome = 'method_not_allowed';
        message = `Cloud Scheduler delivers this job with ${config.httpMethod} (HTTP_METHOD); ${req.method} runs nothing.`;
        res.set('Allow', config.httpMethod);
      } else if (shutdown?.signal.aborted) {
        outcome = 'unavailable';
        message = 'This instance is shutting down; the job was not run. Retry later.';
      } else {
        fields = auth ? { caller: auth.email } : {};
        run = readScheduledRun(req, config);
        const job = findJob(jobs, run.jobName);
        if (job === undefined) throw new UnknownJobError(run.jobName, jobs);
        const clock = deps.clock ?? (async () => (await deps.history?.serverTime()) ?? new Date());
        const plan = await planRun(run, job, clock, config.forcedRunToleranceMs);
        runId = plan.runId;
        const runLogger = logger.child({
          runId,
          jobName: run.jobName,
          scheduleTime: run.scheduleTime,
          ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
        });
        fields = { ...fields, ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }) };
        const refusal = await overlapRefusal(deps, job, run, plan);
        if (refusal !== undefined) {
          ({ outcome, message } = refusal);
          fields = { ...fields, blockedBy: refusal.blockedBy };
        } else {
          const { jobName, scheduleTime } = run;
          const info = jobInfoOf(job);
          let check: Promise<unknown> | undefined;
          const result = await runOnce(
            ledger,
            runId,
            (attempt) => {
              // Once per processed slot, beside the job: it delays the answer by at most its read.
              if (plan.kind === 'slot') {
                check = checkEarlierSlots(deps, job, run as ScheduledRun, runLogger);
              }
              return job.run({
                runId: jobRunId(attempt.runId, attempt.rerun),
                jobName,
                job: info,
                kind: plan.kind,
                rerun: attempt.rerun,
                scheduleTime: new Date(scheduleTime),
                attemptId: attempt.attemptId,
                firstClaimedAt: attempt.firstClaimedAt,
                get leaseExpires() {
                  return attempt.leaseExpires;
                },
                signal: attempt.signal,
                note: attempt.note,
                logger: runLogger.child({ attemptId: attempt.attemptId }),
              });
            },
            {
              details: plan.details,
              logger: runLogger,
              shutdown: shutdown?.signal,
              maxRunMs: config.jobTimeoutMs,
            },
          );
          await check;
          outcome = result.outcome;
          const described = describe(result, config.exposeErrors);
          message = `${KIND_NOTES[plan.kind]}${described.message}`;
          fields = { ...fields, ...described.fields };
        }
      }
    } catch (err) {
      if (err instanceof LedgerUnavailableError) {
        // Before the claim: forced-run detection's read of Firestore's time, or the overlap check.
        outcome = 'unavailable';
        message = `Firestore is unavailable${config.exposeErrors ? ` (${err.message})` : ''}; the job was not run. Retry later.`;
        fields = { ...fields, err };
      } else if (err instanceof InvalidRequestError) {
        outcome = err instanceof UnknownJobError ? 'unknown_job' : 'invalid_request';
        message = err.message;
        fields = { ...fields, reason: err.message };
      } else {
        outcome = 'failed';
        message = `Internal error${config.exposeErrors ? ` (${describeThrown(err)})` : ''}; retry later.`;
        fields = { err: loggableError(err) };
      }
    }
    const status = STATUS_BY_OUTCOME[outcome];
    const body: ResponseBody =
      runId === undefined ? { outcome, message } : { outcome, runId, message };
    if (!res.headersSent) res.status(status).json(body);
    const durationMs = Math.round(performance.now() - startedAt);
    logger[LOG_LEVEL_BY_OUTCOME[outcome]](
      {
        outcome,
        status,
        runId,
        jobName: run?.jobName,
        scheduleTime: run?.scheduleTime,
        durationMs,
        ...fields,
        httpRequest: {
          requestMethod: req.method,
          status,
          latency: `${(durationMs / 1000).toFixed(3)}s`,
          userAgent: req.get('user-agent'),
        },
      },
      `scheduled run: ${outcome}`,
    );
  };
  return shutdown ? (req, res) => shutdown.track(Promise.resolve(handle(req, res))) : handle;
}
