/**
 * The project's one error family: the base class and the errors of the run lifecycle, each naming
 * one thing that went wrong; the layers above add their own (`policy/errors.ts`, `function/errors.ts`).
 */

/** Base class of every error this starter throws on purpose. */
export class RunOnceError extends Error {
  override name = 'RunOnceError';
}

/**
 * Firestore could not be reached, refused the operation for a reason other than a lost race, or did
 * not answer within the configured timeout. Retryable: the caller answers 5xx.
 */
export class LedgerUnavailableError extends RunOnceError {
  override name = 'LedgerUnavailableError';
}

/**
 * The Firestore database does not exist (NOT_FOUND where only a missing database can cause it).
 * Its message names `FIRESTORE_DATABASE` and holds nothing secret, so it reaches the client even in
 * production.
 */
export class DatabaseNotFoundError extends LedgerUnavailableError {
  override name = 'DatabaseNotFoundError';
}

/** Why an attempt's `signal` was aborted. */
export type AbortReason = 'lease_lost' | 'shutdown' | 'job_timeout';

/**
 * The reason given to an attempt's `AbortSignal`: the lease was lost to another attempt, the
 * instance is shutting down (SIGTERM), or the job ran past `JOB_TIMEOUT_SECONDS`. A job that sees it
 * should stop and throw; its claim is then released.
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
    return typeof message === 'string' ? message : String(value);
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
