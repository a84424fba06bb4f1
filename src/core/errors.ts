/**
 * The project's one error family. Each subclass names one thing that went wrong and says, in its
 * message, what to do about it.
 */

/** Base class of every error this starter throws on purpose. */
export class RunOnceError extends Error {
  override name = 'RunOnceError';
}

/**
 * Bad configuration found at cold start. `problems` lists every invalid or inconsistent variable,
 * so one deploy shows them all; the message joins them one per line.
 */
export class ConfigError extends RunOnceError {
  override name = 'ConfigError';
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = problems;
  }
}

/**
 * A delivery that cannot name a scheduled run (missing, malformed, oversized or repeated
 * `X-CloudScheduler-*` or scope headers). The HTTP adapter answers 400 and writes nothing.
 */
export class InvalidRequestError extends RunOnceError {
  override name = 'InvalidRequestError';
}

/**
 * A delivery for a job that is not declared in `jobs.ts`. The HTTP adapter answers 404
 * `unknown_job` and writes nothing; the message names the id received, and the declared ids when
 * given (the adapter gives them only where error text is exposed: they tell any caller which jobs
 * the function runs).
 */
export class UnknownJobError extends InvalidRequestError {
  override name = 'UnknownJobError';

  /**
   * @param jobName - the `X-CloudScheduler-JobName` received.
   * @param declared - the declared jobs, to list their ids; none to list nothing.
   * @example throw new UnknownJobError(run.jobName, exposeErrors ? jobs : undefined);
   */
  constructor(jobName: string, declared?: readonly { readonly id: string }[]) {
    const ids = declared?.map((j) => j.id) ?? [];
    const shown = ids.length > 10 ? [...ids.slice(0, 10), '…'] : ids;
    super(
      `No job "${jobName.length > 60 ? `${jobName.slice(0, 60)}…` : jobName}" is declared in this function${declared === undefined ? '' : ` (declared: ${shown.join(', ')})`}. ` +
        'Declare it in src/jobs.ts, or point the Scheduler job at the function that runs it.',
    );
  }
}

/**
 * Firestore could not be reached, refused the operation for a reason other than a lost race, or did
 * not answer within the configured timeout. Retryable: the caller answers 5xx.
 */
export class LedgerUnavailableError extends RunOnceError {
  override name = 'LedgerUnavailableError';
}

/**
 * The Firestore database does not exist (an operation answered NOT_FOUND where only a missing
 * database can cause it). Its message names `FIRESTORE_DATABASE` and holds nothing secret, so it
 * reaches the client even in production.
 */
export class DatabaseNotFoundError extends LedgerUnavailableError {
  override name = 'DatabaseNotFoundError';
}

/** Why an attempt's `signal` was aborted. */
export type AbortReason = 'lease_lost' | 'shutdown' | 'job_timeout';

/**
 * The reason given to an attempt's `AbortSignal`: the lease was lost to another attempt (a heartbeat's
 * fenced write failed), the instance is shutting down (SIGTERM), or the job ran past
 * `JOB_TIMEOUT_SECONDS`. A job that sees it should stop and throw; its claim is then released.
 */
export class AttemptAbortedError extends RunOnceError {
  override name = 'AttemptAbortedError';
  readonly reason: AbortReason;

  constructor(reason: AbortReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

/**
 * A one-line description of any thrown value, which itself never throws: a job may throw an
 * object without a prototype, a revoked proxy or a value whose `message` getter throws.
 */
export function describeThrown(value: unknown): string {
  try {
    if (isError(value)) return String(value.message);
    if (typeof value === 'string') return value;
    const message = (value as { message?: unknown } | null)?.message;
    if (typeof message === 'string') return message;
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return 'an unprintable value';
    }
  }
}

/** `instanceof Error` that never throws (it does for a revoked proxy). */
function isError(value: unknown): value is Error {
  try {
    return value instanceof Error;
  } catch {
    return false;
  }
}

/** The error to log for a thrown value: an Error as is, anything else as `{ message }` described safely. */
export function loggableError(value: unknown): unknown {
  return isError(value) ? value : { message: describeThrown(value) };
}
