/**
 * Cloud Scheduler's back-off and retry limits (`ops/backoff.ts`) as tables. The first row is the
 * example of the RetryConfig reference itself: "if min_backoff_duration is 10s,
 * max_backoff_duration is 300s, and max_doublings is 3, [...] the requests will retry at 10s, 20s,
 * 40s, 80s, 160s, 240s, 300s, 300s, ....". Pure: no clock, no emulator.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffSeconds, mayRetry } from '../../ops/backoff.ts';

interface BackoffCase {
  readonly name: string;
  readonly minBackoffSeconds: number;
  readonly maxBackoffSeconds: number;
  readonly maxDoublings: number;
  /** The wait before retry 1, 2, 3, …, in seconds. */
  readonly waits: readonly number[];
}

const BACKOFFS: readonly BackoffCase[] = [
  {
    name: "RetryConfig's documented example: doubles 3 times, then grows by 80 s, capped at 300 s",
    minBackoffSeconds: 10,
    maxBackoffSeconds: 300,
    maxDoublings: 3,
    waits: [10, 20, 40, 80, 160, 240, 300, 300],
  },
  {
    name: "this starter's defaults (job-declaration.ts): 30 s doubled up to 5 times, capped at 600 s",
    minBackoffSeconds: 30,
    maxBackoffSeconds: 600,
    maxDoublings: 5,
    waits: [30, 60, 120, 240, 480, 600, 600],
  },
  {
    name: "Scheduler's own defaults (5 s, 1 h, 5 doublings): linear by 160 s after 160 s",
    minBackoffSeconds: 5,
    maxBackoffSeconds: 3600,
    maxDoublings: 5,
    waits: [5, 10, 20, 40, 80, 160, 320, 480, 640],
  },
  {
    name: 'no doubling: linear from the first retry',
    minBackoffSeconds: 10,
    maxBackoffSeconds: 35,
    maxDoublings: 0,
    waits: [10, 20, 30, 35, 35],
  },
  {
    name: 'minimum equal to maximum: a constant wait',
    minBackoffSeconds: 60,
    maxBackoffSeconds: 60,
    maxDoublings: 5,
    waits: [60, 60, 60],
  },
  {
    name: 'no minimum: retries at once',
    minBackoffSeconds: 0,
    maxBackoffSeconds: 600,
    maxDoublings: 5,
    waits: [0, 0, 0],
  },
];

describe('backoffSeconds', () => {
  for (const { name, waits, ...job } of BACKOFFS) {
    it(name, () => {
      const actual = waits.map((_, i) => backoffSeconds(job, i + 1));

      assert.deepEqual(actual, waits);
    });
  }

  it('refuses a retry number below 1 or not whole', () => {
    const job = { minBackoffSeconds: 10, maxBackoffSeconds: 300, maxDoublings: 3 };

    assert.throws(() => backoffSeconds(job, 0), RangeError);
    assert.throws(() => backoffSeconds(job, 1.5), RangeError);
  });
});

/** [retryCount, maxRetryDurationSeconds, retries done, seconds since the first attempt, retries?] */
const LIMITS: readonly (readonly [number, number, number, number, boolean])[] = [
  // "If retryCount is 0 (and if maxRetryDuration is also 0), a job attempt won't be retried"
  [0, 0, 0, 0, false],
  // Without a duration limit, the count alone limits.
  [3, 0, 2, 9999, true],
  [3, 0, 3, 1, false],
  // "If specified with retryCount, the job will be retried until both limits are reached"
  [3, 3600, 3, 100, true],
  [3, 3600, 3, 3600, false],
  [5, 60, 2, 120, true],
  [0, 60, 4, 30, true],
  [0, 60, 4, 60, false],
];

describe('mayRetry', () => {
  for (const [retryCount, maxRetryDurationSeconds, retriesDone, elapsed, expected] of LIMITS) {
    it(`retryCount ${retryCount}, maxRetryDuration ${maxRetryDurationSeconds} s, after ${retriesDone} retries and ${elapsed} s: ${expected ? 'retries' : 'gives up'}`, () => {
      const decision = mayRetry({ retryCount, maxRetryDurationSeconds }, retriesDone, elapsed);

      assert.equal(decision, expected);
    });
  }
});
