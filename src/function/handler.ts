/**
 * The HTTP adapter: decides what a delivery is (`decide.ts`), runs it through {@link runOnce}, and
 * writes the answer of its outcome (`outcomes.ts`).
 */
import type { HttpFunction, Request, Response } from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import { describeThrown, LedgerUnavailableError, loggableError } from '../core/errors.ts';
import type { JobContext } from '../core/job-context.ts';
import type { Ledger } from '../core/ledger.ts';
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { type Attempt, type RunOnceOptions, runOnce } from '../core/run-once.ts';
import { finalFailureReporter, REPORT_WITHDRAWN } from '../policy/final-failure.ts';
import { type DeclaredJob, jobInfoOf } from '../policy/job-declaration.ts';
import { MissedRunCheck } from '../policy/missed-runs.ts';
import { decideOverlap, MAX_OVERLAP_ROUNDS } from '../policy/overlap.ts';
import { auditRun, isAuditJob } from '../policy/run-audit.ts';
import type { RunHistory } from '../policy/run-history.ts';
import type { ScheduledRun } from '../policy/run-plan.ts';
import type { Authenticator } from './auth.ts';
import type { Config } from './config.ts';
import {
  type Answer,
  admit,
  answer,
  answerAsForcedRun,
  type Delivery,
  isAnswer,
  type Known,
  planDelivery,
  readDelivery,
  refuseRerun,
  timedRun,
} from './decide.ts';
import { routeRequestErrors } from './framework-workarounds.ts';
import { withTrace } from './logger.ts';
import {
  blockedSaid,
  logLevelOf,
  MESSAGES,
  type ResponseBody,
  ranSaid,
  runNote,
  STATUS_BY_OUTCOME,
} from './outcomes.ts';
import type { GracefulShutdown } from './shutdown.ts';

/** What the handler needs of run history beside the lease protocol; {@link RunHistory} has it. */
export type RunHistoryPort = Pick<
  RunHistory,
  'getMany' | 'reportMissed' | 'markReported' | 'recordSkipped'
>;

/** What {@link createScheduledJobHandler} needs. */
export interface HandlerDeps {
  readonly config: Config;
  readonly ledger: Ledger;
  /** Where the overlap policy and missed-run detection read and report. */
  readonly history: RunHistoryPort;
  /** The per-job documents (`policy/job-state.ts`). */
  readonly jobDocuments: RunDocuments;
  /** Firestore's time (`() => ledger.serverTime()`), once per delivery: the clock leases use. */
  readonly clock: () => Promise<Date>;
  /** The declared jobs (`validateJobs(jobs)` from `jobs.ts`): a delivery runs the one it names. */
  readonly jobs: readonly DeclaredJob[];
  readonly logger: Logger;
  /** Checks the caller first (`AUTH_MODE=verify-oidc`). */
  readonly authenticate?: Authenticator;
  readonly shutdown?: GracefulShutdown;
}

/** A thrown error's answer: `unavailable` for Firestore, else `failed`; text if `exposeErrors`. */
function thrownAnswer(err: unknown, exposeErrors: boolean, known: Known): Answer {
  if (err instanceof LedgerUnavailableError) {
    const message = MESSAGES.unavailable(exposeErrors ? ` (${err.message})` : '');
    return answer(known, { outcome: 'unavailable', message, fields: { err } });
  }
  const message = MESSAGES.internal(exposeErrors ? ` (${describeThrown(err)})` : '');
  return answer(known, { outcome: 'failed', message, fields: { err: loggableError(err) } });
}

/** Missed-run detection of the job's closed slots, when due; a failure is only a warning. */
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

function checksMissedRuns(deps: HandlerDeps, delivery: Delivery): boolean {
  return delivery.plan.kind === 'slot' && deps.config.missedRunCheck;
}

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
  const finalFailure = finalFailureReporter(job, slot, now, deps.clock, logger);
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

/** Runs the job once (a due slot's beside its missed-run check); `guard_changed`: the lock moved. */
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
  if (result.outcome === 'failed' && result.reported && result.release === 'lease_lost') {
    logger.warn(REPORT_WITHDRAWN);
  }
  const ran = ranSaid(result, deps.config.exposeErrors);
  return answer(delivery.known, { ...ran, message: `${runNote(run, plan.kind)}${ran.message}` });
}

/** Runs one step; an error it throws becomes the answer, naming what is known so far. */
type Stepper = <T>(known: Known, run: () => T | Promise<T>) => Promise<T | Answer>;

/** The overlap decision, then the claim with the lock write; a lost round decides afresh. */
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

/** admit → read → Firestore's now → run → plan → re-run → forced run → overlap and claim. */
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

/** Writes the answer (unless already sent) and its one log line, never a header or the body. */
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
  logger[logLevelOf(outcome)](
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
 * Creates the HTTP function that runs each declared job once per scheduled run, selected by
 * `X-CloudScheduler-JobName` (short id or `projects/P/locations/L/jobs/ID`: one run id). Answers
 * JSON ({@link ResponseBody}) with the status of its outcome ({@link STATUS_BY_OUTCOME}); the
 * caller is checked first, and nothing is written for a refusal.
 *
 * @example
 * functions.http('handleScheduledJob', createScheduledJobHandler({
 *   config, ledger, history: new RunHistory(documents), jobDocuments, clock: () => ledger.serverTime(),
 *   jobs: validateJobs(jobs), logger,
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
    routeRequestErrors((err) => logger.error({ err: loggableError(err) }, MESSAGES.jobLeftError));
    writeAnswer(req, res, logger, await answerDelivery(deps, missedRuns, req, logger), startedAt);
  };
  const { shutdown } = deps;
  return shutdown ? (req, res) => shutdown.track(Promise.resolve(handle(req, res))) : handle;
}
