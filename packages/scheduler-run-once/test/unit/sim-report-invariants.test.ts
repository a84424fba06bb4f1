/**
 * The simulator's invariant 29 (`test/sim/report-invariants.ts`) on hand-built outcomes: an
 * attempt's abort reason, lease warnings and fenced-write reports say what happened and name the
 * attempt. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { History } from '../sim/model.ts';
import { attemptReportsTrue } from '../sim/report-invariants.ts';
import type { Execution, LogLine, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const ATTEMPT = '0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9';

/** A history without faults, late answers or pauses: no stall can have happened. */
const history = {
  events: [],
  faultRate: 0,
  lateAnswers: 0,
} as unknown as History;

const outcome = (executions: Execution[], logs: LogLine[] = []): SimOutcome =>
  ({ history, executions, logs, finalMs: 900_000 }) as unknown as SimOutcome;

const warning = (
  message: string,
  fields: Record<string, unknown>,
  at = 65_000,
): LogLine => ({
  at,
  instance: 'd0-i0-r0',
  level: 'WARNING',
  message,
  fields: { attemptId: ATTEMPT, ...fields },
});

const aborted = (fields: Partial<Execution> = {}): Execution =>
  execution({
    attemptId: ATTEMPT,
    abortedAt: 66_000,
    abortReason: 'lease_lost',
    abortMessage: 'the lease lapsed unrenewed',
    // Still running at the history's end: it gets no answer line.
    end: undefined,
    result: 'running',
    ...fields,
  });

const LAPSED = 'lease lapsed: no extension was confirmed within the lease';
const FAILED = 'lease extension failed; retrying at the next beat';
const failure = (failedExtensions: unknown, at = 64_000) =>
  warning(FAILED, { failedExtensions, leaseMs: 30_000, err: {} }, at);

describe('invariant 29: an attempt’s reports', () => {
  it('finds a signal aborted without a known reason or a message', () => {
    const found = attemptReportsTrue(
      outcome(
        [aborted({ abortReason: 'unknown', abortMessage: '' })],
        [warning(LAPSED, {})],
      ),
    ).join('\n');

    assert.match(found, /without a known reason \(unknown\)/);
    assert.match(found, /with no message saying why/);
  });

  it('finds a warning that says nothing', () => {
    assert.match(
      attemptReportsTrue(outcome([], [warning('', {})])).join('\n'),
      /says nothing/,
    );
  });

  it('finds a job aborted for a lost lease with no lease warning naming its attempt', () => {
    assert.match(
      attemptReportsTrue(
        outcome([aborted()], [warning(LAPSED, { attemptId: 'another' })]),
      ).join('\n'),
      /no lease warning naming its attempt/,
    );
    assert.deepEqual(
      attemptReportsTrue(outcome([aborted()], [warning(LAPSED, {})])),
      [],
    );
  });

  it('finds failed extensions miscounted, or without their lease or error', () => {
    const job = aborted();
    const lapse = warning(LAPSED, {});

    assert.match(
      attemptReportsTrue(outcome([job], [failure(-1), lapse])).join('\n'),
      /counts -1 failed extensions/,
    );
    assert.match(
      attemptReportsTrue(
        outcome([job], [failure(1, 63_000), failure(3), lapse]),
      ).join('\n'),
      /counts 3 failed extensions after 1/,
    );
    assert.match(
      attemptReportsTrue(
        outcome([job], [warning(FAILED, { failedExtensions: 1 }), lapse]),
      ).join('\n'),
      /names no lease/,
    );
    assert.deepEqual(
      attemptReportsTrue(
        outcome([job], [failure(1, 63_000), failure(2), lapse]),
      ),
      [],
    );
  });

  it('finds a count started again at 1 with no renewal landed since the last failure', () => {
    const job = aborted();
    const logs = [failure(1, 40_000), failure(1, 64_000), warning(LAPSED, {})];
    const renewed = new Map([
      [
        ATTEMPT,
        [
          {
            landedAt: 50_000,
            expires: 80_000,
            leaseMs: 30_000,
            runId: 'run-1',
          },
        ],
      ],
    ]);

    assert.match(
      attemptReportsTrue(outcome([job], logs)).join('\n'),
      /counts 1 failed extensions after 1/,
    );
    assert.deepEqual(
      attemptReportsTrue({ ...outcome([job], logs), leaseEnds: renewed }),
      [],
    );
  });

  it('finds a takeover warning whose count or cause is false', () => {
    const job = aborted();
    const lost = (words: string, failedExtensions: number) =>
      warning(`lease lost: another attempt took this run over ${words}`, {
        failedExtensions,
      });

    assert.match(
      attemptReportsTrue(
        outcome(
          [job],
          [
            failure(1, 63_000),
            lost('after 2 failed extension(s) let it lapse', 1),
          ],
        ),
      ).join('\n'),
      /says 2 failed extensions, and logs 1/,
    );
    assert.match(
      attemptReportsTrue(
        outcome(
          [job],
          [lost('although no extension had failed (changed by someone)', 2)],
        ),
      ).join('\n'),
      /logs 2 failed extensions, and its words give another cause/,
    );
    assert.match(
      attemptReportsTrue(
        outcome(
          [job],
          [lost('after no extension ran for a whole lease (paused)', 0)],
        ),
      ).join('\n'),
      /never paused/,
    );
    assert.match(
      attemptReportsTrue(outcome([job], [lost('for no reason', 0)])).join('\n'),
      /gives no cause/,
    );
    const wordless = warning('lease lost: ; aborting the job', {
      failedExtensions: 0,
    });
    assert.match(
      attemptReportsTrue(outcome([job], [wordless])).join('\n'),
      /does not say that another attempt took the run over/,
    );
  });

  it("finds the lapse timer's warning after a takeover's, and passes one before it", () => {
    const job = aborted();
    const lost = warning(
      'lease lost: another attempt took this run over although no extension had failed (the record was changed by someone else)',
      { failedExtensions: 0 },
    );
    const timer = (at: number) => warning(LAPSED, { failedExtensions: 0 }, at);
    assert.match(
      attemptReportsTrue(outcome([job], [lost, timer(70_000)])).join('\n'),
      /warned at .* that its lease lapsed unconfirmed .* after it learnt another attempt took the run over/,
    );
    assert.doesNotMatch(
      attemptReportsTrue(outcome([job], [timer(60_000), lost])).join('\n'),
      /after it learnt another attempt took the run over/,
    );
  });

  it('finds a fenced write’s report naming the other write', () => {
    const returned = execution({ attemptId: ATTEMPT, result: 'returned' });
    const answer = {
      ...warning(
        'scheduled run: processed',
        { outcome: 'processed', completion: 'unrecorded' },
        70_000,
      ),
      level: 'ERROR',
    };
    const unrecorded = {
      ...warning('the claim could not be released', { fence: 'release' }),
      level: 'ERROR',
    };

    assert.match(
      attemptReportsTrue(outcome([returned], [unrecorded, answer])).join('\n'),
      /names the release of a job that returned/,
    );
    assert.deepEqual(
      attemptReportsTrue(
        outcome(
          [returned],
          [
            {
              ...unrecorded,
              message:
                'the job succeeded but its completion could not be recorded',
              fields: { attemptId: ATTEMPT, fence: 'completion' },
            },
            answer,
          ],
        ),
      ),
      [],
    );
  });

  it('finds an answer line that misreports a job that ran, or none at all', () => {
    const threw = execution({ attemptId: ATTEMPT, result: 'threw' });
    const answered = (
      fields: Record<string, unknown>,
      message = 'scheduled run: failed',
    ) => ({
      ...warning(message, fields, 70_000),
      level: 'ERROR',
    });
    const unrecorded = {
      ...warning('the claim could not be released', { fence: 'release' }),
      level: 'ERROR',
    };

    assert.match(
      attemptReportsTrue(
        outcome(
          [threw],
          [
            answered(
              { outcome: 'processed', completion: 'recorded' },
              'scheduled run: processed',
            ),
          ],
        ),
      ).join('\n'),
      /says processed for a job that threw/,
    );
    assert.match(
      attemptReportsTrue(
        outcome([threw], [answered({ outcome: 'failed' })]),
      ).join('\n'),
      /names no result of its release/,
    );
    assert.match(
      attemptReportsTrue(
        outcome(
          [threw],
          [answered({ outcome: 'failed', release: 'unrecorded' })],
        ),
      ).join('\n'),
      /went unrecorded, with no ERROR naming that write/,
    );
    const lossWarning = warning(
      'lease lost: another attempt took this run over',
      {
        fence: 'release',
        leaseLoss: 'unknown',
      },
    );
    assert.match(
      attemptReportsTrue(
        outcome(
          [threw],
          [lossWarning, answered({ outcome: 'failed', release: 'recorded' })],
        ),
      ).join('\n'),
      /was recorded, after a warning that it found the lease lost/,
    );
    assert.match(
      attemptReportsTrue(
        outcome(
          [threw],
          [answered({ outcome: 'failed', release: 'lease_lost' })],
        ),
      ).join('\n'),
      /found the lease lost, with no lease-lost warning/,
    );
    assert.match(
      attemptReportsTrue(outcome([threw], [])).join('\n'),
      /threw, and no answer line names its attempt/,
    );
    assert.deepEqual(
      attemptReportsTrue(
        outcome(
          [threw],
          [unrecorded, answered({ outcome: 'failed', release: 'unrecorded' })],
        ),
      ),
      [],
    );
    assert.deepEqual(
      attemptReportsTrue(outcome([{ ...threw, diedAt: 69_000 }], [])),
      [],
    );
  });
});
