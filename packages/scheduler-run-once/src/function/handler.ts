/** The HTTP adapter: decide (`decide.ts`), run once ({@link runOnce}), answer (`outcomes.ts`). */
import type {
  HttpFunction,
  Request,
  Response,
} from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import { loggableError } from '../core/errors.ts';
import type { JobContext } from '../core/job-context.ts';
import type { GuardedWrite } from '../core/run-documents.ts';
import { type Attempt, type RunOutcome, runOnce } from '../core/run-once.ts';
import {
  finalFailureReporter,
  REPORT_UNCONFIRMED,
  REPORT_WITHDRAWN,
} from '../policy/final-failure.ts';
import { jobInfoOf } from '../policy/job-declaration.ts';
import { type CatchUpSender, LateRunScan } from '../policy/late-runs.ts';
import { MissedRunCheck } from '../policy/missed-runs.ts';
import {
  CLAIM_WINDOW_OPERATIONS,
  decideOverlap,
  MAX_OVERLAP_ROUNDS,
} from '../policy/overlap.ts';
import { auditRun, isAuditJob } from '../policy/run-audit.ts';
import { catchUpSender } from './catch-up-delivery.ts';
import {
  type Answer,
  answer,
  answeringErrors,
  type Delivery,
  decideDelivery,
  isAnswer,
} from './decide.ts';
import { routeRequestErrors } from './framework-workarounds.ts';
import type { HandlerDeps } from './handler-deps.ts';
import { withTrace, withTraceFields } from './logger.ts';
import * as outcomes from './outcomes.ts';
import {
  type DeliverySpan,
  NO_TRACING,
  type SpanAttributes,
  tracedLedger,
} from './tracing.ts';

export type { HandlerDeps } from './handler-deps.ts';

/**
 * The deps and what one function instance keeps: the missed-run check's job cursors, the late-run
 * scan; `send`: for an audit's delivery, how it catches up a late slot.
 */
type InstanceDeps = HandlerDeps & {
  readonly missedRuns: MissedRunCheck;
  readonly lateRuns: LateRunScan;
  readonly send?: CatchUpSender;
};

/** Missed-run detection of the job's closed slots, if due; a failure is only a warning. */
function checkClosedSlots(
  deps: InstanceDeps,
  delivery: Delivery,
  logger: Logger,
) {
  const { job, run, now } = delivery;
  const warn = (err: unknown) => {
    const message =
      'the missed-run check of closed slots failed; the run is not affected';
    logger.warn({ err: loggableError(err) }, message);
  };
  try {
    if (!deps.missedRuns.isDue(job, run.scheduledAt, run.scope, now)) {
      return undefined;
    }
    return deps.missedRuns.check(job, run.scope, logger).then(() => {}, warn);
  } catch (err) {
    return void warn(err);
  }
}

/** The job's context for one attempt of the delivery's run (the job contract, `JobContext`). */
function jobContextOf(
  delivery: Delivery,
  attempt: Attempt,
  logger: Logger,
): JobContext {
  const { job, run, plan } = delivery;
  const scheduleTime = run.scheduledAt;
  // A Force run and a manual run are runs of their own: the job sees no slot (JobContext.slot).
  const standsForSlot = plan.kind === 'slot' || plan.kind === 'rerun';
  const caughtUp = plan.details.caughtUp === true ? { caughtUp: true } : {};
  return {
    runId: attempt.runId,
    jobName: run.jobNameSent,
    job: jobInfoOf(job),
    kind: plan.kind,
    ...(plan.details.rerunOf === undefined
      ? {}
      : { rerunOf: plan.details.rerunOf }),
    scheduleTime,
    ...(standsForSlot ? { slot: scheduleTime } : {}),
    ...caughtUp,
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

/** After an attempt's own final-failure report: a WARN if its release was lost or unanswered. */
function warnOfReportRelease(result: RunOutcome, logger: Logger): void {
  if (result.outcome !== 'failed' || !result.reported) {
    return;
  }
  if (result.release === 'lease_lost') {
    logger.warn(REPORT_WITHDRAWN);
  } else if (result.release === 'unrecorded') {
    logger.warn(REPORT_UNCONFIRMED);
  }
}

/** Runs the job once (a due slot's beside its missed-run check); `guard_changed`: the lock moved. */
async function runDelivery(
  deps: InstanceDeps,
  delivery: Delivery,
  requestLogger: Logger,
  guard: GuardedWrite | undefined,
): Promise<Answer | 'guard_changed'> {
  const { job, run, plan } = delivery;
  const logger = deliveryLogger(delivery, requestLogger);
  routeRequestErrors(logger);
  const audit = isAuditJob(job);
  const jobRun = jobRunOf(deps, delivery, requestLogger);
  const checksMissedRuns = plan.kind === 'slot' && deps.config.missedRunCheck;
  let check: Promise<void> | undefined;
  const work = (attempt: Attempt) => {
    // A due slot's check runs beside the job: it delays the answer by at most its reads.
    if (checksMissedRuns && !audit) {
      check = checkClosedSlots(deps, delivery, logger);
    }
    const context = jobContextOf(delivery, attempt, logger);
    const { tracer } = deps;
    return tracer === undefined
      ? jobRun(context)
      : tracer.step('job', async () => jobRun(context));
  };
  // Never a backfill's final failure, nor a catch-up's: its attempts are not Scheduler's
  // (docs/how-it-works.md, "Missed runs").
  const reportsFinalFailure =
    checksMissedRuns && run.backfill !== true && run.caughtUp !== true;
  const finalFailure = slotFinalFailure(deps, delivery, logger);
  const ended = deps.shutdown?.running(plan.runId);
  const result = await runOnce(deps.ledger, plan.runId, work, {
    details: plan.details,
    ...(guard === undefined ? {} : { guard }),
    // Only a backfill (`X-Run-Once-Backfill`) runs a slot after it was reported.
    reopenReported: run.backfill === true,
    logger,
    shutdown: deps.shutdown?.signal,
    maxRunMs: deps.config.jobTimeoutMs,
    ...(reportsFinalFailure ? { finalFailure } : {}),
  }).finally(ended);
  if (check !== undefined) {
    await check;
  }
  if (result.outcome === 'guard_changed') {
    return 'guard_changed';
  }
  warnOfReportRelease(result, logger);
  return runAnswer(deps, delivery, result);
}

/** The logger of one delivery's run: its run id, job, schedule time and (unless a slot) kind. */
function deliveryLogger(delivery: Delivery, requestLogger: Logger): Logger {
  const { run, plan } = delivery;
  return requestLogger.child({
    runId: plan.runId,
    jobName: run.jobNameSent,
    scheduleTime: run.scheduleTime,
    ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
  });
}

/** The work a delivery runs: the job's own, or the audit's run over the missed-run ledger. */
function jobRunOf(
  deps: InstanceDeps,
  delivery: Delivery,
  requestLogger: Logger,
) {
  const { job, run, plan } = delivery;
  return isAuditJob(job)
    ? auditRun(
        {
          missedRuns: deps.missedRuns,
          lateRuns: deps.lateRuns,
          ...(deps.send === undefined ? {} : { send: deps.send }),
        },
        deps.jobs,
        run.scope,
        requestLogger.child({ auditRunId: plan.runId }),
      )
    : job.run;
}

/**
 * The reporter of a slot's final failure by its own release write, judged from when this delivery
 * reached the instance (`now`).
 */
function slotFinalFailure(
  deps: InstanceDeps,
  delivery: Delivery,
  logger: Logger,
) {
  const slot = delivery.run.scheduledAt;
  return finalFailureReporter(
    delivery.job,
    slot,
    delivery.now,
    deps.clock,
    logger,
  );
}

/** The answer to a delivery whose run ended with `result`: the run's reply, its kind noted. */
function runAnswer(
  deps: InstanceDeps,
  delivery: Delivery,
  result: Exclude<RunOutcome, { outcome: 'guard_changed' }>,
): Answer {
  const ran = outcomes.runReply(result, deps.config.exposeErrors);
  const note = outcomes.runNote(delivery.run, delivery.plan.kind);
  return answer(delivery.findings, {
    ...ran,
    message: `${note}${ran.message}`,
  });
}

/** The overlap decision, then the claim with the lock write; a lost round decides afresh. */
async function claimAndRun(
  deps: InstanceDeps,
  delivery: Delivery,
  logger: Logger,
): Promise<Answer> {
  const { job, run, plan, findings } = delivery;
  const findingsNow = () => findings;
  const { history, jobDocuments } = deps;
  // An older revision's claim follows its lock write within a few Firestore operations.
  const claimWindowMs =
    CLAIM_WINDOW_OPERATIONS * deps.config.firestoreTimeoutMs;
  const { ledger } = deps;
  const heldHere = (id: string) => ledger.holds?.(id) === true;
  const stores = {
    history,
    jobDocuments,
    leaseMs: deps.config.leaseMs,
    claimWindowMs,
    heldHere,
  };
  for (let round = 0; round < MAX_OVERLAP_ROUNDS; round++) {
    const decided = await answeringErrors(deps, findingsNow, () =>
      decideOverlap(stores, job, run, plan),
    );
    if (isAnswer(decided)) {
      return decided;
    }
    if (decided.action !== 'run') {
      return answer(findings, outcomes.blockedReply(decided, job.id, plan));
    }
    const ran = await answeringErrors(deps, findingsNow, () =>
      runDelivery(deps, delivery, logger, decided.guard),
    );
    if (ran !== 'guard_changed') {
      return ran;
    }
  }
  const message = outcomes.MESSAGES.lockContended(
    job.id,
    plan.overlap,
    MAX_OVERLAP_ROUNDS,
  );
  return { ...findings, outcome: 'waiting', message };
}

/** Writes the answer (unless already sent) and its one log line, never a header or the body. */
function writeAnswer(
  req: Request,
  res: Response,
  logger: Logger,
  reply: Answer,
  ms: number,
): void {
  const { outcome, message, runId, run, headers = {} } = reply;
  const status = outcomes.STATUS_BY_OUTCOME[outcome];
  const body =
    runId === undefined ? { outcome, message } : { outcome, runId, message };
  if (!res.headersSent) {
    res.set(headers).status(status).json(body);
  }
  const durationMs = Math.round(ms);
  const latency = `${(durationMs / 1000).toFixed(3)}s`;
  const userAgent = req.get('user-agent');
  const httpRequest = { requestMethod: req.method, status, latency, userAgent };
  const fields = {
    outcome,
    status,
    runId,
    jobName: run?.jobNameSent,
    scheduleTime: run?.scheduleTime,
  };
  const line = { ...fields, durationMs, ...reply.fields, httpRequest };
  logger[outcomes.logLevelOf(outcome)](line, `scheduled run: ${outcome}`);
}

/** A delivery's span attributes: its run id, job, slot (the schedule time) and kind. */
function deliveryAttributes(delivery: Delivery): SpanAttributes {
  const { run, plan } = delivery;
  return {
    'run_once.run_id': plan.runId,
    'run_once.job': run.jobNameSent,
    'run_once.slot': run.scheduleTime,
    'run_once.kind': plan.kind,
  };
}

/** An answer's span attributes: its outcome and status, and its run where one was read. */
function answerAttributes(answered: Answer): SpanAttributes {
  const { outcome, runId, run } = answered;
  return {
    ...(runId === undefined ? {} : { 'run_once.run_id': runId }),
    ...(run === undefined
      ? {}
      : { 'run_once.job': run.jobNameSent, 'run_once.slot': run.scheduleTime }),
    'run_once.outcome': outcome,
    'http.response.status_code': outcomes.STATUS_BY_OUTCOME[outcome],
  };
}

/**
 * Decides a delivery and runs it (or refuses it) inside its span: the answer to write and the
 * logger of its lines, which carry the span's ids when it is sampled, else the request's trace.
 */
async function answerDelivery(
  instance: InstanceDeps,
  req: Request,
  span: DeliverySpan,
): Promise<{ readonly answered: Answer; readonly logger: Logger }> {
  const logger =
    span.traceFields === undefined
      ? withTrace(instance.logger, req.headers)
      : withTraceFields(instance.logger, span.traceFields);
  // Before the run is known; runDelivery routes them to the run's logger once it is.
  routeRequestErrors(logger);
  const decided = await decideDelivery(instance, req);
  if (!isAnswer(decided)) {
    span.set(deliveryAttributes(decided));
  }
  const answered = isAnswer(decided)
    ? decided
    : await claimAndRun(withCatchUp(instance, decided, req), decided, logger);
  span.set(answerAttributes(answered));
  if (outcomes.STATUS_BY_OUTCOME[answered.outcome] >= 500) {
    span.fail(answered.message);
  }
  return { answered, logger };
}

/** The instance's deps for a delivery; an audit's can catch up late slots through its own URL. */
function withCatchUp(
  instance: InstanceDeps,
  delivery: Delivery,
  req: Request,
): InstanceDeps {
  if (!isAuditJob(delivery.job)) {
    return instance;
  }
  const send = instance.catchUpSender?.(req) ?? catchUpSender(instance, req);
  return { ...instance, send };
}

/**
 * Creates the HTTP function that runs each declared job once per scheduled run, selected by
 * `X-CloudScheduler-JobName` (wired in `register.ts`). Answers JSON ({@link outcomes.ResponseBody})
 * with its outcome's status; the caller is checked first, and a refusal writes nothing.
 */
export function createScheduledJobHandler(deps: HandlerDeps): HttpFunction {
  const { forcedRunToleranceMs } = deps.config;
  const tracer = deps.tracer ?? NO_TRACING;
  // Traced, the claim, the completion and the lease extensions are spans of their own.
  const ledger =
    deps.tracer === undefined
      ? deps.ledger
      : tracedLedger(deps.ledger, deps.tracer);
  const instance: InstanceDeps = {
    ...deps,
    ledger,
    missedRuns: new MissedRunCheck({ ...deps, forcedRunToleranceMs }),
    lateRuns: new LateRunScan({ ...deps, forcedRunToleranceMs }),
  };
  const handle = async (req: Request, res: Response): Promise<void> => {
    const startedAt = performance.now();
    // The span ends and is exported before the answer is written (docs/tracing.md, "Flushing").
    const { answered, logger } = await tracer.delivery(req.headers, (span) =>
      answerDelivery(instance, req, span),
    );
    writeAnswer(req, res, logger, answered, performance.now() - startedAt);
  };
  const { shutdown } = deps;
  return shutdown ? (req, res) => shutdown.track(handle(req, res)) : handle;
}
