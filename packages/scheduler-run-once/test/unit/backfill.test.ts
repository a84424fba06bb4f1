/**
 * Which missed slots a backfill delivers (`src/ops/backfill.ts` `planBackfill`), in-process: the rule
 * that a slot before the job's first record in the window is left alone gives way when the job is
 * known to have a record before the window.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planBackfill } from '../../src/ops/backfill.ts';
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
});
