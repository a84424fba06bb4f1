/**
 * The simulator's invariant 1 (`test/sim/invariants.ts`) on hand-built outcomes: which earlier
 * execution excuses a second one of the same run. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { violations } from '../sim/invariants.ts';
import type { Execution, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const outcome = (executions: Execution[]): SimOutcome =>
  ({
    emulator: true,
    startMs: 0,
    stopMs: 600_000,
    finalMs: 900_000,
    executions,
    // The retry's delivery was answered (invariant 29 asks each job that ended for its answer line).
    logs: executions
      .filter((e) => e.crashedBeforeAnswer !== true)
      .map((e) => ({
        at: e.end ?? 0,
        instance: e.instance,
        level: 'INFO',
        message: 'scheduled run: processed',
        fields: {
          attemptId: e.attemptId,
          outcome: 'processed',
          completion: 'recorded',
        },
      })),
    answers: [],
    deliveries: [],
    operatorPauses: [],
    foreignWrites: [],
    schedulerAttempts: [],
    firestoreTimeoutMs: 10_000,
    deployments: [],
    records: new Map(),
    createTimes: new Map(),
    errors: [],
    leaseMs: 30_000,
    gaps: {},
  }) as unknown as SimOutcome;

describe('invariant 1: a second execution of a run', () => {
  it('is excused after a job that returned as its instance crashed, its completion never landed', () => {
    const first = execution({ crashedBeforeAnswer: true });
    const retry = execution({
      attemptId: 'attempt-2',
      start: 90_000,
      end: 95_000,
    });

    assert.deepEqual(violations(outcome([first, retry])), []);
  });

  it('is a double run when the crashed instance’s completion had landed: the retry found the run completed', () => {
    const first = execution({
      crashedBeforeAnswer: true,
      completionLanded: true,
    });
    const retry = execution({
      attemptId: 'attempt-2',
      start: 90_000,
      end: 95_000,
    });

    assert.match(
      violations(outcome([first, retry])).join('\n'),
      /executed twice/,
    );
  });
});
