/**
 * Invariant 3 across a rolling deploy (`overlapPolicyKept`, test/sim/invariants.ts) on hand-built
 * outcomes: a revision that turned job-0 `skip` never starts a slot's run while the previous
 * slot's run, started by the old revision (`allow`, no lock) before that request came, executes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { overlapPolicyKept } from '../sim/invariants.ts';
import type { Execution, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

/** Job-0 every minute: `allow` in revision 0, `skip` in revision 1. */
const job = (overlap: string) => ({
  id: 'job-0',
  schedule: '* * * * *',
  overlap,
});

/** The old revision's run of the 60 s slot, 60 s to 150 s: it outlasts its minute. */
const old = execution({ revision: 0, start: 60_000, end: 150_000 });

/** The new revision's run of the 120 s slot, started at `start`, its request sent at 120 s. */
const next = (start: number, revision = 1): Execution =>
  execution({
    revision,
    scheduleTime: 120_000,
    runId: 'run-of-120',
    attemptId: 'attempt-2',
    instance: 'd0-i1-r0',
    start,
    end: start + 5_000,
  });

const outcomeOf = (executions: Execution[]): SimOutcome =>
  ({
    finalMs: 900_000,
    leaseMs: 60_000,
    executions,
    logs: [],
    leaseEnds: new Map(),
    deliveries: [
      {
        deployment: 0,
        source: 'scheduler',
        jobId: 'job-0',
        scheduleTime: new Date(120_000).toISOString(),
        sentAt: 120_000,
        endedAt: undefined,
        instance: 'd0-i1-r0',
      },
    ],
    deployments: [
      { revisions: [{ jobs: [job('allow')] }, { jobs: [job('skip')] }] },
    ],
  }) as unknown as SimOutcome;

describe('invariant 3 across a rolling deploy: the previous slot holds the job', () => {
  it("fails the new revision's slot started beside the old revision's previous slot", () => {
    const found = overlapPolicyKept(outcomeOf([old, next(120_050)]));
    assert.equal(found.length, 1);
    assert.match(found[0] ?? '', /overlap policy broken for job-0/);
  });

  it('passes it once the previous slot ended, and an old revision that runs beside', () => {
    assert.deepEqual(overlapPolicyKept(outcomeOf([old, next(150_050)])), []);
    assert.deepEqual(overlapPolicyKept(outcomeOf([old, next(120_050, 0)])), []);
  });
});
