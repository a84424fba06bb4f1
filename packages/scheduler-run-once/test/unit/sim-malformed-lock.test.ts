/**
 * Invariant 39 (test/sim/malformed-lock-invariants.ts) on hand-built outcomes: while a lock names
 * no run id, its `skip` job's requests are answered `unreadable_record` naming the lock and the
 * repair, and none runs, is skipped or waits; after the repair, they run as usual.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { malformedLocksAnswered } from '../../test/sim/malformed-lock-invariants.ts';

const LOCKED_AT = Date.parse('2026-01-05T01:00:30.000Z');
const REPAIRED_AT = Date.parse('2026-01-05T01:04:30.000Z');
const LOCK_ID = 'job-0~overlap';
/** The lock's holder id as stored: a run id in capitals. */
const HOLDER = 'A'.repeat(64);
const REPAIR = `Repair it: delete the lock document ${LOCK_ID} (in the runs collection's _jobs collection).`;

/** A delivery of job-0's slot at minute `minute`, answered `outcome` a moment later. */
function delivery(minute: number, outcome: string, message = REPAIR) {
  const sentAt = Date.parse('2026-01-05T01:00:00.000Z') + minute * 60_000;
  return {
    deployment: 0,
    source: 'scheduler',
    jobId: 'job-0',
    scheduleTime: new Date(sentAt).toISOString(),
    sentAt,
    endedAt: sentAt + 100,
    status: outcome === 'processed' ? 200 : 500,
    outcome,
    instance: 'd0-i0-r0',
    runId: `run-${minute}`,
    message,
  };
}

/** The ERROR line of a delivery's `unreadable_record` answer naming `blockedBy`. */
function answerLine(
  d: ReturnType<typeof delivery>,
  blockedBy = LOCK_ID,
  problem = `is "${HOLDER}", not a run id`,
) {
  return {
    at: d.endedAt,
    instance: d.instance,
    level: 'ERROR',
    message: 'scheduled run: unreadable_record',
    fields: {
      jobName: 'job-0',
      outcome: d.outcome,
      blockedBy,
      field: 'holder_run_id',
      problem,
    },
  };
}

/** An outcome with one malformed lock of job-0 (`skip`), repaired at minute 4.5. */
function outcomeWith(
  deliveries: ReturnType<typeof delivery>[],
  logs: object[],
  executions: object[] = [],
) {
  return {
    deployments: [
      { revisions: [{ jobs: [{ id: 'job-0', overlap: 'skip' }] }] },
    ],
    malformedLocks: [
      {
        deployment: 0,
        jobId: 'job-0',
        lockId: LOCK_ID,
        form: 'capitals',
        holderValue: HOLDER,
        lockedAt: LOCKED_AT,
        deletedAt: REPAIRED_AT,
      },
    ],
    deliveries,
    logs,
    executions,
  } as never;
}

describe('invariant 39: a lock naming no run id is answered unreadable_record', () => {
  it('passes answers naming the lock and its repair, and a run after the repair', () => {
    const blocked = delivery(1, 'unreadable_record');
    const after = delivery(5, 'processed');
    const run = {
      deployment: 0,
      revision: 0,
      jobId: 'job-0',
      scheduleTime: after.sentAt,
      start: after.sentAt + 10,
    };
    const outcome = outcomeWith([blocked, after], [answerLine(blocked)], [run]);
    assert.deepEqual(malformedLocksAnswered(outcome), []);
  });

  it('fails a run, a skip or a wait behind the lock', () => {
    for (const answer of ['processed', 'skipped', 'waiting']) {
      const d = delivery(2, answer);
      const found = malformedLocksAnswered(outcomeWith([d], []));
      assert.equal(found.length, 1, answer);
      assert.match(found[0] ?? '', /it must be answered unreadable_record/);
    }
    const run = {
      deployment: 0,
      revision: 0,
      jobId: 'job-0',
      scheduleTime: LOCKED_AT + 29_500,
      start: LOCKED_AT + 30_000,
      source: 'scheduler',
      instance: 'd0-i0-r0',
    };
    const found = malformedLocksAnswered(outcomeWith([], [], [run]));
    assert.match(found[0] ?? '', /named no run \(holder id capitals/);
  });

  it('fails an answer that names neither the lock nor its repair', () => {
    const d = delivery(3, 'unreadable_record', 'Repair that record: delete it');
    const found = malformedLocksAnswered(
      outcomeWith([d], [answerLine(d, 'some-run-id')]),
    );
    assert.equal(found.length, 2);
    assert.match(found[0] ?? '', /no ERROR line of its answer names the lock/);
    assert.match(found[1] ?? '', /does not name the lock document/);
  });

  it('fails an ERROR whose problem does not quote the holder id as stored', () => {
    const d = delivery(3, 'unreadable_record');
    const found = malformedLocksAnswered(
      outcomeWith([d], [answerLine(d, LOCK_ID, 'is missing, not a run id')]),
    );
    assert.equal(found.length, 1);
    assert.match(
      found[0] ?? '',
      /does not quote the holder id as stored \("A{64}"\)/,
    );
  });
});
