/**
 * The simulator's invariant 45 (test/sim/lapse-warning-invariants.ts) on hand-built outcomes: a
 * lease that ran out unrenewed is told, with its cause, before the attempt's next write, and once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lapseToldBeforeNextWrite } from '../sim/lapse-warning-invariants.ts';
import type { LogLine, SimOutcome, WriteSpan } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const START = 60_000;
const LEASE_MS = 30_000;

/** The claim's lease, and one landing halfway through each clean write of `spans`. */
function leases(spans: readonly WriteSpan[]) {
  return [
    {
      landedAt: START - 40,
      expires: START + 10_000,
      leaseMs: 10_000,
      runId: 'r',
    },
    ...spans
      .filter((span) => span.clean)
      .map((span) => ({
        landedAt: (span.sentAt + span.answeredBy) / 2,
        expires: (span.sentAt + span.answeredBy) / 2 + LEASE_MS,
        leaseMs: LEASE_MS,
        runId: 'r',
      })),
  ];
}

/** An outcome of one execution that never noted, its writes `spans`, its lines `logs`. */
function outcomeOf(
  spans: WriteSpan[],
  logs: LogLine[],
  firstNoteAt?: number,
): SimOutcome {
  return {
    executions: [
      execution({ start: START, end: START + 120_000, firstNoteAt }),
    ],
    logs,
    leaseMs: LEASE_MS,
    firestoreTimeoutMs: 10_000,
    instancePauses: [
      { instance: 'd0-i0-r0', from: START + 5_000, until: START + 60_000 },
    ],
    attemptWriteSpans: new Map([['attempt-1', spans]]),
    leaseEnds: new Map([['attempt-1', leases(spans)]]),
    recordWrites: [],
  } as unknown as SimOutcome;
}

// The widening at 3.3 s, then a pause from 5 s to 60 s: the next beat is sent on waking.
const widening = {
  sentAt: START + 3_300,
  answeredBy: START + 3_340,
  clean: true,
};
const onWaking = {
  sentAt: START + 60_000,
  answeredBy: START + 60_040,
  clean: true,
};
const lapseLine = (at: number, lapseCause: string): LogLine => ({
  at,
  instance: 'd0-i0-r0',
  level: 'WARNING',
  message: 'lease lapsed: no extension ran for a whole lease',
  fields: { attemptId: 'attempt-1', lapseCause },
});

describe('invariant 45: a lapse told before the next write', () => {
  it('passes a stall told with its cause as the beat on waking is sent', () => {
    const told = outcomeOf(
      [widening, onWaking],
      [lapseLine(START + 60_000, 'stalled')],
    );
    assert.deepEqual(lapseToldBeforeNextWrite(told), []);
  });

  it("passes the lapse timer's own warning when it came first", () => {
    const generic: LogLine = {
      ...lapseLine(START + 60_000, 'stalled'),
      message: 'lease lapsed: no extension was confirmed within the lease',
      fields: { attemptId: 'attempt-1' },
    };
    assert.deepEqual(
      lapseToldBeforeNextWrite(outcomeOf([widening, onWaking], [generic])),
      [],
    );
  });

  it('fails a beat sent more than a lease after the last renewal with no lapse warning before it', () => {
    const later = lapseLine(START + 60_001, 'stalled');
    assert.match(
      lapseToldBeforeNextWrite(outcomeOf([widening, onWaking], [later])).join(
        '\n',
      ),
      /sent a write to its run's record at .*02:00\.000Z, after its lease ran out unrenewed at .*01:33\.340Z \(stalled\), with no lease-lapsed warning/,
    );
  });

  it('judges neither a job that notes nor one whose extension failed since its last renewal', () => {
    assert.deepEqual(
      lapseToldBeforeNextWrite(outcomeOf([widening, onWaking], [], START)),
      [],
    );
    const failed: LogLine = {
      at: START + 20_000,
      instance: 'd0-i0-r0',
      level: 'WARNING',
      message: 'lease extension failed; retrying at the next beat',
      fields: { attemptId: 'attempt-1', failedExtensions: 1 },
    };
    assert.deepEqual(
      lapseToldBeforeNextWrite(outcomeOf([widening, onWaking], [failed])),
      [],
    );
  });

  it('fails a cause told twice with no renewal landed between, and passes the lapse timer after a cause (before the beat on waking landed)', () => {
    const told = lapseLine(START + 60_000, 'stalled');
    const again = lapseLine(START + 60_010, 'extension_unanswered');
    assert.match(
      lapseToldBeforeNextWrite(
        outcomeOf([widening, onWaking], [told, again]),
      ).join('\n'),
      /told its lease's lapse again at .*02:00\.010Z \(extension_unanswered\).*a lapse is told once/,
    );
    const timer: LogLine = {
      ...told,
      at: START + 60_010,
      message: 'lease lapsed: no extension was confirmed within the lease',
      fields: { attemptId: 'attempt-1' },
    };
    assert.deepEqual(
      lapseToldBeforeNextWrite(outcomeOf([widening, onWaking], [told, timer])),
      [],
    );
    // The beat sent on waking landed (at 60.02 s) before a later lapse was told.
    const afterRenewal = lapseLine(START + 120_000, 'stalled');
    assert.deepEqual(
      lapseToldBeforeNextWrite(
        outcomeOf([widening, onWaking], [told, afterRenewal]),
      ),
      [],
    );
  });
});
