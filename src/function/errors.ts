/**
 * The HTTP adapter's errors, in the project's one family (`RunOnceError`, `core/errors.ts`): a
 * delivery that names no run the function can run. The handler turns them into 400 and 404.
 */
import { RunOnceError } from '../core/errors.ts';

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
