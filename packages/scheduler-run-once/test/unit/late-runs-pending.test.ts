/**
 * A pending slot that the late-run scan never put there (a mark written by hand, or a schedule
 * changed since): `pendingStep` never delivers a slot before its time, nor a time that is not a
 * slot of the job's schedule.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type DeclaredJob,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import { pendingStep } from '../../src/policy/late-runs.ts';

/** A job every 5 minutes with catch-up of every slot in an hour's window. */
const [job] = validateJobs([
  {
    id: 'sync',
    schedule: '*/5 * * * *',
    catchUp: { slots: 'all' },
    run: () => {},
  },
]) as [DeclaredJob];

const now = new Date('2026-03-02T10:12:00Z');
const row = (iso: string) => ({
  slot: new Date(iso),
  runId: `sync-${iso}`,
  record: undefined,
});

describe('pendingStep of a slot the scan would never have left pending', () => {
  it('delivers a slot of the schedule within the window (the case it is for)', () => {
    assert.equal(pendingStep(job, row('2026-03-02T10:05:00Z'), now), 'deliver');
  });

  it('drops a slot still in the future: its run would come before its time', () => {
    assert.equal(pendingStep(job, row('2026-03-02T10:20:00Z'), now), 'drop');
  });

  it('drops a time that is not a slot of the schedule (a schedule changed since, or a hand edit)', () => {
    assert.equal(pendingStep(job, row('2026-03-02T10:07:00Z'), now), 'drop');
  });
});
