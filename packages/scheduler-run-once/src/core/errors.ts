/** The project's one error family: its base class, the run lifecycle's errors and bad configuration. */

/** Base class of every error this starter throws on purpose. */
export class RunOnceError extends Error {
  override name = 'RunOnceError';
}

/** Firestore failed for a reason other than a lost race, or did not answer in time. Retryable (5xx). */
export class LedgerUnavailableError extends RunOnceError {
  override name = 'LedgerUnavailableError';
}

/** The database does not exist. Its message (`FIRESTORE_DATABASE`, nothing secret) reaches clients. */
export class DatabaseNotFoundError extends LedgerUnavailableError {
  override name = 'DatabaseNotFoundError';
}

/** The reason of an attempt's aborted `signal`: the job should stop and throw. */
export class AttemptAbortedError extends RunOnceError {
  override name = 'AttemptAbortedError';
  /** Why the signal was aborted. */
  readonly reason: 'lease_lost' | 'shutdown' | 'job_timeout';
  constructor(reason: AttemptAbortedError['reason'], message: string) {
    super(message);
    this.reason = reason;
  }
}

/** Bad configuration found at cold start: `problems` lists every one, the message one per line. */
export class ConfigError extends RunOnceError {
  override name = 'ConfigError';
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(
      `Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.problems = problems;
  }
}

/** A one-line description of any thrown value (a revoked proxy, a throwing getter…); never throws. */
export function describeThrown(value: unknown): string {
  try {
    if (isError(value)) {
      return String(value.message);
    }
    if (typeof value === 'string') {
      return value;
    }
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
