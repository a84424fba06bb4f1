/** The deciding steps of a delivery: each returns an {@link Answer} or hands on what it learnt. */
import type { Request } from '@google-cloud/functions-framework';
import {
  describeThrown,
  LedgerUnavailableError,
  loggableError,
} from '../core/errors.ts';
import { isCompleted, isLeaseLive } from '../core/run-record.ts';
import { forceRunScheduleTime } from '../policy/force-run.ts';
import { type DeclaredJob, findJob } from '../policy/job-declaration.ts';
import { rerunRefusal } from '../policy/rerun.ts';
import { longestExecutionMs } from '../policy/retry-policy.ts';
import { forcedRunId, slotsForcedRun } from '../policy/run-history.ts';
import {
  planRun,
  type RunPlan,
  type ScheduledRun,
} from '../policy/run-plan.ts';
import {
  forcedRunToleranceMs,
  scheduleTimeProblem,
} from '../policy/schedule-time.ts';
import type { Config } from './config.ts';
import type { HandlerDeps } from './handler-deps.ts';
import {
  MESSAGES,
  OUTCOME_BY_RERUN_REFUSAL,
  type Reply,
  unavailableMessage,
  unknownJobMessage,
} from './outcomes.ts';
import * as request from './scheduler-request.ts';

/** What the steps found out about a delivery so far: its run once timed, its run id once planned, log fields. */
export type Findings = Readonly<{
  run?: ScheduledRun;
  runId?: string;
  fields: object;
}>;

/** What the function answers one delivery; `handler.ts` writes it. */
export interface Answer extends Findings, Omit<Reply, 'fields'> {
  /** Headers the outcome calls for: `WWW-Authenticate` with a 401, `Allow` with a 405. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A delivery whose job is known, its headers read; `TimedDelivery` once its run is, at Firestore's `now`. */
type ReadDelivery = Readonly<{
  job: DeclaredJob;
  headers: request.DeliveryHeaders;
  findings: Findings;
}>;
type TimedDelivery = ReadDelivery & Readonly<{ run: ScheduledRun; now: Date }>;

/** A planned delivery; `now` (Firestore's) judges all of it, `toleranceMs` its job's (ms). */
export type Delivery = TimedDelivery &
  Readonly<{ plan: RunPlan; toleranceMs: number }>;

/** Whether a step's result is its answer rather than what it hands on. */
export function isAnswer<T extends object>(value: Answer | T): value is Answer {
  return 'outcome' in value && 'message' in value;
}

/** The answer `reply`, naming what was found; its fields join the findings'. */
export function answer(findings: Findings, reply: Reply): Answer {
  return {
    ...findings,
    ...reply,
    fields: { ...findings.fields, ...reply.fields },
  };
}

/** A refusal of a delivery that names no run: its message is also the log line's `reason`. */
function refusal(
  findings: Findings,
  outcome: Reply['outcome'],
  message: string,
): Answer {
  return answer(findings, { outcome, message, fields: { reason: message } });
}

/**
 * Runs one step; its rejection becomes the answer naming what `findingsNow()` says was found by then:
 * 400 for an `InvalidRequestError`, `unavailable` for Firestore, else `failed` (its text if
 * `EXPOSE_ERRORS`).
 */
export function answeringErrors<T>(
  deps: HandlerDeps,
  findingsNow: () => Findings,
  run: () => Promise<T>,
): Promise<T | Answer> {
  return run().catch((err: unknown) => {
    const findings = findingsNow();
    if (err instanceof request.InvalidRequestError) {
      return refusal(findings, 'invalid_request', err.message);
    }
    const detail = (text: string) =>
      deps.config.exposeErrors ? ` (${text})` : '';
    if (err instanceof LedgerUnavailableError) {
      const message = unavailableMessage(err, detail(err.message));
      return answer(findings, {
        outcome: 'unavailable',
        message,
        fields: { err },
      });
    }
    const message = MESSAGES.internal(detail(describeThrown(err)));
    return answer(findings, {
      outcome: 'failed',
      message,
      fields: { err: loggableError(err) },
    });
  });
}

/**
 * admit → read → timed run (at Firestore's now) → plan → a re-run's refusal or the Force run that stood for the slot;
 * one {@link answeringErrors}, whose answer to a thrown error names what the steps so far learnt.
 */
export function decideDelivery(
  deps: HandlerDeps,
  req: Request,
): Promise<Answer | Delivery> {
  let findings: Findings = { fields: {} };
  const decide = async (): Promise<Answer | Delivery> => {
    const admitted = await admit(deps, req);
    if (isAnswer(admitted)) {
      return admitted;
    }
    findings = admitted;
    const read = readDelivery(deps, req, findings);
    if (isAnswer(read)) {
      return read;
    }
    findings = read.findings;
    const timed = await timedRun(deps, read);
    if (isAnswer(timed)) {
      return timed;
    }
    findings = timed.findings;
    const planned = planDelivery(deps, timed);
    if (isAnswer(planned)) {
      return planned;
    }
    findings = planned.findings;
    return (planned.plan.kind === 'rerun' ? refuseRerun : asForcedRun)(
      deps,
      planned,
    );
  };
  return answeringErrors(deps, () => findings, decide);
}

/** The refusal of a request that may not run anything (credentials, method, shutdown). */
async function admit(
  deps: HandlerDeps,
  req: Request,
): Promise<Answer | Findings> {
  const { config, authenticate, shutdown } = deps;
  const auth = authenticate
    ? await authenticate(req.get('authorization'))
    : undefined;
  if (auth?.ok === false) {
    const refused = refusal({ fields: {} }, auth.outcome, auth.message);
    if (auth.outcome !== 'unauthenticated') {
      return refused;
    }
    return { ...refused, headers: { 'WWW-Authenticate': 'Bearer' } }; // RFC 9110: name the scheme
  }
  if (req.method !== config.httpMethod) {
    const message = MESSAGES.methodNotAllowed(config.httpMethod, req.method);
    const headers = { Allow: config.httpMethod };
    return { outcome: 'method_not_allowed', message, fields: {}, headers };
  }
  if (shutdown?.signal.aborted) {
    return {
      outcome: 'unavailable',
      message: MESSAGES.shuttingDown,
      fields: {},
    };
  }
  return { fields: auth === undefined ? {} : { caller: auth.email } };
}

/** The job a delivery names and its headers; 400 for headers naming no run, 404 for no such job. */
function readDelivery(
  deps: HandlerDeps,
  req: Request,
  findings: Findings,
): Answer | ReadDelivery {
  const headers = request.readDeliveryHeaders(req, deps.config);
  const job = findJob(deps.jobs, headers.jobNameSent);
  if (job === undefined && headers.scheduleTime === undefined) {
    return refusal(
      findings,
      'invalid_request',
      request.missingScheduleTimeAdvice(headers.jobNameSent),
    );
  }
  if (job === undefined) {
    const declared = deps.config.exposeErrors ? deps.jobs : undefined;
    return refusal(
      findings,
      'unknown_job',
      unknownJobMessage(headers.jobNameSent, declared),
    );
  }
  const { scheduleTime, scheduledAt, ...rest } = headers;
  const run =
    scheduleTime === undefined || scheduledAt === undefined
      ? {}
      : { run: { ...rest, scheduleTime, scheduledAt } };
  return { job, headers, findings: { ...findings, ...run } };
}

/**
 * The run a delivery names, at Firestore's now: as sent, or for a "Force run" without a schedule
 * time the one `policy/force-run.ts` chooses (400 if none). @throws {LedgerUnavailableError}
 */
async function timedRun(
  deps: HandlerDeps,
  read: ReadDelivery,
): Promise<Answer | TimedDelivery> {
  const { job, headers, findings } = read;
  const now = await deps.clock();
  if (findings.run !== undefined) {
    return { ...read, run: findings.run, now };
  }
  const forced = await forceRunScheduleTime(job, headers.scope, now, (ids) =>
    deps.history.getMany(ids),
  );
  if (forced === undefined) {
    return refusal(findings, 'invalid_request', MESSAGES.noNextSlot(job.id));
  }
  const run: ScheduledRun = {
    ...headers,
    scheduleTime: forced,
    scheduledAt: new Date(forced),
    withoutScheduleTime: true,
  };
  return { ...read, run, now, findings: { ...findings, run } };
}

/**
 * The job's forced-run tolerance for this delivery, ms: the band's low end [min(configured, 30 s),
 * configured] where the verdict is the same at both ends (docs/performance.md).
 */
function toleranceFor(
  job: DeclaredJob,
  run: ScheduledRun,
  now: Date,
  config: Config,
): number {
  const { forcedRunToleranceMs: configured, retentionMs } = config;
  const low = Math.min(configured, 30_000);
  const late = now.getTime() - run.scheduledAt.getTime();
  const slotDelivery = run.trigger === undefined && !run.withoutScheduleTime;
  const banded = Math.abs(late) <= low || late > longestExecutionMs(job);
  if (slotDelivery && banded && late + configured <= retentionMs) {
    return low;
  }
  return forcedRunToleranceMs(job, configured);
}

/** The plan of the delivery's run at `now`; 400 for a schedule time `schedule-time.ts` refuses. */
function planDelivery(
  deps: HandlerDeps,
  timed: TimedDelivery,
): Answer | Delivery {
  const { job, run, now, findings } = timed;
  const toleranceMs = toleranceFor(job, run, now, deps.config);
  const limits = { now, retentionMs: deps.config.retentionMs, toleranceMs };
  const problem = scheduleTimeProblem(job, run.scheduledAt, limits);
  if (problem !== undefined) {
    return refusal(findings, 'invalid_request', problem);
  }
  const plan = planRun(run, job, now, toleranceMs);
  const fields = {
    ...findings.fields,
    ...(plan.kind === 'slot' ? {} : { runKind: plan.kind }),
    ...(run.withoutScheduleTime ? { scheduleTimeSent: false } : {}),
  };
  return {
    ...timed,
    plan,
    toleranceMs,
    findings: { run, runId: plan.runId, fields },
  };
}

/** The refusal of a re-run `rerun.ts` refuses. @throws {LedgerUnavailableError} */
async function refuseRerun(
  deps: HandlerDeps,
  delivery: Delivery,
): Promise<Answer | Delivery> {
  const { job, run, plan, now, toleranceMs, findings } = delivery;
  const { rerunOf } = plan.details;
  if (rerunOf === undefined) {
    return delivery;
  }
  const forced = {
    runId: forcedRunId(job.id, run.scheduledAt, run.scope),
    toleranceMs,
  };
  const refused = await rerunRefusal(
    job,
    run,
    rerunOf,
    now,
    deps.history,
    forced,
  );
  if (refused === undefined) {
    return delivery;
  }
  const outcome = OUTCOME_BY_RERUN_REFUSAL[refused.refusal];
  const fields = { rerunOf, reason: refused.refusal };
  return answer(findings, { outcome, message: refused.message, fields });
}

/**
 * A late retry of a slot (past the tolerance, within the job's longest execution: the last retry
 * Scheduler may send, plus one attempt deadline, `longestExecutionMs`) whose delivery was taken for
 * a forced run answers as that run: a duplicate once finished, 409 while its lease is live. Not the
 * retry window, which assumes every attempt ran to its deadline: a retry after attempts that
 * failed fast may come later (as `forceRunScheduleTime` found, seed 5 history 23).
 */
async function asForcedRun(
  deps: HandlerDeps,
  delivery: Delivery,
): Promise<Answer | Delivery> {
  const { job, run, plan, now, toleranceMs, findings } = delivery;
  if (plan.kind !== 'slot') {
    return delivery;
  }
  const slot = run.scheduledAt;
  const late = now.getTime() - slot.getTime();
  if (late <= toleranceMs || late > longestExecutionMs(job)) {
    return delivery;
  }
  const forcedRun = await slotsForcedRun(
    deps.history,
    job,
    slot,
    run.scope,
    toleranceMs,
  );
  if (forcedRun === undefined) {
    return delivery;
  }
  const { runId, record } = forcedRun;
  const reply: Omit<Reply, 'fields'> | undefined = isCompleted(record)
    ? { outcome: 'duplicate', message: MESSAGES.forcedRunDone }
    : isLeaseLive(record, now)
      ? { outcome: 'in_progress', message: MESSAGES.forcedRunRunning }
      : undefined;
  if (reply === undefined) {
    return delivery;
  }
  return answer(
    { ...findings, runId },
    { ...reply, fields: { slotRunKind: 'forced' } },
  );
}
