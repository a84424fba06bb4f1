/**
 * Scheduler's documented back-off sequence and the retry window (`retry-policy.ts`). No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffMs, backoffSequenceMs, retryWindowMs } from '../../src/retry-policy.ts';

const DOC_EXAMPLE = { minBackoffSeconds: 10, maxBackoffSeconds: 300, maxDoublings: 3 };

describe('backoffMs', () => {
  it("gives the RetryConfig reference's example: 10, 20, 40, 80, 160, 240, 300, 300 s", () => {
    const waits = Array.from({ length: 8 }, (_, n) => backoffMs(DOC_EXAMPLE, n) / 1000);

    assert.deepEqual(waits, [10, 20, 40, 80, 160, 240, 300, 300]);
  });

  it('never doubles with maxDoublings 0: grows linearly by the minimum', () => {
    const settings = { minBackoffSeconds: 5, maxBackoffSeconds: 3600, maxDoublings: 0 };

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
    const settings = { ...defaults, retryCount: 1, maxRetryDurationSeconds: 1000 };

    // 180 (first attempt) +30 +180 +60 +180 +120 = 750 < 1000; +180 +240 would pass 1000.
    assert.deepEqual(backoffSequenceMs(settings), [30_000, 60_000, 120_000]);
  });

  it('gives every attempt its whole deadline and waits out every back-off', () => {
    assert.equal(retryWindowMs(defaults), 4 * 180_000 + 30_000 + 60_000 + 120_000);
  });
});
