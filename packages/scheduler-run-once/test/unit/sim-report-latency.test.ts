/**
 * The simulator's invariant 31 (`test/sim/report-latency-invariants.ts`) on hand-built outcomes:
 * a slot's report may wait for the first clean run audit after its verdict was due, no longer.
 * No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ReportedSlot,
  reportedLate,
} from '../sim/report-latency-invariants.ts';
import type { LogLine, SimOutcome } from '../sim/simulator.ts';

const MINUTE = 60_000;
const T0 = Date.parse('2026-01-05T01:00:00.000Z');
const JOB = {
  id: 'job-0',
  schedule: '* * * * *',
  attemptDeadlineSeconds: 15,
  retryCount: 0,
  maxRetryDurationSeconds: 0,
  minBackoffSeconds: 1,
  maxBackoffSeconds: 20,
  maxDoublings: 0,
};

/** A run audit of `scheduledMs` that checked every job, done at `doneAt`, with `failed` checks. */
function auditDone(scheduledMs: number, doneAt: number, failed = 0): LogLine {
  return {
    at: doneAt,
    instance: 'd0-i1-r0',
    level: 'INFO',
    message: 'run audit done',
    fields: {
      scheduleTime: new Date(scheduledMs).toISOString(),
      failed,
    },
  };
}

function outcomeOf(logs: LogLine[]): SimOutcome {
  return {
    logs,
    leaseEnds: new Map(),
    schedulerAttempts: [[]],
    firestoreTimeoutMs: 5000,
  } as unknown as SimOutcome;
}

/** The slot of T0 + 1 minute, due 45 s later, first reported at `firstReportAt`. */
function slotReportedAt(
  firstReportAt: number,
  reportWrittenAt?: number,
): ReportedSlot {
  const slotMs = T0 + MINUTE;
  return {
    d: 0,
    job: JOB,
    what: 'job-0@01:01',
    slotMs,
    executionEndsMs: slotMs + 45_000,
    declaredUntil: Number.POSITIVE_INFINITY,
    executions: [],
    firstReportAt,
    reportWrittenAt,
  };
}

describe('invariant 31: a missed or failed slot is known by the first clean audit after its verdict was due', () => {
  it('fails a slot first reported after a clean audit scheduled past its due time', () => {
    const outcome = outcomeOf([
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000),
    ]);

    const late = reportedLate(outcome, slotReportedAt(T0 + 10 * MINUTE));

    assert.match(
      String(late),
      /first reported at .* after the run audit of 2026-01-05T01:05:00/,
    );
  });

  it('passes a slot the audit itself reported, and one whose only later audit failed a check', () => {
    const reportedByAudit = outcomeOf([
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000),
    ]);
    const failedAudit = outcomeOf([
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000, 1),
    ]);

    assert.equal(
      reportedLate(reportedByAudit, slotReportedAt(T0 + 5 * MINUTE + 1000)),
      undefined,
    );
    assert.equal(
      reportedLate(failedAudit, slotReportedAt(T0 + 10 * MINUTE)),
      undefined,
    );
  });

  it('passes an audit scheduled before the slot was due, and waits two minutes for a dead writer’s log line', () => {
    const early = outcomeOf([auditDone(T0 + MINUTE + 30_000, T0 + 2 * MINUTE)]);
    const afterWrite = outcomeOf([
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000),
    ]);
    // Written at 01:04 by a check that died before logging it: the 01:05 audit is within the grace.
    const written = slotReportedAt(T0 + 10 * MINUTE, T0 + 4 * MINUTE);

    assert.equal(
      reportedLate(early, slotReportedAt(T0 + 10 * MINUTE)),
      undefined,
    );
    assert.equal(reportedLate(afterWrite, written), undefined);
    assert.notEqual(
      reportedLate(
        afterWrite,
        slotReportedAt(T0 + 10 * MINUTE, T0 + 2 * MINUTE),
      ),
      undefined,
      'written at 01:02: past the grace by 01:05',
    );
  });

  it('passes a report another check wrote before the audit was done and logged within a Firestore timeout of its write (seed 20261212, history 1387)', () => {
    const audit = outcomeOf([
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 1000),
    ]);
    const writtenAt = T0 + 5 * MINUTE + 300;

    // Its write's answer came a timeout (5 s) late, the line just after it: in time.
    assert.equal(
      reportedLate(audit, slotReportedAt(writtenAt + 4_900, writtenAt)),
      undefined,
    );
    // A report written after the audit was done was not there for it to find: late.
    assert.notEqual(
      reportedLate(
        audit,
        slotReportedAt(T0 + 5 * MINUTE + 3_000, T0 + 5 * MINUTE + 2_000),
      ),
      undefined,
    );
  });

  it('waits for an execution that runs on past its lease to end and write its release (--faults --seed 1, history 87)', () => {
    const outcome = outcomeOf([
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000),
      auditDone(T0 + 10 * MINUTE, T0 + 10 * MINUTE + 2000),
    ]);
    // Its lease ran out at 01:01:45, but the job ran on until 01:05:03: the 01:05 audit's report
    // write met its release, and the 01:10 audit is the first to judge it afterwards.
    const stubborn = {
      ...slotReportedAt(T0 + 10 * MINUTE + 1000),
      executions: [{ end: T0 + 5 * MINUTE + 3000 }],
    } as unknown as ReportedSlot;
    assert.equal(reportedLate(outcome, stubborn), undefined);
    const reportedLater = {
      ...stubborn,
      firstReportAt: T0 + 20 * MINUTE,
    };
    assert.match(
      String(reportedLate(outcome, reportedLater)),
      /after the run audit of 2026-01-05T01:10:00/,
    );
  });

  it("judges by the final write's landing, twelve Firestore timeouts after the end if none is seen, and ignores a backfill's run after the report", () => {
    const audits = [
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000),
      auditDone(T0 + 10 * MINUTE, T0 + 10 * MINUTE + 2000),
    ];
    // The job ended at 01:04:30 and its release landed at 01:04:32: the 01:05 audit could judge it.
    const slot = {
      ...slotReportedAt(T0 + 10 * MINUTE + 1000),
      executions: [
        {
          runId: 'run-1',
          instance: 'd0-i0-r0',
          start: T0 + MINUTE,
          end: T0 + 4 * MINUTE + 30_000,
        },
      ],
    } as unknown as ReportedSlot;
    const released = {
      ...outcomeOf(audits),
      recordWrites: [
        { at: T0 + 4 * MINUTE + 32_000, machine: 'd0-i0-r0', runId: 'run-1' },
      ],
    } as unknown as SimOutcome;
    assert.match(
      String(reportedLate(released, slot)),
      /after the run audit of 2026-01-05T01:05:00/,
    );
    // No landing seen: it may land until 01:05:30 (12 × 5 s), after the 01:05 audit read it.
    assert.equal(reportedLate(outcomeOf(audits), slot), undefined);
    // A backfill ran the slot at 01:30, after its report: the 01:05 audit was due to report it.
    const backfilled = {
      ...slotReportedAt(T0 + 10 * MINUTE),
      executions: [
        {
          runId: 'run-1',
          instance: 'd0-i0-r0',
          start: T0 + 30 * MINUTE,
          end: T0 + 31 * MINUTE,
        },
      ],
    } as unknown as ReportedSlot;
    assert.match(
      String(reportedLate(outcomeOf(audits), backfilled)),
      /after the run audit of 2026-01-05T01:05:00/,
    );
  });

  it('waits two minutes after a relog claim whose check logged nothing of the run (--regressions, seed 2104191038)', () => {
    const audits = [
      auditDone(T0 + 5 * MINUTE, T0 + 5 * MINUTE + 2000),
      auditDone(T0 + 10 * MINUTE, T0 + 10 * MINUTE + 2000),
    ];
    // Written at 01:02 by a check that died before its line; claimed for a relog at 01:04 by a
    // check whose instance died too: the 01:05 audit is within the claim's grace.
    const slot = {
      ...slotReportedAt(T0 + 10 * MINUTE + 1000, T0 + 2 * MINUTE),
      runId: 'run-1',
    };
    const claimed = {
      ...outcomeOf(audits),
      recordWrites: [
        {
          at: T0 + 4 * MINUTE,
          machine: 'd0-i3-r0',
          runId: 'run-1',
          relogBy: 'a-check',
        },
      ],
    } as unknown as SimOutcome;
    assert.equal(reportedLate(claimed, slot), undefined);
    assert.match(
      String(reportedLate(outcomeOf(audits), slot)),
      /after the run audit of 2026-01-05T01:05:00/,
    );
  });
});
