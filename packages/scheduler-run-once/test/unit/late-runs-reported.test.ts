/** The pure parts of the late-run scan (src/policy/late-runs.ts): what a pending slot's check does. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  RunKind,
  type RunRecord,
  RunStatus,
} from '../../src/core/run-record.ts';
import {
  type DeclaredJob,
  defineJob,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import { pendingStep } from '../../src/policy/late-runs.ts';

const tick = validateJobs([
  defineJob({
    id: 'tick',
    schedule: '* * * * *',
    catchUp: { graceSeconds: 60, windowSeconds: 3600, slots: 'all' },
    run: () => {},
  }),
])[0] as DeclaredJob;
const SLOT = new Date(Date.UTC(2026, 0, 5, 12, 0));
const minutesAfter = (minutes: number) =>
  new Date(SLOT.getTime() + minutes * 60_000);

/** The record the missed-run check writes when it reports a slot missed: no attempt, reported. */
function reportedMissed(reportedAt: Date): RunRecord {
  return {
    status: RunStatus.Missed,
    attemptId: '',
    leaseExpires: undefined,
    attempts: 0,
    firstClaimedAt: undefined,
    claimedAt: undefined,
    completedAt: undefined,
    failedAt: undefined,
    lastError: undefined,
    reportedAt,
    reportedBy: 'check-1',
    jobName: 'tick',
    scheduleTime: SLOT,
    kind: RunKind.Slot,
    rerunOf: undefined,
    withoutScheduleTime: false,
    blockedBy: undefined,
    notes: {},
    keyScope: '',
  };
}

describe('the step of a pending late slot', () => {
  it('delivers a slot with no record while it is within the catch-up window', () => {
    const row = { slot: SLOT, runId: 'r', record: undefined };
    assert.equal(pendingStep(tick, row, minutesAfter(10)), 'deliver');
    assert.equal(pendingStep(tick, row, minutesAfter(61)), 'drop');
  });

  it('drops a slot reported missed meanwhile: the ledger never runs a reported slot for a catch-up, and the slots behind it would wait for nothing', () => {
    const row = {
      slot: SLOT,
      runId: 'r',
      record: reportedMissed(minutesAfter(4)),
    };
    assert.equal(pendingStep(tick, row, minutesAfter(10)), 'drop');
  });
});
