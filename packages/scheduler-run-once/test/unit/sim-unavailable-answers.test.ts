/**
 * The simulator's invariant 49 (`test/sim/unavailable-answer-invariants.ts`,
 * `unavailableOnlyWhenFirestoreFailed`) on hand-built outcomes: a request is answered
 * `unavailable`, and a line names Firestore's failure, only when a fault met an operation of its
 * instance, the instance was paused, or (a request) it was shutting down. No simulation, no
 * Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type {
  Delivered,
  DeliveryOp,
  LogLine,
  SimOutcome,
} from '../sim/simulator.ts';
import { unavailableOnlyWhenFirestoreFailed } from '../sim/unavailable-answer-invariants.ts';

const INSTANCE = 'd0-i0-r0';
const TIMEOUT_MS = 5_000;

/** The claim the request sent at 60.01 s. */
const claim = (troubled: boolean): DeliveryOp => ({
  at: 60_010,
  kind: 'create',
  paths: ['runs/run-1'],
  troubled,
});

/** A Scheduler request sent at 60 s and answered at 65 s, `unavailable` unless said. */
function request(
  ops: DeliveryOp[],
  message = 'Firestore is unavailable',
): Delivered {
  return {
    deployment: 0,
    source: 'scheduler',
    jobId: 'job-0',
    scheduleTime: '1970-01-01T00:01:00Z',
    sentAt: 60_000,
    endedAt: 65_000,
    status: 500,
    outcome: 'unavailable',
    instance: INSTANCE,
    runId: 'run-1',
    message,
    ops,
  };
}

/** A check's line at 120 s naming Firestore's failure. */
const failedCheckLine: LogLine = {
  at: 120_000,
  instance: INSTANCE,
  level: 'WARNING',
  message: 'missed-run check failed',
  fields: {
    err: { type: 'LedgerUnavailableError', message: 'Firestore skip failed' },
  },
};

function outcome(parts: {
  deliveries?: Delivered[];
  logs?: LogLine[];
  troubledOps?: { at: number; machine: string; paths: string[] }[];
  instancePauses?: { instance: string; from: number; until: number }[];
}): SimOutcome {
  return {
    emulator: false,
    firestoreTimeoutMs: TIMEOUT_MS,
    deliveries: parts.deliveries ?? [],
    logs: parts.logs ?? [],
    troubledOps: parts.troubledOps ?? [],
    instancePauses: parts.instancePauses ?? [],
  } as unknown as SimOutcome;
}

describe('invariant 49: only Firestore failing is answered and logged as its failure', () => {
  it('fails an unavailable answer none of whose operations met a fault, and passes one whose claim did', () => {
    const found = unavailableOnlyWhenFirestoreFailed(
      outcome({ deliveries: [request([claim(false)])] }),
    );
    assert.equal(found.length, 1);
    assert.match(found[0] ?? '', /answered unavailable, but none of its 1/);

    assert.deepEqual(
      unavailableOnlyWhenFirestoreFailed(
        outcome({ deliveries: [request([claim(true)])] }),
      ),
      [],
    );
  });

  it('passes a request that waited on another request’s faulted claim on its instance, a paused instance and a shutdown', () => {
    // The other request's claim was sent 3 s before this one and met a fault.
    const shared = outcome({
      deliveries: [request([])],
      troubledOps: [{ at: 57_000, machine: INSTANCE, paths: ['runs/run-1'] }],
    });
    assert.deepEqual(unavailableOnlyWhenFirestoreFailed(shared), []);

    const paused = outcome({
      deliveries: [request([claim(false)])],
      instancePauses: [{ instance: INSTANCE, from: 62_000, until: 70_000 }],
    });
    assert.deepEqual(unavailableOnlyWhenFirestoreFailed(paused), []);

    const shuttingDown = outcome({
      deliveries: [
        request(
          [],
          'This instance is shutting down; the job was not run. Retry later.',
        ),
      ],
    });
    assert.deepEqual(unavailableOnlyWhenFirestoreFailed(shuttingDown), []);
  });

  it('does not take a fault on another instance, or one more than a timeout before the request, for an explanation', () => {
    const elsewhere = outcome({
      deliveries: [request([])],
      troubledOps: [{ at: 61_000, machine: 'd0-i1-r0', paths: ['runs/run-1'] }],
    });
    assert.equal(unavailableOnlyWhenFirestoreFailed(elsewhere).length, 1);

    const tooEarly = outcome({
      deliveries: [request([])],
      troubledOps: [
        { at: 60_000 - TIMEOUT_MS - 1, machine: INSTANCE, paths: ['runs/x'] },
      ],
    });
    assert.equal(unavailableOnlyWhenFirestoreFailed(tooEarly).length, 1);
  });

  it('fails a line naming Firestore’s failure with no fault before it on its instance, and passes one with a fault', () => {
    const found = unavailableOnlyWhenFirestoreFailed(
      outcome({ logs: [failedCheckLine] }),
    );
    assert.equal(found.length, 1);
    assert.match(
      found[0] ?? '',
      /"missed-run check failed" .* names Firestore's failure/,
    );

    const faulted = outcome({
      logs: [failedCheckLine],
      troubledOps: [{ at: 115_000, machine: INSTANCE, paths: ['runs/run-2'] }],
    });
    assert.deepEqual(unavailableOnlyWhenFirestoreFailed(faulted), []);
  });
});
