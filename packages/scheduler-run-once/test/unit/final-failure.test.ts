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
import {
  lastRetrySentMs,
  retryWindowMs,
} from '../../src/policy/retry-policy.ts';
import { assertErrorReportingEvent } from '../fixtures/error-reporting.ts';

const SLOT = new Date(Date.UTC(2030, 0, 7, 12, 0));
const at = (secondsAfterSlot: number) =>
  new Date(SLOT.getTime() + secondsAfterSlot * 1000);

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
  ({
    runId: 'run-1',
    attemptId: 'a-1',
    firstClaimedAt,
    attempts: 1,
  }) as Attempt;

describe('finalFailureReporter', () => {
  it('logs the report as it gives the reporter id, before the caller writes anything', async () => {
    // Scheduler's one attempt of the slot comes at the latest an attempt deadline (180 s) after it,
    // having waited behind the job's previous execution: that late, nothing can follow.
    const { logger, lines } = logs();
    const report = finalFailureReporter(
      job as never,
      SLOT,
      at(180),
      async () => at(181),
      logger,
    );

    const reporter = await report(attempt(at(180)), 'the export failed');

    assert.equal(typeof reporter, 'string');
    const errors = lines().filter((l) => l.message === FAILED_AFTER_RETRIES);
    assert.deepEqual(
      errors.map((l) => [l.slot, l.runId, l.lastError, l.reportedBy]),
      [[SLOT.toISOString(), 'run-1', 'the export failed', 'attempt']],
    );
    assertErrorReportingEvent(errors[0], FAILED_AFTER_RETRIES);
    assert.equal(
      errors[0]?.fix,
      `npm run trigger -- ${job?.id} --slot ${SLOT.toISOString()} --rerun`,
    );
  });

  it('neither reports nor logs the first failure of a job Scheduler never retries while its own attempt may still come (issue 40: the claim may be a Force run’s attempt)', async () => {
    const { logger, lines } = logs();
    const report = finalFailureReporter(
      job as never,
      SLOT,
      at(1),
      async () => at(2),
      logger,
    );

    assert.equal(await report(attempt(at(1)), 'the export failed'), undefined);
    assert.deepEqual(lines(), []);
  });

  it('neither reports nor logs a delivery taken for its slot before the slot’s time: Scheduler’s own delivery is still to come', async () => {
    const { logger, lines } = logs();
    const report = finalFailureReporter(
      job as never,
      SLOT,
      at(-10),
      async () => at(-9),
      logger,
    );

    const reporter = await report(attempt(at(-10)), 'the export failed');

    assert.equal(reporter, undefined);
    assert.deepEqual(lines(), []);
  });

  it('neither reports nor logs while a retry Scheduler decided on during the job may still come (a duplicate ran the job)', async () => {
    // Scheduler's attempt 1 came twice: one copy ran the job 43 s; the other met its lease (409)
    // and Scheduler retried it. This attempt's own timing (43 s + a 17 s back-off, a 60 s limit)
    // says no retry follows, but Scheduler's retries decided meanwhile arrive up to 60 s in.
    const { logger, lines } = logs();
    const [limited] = validateJobs([
      defineJob({
        id: 'limited',
        schedule: '* * * * *',
        retryCount: 0,
        maxRetryDurationSeconds: 60,
        minBackoffSeconds: 17,
        maxBackoffSeconds: 20,
        maxDoublings: 0,
        attemptDeadlineSeconds: 54,
        run: () => {},
      }),
    ]);
    const report = finalFailureReporter(
      limited as never,
      SLOT,
      at(0),
      async () => at(43),
      logger,
    );

    assert.equal(await report(attempt(at(0)), 'the export failed'), undefined);
    assert.deepEqual(lines(), []);
    const late = finalFailureReporter(
      limited as never,
      SLOT,
      at(30),
      // 60 s of retries from the latest Scheduler's own execution can begin, 114 s after the slot.
      async () => at(174),
      logger,
    );
    assert.equal(
      typeof (await late(attempt(at(0)), 'the export failed')),
      'string',
    );
  });

  it('neither reports nor logs a run a Force run claimed before its slot while Scheduler’s own execution of the slot may still retry', async () => {
    // A Force run pressed 24 s before the slot was taken for it and claimed it; Scheduler's own
    // execution of the slot waited behind the job's previous one (a broken job retried for 300 s)
    // and began about 288 s after the slot, so its retries come until about 588 s after it. At
    // 306 s, 330 s after the first claim, this attempt's own arithmetic says none follows.
    const { logger, lines } = logs();
    const [queued] = validateJobs([
      defineJob({
        id: 'queued',
        schedule: '* * * * *',
        retryCount: 0,
        maxRetryDurationSeconds: 300,
        minBackoffSeconds: 1,
        maxBackoffSeconds: 20,
        maxDoublings: 0,
        attemptDeadlineSeconds: 15,
        run: () => {},
      }),
    ]);
    const forcedFirst = { ...attempt(at(-24)), attempts: 7 };
    const report = finalFailureReporter(
      queued as never,
      SLOT,
      at(305),
      async () => at(306),
      logger,
    );

    assert.equal(await report(forcedFirst, 'the export failed'), undefined);
    assert.deepEqual(lines(), []);
    // The latest: the previous execution, begun by the slot, lasts to its last retry's deadline;
    // the slot's own execution then retries for as long again.
    const lastSentSeconds = lastRetrySentMs(queued as never) / 1000;
    const after = at(2 * lastSentSeconds + 15);
    const late = finalFailureReporter(
      queued as never,
      SLOT,
      after,
      async () => after,
      logger,
    );
    assert.equal(
      typeof (await late(forcedFirst, 'the export failed')),
      'string',
    );
  });

  it('neither reports nor logs when a retry can follow', async () => {
    const { logger, lines } = logs();
    const [retried] = validateJobs([
      defineJob({
        id: 'retried',
        schedule: '* * * * *',
        retryCount: 3,
        run: () => {},
      }),
    ]);
    const report = finalFailureReporter(
      retried as never,
      SLOT,
      at(1),
      async () => at(2),
      logger,
    );

    assert.equal(await report(attempt(at(1)), 'the export failed'), undefined);
    assert.deepEqual(lines(), []);
  });
  it('neither reports nor logs while Scheduler may still send a retry it decided on from an earlier answer (issue 40: a 409 answered while this attempt ran)', async () => {
    // The settings of `npm run simulate -- --histories 300 --seed 3`, history 296: the retry window
    // (every attempt to its 31 s deadline) is 284 s, but attempts that fail fast are retried while
    // their send time is within the 300 s maxRetryDuration. Scheduler's attempt 12, sent at 278 s,
    // came twice: one copy met the other's lease (409) at 278.2 s, and Scheduler, taking that
    // answer, retried at 298.2 s; the other copy is this attempt, failing at 284.8 s.
    const { logger, lines } = logs();
    const [limited] = validateJobs([
      defineJob({
        id: 'limited',
        schedule: '*/5 * * * *',
        attemptDeadlineSeconds: 31,
        retryCount: 2,
        maxRetryDurationSeconds: 300,
        minBackoffSeconds: 18,
        maxBackoffSeconds: 20,
        maxDoublings: 3,
        run: () => {},
      }),
    ]);
    const firstClaim = { ...attempt(at(0)), attempts: 12 };
    assert.ok(retryWindowMs(limited as never) < 284_800);
    const report = finalFailureReporter(
      limited as never,
      SLOT,
      at(278),
      async () => at(284.8),
      logger,
    );

    assert.equal(await report(firstClaim, 'the export failed'), undefined);
    assert.deepEqual(lines(), []);
    // Still running when the 300 s of retries from the latest start (331 s) have passed.
    const late = finalFailureReporter(
      limited as never,
      SLOT,
      at(290),
      async () => at(631),
      logger,
    );
    assert.equal(
      typeof (await late(firstClaim, 'the export failed')),
      'string',
    );
  });

  it('neither reports nor logs while a Force run’s retry may have made the first claim after the slot and Scheduler’s own execution still retries (issue 40: seed 7, history 316)', async () => {
    // A Force run pressed 60 s before the slot ran as a forced run; a retry of it after the slot
    // claimed the slot's run. Scheduler's own execution of the slot waited behind the previous one
    // and retried until about 576 s after the slot; from the first claim (2.3 s), the attempt's
    // reading had no retry past 302.3 s. Nothing in the record tells that claim from Scheduler's.
    const { logger, lines } = logs();
    const [queued] = validateJobs([
      defineJob({
        id: 'queued',
        schedule: '* * * * *',
        retryCount: 0,
        maxRetryDurationSeconds: 300,
        minBackoffSeconds: 1,
        maxBackoffSeconds: 20,
        maxDoublings: 0,
        attemptDeadlineSeconds: 15,
        run: () => {},
      }),
    ]);
    const forcedRetryFirst = { ...attempt(at(2.3)), attempts: 14 };
    const report = finalFailureReporter(
      queued as never,
      SLOT,
      at(425),
      async () => at(426),
      logger,
    );

    assert.equal(
      await report(forcedRetryFirst, 'the export failed'),
      undefined,
    );
    assert.deepEqual(lines(), []);
    // The latest: the previous execution, begun by the slot, lasts to its last retry's deadline
    // (315 s); the slot's own execution then retries for 300 s more.
    const after = at(2 * 300 + 15);
    const late = finalFailureReporter(
      queued as never,
      SLOT,
      after,
      async () => after,
      logger,
    );
    assert.equal(
      typeof (await late(forcedRetryFirst, 'the export failed')),
      'string',
    );
  });
});
