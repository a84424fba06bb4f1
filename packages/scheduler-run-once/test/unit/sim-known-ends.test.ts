/**
 * The simulator's invariant on blocked answers (`blockedOnlyByLiveRuns` in
 * `test/sim/invariants.ts`) with an ended execution whose release went unrecorded: its record may
 * hold a lease for a while, and another instance may be refused meanwhile; the instance that ran it
 * knows the release went unanswered and takes the failed run over at once, so its own refusal of a
 * retry is a dead holder blocking it. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AWAITING_FIX, blockedOnlyByLiveRuns } from '../sim/invariants.ts';
import type { Delivered, LogLine, SimOutcome } from '../sim/simulator.ts';
import { execution, SLOT_RUN } from './sim-execution.ts';

const HERE = 'd0-i0-r0';

/** The first attempt's answer at 70 s: its job threw, its release unrecorded. */
const UNRECORDED: LogLine = {
  at: 70_000,
  instance: HERE,
  level: 'ERROR',
  message: 'scheduled run: failed',
  fields: { outcome: 'failed', attemptId: 'attempt-1', release: 'unrecorded' },
};

/** Scheduler's retry of the slot at 80 s, sent to `instance` and answered 409 in_progress. */
function refusedRetry(instance: string): Delivered {
  return {
    deployment: 0,
    source: 'scheduler',
    jobId: 'job-0',
    scheduleTime: new Date(60_000).toISOString(),
    sentAt: 80_000,
    endedAt: 80_050,
    status: 409,
    outcome: 'in_progress',
    instance,
    runId: SLOT_RUN,
  };
}

function outcome(retry: Delivered): SimOutcome {
  return {
    emulator: false,
    leaseMs: 60_000,
    firestoreTimeoutMs: 10_000,
    executions: [execution({ result: 'threw' })],
    deliveries: [retry],
    logs: [UNRECORDED],
  } as unknown as SimOutcome;
}

describe('a retry refused behind an ended attempt whose release went unrecorded', () => {
  it('is a dead holder blocking it on the instance that knows the release went unanswered', () => {
    const found = blockedOnlyByLiveRuns(
      outcome(refusedRetry(HERE)),
      AWAITING_FIX,
    );
    assert.equal(found.length, 1);
    assert.match(
      found[0] ?? '',
      /answered 409 in_progress .* a dead holder blocked it/,
    );
  });

  it('is allowed on another instance, which cannot know: the record holds the lease', () => {
    assert.deepEqual(
      blockedOnlyByLiveRuns(outcome(refusedRetry('d0-i1-r0')), AWAITING_FIX),
      [],
    );
  });
});
