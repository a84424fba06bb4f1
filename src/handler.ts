/**
 * The HTTP adapter: reads a Cloud Scheduler delivery, runs it through {@link runOnce}, and owns the
 * mapping from outcome to status code and body, in one place.
 */
import { Timestamp } from '@google-cloud/firestore';
import type { HttpFunction } from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import type { Authenticator } from './auth.ts';
import type { Config } from './config.ts';
import { InvalidRequestError } from './errors.ts';
import type { JobContext } from './job.ts';
import type { RunLedger } from './ledger.ts';
import { withTrace } from './logger.ts';
import { computeRunId } from './run-key.ts';
import { type OutcomeName, type RunOutcome, runOnce } from './run-once.ts';
import { readScheduledRun, type ScheduledRun } from './scheduler-request.ts';
import type { GracefulShutdown } from './shutdown.ts';

/** Every response's outcome: the run outcomes plus the adapter's own refusals. */
export type ResponseOutcome = OutcomeName | 'invalid_request' | 'unauthenticated' | 'forbidden';

/**
 * Status code per outcome. 409 for a live claim, never 503: App Engine targets treat 503 specially
 * (the Scheduler guide). Every non-2xx makes Cloud Scheduler retry under the job's retry config.
 */
export const STATUS_BY_OUTCOME = {
  processed: 200,
  duplicate: 200,
  in_progress: 409,
  invalid_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  failed: 500,
  unavailable: 500,
} as const satisfies Record<ResponseOutcome, number>;

/** The JSON body of every response. */
export interface ResponseBody {
  readonly outcome: ResponseOutcome;
  /** Absent when the request named no valid run. */
  readonly runId?: string;
  readonly message: string;
}

/** What {@link createScheduledJobHandler} needs. */
export interface HandlerDeps {
  /** Scope settings, `exposeErrors` and `jobTimeoutMs`. */
  readonly config: Pick<
    Config,
    'keyScope' | 'keyScopeHeaders' | 'keyScopeParams' | 'exposeErrors' | 'jobTimeoutMs'
  >;
  readonly ledger: RunLedger;
  /** The user's job (`runJobLogic` from `job.ts`). */
  readonly job: (ctx: JobContext) => Promise<void> | void;
  readonly logger: Logger;
  /** Checks the caller before anything else (`AUTH_MODE=verify-oidc`); none with `platform`. */
  readonly authenticate?: Authenticator;
  /** Tracks requests and aborts their jobs on SIGTERM. */
  readonly shutdown?: GracefulShutdown;
}

const LOG_LEVEL_BY_OUTCOME = {
  processed: 'info',
  duplicate: 'info',
  in_progress: 'info',
  invalid_request: 'warn',
  unauthenticated: 'warn',
  forbidden: 'warn',
  failed: 'error',
  unavailable: 'error',
} as const satisfies Record<ResponseOutcome, string>;

/** Firestore Timestamp of a canonical RFC 3339 instant, keeping up to nanoseconds. */
function timestampOf(scheduleTime: string): Timestamp {
  const [whole = '', fraction = ''] = scheduleTime.replace(/Z$/, '').split('.');
  return new Timestamp(Date.parse(`${whole}Z`) / 1000, Number(fraction.padEnd(9, '0')));
}

function isoOf(value: unknown): string | undefined {
  return value instanceof Timestamp ? value.toDate().toISOString() : undefined;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The message and extra log fields of a run outcome. */
function describe(result: RunOutcome, exposeErrors: boolean): { message: string; fields: object } {
  const detail = (error: unknown) => (exposeErrors ? ` (${errorText(error)})` : '');
  switch (result.outcome) {
    case 'processed': {
      const { attempt, completion } = result;
      const fields = { attemptId: attempt.attemptId, takeover: attempt.takeover, completion };
      const message = {
        recorded: 'Run processed: the job ran and its completion is recorded.',
        lease_lost:
          'The job ran, but another attempt took the run over after this lease expired; raise LEASE_SECONDS.',
        unrecorded:
          'The job ran, but Firestore did not record its completion; a later delivery may run it again.',
      }[completion];
      return { message, fields };
    }
    case 'duplicate': {
      const at = isoOf(result.record.completed_at);
      return {
        message: `Run already completed${at ? ` at ${at}` : ''}; the job was not run again.`,
        fields: { completedBy: result.record.attempt_id },
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
            lease_lost: 'another attempt had already taken the run over (lease lost).',
            unrecorded:
              'its claim could not be released, so retries get 409 until the lease lapses.',
          }[result.release]
        }`,
        fields: { attemptId: result.attempt.attemptId, release: result.release, err: result.error },
      };
    case 'unavailable':
      return {
        message: `Firestore is unavailable${detail(result.error)}; the job was not run. Retry later.`,
        fields: { err: result.error },
      };
  }
}

/**
 * Creates the HTTP function that runs `deps.job` once per scheduled run.
 *
 * Responses (JSON {@link ResponseBody}): 200 `processed` or `duplicate`; 409 `in_progress`; 400
 * `invalid_request` (nothing written); 401 `unauthenticated` / 403 `forbidden` with
 * `deps.authenticate` (checked before anything else); 500 `failed` (claim released) or
 * `unavailable` (job not run).
 * Logs one line per request with outcome, runId, jobName, scheduleTime, attemptId and duration; never
 * a header or the body.
 */
export function createScheduledJobHandler(deps: HandlerDeps): HttpFunction {
  const { config, ledger, job, authenticate, shutdown } = deps;
  const handle: HttpFunction = async (req, res) => {
    const startedAt = performance.now();
    const logger = withTrace(deps.logger, req.headers);
    let run: ScheduledRun | undefined;
    let runId: string | undefined;
    let outcome: ResponseOutcome;
    let message: string;
    let fields: object = {};
    try {
      const auth = authenticate ? await authenticate(req.get('authorization')) : undefined;
      if (auth?.ok === false) {
        outcome = auth.outcome;
        message = auth.message;
        fields = { reason: auth.message };
        // RFC 9110: a 401 names the scheme the caller should use.
        if (auth.outcome === 'unauthenticated') res.set('WWW-Authenticate', 'Bearer');
      } else if (shutdown?.signal.aborted) {
        outcome = 'unavailable';
        message = 'This instance is shutting down; the job was not run. Retry later.';
      } else {
        fields = auth ? { caller: auth.email } : {};
        run = readScheduledRun(req, config);
        runId = computeRunId(run);
        const runLogger = logger.child({
          runId,
          jobName: run.jobName,
          scheduleTime: run.scheduleTime,
        });
        const scheduleTime = timestampOf(run.scheduleTime);
        const { jobName } = run;
        const result = await runOnce(
          ledger,
          runId,
          (attempt) =>
            job({
              runId: attempt.runId,
              jobName,
              scheduleTime: scheduleTime.toDate(),
              attemptId: attempt.attemptId,
              leaseExpires: attempt.leaseExpires,
              signal: attempt.signal,
              logger: runLogger.child({ attemptId: attempt.attemptId }),
            }),
          {
            details: { job_name: jobName, schedule_time: scheduleTime },
            logger: runLogger,
            shutdown: shutdown?.signal,
            maxRunMs: config.jobTimeoutMs,
          },
        );
        outcome = result.outcome;
        const described = describe(result, config.exposeErrors);
        message = described.message;
        fields = { ...fields, ...described.fields };
      }
    } catch (err) {
      if (err instanceof InvalidRequestError) {
        outcome = 'invalid_request';
        message = err.message;
        fields = { ...fields, reason: err.message };
      } else {
        outcome = 'failed';
        message = `Internal error${config.exposeErrors ? ` (${errorText(err)})` : ''}; retry later.`;
        fields = { err };
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
