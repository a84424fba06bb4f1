/**
 * What became of a slot (`run-history.ts`), in-process: each record shape and absence, judged
 * against the job's retry window. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeRunId } from '../../src/core/run-key.ts';
import type { RunRecord } from '../../src/core/run-record.ts';
import { slotRow } from '../../src/ops/slot-history.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { isSlotsOwnDelivery, slotRunId } from '../../src/policy/run-history.ts';
import { slotVerdict } from '../../src/policy/slot-verdict.ts';

const [job] = validateJobs([
  defineJob({
    id: 'hourly',
    schedule: '0 * * * *',
    attemptDeadlineSeconds: 60,
    retryCount: 1,
    maxRetryDurationSeconds: 0,
    minBackoffSeconds: 30,
    run: () => {},
  }),
]);
if (job === undefined) {
  throw new Error('no job');
}
const SLOT = new Date('2026-10-16T12:00:00Z');
// One 60 s attempt, a 30 s back-off, one more 60 s attempt: the execution ends by 12:02:30, and
// the missed-run check takes the slot as closed an attempt deadline later, at 12:03:30.
const INSIDE = new Date('2026-10-16T12:03:29Z');
const PAST = new Date('2026-10-16T12:03:30Z');

/** An hourly job with Scheduler's shipped retry settings (a longest execution of 3780 s). */
const [hourly] = validateJobs([
  defineJob({ id: 'hourly', schedule: '0 * * * *', run: () => {} }),
]);
if (hourly === undefined) {
  throw new Error('no job');
}

/** `seconds` after the slot. */
function afterSlot(seconds: number): Date {
  return new Date(SLOT.getTime() + seconds * 1000);
}

function record(fields: Partial<RunRecord>): RunRecord {
  return {
    status: 'completed',
    attemptId: 'attempt-1',
    reportedBy: undefined,
    keyScope: undefined,
    leaseExpires: undefined,
    attempts: 1,
    firstClaimedAt: undefined,
    claimedAt: undefined,
    completedAt: undefined,
    failedAt: undefined,
    lastError: undefined,
    reportedAt: undefined,
    jobName: 'hourly',
    scheduleTime: SLOT,
    kind: 'slot',
    rerunOf: undefined,
    withoutScheduleTime: false,
    blockedBy: undefined,
    notes: {},
    ...fields,
  };
}

describe('slotRunId', () => {
  it('is the run id a delivery of that slot gets: short id, canonical time, same scope', () => {
    const scope = [['config', 'prod']] as const;

    assert.equal(
      slotRunId('hourly', SLOT, scope),
      computeRunId({
        jobName: 'hourly',
        scheduleTime: '2026-10-16T12:00:00Z',
        scope,
      }),
    );
  });
});

describe('slotRow', () => {
  const cases: [string, RunRecord | undefined, Date, string, boolean][] = [
    ['no record inside the retry window', undefined, INSIDE, 'pending', false],
    ['no record past the retry window', undefined, PAST, 'missed', true],
    ['a completed record', record({}), INSIDE, 'completed', true],
    [
      'a failed record inside the window',
      record({ status: 'failed' }),
      INSIDE,
      'failed',
      false,
    ],
    [
      'a failed record past the window',
      record({ status: 'failed' }),
      PAST,
      'failed',
      true,
    ],
    [
      'a held record long past the window',
      record({ status: 'in_progress' }),
      PAST,
      'in_progress',
      false,
    ],
    [
      'a reported miss',
      record({ status: 'missed', attempts: 0 }),
      PAST,
      'missed',
      true,
    ],
    [
      'a held record whose lease ends three days from now (a leased_at from the future)',
      record({
        status: 'in_progress',
        leaseExpires: new Date(PAST.getTime() + 3 * 86_400_000),
      }),
      PAST,
      'unreadable',
      false,
    ],
  ];
  for (const [what, stored, now, state, final] of cases) {
    it(`calls ${what} ${state}${final ? ', final' : ''}`, () => {
      const row = slotRow(job, SLOT, 'run', stored, now);

      assert.equal(row.state, state);
      assert.equal(row.final, final);
    });
  }

  it('calls a slot missed, or its failure final, only once the missed-run check would: after its longest execution and an attempt deadline, not its retry window', () => {
    // Scheduler's shipped retries: a retry window of 3570 s (every attempt to its deadline), but
    // attempts that fail at once leave room for a retry sent up to maxRetryDuration (3600 s), which
    // runs up to its 180 s deadline (3780 s); the check takes the slot as closed an attempt
    // deadline later, at 3960 s (`slotVerdict`).
    const failed = record({ status: 'failed', attempts: 3 });

    for (const seconds of [3570, 3959]) {
      assert.equal(
        slotRow(hourly, SLOT, 'run', undefined, afterSlot(seconds)).state,
        'pending',
      );
      assert.equal(
        slotRow(hourly, SLOT, 'run', failed, afterSlot(seconds)).final,
        false,
      );
    }
    const missed = slotRow(hourly, SLOT, 'run', undefined, afterSlot(3960));
    assert.deepEqual([missed.state, missed.final], ['missed', true]);
    assert.equal(
      slotRow(hourly, SLOT, 'run', failed, afterSlot(3960)).final,
      true,
    );
  });

  it('agrees with the missed-run check on a late-started slot: final only when the check closes it, from its first claim (helper attack 1b, 1d)', () => {
    const verdictAt = (stored: RunRecord, seconds: number) =>
      slotVerdict(
        hourly,
        SLOT,
        stored,
        Number.NEGATIVE_INFINITY,
        afterSlot(seconds),
      ).verdict;
    // First claimed 20 min late, failed at once: its execution may run 3780 s from its claim, and
    // the check takes it as closed an attempt deadline later, at 1200 + 3960 s.
    const lateFailed = record({
      status: 'failed',
      attempts: 1,
      firstClaimedAt: afterSlot(1200),
      failedAt: afterSlot(1210),
    });
    assert.equal(
      slotRow(hourly, SLOT, 'run', lateFailed, afterSlot(5159)).final,
      false,
    );
    assert.equal(verdictAt(lateFailed, 5159), 'open');
    assert.equal(
      slotRow(hourly, SLOT, 'run', lateFailed, afterSlot(5160)).final,
      true,
    );
    assert.equal(verdictAt(lateFailed, 5160), 'failed');
    // First claimed past one longest execution (a Force run's retry, say): Scheduler's own
    // execution began by slot + 3780 s at the latest, so the slot closes at 3780 + 3960 s.
    const lapsed = record({
      status: 'in_progress',
      firstClaimedAt: afterSlot(5000),
      claimedAt: afterSlot(5000),
      leaseExpires: afterSlot(5500),
    });
    assert.equal(
      slotRow(hourly, SLOT, 'run', lapsed, afterSlot(7739)).state,
      'in_progress',
    );
    assert.equal(verdictAt(lapsed, 7739), 'open');
    const closed = slotRow(hourly, SLOT, 'run', lapsed, afterSlot(7740));
    assert.deepEqual([closed.state, closed.final], ['failed', true]);
    assert.equal(verdictAt(lapsed, 7740), 'failed');
  });

  it('calls a failure its attempt reported final at once (helper attack 1a)', () => {
    // No retries and a 30-minute deadline: the failing attempt knows no retry can come and
    // reports at 1900 s, before the slot closes to the check (3600 s).
    const [single] = validateJobs([
      defineJob({
        id: 'single',
        schedule: '0 * * * *',
        attemptDeadlineSeconds: 1800,
        retryCount: 0,
        maxRetryDurationSeconds: 0,
        run: () => {},
      }),
    ]);
    if (single === undefined) {
      throw new Error('no job');
    }
    const failedAt = new Date(SLOT.getTime() + 1_900_000);
    const failed = {
      status: 'failed',
      attempts: 1,
      firstClaimedAt: SLOT,
      failedAt,
    } as const;
    const reported = record({
      ...failed,
      reportedAt: failedAt,
      reportedBy: 'attempt-1',
    });

    assert.equal(slotRow(single, SLOT, 'run', reported, failedAt).final, true);
    assert.equal(
      slotRow(single, SLOT, 'run', record(failed), failedAt).final,
      false,
    );
  });

  it("calls a failed forced run final only once Scheduler's retries of it are over, a manual run's at once", () => {
    const claimed = new Date('2026-10-16T11:00:00Z'); // a Force run of the 12:00 slot, an hour early
    const forced = record({
      status: 'failed',
      kind: 'forced',
      firstClaimedAt: claimed,
    });
    const manual = record({
      status: 'failed',
      kind: 'manual',
      firstClaimedAt: claimed,
    });
    const at = (ms: number) => new Date(claimed.getTime() + ms);

    // From the first claim: 60 s, a 30 s back-off, 60 s, and an attempt deadline more.
    assert.equal(slotRow(job, SLOT, 'run', forced, at(209_000)).final, false);
    assert.equal(slotRow(job, SLOT, 'run', forced, at(210_000)).final, true);
    assert.equal(slotRow(job, SLOT, 'run', manual, at(1_000)).final, true);
  });

  it('calls a forced run whose lease lapsed failed, final, once its retry window from its first claim closed (not from its slot)', () => {
    const claimed = new Date('2026-10-16T11:00:00Z'); // a Force run of the 12:00 slot, an hour early
    const held = record({
      status: 'in_progress',
      kind: 'forced',
      firstClaimedAt: claimed,
      claimedAt: claimed,
      leaseExpires: new Date(claimed.getTime() + 60_000), // its instance died holding it
    });
    // 11:10: Scheduler's retries of it ended at 11:02:30; nothing will finish or retry it now.
    const row = slotRow(
      job,
      SLOT,
      'run',
      held,
      new Date('2026-10-16T11:10:00Z'),
    );

    assert.equal(row.state, 'failed');
    assert.equal(row.final, true);
    // Inside its window a retry may still come and take it over.
    const inside = slotRow(
      job,
      SLOT,
      'run',
      held,
      new Date(claimed.getTime() + 149_000),
    );
    assert.equal(inside.state, 'in_progress');
    assert.equal(inside.final, false);
  });

  it('never calls a failed forced run without a claim time final while a retry of it may still come', () => {
    // A record without claimed_at (an earlier version's, a hand-written one): it failed at 11:00:30,
    // so its first claim was no later, and Scheduler's last attempt of it ends by 11:03:00; it is
    // final an attempt deadline later, when the missed-run check would take it as closed.
    const failedAt = new Date('2026-10-16T11:00:30Z');
    const forced = record({ status: 'failed', kind: 'forced', failedAt });

    assert.equal(
      slotRow(job, SLOT, 'run', forced, new Date('2026-10-16T11:00:40Z')).final,
      false,
    );
    assert.equal(
      slotRow(job, SLOT, 'run', forced, new Date('2026-10-16T11:03:59Z')).final,
      false,
    );
    assert.equal(
      slotRow(job, SLOT, 'run', forced, new Date('2026-10-16T11:04:00Z')).final,
      true,
    );
  });

  it('measures how late the run started and how long its completing attempt took', () => {
    const row = slotRow(
      job,
      SLOT,
      'run',
      record({
        attempts: 2,
        firstClaimedAt: new Date('2026-10-16T12:00:01.500Z'),
        claimedAt: new Date('2026-10-16T12:01:40Z'),
        completedAt: new Date('2026-10-16T12:01:43Z'),
        lastError: 'first try refused',
      }),
      PAST,
    );

    assert.equal(row.startedLateMs, 1500);
    assert.equal(row.durationMs, 3000);
    assert.equal(row.attempts, 2);
    assert.equal(row.lastError, 'first try refused');
  });
});

describe('isSlotsOwnDelivery: which forced run was in fact its slot’s delivery', () => {
  const forced = (fields: Partial<RunRecord>) =>
    record({
      kind: 'forced',
      firstClaimedAt: new Date(SLOT.getTime() - 10_000),
      ...fields,
    });

  it('a timed forced run first claimed within the tolerance before its slot is the slot’s delivery', () => {
    assert.equal(isSlotsOwnDelivery(forced({}), SLOT, 30_000), true);
  });

  it('a forced run sent without a schedule time never is, however near its slot', () => {
    assert.equal(
      isSlotsOwnDelivery(forced({ withoutScheduleTime: true }), SLOT, 30_000),
      false,
    );
  });

  it('one first claimed before the tolerance is not', () => {
    assert.equal(isSlotsOwnDelivery(forced({}), SLOT, 5_000), false);
  });

  it('nor one first claimed in the first half of the tolerance: a genuine forced run, judged early when planned, claimed a moment later', () => {
    const edge = (msBefore: number) =>
      isSlotsOwnDelivery(
        forced({ firstClaimedAt: new Date(SLOT.getTime() - msBefore) }),
        SLOT,
        30_000,
      );

    assert.deepEqual(
      [edge(30_000), edge(15_001), edge(15_000), edge(0)],
      [false, false, true, true],
    );
  });
});
