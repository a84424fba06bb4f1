/**
 * The HTTP adapter: decides what a Cloud Scheduler delivery is (refused, not a run, a run planned),
 * runs it through {@link runOnce}, and answers. Each step returns an {@link Answer} or hands on
 * what it learnt; one function writes the answer, with the status, level and words of its outcome
 * (`outcomes.ts`).
 */
import type { HttpFunction, Request, Response } from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import { describeThrown, LedgerUnavailableError, loggableError } from '../core/errors.ts';
import type { JobContext } from '../core/job-context.ts';
import type { Ledger } from '../core/ledger.ts';
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { type Attempt, type RunOnceOptions, runOnce } from '../core/run-once.ts';
import { isCompleted, isLeaseLive, RunStatus } from '../core/run-record.ts';
import { untimedForceRun } from '../policy/force-run.ts';
import { type DeclaredJob, findJob, jobInfoOf } from '../policy/job-declaration.ts';
import { finalFailureReporter, MissedRunCheck, reportFinalFailure } from '../policy/missed-runs.ts';
import { decideOverlap, MAX_OVERLAP_ROUNDS } from '../policy/overlap.ts';
import { rerunRefusal } from '../policy/rerun.ts';
import { retryWindowMs } from '../policy/retry-policy.ts';
import { auditRun, isAuditJob } from '../policy/run-audit.ts';
import { forcedRunId, type RunHistory, slotsForcedRun } from '../policy/run-history.ts';
import { planRun, type RunPlan } from '../policy/run-plan.ts';
import { forcedRunToleranceMs, scheduleTimeProblem } from '../policy/schedule-time.ts';
import type { Authenticator } from './auth.ts';
import type { Config } from './config.ts';
import { InvalidRequestError } from './errors.ts';
import { routeRequestErrors } from './framework-workarounds.ts';
import { withTrace } from './logger.ts';
import {
  blockedSaid,
  LOG_LEVEL_BY_OUTCOME,
  MESSAGES,
  OUTCOME_BY_RERUN_REFUSAL,
  type ResponseBody,
  type ResponseOutcome,
  ranSaid,
  runNote,
  type Said,
  STATUS_BY_OUTCOME,
  unknownJobMessage,
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
 * slots, the missed and finally-failed reports, and the `skipped` record of the overlap policy
 * `skip`. {@link RunHistory} implements it.
 */
export type RunHistoryPort = Pick<
  RunHistory,
  'getMany' | 'reportMissed' | 'markReported' | 'recordSkipped'
>;

/** What {@link createScheduledJobHandler} needs. */
export interface HandlerDeps {
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
  /** The per-job documents (`policy/job-state.ts`): missed-run cursors, overlap locks. */
  readonly jobDocuments: RunDocuments;
  /**
   * Firestore's time now (`() => ledger.serverTime()`), read once per delivery: a delivery is
   * judged early, and a slot closed, by the clock its lease is judged by, never the instance's.
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
  /** The delivery, once its schedule time is known. */
  readonly run?: ScheduledRun;
  /** The run it asks for, once planned. */
  readonly runId?: string;
  /** Extra fields of the log line (the caller, the run kind, why it was refused). */
  readonly fields: object;
}

/** What the function answers one delivery: {@link writeAnswer} turns it into the response. */
export interface Answer extends Known, Omit<Said, 'fields'> {
  /** Headers the outcome calls for: `WWW-Authenticate` with a 401, `Allow` with a 405. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A delivery whose job is known, its headers read. */
interface Read {
  readonly job: DeclaredJob;
  readonly headers: DeliveryHeaders;
  readonly known: Known;
}

/** A delivery the function will decide on: its job, its run, its plan, and Firestore's now. */
interface Delivery {
  readonly job: DeclaredJob;
  readonly run: ScheduledRun;
  readonly plan: RunPlan;
  /** Firestore's time when the delivery was judged: every decision of this delivery uses it. */
  readonly now: Date;
  /** The job's forced-run tolerance, ms (`forcedRunToleranceMs`). */
  readonly toleranceMs: number;
  readonly known: Known;
}

function isAnswer<T extends object>(value: Answer | T): value is Answer {
  return 'outcome' in value && 'message' in value;
}

/** The answer `said`, naming what is known; its fields join the known ones. */
function answer(known: Known, said: Said): Answer {
  return { ...known, ...said, fields: { ...known.fields, ...said.fields } };
}

/** A refusal of a delivery that names no run: its message is also the log line's `reason`. */
function refusal(known: Known, outcome: ResponseOutcome, message: string): Answer {
  return answer(known, { outcome, message, fields: { reason: message } });
}

/**
 * The answer for an error a step threw: `unavailable` for Firestore before the claim (the clock,
 * forced-run detection, the overlap check), `failed` for anything else. Error text only with
 * `exposeErrors`.
 */
function thrownAnswer(err: unknown, exposeErrors: boolean, known: Known): Answer {
  if (err instanceof LedgerUnavailableError) {
    const detail = exposeErrors ? ` (${err.message})` : '';
    return answer(known, {
      outcome: 'unavailable',
      message: MESSAGES.unavailable(detail),
      fields: { err },
    });
  }
  const detail = exposeErrors ? ` (${describeThrown(err)})` : '';
  return answer(known, {
    outcome: 'failed',
    message: MESSAGES.internal(detail),
    fields: { err: loggableError(err) },
  });
}

/** The refusal of a request that may not run anything (credentials, method, shutdown). */
async function admit(deps: HandlerDeps, req: Request): Promise<Answer | Known> {
  const { config, authenticate, shutdown } = deps;
  const auth = authenticate ? await authenticate(req.get('authorization')) : undefined;
  if (auth?.ok === false) {
    const refused = refusal({ fields: {} }, auth.outcome, auth.message);
    // RFC 9110: a 401 names the scheme the caller should use.
    const scheme = { 'WWW-Authenticate': 'Bearer' };
    return auth.outcome === 'unauthenticated' ? { ...refused, headers: scheme } : refused;
  }
  if (req.method !== config.httpMethod) {
    const message = MESSAGES.methodNotAllowed(config.httpMethod, req.method);
    const said: Said = { outcome: 'method_not_allowed', message };
    return { ...answer({ fields: {} }, said), headers: { Allow: config.httpMethod } };
  }
  if (shutdown?.signal.aborted) {
    return answer({ fields: {} }, { outcome: 'unavailable', message: MESSAGES.shuttingDown });
  }
  return { fields: auth === undefined ? {} : { caller: auth.email } };
}

/**
 * The job a delivery names, and its headers (`readDeliveryHeaders`); 400 for headers that name no
 * run (a job not declared here that sent no schedule time: a groc schedule's, most likely), 404
 * for a job that is not declared (the declared ids listed only with `exposeErrors`).
 */
function readDelivery(deps: HandlerDeps, req: Request, known: Known): Answer | Read {
  let headers: DeliveryHeaders;
  try {
    headers = readDeliveryHeaders(req, deps.config);
  } catch (err) {
    if (err instanceof InvalidRequestError) return refusal(known, 'invalid_request', err.message);
    throw err;
  }
  const job = findJob(deps.jobs, headers.jobName);
  if (job === undefined && headers.scheduleTime === undefined) {
    return refusal(known, 'invalid_request', missingScheduleTimeAdvice(headers.jobName));
  }
  if (job === undefined) {
    const declared = deps.config.exposeErrors ? deps.jobs : undefined;
    return refusal(known, 'unknown_job', unknownJobMessage(headers.jobName, declared));
  }
  const { scheduleTime, ...rest } = headers;
  return {
    job,
    headers,
    known: scheduleTime === undefined ? known : { ...known, run: { ...rest, scheduleTime } },
  };
}

/**
 * The run a delivery names: as sent, or for a "Force run" without `X-CloudScheduler-ScheduleTime`
 * the forced run `policy/force-run.ts` chooses at `now` (the job's next slot, or the slot whose
 * forced run it retries), marked `withoutScheduleTime`; 400 if the schedule never fires again.
 *
 * @throws {LedgerUnavailableError} if the records cannot be read.
 */
async function timedRun(deps: HandlerDeps, read: Read, now: Date): Promise<Answer | ScheduledRun> {
  if (read.known.run !== undefined) return read.known.run;
  const { job, headers } = read;
  const readMany = (ids: readonly string[]) => deps.history.getMany(ids);
  const forced = await untimedForceRun(job, headers.scope, now, readMany);
  if (forced === undefined) {
    return refusal(read.known, 'invalid_request', MESSAGES.noNextSlot(job.id));
  }
  const { scheduleTime: _unsent, ...rest } = headers;
  return { ...rest, scheduleTime: forced.scheduleTime, withoutScheduleTime: true };
}

/**
 * The plan of the run of `job` a delivery names, at `now`; 400 for a schedule time Scheduler cannot
 * have sent, or whose record the TTL may have deleted (`schedule-time.ts`).
 */
async function planDelivery(
  deps: HandlerDeps,
  job: DeclaredJob,
  run: ScheduledRun,
  now: Date,
  known: Known,
): Promise<Answer | Delivery> {
  const toleranceMs = forcedRunToleranceMs(job, deps.config.forcedRunToleranceMs);
  const limits = { now, retentionMs: deps.config.retentionMs, toleranceMs };
  const problem = scheduleTimeProblem(job, new Date(run.scheduleTime), limits);
  if (problem !== undefined) return refusal(known, 'invalid_request', problem);
  const plan = await planRun(run, job, async () => now, toleranceMs);
  const fields = {
    ...known.fields,
    ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
    ...(run.withoutScheduleTime ? { scheduleTimeSent: false } : {}),
  };
  return { job, run, plan, now, toleranceMs, known: { run, runId: plan.runId, fields } };
}

/**
 * The refusal of a re-run the function may not run (`rerun.ts`): 400 `invalid_request`, 409
 * `in_progress` while the slot runs, 500 `unreadable_record`.
 *
 * @throws {LedgerUnavailableError} if the slot's record cannot be read.
 */
async function refuseRerun(deps: HandlerDeps, delivery: Delivery): Promise<Answer | Delivery> {
  const { job, run, plan, now, known } = delivery;
  const { rerunOf } = plan.details;
  if (plan.kind !== 'rerun' || rerunOf === undefined) return delivery;
  const forced = {
    runId: forcedRunId(job.id, new Date(run.scheduleTime), run.scope),
    toleranceMs: delivery.toleranceMs,
  };
  const refused = await rerunRefusal(job, run.scheduleTime, rerunOf, now, deps.history, forced);
  if (refused === undefined) return delivery;
  const outcome = OUTCOME_BY_RERUN_REFUSAL[refused.refusal];
  const fields = { rerunOf, reason: refused.refusal };
  return answer(known, { outcome, message: refused.message, fields });
}

/**
 * A Scheduler retry of a slot (more than the job's forced-run tolerance after it, within its retry
 * window) whose delivery an instance earlier took for a forced run (`slotsForcedRun`) answers as
 * that run: a duplicate once it finished, 409 while its lease is live; after a failure, or a
 * lapsed lease, the slot runs. On-time deliveries skip the read, and so do those past the window
 * (a backfill, `trigger --slot`), so a processed run costs what it did.
 *
 * @throws {LedgerUnavailableError} if the records cannot be read.
 */
async function answerAsForcedRun(
  deps: HandlerDeps,
  delivery: Delivery,
): Promise<Answer | Delivery> {
  const { job, run, plan, now, toleranceMs, known } = delivery;
  if (plan.kind !== 'slot') return delivery;
  const slot = new Date(run.scheduleTime);
  const late = now.getTime() - slot.getTime();
  if (late <= toleranceMs || late > retryWindowMs(job)) return delivery;
  const standIn = await slotsForcedRun(deps.history, job, slot, run.scope, toleranceMs);
  if (standIn === undefined) return delivery;
  const { runId, record } = standIn;
  const fields = { slotRunKind: 'forced' };
  if (isCompleted(record) || record.status === RunStatus.Skipped) {
    return answer(
      { ...known, runId },
      { outcome: 'duplicate', message: MESSAGES.forcedRunDone, fields },
    );
  }
  if (record.status === RunStatus.InProgress && isLeaseLive(record, now)) {
    const message = MESSAGES.forcedRunRunning;
    return answer({ ...known, runId }, { outcome: 'in_progress', message, fields });
  }
  return delivery;
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

/** Whether this delivery is a due slot's, whose run checks for missed and finally failed runs. */
function checksMissedRuns(deps: HandlerDeps, delivery: Delivery): boolean {
  return delivery.plan.kind === 'slot' && deps.config.missedRunCheck;
}

/** How {@link runOnce} runs the delivery's job: its record, its lock write, its limits. */
function runOptions(
  deps: HandlerDeps,
  delivery: Delivery,
  logger: Logger,
  guard: GuardedWrite | undefined,
): RunOnceOptions {
  const { job, run, plan, now } = delivery;
  // A slot's failure that no Scheduler retry can follow is reported by its own release write,
  // judged from when this delivery reached the instance (`now`).
  const slot = new Date(run.scheduleTime);
  const finalFailure = finalFailureReporter(job, slot, now, deps.clock);
  return {
    details: plan.details,
    ...(guard === undefined ? {} : { guard }),
    // Only a backfill (`X-Run-Once-Backfill`) runs a slot after it was reported.
    reopenReported: run.backfill === true,
    logger,
    shutdown: deps.shutdown?.signal,
    maxRunMs: deps.config.jobTimeoutMs,
    ...(checksMissedRuns(deps, delivery) ? { finalFailure } : {}),
  };
}

/**
 * Runs the delivery's job once through {@link runOnce}, with the missed-run check of the job's
 * closed slots beside the job of a due slot's run (a run audit checks every job instead), and
 * answers with what became of the run; `guard_changed` if another run's claim took the lock first.
 */
async function runDelivery(
  deps: HandlerDeps,
  missedRuns: MissedRunCheck,
  delivery: Delivery,
  requestLogger: Logger,
  guard: GuardedWrite | undefined,
): Promise<Answer | 'guard_changed'> {
  const { job, run, plan } = delivery;
  const logger = requestLogger.child({
    runId: plan.runId,
    jobName: run.jobName,
    scheduleTime: run.scheduleTime,
    ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
  });
  routeRequestErrors((err) => logger.error({ err: loggableError(err) }, MESSAGES.jobLeftError));
  const audit = isAuditJob(job);
  const jobRun = audit
    ? auditRun(missedRuns, deps.jobs, run.scope, requestLogger.child({ auditRunId: plan.runId }))
    : job.run;
  const checks: Promise<void>[] = [];
  const ended = deps.shutdown?.running(plan.runId);
  const work = (attempt: Attempt) => {
    // A due slot's check runs beside the job: it delays the answer by at most its reads.
    if (checksMissedRuns(deps, delivery) && !audit) {
      checks.push(checkClosedSlots(missedRuns, job, run, logger));
    }
    return jobRun(jobContext(delivery, attempt, logger));
  };
  const options = runOptions(deps, delivery, logger, guard);
  const result = await runOnce(deps.ledger, plan.runId, work, options).finally(ended);
  await Promise.all(checks);
  if (result.outcome === 'guard_changed') return 'guard_changed';
  if (result.outcome === 'failed' && result.reported) {
    reportFinalFailure(logger, job, run.scheduleTime, result);
  }
  const ran = ranSaid(result, deps.config.exposeErrors);
  return answer(delivery.known, { ...ran, message: `${runNote(run, plan.kind)}${ran.message}` });
}

/** Runs one step; an error it throws becomes the answer, naming what is known so far. */
type Stepper = <T>(known: Known, run: () => T | Promise<T>) => Promise<T | Answer>;

/**
 * The overlap decision, then the claim with the lock write: a lost round (another run's claim
 * with the lock landed between our read and our claim) decides afresh.
 */
async function claimAndRun(
  deps: HandlerDeps,
  missedRuns: MissedRunCheck,
  delivery: Delivery,
  logger: Logger,
  step: Stepper,
): Promise<Answer> {
  const { job, run, plan, known } = delivery;
  const { history, jobDocuments } = deps;
  const stores = { history, jobDocuments, leaseMs: deps.config.leaseMs };
  for (let round = 0; round < MAX_OVERLAP_ROUNDS; round++) {
    const decided = await step(known, () => decideOverlap(stores, job, run, plan));
    if (isAnswer(decided)) return decided;
    if (decided.action !== 'run') {
      return answer(known, blockedSaid(decided, job.id, plan.kind, plan.overlap));
    }
    const guard = decided.guard;
    const ran = await step(known, () => runDelivery(deps, missedRuns, delivery, logger, guard));
    if (ran !== 'guard_changed') return ran;
  }
  const message = MESSAGES.lockContended(job.id, plan.overlap, MAX_OVERLAP_ROUNDS);
  return { ...known, outcome: 'waiting', message };
}

/**
 * Decides what the delivery is and runs it: admit → read → Firestore's now → run → plan → re-run
 * → forced run → overlap and claim. Each step answers (a refusal, or the error it threw) or hands
 * on what it learnt.
 */
async function answerDelivery(
  deps: HandlerDeps,
  missedRuns: MissedRunCheck,
  req: Request,
  logger: Logger,
): Promise<Answer> {
  const step: Stepper = (known, run) =>
    Promise.resolve()
      .then(run)
      .catch((err: unknown) => thrownAnswer(err, deps.config.exposeErrors, known));
  const admitted = await step({ fields: {} }, () => admit(deps, req));
  if (isAnswer(admitted)) return admitted;
  const read = await step(admitted, () => readDelivery(deps, req, admitted));
  if (isAnswer(read)) return read;
  const now = await step(read.known, () => deps.clock());
  if (isAnswer(now)) return now;
  const run = await step(read.known, () => timedRun(deps, read, now));
  if (isAnswer(run)) return run;
  const known = { ...read.known, run };
  const planned = await step(known, () => planDelivery(deps, read.job, run, now, known));
  if (isAnswer(planned)) return planned;
  const rerun = await step(planned.known, () => refuseRerun(deps, planned));
  if (isAnswer(rerun)) return rerun;
  const delivery = await step(planned.known, () => answerAsForcedRun(deps, rerun));
  if (isAnswer(delivery)) return delivery;
  return claimAndRun(deps, missedRuns, delivery, logger, step);
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
  // Each job's forced-run tolerance, at cold start rather than on the first delivery's clock.
  for (const job of deps.jobs) forcedRunToleranceMs(job, deps.config.forcedRunToleranceMs);
  const handle: HttpFunction = async (req, res) => {
    const startedAt = performance.now();
    const logger = withTrace(deps.logger, req.headers);
    // Before the run is known; runDelivery routes them to the run's logger once it is.
    routeRequestErrors((err) => logger.error({ err: loggableError(err) }, MESSAGES.jobLeftError));
    writeAnswer(req, res, logger, await answerDelivery(deps, missedRuns, req, logger), startedAt);
  };
  const { shutdown } = deps;
  return shutdown ? (req, res) => shutdown.track(Promise.resolve(handle(req, res))) : handle;
}
