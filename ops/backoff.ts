/**
 * Cloud Scheduler's retry policy as pure arithmetic: how long it waits before each retry of a failed
 * attempt, and whether it retries at all. The local Scheduler (`ops/local-scheduler.ts`) follows it;
 * `test/unit/backoff.test.ts` checks it against the documented example as a table.
 *
 * Source: RetryConfig in the Cloud Scheduler API reference
 * (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#retryconfig) and
 * "Retry jobs" (https://cloud.google.com/scheduler/docs/configuring/retry-jobs):
 *
 * - maxDoublings: "The time between retries will double max_doublings times. A job's retry interval
 *   starts at min_backoff_duration, then doubles max_doublings times, then increases linearly, and
 *   finally retries at intervals of max_backoff_duration up to retry_count times. For example, if
 *   min_backoff_duration is 10s, max_backoff_duration is 300s, and max_doublings is 3, then the job
 *   will first be retried in 10s. The retry interval will double three times, and then increase
 *   linearly by 2^3 * 10s. [...] Thus, the requests will retry at 10s, 20s, 40s, 80s, 160s, 240s,
 *   300s, 300s, ...."
 * - maxRetryDuration: "The time limit for retrying a failed job, measured from the time when an
 *   execution was first attempted. If specified with retryCount, the job will be retried until both
 *   limits are reached." Zero means no time limit, so `retryCount` alone limits ("If retryCount is 0
 *   (and if maxRetryDuration is also 0), a job attempt won't be retried").
 */
import type { DeclaredJob } from '../src/job-declaration.ts';

/** The retry settings of a declared job, in whole seconds as declared. */
export type RetrySettings = Pick<
  DeclaredJob,
  | 'retryCount'
  | 'maxRetryDurationSeconds'
  | 'minBackoffSeconds'
  | 'maxBackoffSeconds'
  | 'maxDoublings'
>;

/**
 * How long Scheduler waits before retry number `retry` of an execution, in seconds: the minimum
 * back-off doubled up to `maxDoublings` times, then grown linearly by the last doubled interval,
 * never above the maximum back-off (see the module comment for the documented rule).
 *
 * @param retry - 1 for the first retry (after the first attempt failed), 2 for the second, …
 * @returns seconds, from `minBackoffSeconds` (capped at `maxBackoffSeconds`) up to `maxBackoffSeconds`.
 * @throws {RangeError} if `retry` is not a whole number ≥ 1.
 * @example
 * const job = { minBackoffSeconds: 10, maxBackoffSeconds: 300, maxDoublings: 3 };
 * [1, 2, 3, 4, 5, 6, 7].map((n) => backoffSeconds(job, n)); // [10, 20, 40, 80, 160, 240, 300]
 */
export function backoffSeconds(
  job: Pick<RetrySettings, 'minBackoffSeconds' | 'maxBackoffSeconds' | 'maxDoublings'>,
  retry: number,
): number {
  if (!Number.isInteger(retry) || retry < 1) {
    throw new RangeError(`retry must be a whole number from 1, not ${retry}`);
  }
  const step = retry - 1;
  const doubled = job.minBackoffSeconds * 2 ** Math.min(step, job.maxDoublings);
  // After the last doubling the interval grows by that doubled interval per retry.
  const linear = doubled * (Math.max(step - job.maxDoublings, 0) + 1);
  return Math.min(linear, job.maxBackoffSeconds);
}

/**
 * Whether Scheduler retries after a failed attempt: until both limits are reached, the retry count
 * and, when it is not zero, the retry duration measured from the execution's first attempt.
 *
 * @param retriesDone - retries already made in this execution (0 after the first attempt failed).
 * @param elapsedSeconds - seconds since the execution's first attempt started, now.
 * @example
 * mayRetry({ retryCount: 3, maxRetryDurationSeconds: 0 }, 3, 10);     // false: 3 retries made
 * mayRetry({ retryCount: 3, maxRetryDurationSeconds: 3600 }, 3, 10);  // true: an hour not yet over
 */
export function mayRetry(
  job: Pick<RetrySettings, 'retryCount' | 'maxRetryDurationSeconds'>,
  retriesDone: number,
  elapsedSeconds: number,
): boolean {
  const countReached = retriesDone >= job.retryCount;
  const durationReached =
    job.maxRetryDurationSeconds === 0 || elapsedSeconds >= job.maxRetryDurationSeconds;
  return !(countReached && durationReached);
}
