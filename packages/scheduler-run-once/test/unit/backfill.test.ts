/**
 * Which missed slots a backfill delivers (`src/ops/backfill.ts` `planBackfill`), in-process: the rule
 * that a slot before the job's first record in the window is left alone gives way when the job is
 * known to have a record before the window.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backfillSummary, planBackfill } from '../../src/ops/backfill.ts';
import { slotRow } from '../../src/ops/slot-history.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { slotRunId } from '../../src/policy/run-history.ts';

const [weekly] = validateJobs([
  defineJob({ id: 'weekly', schedule: '0 9 * * MON', run: () => {} }),
]);
if (weekly === undefined) {
  throw new Error('no job');
}
const NOW = new Date('2026-11-10T12:00:00Z');
const SLOT = new Date('2026-11-09T09:00:00Z');
const rows = [
  slotRow(weekly, SLOT, slotRunId('weekly', SLOT, []), undefined, NOW),
];
const rules = {
  now: NOW,
  retentionMs: 30 * 86_400_000,
  forcedRunToleranceMs: 60_000,
};

describe('planBackfill', () => {
  it('leaves a missed slot before the window’s first record alone by default', () => {
    const plan = planBackfill(rows, [weekly], rules);

    assert.deepEqual(plan.deliver, []);
    assert.deepEqual(
      plan.withheld.map((w) => w.reason),
      ['before_first_record'],
    );
  });

  it('delivers it when the job has a record before the window', () => {
    const plan = planBackfill(rows, [weekly], {
      ...rules,
      seenBefore: new Set(['weekly']),
    });

    assert.deepEqual(
      plan.deliver.map((row) => row.slot.toISOString()),
      ['2026-11-09T09:00:00.000Z'],
    );
  });

  it('leaves alone, and counts, every slot the table shows before the first record, missed or still inside its retry window', () => {
    // A five-minute job with Scheduler's default retries (closed to the check 66 min after its
    // time: its last retry sent at 60 min, its deadline, one more deadline) and one run at 11:00,
    // judged at 11:30: 09:00 to 10:20 are missed, 10:25 to 10:55 still inside it.
    const [five] = validateJobs([
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    ]);
    if (five === undefined) {
      throw new Error('no job');
    }
    const now = new Date('2026-11-10T11:30:00Z');
    const row = (slot: Date) =>
      slotRow(five, slot, slotRunId('five', slot, []), undefined, now);
    const before = Array.from({ length: 24 }, (_, i) =>
      row(new Date(Date.UTC(2026, 10, 10, 9, i * 5))),
    );
    const ran = {
      ...row(new Date('2026-11-10T11:00:00Z')),
      state: 'completed' as const,
      final: true,
      attempts: 1,
    };

    const plan = planBackfill([...before, ran], [five], { ...rules, now });
    const included = planBackfill([...before, ran], [five], {
      ...rules,
      now,
      includeBeforeFirstRecord: true,
    });

    assert.equal(plan.deliver.length, 0);
    assert.equal(plan.withheld.length, 24);
    assert.match(
      backfillSummary(plan, rules.retentionMs).join('\n'),
      /24 slot\(s\) left alone: not judged \(before first record\), as the table shows them .* delivers the 17 of them past their retry window .* the other 7 are still inside their retry window/,
    );
    assert.equal(included.deliver.length, 17);
    assert.deepEqual(
      included.withheld.map((w) => w.row.state),
      Array(7).fill('pending'),
    );
  });
});
