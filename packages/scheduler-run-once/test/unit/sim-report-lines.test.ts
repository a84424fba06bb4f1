/**
 * Invariant 32 (test/sim/report-line-invariants.ts) on hand-built outcomes: a report line that
 * names its job, slot, run, state and fix with Error Reporting's fields passes; one that lacks
 * any of them is a violation naming what is missing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { errorEventFields } from '../../src/policy/error-report.ts';
import { REPORT_NOT_ACKNOWLEDGED } from '../../src/policy/missed-runs.ts';
import {
  auditCountsTrue,
  checkReportsLogged,
  reloggedReportsSayTheSame,
  reportLinesSayWhat,
  unmarkedWarningsTrue,
} from '../../test/sim/report-line-invariants.ts';

const SLOT = '2026-01-05T01:00:00.000Z';

/**
 * An outcome with one `failed` record (with `recordFields` besides its job, slot and status) and
 * the attempt's report line carrying `fields`.
 */
function outcomeWith(
  fields: Record<string, unknown>,
  recordFields: Record<string, unknown> = {},
) {
  const record = {
    job_name: 'job-0',
    schedule_time: Timestamp.fromMillis(Date.parse(SLOT)),
    status: 'failed',
    ...recordFields,
  };
  return {
    logs: [
      {
        at: Date.parse(SLOT) + 30_000,
        instance: 'd0-i0-r0',
        level: 'ERROR',
        message: 'run failed after retries',
        fields,
      },
    ],
    records: new Map([['run-1', record]]),
  } as never;
}

const GOOD = {
  jobName: 'job-0',
  slot: SLOT,
  runId: 'run-1',
  state: 'failed',
  attempts: 2,
  lastError: 'downstream refused',
  reportedBy: 'attempt',
  ...errorEventFields('failed', 'job-0', SLOT),
};

describe('invariant 32: a report line says what it reports', () => {
  it("passes the product's own line", () => {
    assert.deepEqual(reportLinesSayWhat(outcomeWith(GOOD)), []);
  });

  it('names what a line lacks', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...GOOD, '@type': undefined }, /its @type is undefined/],
      [{ ...GOOD, context: {} }, /its context\.reportLocation is undefined/],
      [{ ...GOOD, state: '' }, /its state is $/],
      [{ ...GOOD, slot: '2026-01-05T01:01:00.000Z' }, /its run id names job-0/],
      [{ ...GOOD, fix: 'npm run runs' }, /its fix is "npm run runs"/],
      [{ ...GOOD, attempts: 0 }, /its attempts is 0/],
      [{ ...GOOD, lastError: '' }, /it has no lastError/],
      [{ ...GOOD, reportedBy: '' }, /its reportedBy is $/],
    ];
    for (const [fields, says] of cases) {
      const found = reportLinesSayWhat(outcomeWith(fields));
      assert.equal(found.length, 1, JSON.stringify(fields));
      assert.match(found[0] ?? '', says);
    }
  });

  it("asks the line's lastError to be the one its landed report's record keeps", () => {
    const kept = {
      reported_by: 'reporter-1',
      last_error: 'downstream refused',
    };
    const line = { ...GOOD, reporter: 'reporter-1' };
    assert.deepEqual(reportLinesSayWhat(outcomeWith(line, kept)), []);
    const uncut = {
      ...line,
      lastError: `downstream refused${'.'.repeat(500)}`,
    };
    assert.match(
      reportLinesSayWhat(outcomeWith(uncut, kept))[0] ?? '',
      /its lastError \(518 characters\) is not the record's \(18\)/,
    );
    // Another reporter's record (this report did not land, or was overwritten) is not compared.
    const other = { ...kept, reported_by: 'reporter-2' };
    assert.deepEqual(reportLinesSayWhat(outcomeWith(uncut, other)), []);
  });
});

describe("invariant 36: a run audit's summary counts the reports its checks logged", () => {
  const AUDIT_RUN = 'audit-run-1';
  const SENT = Date.parse(SLOT);
  const line = (at: number, message: string, fields: object) => ({
    at,
    instance: 'd0-i0-r0',
    level: 'INFO',
    message,
    fields,
  });
  const report = line(SENT + 2_000, 'missed run', {
    runId: 'run-1',
    auditRunId: AUDIT_RUN,
  });
  const done = (reported: unknown, failed = 0) =>
    line(SENT + 3_000, 'run audit done', {
      runId: AUDIT_RUN,
      scheduleTime: SLOT,
      reported,
      failed,
    });
  /** The audit's request, answered at 4 s, and `others` of its slot. */
  const outcome = (logs: object[], others: object[] = []) =>
    ({
      logs,
      auditDeliveries: [
        {
          instance: 'd0-i0-r0',
          scheduleTime: SLOT,
          sentAt: SENT,
          endedAt: SENT + 4_000,
        },
        ...others,
      ],
    }) as never;

  it('passes a summary that counts its report, and one whose check failed', () => {
    assert.deepEqual(auditCountsTrue(outcome([report, done(1)])), []);
    assert.deepEqual(auditCountsTrue(outcome([report, done(0, 1)])), []);
  });

  it('fails a summary that counts none, or no number', () => {
    assert.match(
      auditCountsTrue(outcome([report, done(0)]))[0] ?? '',
      /says reported: 0, and its checks logged 1 reports/,
    );
    assert.equal(auditCountsTrue(outcome([done(undefined)])).length, 1);
  });

  it("counts lines logged before a duplicate request's in_progress answer (seed 213, path 82, --small)", () => {
    // Two requests of the slot at once: one ran the audit, the other was answered in_progress
    // after the report line; that answer ran no check, so the line is still the audit's.
    const duplicate = {
      instance: 'd0-i0-r0',
      scheduleTime: SLOT,
      sentAt: SENT,
      endedAt: SENT + 2_500,
      outcome: 'in_progress',
    };
    assert.deepEqual(
      auditCountsTrue(outcome([report, done(1)], [duplicate])),
      [],
    );
    const ranIt = { ...duplicate, outcome: 'failed' };
    assert.equal(
      auditCountsTrue(outcome([report, done(1)], [ranIt])).length,
      1,
    );
  });

  it("counts lines logged before a duplicate request's claim went unanswered (seed 5, path 245, --faults)", () => {
    // The duplicate's claim had no answer within FIRESTORE_TIMEOUT_SECONDS: answered
    // `unavailable`, its job never started, so it logged no report.
    const unanswered = {
      instance: 'd0-i0-r0',
      scheduleTime: SLOT,
      sentAt: SENT,
      endedAt: SENT + 2_500,
      outcome: 'unavailable',
    };
    assert.deepEqual(
      auditCountsTrue(outcome([report, done(1)], [unanswered])),
      [],
    );
  });
});

describe('invariant 37: a check logs the report it wrote', () => {
  const WROTE = Date.parse(SLOT) + 60_000;
  const written = {
    at: WROTE,
    machine: 'auditor',
    runId: 'run-1',
    reporter: 'r1',
  };
  const line = (instance: string, reporter: string) => ({
    at: WROTE + 100,
    instance,
    level: 'ERROR',
    message: 'missed run',
    fields: { runId: 'run-1', reporter },
  });
  const judge = (fields: object) =>
    checkReportsLogged({
      finalMs: WROTE + 600_000,
      checkReports: [written],
      logs: [],
      ...fields,
    } as never);

  it('passes a report its own check logged, and one whose machine died after the write', () => {
    assert.deepEqual(judge({ logs: [line('d0-auditor', 'r1')] }), []);
    assert.deepEqual(
      judge({ deaths: [{ at: WROTE, instance: 'auditor' }] }),
      [],
    );
  });

  it('fails a report never logged, or logged only by another machine or reporter', () => {
    assert.match(
      judge({})[0] ?? '',
      /wrote the report of run run-1 .* never logged it/,
    );
    assert.equal(judge({ logs: [line('d0-operator', 'r1')] }).length, 1);
    assert.equal(judge({ logs: [line('d0-auditor', 'r2')] }).length, 1);
    const relogged = {
      ...line('d0-auditor', 'r1'),
      fields: { runId: 'run-1', reporter: 'r1', relogged: true },
    };
    assert.equal(judge({ logs: [relogged] }).length, 1, "a later check's line");
    assert.equal(
      judge({ deaths: [{ at: WROTE + 600_000, instance: 'auditor' }] }).length,
      1,
      'a death long after the line was due',
    );
  });
});

describe('invariant 38: a report logged again says what it said first', () => {
  const line = (message: string, state: string, relogged: boolean) => ({
    at: 0,
    instance: 'd0-auditor',
    level: 'ERROR',
    message,
    fields: { runId: 'run-1', reporter: 'r1', state, relogged },
  });
  const judge = (logs: object[]) =>
    reloggedReportsSayTheSame({ logs } as never);

  it('passes the same report again, and a relog whose writer never logged it', () => {
    const first = line('run failed after retries', 'failed', false);
    const again = line('run failed after retries', 'failed', true);
    assert.deepEqual(judge([first, again]), []);
    assert.deepEqual(judge([line('missed run', 'missed', true)]), []);
  });

  it('fails a failure report logged again as missed', () => {
    const first = line('run failed after retries', 'failed', false);
    const again = line('missed run', 'missed', true);
    assert.match(judge([first, again])[0] ?? '', /then again as "missed run"/);
  });
});

describe('invariant 41: a report said unmarked had something keep its mark from landing', () => {
  const REPORTED_AT = 600_000;
  const OWN_WRITE = REPORTED_AT - 30;
  const line = (at: number, message: string) => ({
    at,
    instance: 'd0-i0-r0',
    level: message === 'missed run' ? 'ERROR' : 'WARNING',
    message,
    fields: { runId: 'run-1' },
  });
  const logs = [
    line(REPORTED_AT, 'missed run'),
    line(REPORTED_AT + 20, REPORT_NOT_ACKNOWLEDGED),
  ];
  // The check's report write landed just before its line: the mark is fenced on it.
  const ownReport = { at: OWN_WRITE, machine: 'd0-i0-r0', runId: 'run-1' };
  const judge = (fields: { recordWrites?: object[]; [k: string]: unknown }) =>
    unmarkedWarningsTrue({
      logs,
      firestoreTimeoutMs: 10_000,
      troubledOps: [],
      instancePauses: [],
      ...fields,
      recordWrites: [ownReport, ...(fields.recordWrites ?? [])],
    } as never);

  it('passes a warning after a fault on the run, a later write to it on any machine, or a pause', () => {
    // The report write itself, sent 5 s before it landed, answered late.
    const fault = {
      at: OWN_WRITE - 5_000,
      machine: 'd0-i0-r0',
      paths: ['runs/run-1'],
    };
    assert.deepEqual(judge({ troubledOps: [fault] }), []);
    const race = { at: REPORTED_AT + 5, machine: 'auditor', runId: 'run-1' };
    assert.deepEqual(judge({ recordWrites: [race] }), []);
    // Another check on the same instance (the audit's and a delivery's) wrote after it.
    const twin = { at: REPORTED_AT + 5, machine: 'd0-i0-r0', runId: 'run-1' };
    assert.deepEqual(judge({ recordWrites: [twin] }), []);
    const pause = {
      instance: 'd0-i0-r0',
      from: REPORTED_AT - 1_000,
      until: REPORTED_AT + 15,
    };
    assert.deepEqual(judge({ instancePauses: [pause] }), []);
  });

  it('fails a warning with nothing behind it since its write: no fault, one elsewhere or long before, a write before its own', () => {
    assert.match(judge({})[0] ?? '', /nothing kept the mark from landing/);
    const elsewhere = [
      { at: REPORTED_AT + 10, machine: 'd0-i0-r0', paths: ['runs/run-2'] },
      { at: REPORTED_AT + 10, machine: 'd0-i1-r0', paths: ['runs/run-1'] },
      { at: OWN_WRITE - 60_000, machine: 'd0-i0-r0', paths: ['runs/run-1'] },
    ];
    assert.equal(judge({ troubledOps: elsewhere }).length, 1);
    const before = { at: OWN_WRITE - 10, machine: 'auditor', runId: 'run-1' };
    assert.equal(judge({ recordWrites: [before] }).length, 1);
  });
});
