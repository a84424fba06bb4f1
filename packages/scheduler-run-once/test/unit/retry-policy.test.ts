/**
 * Scheduler's documented back-off sequence and the retry window (`retry-policy.ts`). No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  backoffMs,
  backoffSequenceMs,
  lastRetrySentMs,
  makesRetry,
  retryWindowMs,
} from '../../src/policy/retry-policy.ts';
import {
  type SchedulerSettings,
  schedulerBackoffMs,
  schedulerRetries,
} from '../sim/cloud-scheduler.ts';

const DOC_EXAMPLE = {
  minBackoffSeconds: 10,
  maxBackoffSeconds: 300,
  maxDoublings: 3,
};

describe('backoffMs', () => {
  it("gives the RetryConfig reference's example: 10, 20, 40, 80, 160, 240, 300, 300 s", () => {
    const waits = Array.from(
      { length: 8 },
      (_, n) => backoffMs(DOC_EXAMPLE, n) / 1000,
    );

    assert.deepEqual(waits, [10, 20, 40, 80, 160, 240, 300, 300]);
  });

  it('never doubles with maxDoublings 0: grows linearly by the minimum', () => {
    const settings = {
      minBackoffSeconds: 5,
      maxBackoffSeconds: 3600,
      maxDoublings: 0,
    };

    assert.deepEqual(
      [0, 1, 2, 3].map((n) => backoffMs(settings, n) / 1000),
      [5, 10, 15, 20],
    );
  });
});

describe('backoffSequenceMs and retryWindowMs', () => {
  const defaults = {
    attemptDeadlineSeconds: 180,
    retryCount: 3,
    maxRetryDurationSeconds: 0,
    minBackoffSeconds: 30,
    maxBackoffSeconds: 600,
    maxDoublings: 5,
  };

  it('makes retryCount retries when no maxRetryDuration is set', () => {
    assert.deepEqual(backoffSequenceMs(defaults), [30_000, 60_000, 120_000]);
  });

  it('makes no retry with retryCount 0 and no maxRetryDuration', () => {
    const settings = { ...defaults, retryCount: 0 };

    assert.deepEqual(backoffSequenceMs(settings), []);
    assert.equal(retryWindowMs(settings), 180_000);
  });

  it('goes on retrying until both limits are reached', () => {
    const settings = {
      ...defaults,
      retryCount: 1,
      maxRetryDurationSeconds: 1000,
    };

    // 180 (first attempt) +30 +180 +60 +180 +120 = 750 < 1000; +180 +240 would pass 1000.
    assert.deepEqual(backoffSequenceMs(settings), [30_000, 60_000, 120_000]);
  });

  it('gives every attempt its whole deadline and waits out every back-off', () => {
    assert.equal(
      retryWindowMs(defaults),
      4 * 180_000 + 30_000 + 60_000 + 120_000,
    );
  });
});

/** Back-off settings and the waits before retry 0, 1, 2, …, in seconds. */
const BACKOFFS: readonly {
  readonly name: string;
  readonly minBackoffSeconds: number;
  readonly maxBackoffSeconds: number;
  readonly maxDoublings: number;
  readonly waits: readonly number[];
}[] = [
  {
    name: "this starter's defaults (job-declaration.ts): 30 s doubled up to 5 times, capped at 600 s",
    minBackoffSeconds: 30,
    maxBackoffSeconds: 600,
    maxDoublings: 5,
    waits: [30, 60, 120, 240, 480, 600, 600],
  },
  {
    name: "Scheduler's own defaults (5 s, 1 h, 5 doublings): then linear by 160 s",
    minBackoffSeconds: 5,
    maxBackoffSeconds: 3600,
    maxDoublings: 5,
    waits: [5, 10, 20, 40, 80, 160, 320, 480, 640],
  },
  {
    name: 'a cap reached while still doubling',
    minBackoffSeconds: 10,
    maxBackoffSeconds: 35,
    maxDoublings: 5,
    waits: [10, 20, 35, 35],
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

describe('backoffMs, as a table', () => {
  for (const { name, waits, ...settings } of BACKOFFS) {
    it(name, () => {
      const actual = waits.map((_, n) => backoffMs(settings, n) / 1000);

      assert.deepEqual(actual, waits);
    });
  }
});

/**
 * [retryCount, maxRetryDurationSeconds, retry n (0-based), seconds since the first attempt,
 * retries?], with RetryConfig's example back-off (10 s, 300 s, 3 doublings: retry 0 waits 10 s,
 * retry 1 20 s, retry 3 80 s).
 */
const DECISIONS: readonly (readonly [
  number,
  number,
  number,
  number,
  boolean,
])[] = [
  // "If retryCount is 0 (and if maxRetryDuration is also 0), a job attempt won't be retried"
  [0, 0, 0, 0, false],
  // Without a duration limit, the count alone limits.
  [3, 0, 2, 9999, true],
  [3, 0, 3, 1, false],
  // "If specified with retryCount, the job will be retried until both limits are reached"
  [3, 3600, 3, 100, true],
  [3, 3600, 3, 3530, false],
  [0, 60, 0, 30, true],
  [0, 60, 1, 45, false],
];

describe('makesRetry', () => {
  for (const [
    retryCount,
    maxRetryDurationSeconds,
    n,
    elapsed,
    expected,
  ] of DECISIONS) {
    it(`retryCount ${retryCount}, maxRetryDuration ${maxRetryDurationSeconds} s: retry ${n} at ${elapsed} s ${expected ? 'comes' : 'does not come'}`, () => {
      const settings = { ...DOC_EXAMPLE, retryCount, maxRetryDurationSeconds };

      const decision = makesRetry(settings, n, elapsed * 1000);

      assert.equal(decision, expected);
    });
  }
});

/**
 * The send times of one execution's retries, ms after its first attempt, by the simulator's
 * Cloud Scheduler model (written from Scheduler's documentation, independent of the product):
 * attempt `n` lasts `durations[n]` (at most the attempt deadline) and fails.
 */
function retrySendTimes(
  job: SchedulerSettings,
  durations: readonly number[],
): number[] {
  const sent: number[] = [];
  let attemptStart = 0;
  for (let retry = 1; retry <= durations.length; retry++) {
    const decidedAt = attemptStart + (durations[retry - 1] ?? 0);
    if (!schedulerRetries(job, retry, 0, decidedAt)) {
      break;
    }
    attemptStart = decidedAt + schedulerBackoffMs(job, retry);
    sent.push(attemptStart);
  }
  return sent;
}

describe('lastRetrySentMs', () => {
  const settings = fc.record({
    id: fc.constant('job'),
    schedule: fc.constant('* * * * *'),
    attemptDeadlineSeconds: fc.integer({ min: 15, max: 200 }),
    retryCount: fc.integer({ min: 0, max: 5 }),
    maxRetryDurationSeconds: fc.oneof(
      fc.constant(0),
      fc.integer({ min: 1, max: 4000 }),
    ),
    minBackoffSeconds: fc.integer({ min: 0, max: 60 }),
    maxBackoffSeconds: fc.integer({ min: 60, max: 700 }),
    maxDoublings: fc.integer({ min: 0, max: 6 }),
  });

  it("bounds every retry Scheduler's model sends, however long each attempt lasts (0 to its deadline)", () => {
    fc.assert(
      fc.property(
        settings,
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), {
          minLength: 1,
          maxLength: 400,
        }),
        (job, fractions) => {
          const attemptMs = job.attemptDeadlineSeconds * 1000;
          const durations = fractions.map((f) => f * attemptMs);
          const latest = lastRetrySentMs(job);
          for (const sentAt of retrySendTimes(job, durations)) {
            assert.ok(
              sentAt <= latest,
              `retry sent ${sentAt} ms after the first attempt, past ${latest} ms`,
            );
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('is later than the retry window when fast-failing attempts are retried up to maxRetryDuration (issue 40: seed 3, history 296)', () => {
    const job = {
      id: 'job',
      schedule: '*/5 * * * *',
      attemptDeadlineSeconds: 31,
      retryCount: 2,
      maxRetryDurationSeconds: 300,
      minBackoffSeconds: 18,
      maxBackoffSeconds: 20,
      maxDoublings: 3,
    };
    // Every attempt answered within a second (a 409 met, a quick failure).
    const sent = retrySendTimes(job, Array(100).fill(1000));

    assert.equal(retryWindowMs(job), 284_000);
    assert.ok((sent.at(-1) ?? 0) > retryWindowMs(job));
    assert.equal(lastRetrySentMs(job), 300_000);
  });

  it("is the count-limited retries' latest send when maxRetryDuration is shorter (or 0)", () => {
    const job = {
      attemptDeadlineSeconds: 180,
      retryCount: 3,
      maxRetryDurationSeconds: 0,
      minBackoffSeconds: 30,
      maxBackoffSeconds: 600,
      maxDoublings: 5,
    };

    // Retries sent after the first attempt's deadline and a 30 s back-off, the second attempt's
    // and 60 s, the third's and 120 s.
    assert.equal(
      lastRetrySentMs(job),
      (180 + 30 + 180 + 60 + 180 + 120) * 1000,
    );
    assert.equal(
      lastRetrySentMs({ ...job, maxRetryDurationSeconds: 3600 }),
      3_600_000,
    );
  });

  it('ignores a maxRetryDuration that no retry beyond retryCount can be sent within (seed 13, history 2349)', () => {
    // One counted retry after 20 s; the next would wait 40 s more, so even attempts that fail at
    // once send it 60 s after the first: not within the 60 s limit.
    const job = {
      attemptDeadlineSeconds: 20,
      retryCount: 1,
      maxRetryDurationSeconds: 60,
      minBackoffSeconds: 20,
      maxBackoffSeconds: 60,
      maxDoublings: 0,
    };

    assert.equal(lastRetrySentMs(job), (20 + 20) * 1000);
    assert.equal(
      lastRetrySentMs({ ...job, maxRetryDurationSeconds: 61 }),
      61_000,
    );
  });
});
