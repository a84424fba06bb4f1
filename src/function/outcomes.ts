/**
 * Every answer's outcome, its HTTP status and its log level: the one table from outcome to status.
 * Modules return outcomes; only the HTTP adapter (and the framework workarounds, for requests
 * refused before the function runs) turn them into status codes, through this table.
 */

/**
 * Status code per outcome. 409 for a live claim, never 503: App Engine targets treat 503 specially
 * (the Scheduler guide). Every non-2xx makes Cloud Scheduler retry under the job's retry config.
 */
export const STATUS_BY_OUTCOME = {
  /** The job ran and its completion is recorded (or could not be, see the message). */
  processed: 200,
  /** The run already completed: the job was not run again. */
  duplicate: 200,
  /** Another attempt holds a live lease on the run: retry later. */
  in_progress: 409,
  /** Not run: an earlier slot of the job still runs (overlap policy `skip`); recorded, not retried. */
  skipped: 200,
  /** Not run yet: an earlier slot of the job still runs (overlap policy `wait`): retry later. */
  waiting: 409,
  /** The request names no valid run (headers, body): nothing written. */
  invalid_request: 400,
  /** The request body is larger than functions-framework's body parser takes. */
  body_too_large: 413,
  /** The request body's Content-Encoding or charset is not supported. */
  unsupported_encoding: 415,
  /** No valid credential (`AUTH_MODE=verify-oidc`). */
  unauthenticated: 401,
  /** A valid credential of a caller that may not invoke. */
  forbidden: 403,
  /** No such route. */
  not_found: 404,
  /** The delivery names a job that is not declared in `jobs.ts`: nothing written. */
  unknown_job: 404,
  /** A method other than the Scheduler job's (`HTTP_METHOD`): nothing run. */
  method_not_allowed: 405,
  /** The job threw: the claim is released for a retry. */
  failed: 500,
  /** The run's record cannot be read by this version: not overwritten, job not run. */
  unreadable_record: 500,
  /** Firestore failed or the instance is shutting down: job not run. */
  unavailable: 500,
} as const;

/** Every response's outcome. */
export type ResponseOutcome = keyof typeof STATUS_BY_OUTCOME;

/** Log level per outcome: refusals warn, failures are errors. */
export const LOG_LEVEL_BY_OUTCOME = {
  processed: 'info',
  duplicate: 'info',
  in_progress: 'info',
  skipped: 'info',
  waiting: 'info',
  invalid_request: 'warn',
  body_too_large: 'warn',
  unsupported_encoding: 'warn',
  unauthenticated: 'warn',
  forbidden: 'warn',
  not_found: 'warn',
  unknown_job: 'warn',
  method_not_allowed: 'warn',
  failed: 'error',
  unreadable_record: 'error',
  unavailable: 'error',
} as const satisfies Record<ResponseOutcome, 'info' | 'warn' | 'error'>;

/** The JSON body of every response. */
export interface ResponseBody {
  readonly outcome: ResponseOutcome;
  /** Absent when the request named no valid run. */
  readonly runId?: string;
  readonly message: string;
}
