/**
 * A failed attempt's own final-failure report (`src/policy/final-failure.ts`): when it is made, and
 * that its ERROR line is logged when the reporter id is given, before any release is written. No
 * Firestore: the clock is given.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import type { Attempt } from '../../src/core/run-once.ts';
import { createLogger } from '../../src/function/logger.ts';
import { finalFailureReporter } from '../../src/policy/final-failure.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { FAILED_AFTER_RETRIES } from '../../src/policy/missed-runs.ts';

const SLOT = new Date(Date.UTC(2030, 0, 7, 12, 0));
const at = (secondsAfterSlot: number) => new Date(SLOT.getTime() + secondsAfterSlot * 1000);

/** A per-minute job Scheduler never retries: its first failure is final. */
const [job] = validateJobs([
  defineJob({
    id: 'no-retries',
    schedule: '* * * * *',
    retryCount: 0,
    maxRetryDurationSeconds: 0,
    run: () => {},
  }),
]);

function logs() {
  let text = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger(
    { logLevel: 'trace', projectId: 'demo-project', serviceName: 'test' },
    sink,
  );
  const lines = () =>
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines };
}

const attempt = (firstClaimedAt: Date) =>
  ({ runId: 'run-1', attemptId: 'a-1', firstClaimedAt, attempts: 1 }) as Attempt;

describe('finalFailureReporter', () => {
  it('logs the report as it gives the reporter id, before the caller writes anything', async () => {
    const { logger, lines } = logs();
    const report = finalFailureReporter(job as never, SLOT, at(1), async () => at(2), logger);

    const reporter = await report(attempt(at(1)), 'the export failed');

    assert.equal(typeof reporter, 'string');
    const errors = lines().filter((l) => l.message === FAILED_AFTER_RETRIES);
    assert.deepEqual(
      errors.map((l) => [l.slot, l.runId, l.lastError, l.reportedBy]),
      [[SLOT.toISOString(), 'run-1', 'the export failed', 'attempt']],
    );
  });

  it('neither reports nor logs a delivery taken for its slot before the slot’s time: Scheduler’s own delivery is still to come', async () => {
    const { logger, lines } = logs();
    const report = finalFailureReporter(job as never, SLOT, at(-10), async () => at(-9), logger);

    const reporter = await report(attempt(at(-10)), 'the export failed');

    assert.equal(reporter, undefined);
    assert.deepEqual(lines(), []);
  });

  it('neither reports nor logs when a retry can follow', async () => {
    const { logger, lines } = logs();
    const [retried] = validateJobs([
      defineJob({ id: 'retried', schedule: '* * * * *', retryCount: 3, run: () => {} }),
    ]);
    const report = finalFailureReporter(retried as never, SLOT, at(1), async () => at(2), logger);

    assert.equal(await report(attempt(at(1)), 'the export failed'), undefined);
    assert.deepEqual(lines(), []);
  });
});
