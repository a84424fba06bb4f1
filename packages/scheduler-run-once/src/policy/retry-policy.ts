/** Scheduler's `RetryConfig`, pure, ms (docs/how-it-works.md, "Cloud Scheduler's retry policy"). */
import type { JobSettings } from './job-declaration.ts';

/** A job's `RetryConfig`: its settings but the attempt deadline, in Scheduler's units (s). */
export type RetryConfig = Omit<JobSettings, 'attemptDeadlineSeconds'>;

/** The wait before retry `n` (0-based), ms: doubling `maxDoublings` times, then linear, capped. */
export function backoffMs(
  settings: Pick<
    JobSettings,
    'minBackoffSeconds' | 'maxBackoffSeconds' | 'maxDoublings'
  >,
  n: number,
): number {
  const {
    minBackoffSeconds: min,
    maxBackoffSeconds: max,
    maxDoublings: d,
  } = settings;
  const doubled = min * 2 ** Math.min(n, d);
  const linear = n > d ? (n - d) * min * 2 ** d : 0;
  return Math.min(max, doubled + linear) * 1000;
}

/**
 * Whether Scheduler makes retry `n` (0-based), decided `elapsedMs` after the first attempt: until
 * both `retryCount` and `maxRetryDuration` (0: no limit of its own) are reached.
 */
export function makesRetry(
  config: RetryConfig,
  n: number,
  elapsedMs: number,
): boolean {
  const durationMs = config.maxRetryDurationSeconds * 1000;
  if (n < config.retryCount) {
    return true;
  }
  return durationMs > 0 && elapsedMs + backoffMs(config, n) < durationMs;
}

/** The waits before each retry after a failed first attempt, ms ({@link makesRetry}); at most 100. */
export function backoffSequenceMs(settings: JobSettings): number[] {
  const waits: number[] = [];
  const attemptMs = settings.attemptDeadlineSeconds * 1000;
  let elapsed = attemptMs; // the first attempt
  for (let n = 0; n < 100 && makesRetry(settings, n, elapsed); n++) {
    const wait = backoffMs(settings, n);
    waits.push(wait);
    elapsed += wait + attemptMs;
  }
  return waits;
}

/** The retry window, ms: `(retries + 1) × attemptDeadline + Σ back-offs` (default 3570 s). */
export function retryWindowMs(settings: JobSettings): number {
  const attemptMs = settings.attemptDeadlineSeconds * 1000;
  return backoffSequenceMs(settings).reduce(
    (ms, wait) => ms + wait + attemptMs,
    attemptMs,
  );
}

/**
 * The latest a slot is judged after its time, ms: `2 × E + D`, E the longest execution
 * ({@link longestExecutionMs}; `slotVerdict`): the execution outstanding at the slot, then the
 * slot's own, then one attempt deadline. Default: 7740 s.
 */
export function judgingDelayMs(settings: JobSettings): number {
  return (
    2 * longestExecutionMs(settings) + settings.attemptDeadlineSeconds * 1000
  );
}

/**
 * The latest after an execution's first attempt that Scheduler may still send a retry of it, ms,
 * by the latest reading of its `RetryConfig` (issue 40): retries under `retryCount` are made
 * whatever the time, each at the latest when every attempt before it ran to its deadline; retries
 * beyond it only while their send time is within `maxRetryDuration` of the first attempt, and
 * attempts that fail fast (a 409 met while another attempt runs) can place one just inside it. So
 * neither the attempts a record counts nor the failing attempt's own timing bound it:
 * {@link retryWindowMs} assumes every attempt ran to its deadline, which makes the fewest retries
 * by duration. A limit so short that even attempts failing at once send no retry beyond
 * `retryCount` within it adds none (seed 13, history 2349). Default: 3600 s.
 */
export function lastRetrySentMs(settings: JobSettings): number {
  const attemptMs = settings.attemptDeadlineSeconds * 1000;
  let countedRetrySentMs = 0;
  let soonestSentMs = 0; // every attempt failing at once
  let elapsed = attemptMs; // the first attempt, to its deadline
  for (let n = 0; n < settings.retryCount; n++) {
    countedRetrySentMs = elapsed + backoffMs(settings, n);
    elapsed = countedRetrySentMs + attemptMs;
    soonestSentMs += backoffMs(settings, n);
  }
  // A retry beyond them comes only if even attempts that fail at once leave one inside the limit.
  const durationMs = settings.maxRetryDurationSeconds * 1000;
  const beyondCount =
    durationMs > 0 &&
    soonestSentMs + backoffMs(settings, settings.retryCount) < durationMs;
  return beyondCount
    ? Math.max(countedRetrySentMs, durationMs)
    : countedRetrySentMs;
}

/**
 * The longest one execution of a slot lasts from its first attempt to its last attempt's end, ms:
 * its last retry is sent by {@link lastRetrySentMs} and runs up to an attempt deadline. Longer
 * than the retry window when attempts fail fast (a 409, an unreachable Firestore) and so leave
 * room for retries that `maxRetryDuration` still allows (issue 40: a slot Scheduler dispatched
 * behind a long execution was reported failed a retry early). Default: 3780 s.
 */
export function longestExecutionMs(settings: JobSettings): number {
  return lastRetrySentMs(settings) + settings.attemptDeadlineSeconds * 1000;
}
