/**
 * The simulator's invariants 12 and 13 (`test/sim/invariants.ts`) on hand-built outcomes, and
 * which writes its `crashAfterWrite` fault treats as logged ones (`loggedWriteOf`): each check
 * passes what the promise allows and fails what it forbids. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { REPORT_UNCONFIRMED } from '../../src/policy/final-failure.ts';
import { FAILED_AFTER_RETRIES } from '../../src/policy/log-messages.ts';
import {
  REPORT_NOT_ACKNOWLEDGED,
  UNREADABLE_PAUSES,
} from '../../src/policy/missed-runs.ts';
import { PAUSE_OVERDUE, readPauses } from '../../src/policy/pauses.ts';
import { foreignPauses } from '../sim/foreign-writes.ts';
import {
  foreignPausesSaid,
  missedReportsNeverRan,
  noBlockBehindVanishedHolder,
  reportsLoggedOnceOrTwice,
  unknownStatusesSaid,
} from '../sim/invariants.ts';
import {
  FOREIGN_PAUSE_KINDS,
  type ForeignPauseKind,
  isReadablePauseKind,
} from '../sim/model.ts';
import type {
  Delivered,
  ForeignRecord,
  LogLine,
  SimOutcome,
} from '../sim/simulator.ts';
import { loggedWriteOf, overdueReportOf } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const RUN = 'a'.repeat(64);
const HOLDER = 'b'.repeat(64);

const line = (
  at: number,
  message: string,
  fields: Record<string, unknown>,
): LogLine => ({
  at,
  instance: 'd0-i0-r0',
  level: 'ERROR',
  message,
  fields,
});

const outcome = (fields: Partial<SimOutcome>): SimOutcome =>
  ({
    emulator: false,
    startMs: 0,
    stopMs: 600_000,
    finalMs: 900_000,
    executions: [],
    logs: [],
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
    leaseMs: 60_000,
    gaps: {},
    ...fields,
  }) as unknown as SimOutcome;

const missedRecord = {
  status: 'missed',
  reported_at: Timestamp.fromMillis(100_000),
};

describe('invariant 12: every report written is logged once or twice', () => {
  it('passes a report logged by its writer and once more by a later check only when the writer could not mark it logged', () => {
    const written = line(100_000, 'missed run', { runId: RUN, reporter: 'r1' });
    const relogged = line(400_000, 'missed run', {
      runId: RUN,
      reporter: 'r1',
      relogged: true,
    });
    const records = new Map([[RUN, missedRecord]]);
    const judge = (fields: Partial<SimOutcome>) =>
      reportsLoggedOnceOrTwice(outcome({ records, ...fields }));

    assert.match(
      judge({ logs: [written, relogged] }).join('\n'),
      /logged 2 times/,
      'its writer marked it logged: a second line is one too many',
    );
    const unacknowledged = line(100_500, REPORT_NOT_ACKNOWLEDGED, {
      runId: RUN,
    });
    assert.deepEqual(judge({ logs: [written, unacknowledged, relogged] }), []);
    const died = [{ at: 100_200, instance: 'd0-i0-r0' }];
    assert.deepEqual(judge({ logs: [written, relogged], deaths: died }), []);
    const paused = [{ instance: 'd0-i0-r0', from: 100_100, until: 300_000 }];
    assert.deepEqual(
      judge({ logs: [written, relogged], instancePauses: paused }),
      [],
      'paused past the grace before its mark: another check may log it again',
    );
  });

  it('fails a slot reported missed after an execution of its run started, passes one reported before its backfill ran', () => {
    const threw = execution({
      runId: RUN,
      start: 50_000,
      end: 60_000,
      result: 'threw',
    });
    const missed = line(100_000, 'missed run', { runId: RUN });

    assert.match(
      missedReportsNeverRan(
        outcome({ logs: [missed], executions: [threw] }),
      ).join('\n'),
      /reported "missed run" at .* but it ran before/,
    );
    const repaired = new Map([
      [
        RUN,
        {
          at: 70_000,
          deployment: 0,
          jobId: 'job-0',
          kind: 'repaired',
          deletedAt: 70_000,
        },
      ],
    ]);
    assert.deepEqual(
      missedReportsNeverRan(
        outcome({
          logs: [missed],
          executions: [threw],
          foreignRecords: repaired,
        } as Partial<SimOutcome>),
      ),
      [],
      "the repair deleted the dead attempt's record: the slot had no run to report",
    );
    const backfilled = { ...threw, start: 150_000, end: 160_000 };
    assert.deepEqual(
      missedReportsNeverRan(
        outcome({ logs: [missed], executions: [backfilled] }),
      ),
      [],
    );
  });

  it('fails a report logged three times by loggers that all marked it logged', () => {
    const logs = [100_000, 400_000, 700_000].map((at) =>
      line(at, 'missed run', { runId: RUN, reporter: 'r1' }),
    );
    const records = new Map([[RUN, missedRecord]]);

    assert.match(
      reportsLoggedOnceOrTwice(outcome({ logs, records })).join('\n'),
      /logged 3 times: at most once more than the 0 loggers/,
    );
  });

  it('passes a third line when two loggers could not mark it logged: one warned, one died (seed 505)', () => {
    const warned = {
      ...line(400_100, REPORT_NOT_ACKNOWLEDGED, { runId: RUN }),
      level: 'WARNING',
    };
    const logs = [
      line(400_000, 'missed run', { runId: RUN, reporter: 'r1' }),
      warned,
      {
        ...line(700_000, 'missed run', { runId: RUN }),
        instance: 'd0-auditor',
      },
      {
        ...line(900_000, 'missed run', { runId: RUN }),
        instance: 'd0-operator',
      },
    ];
    const records = new Map([[RUN, missedRecord]]);
    const deaths = [{ at: 700_030, instance: 'auditor' }];

    assert.deepEqual(
      reportsLoggedOnceOrTwice(outcome({ logs, records, deaths })),
      [],
    );
    assert.match(
      reportsLoggedOnceOrTwice(outcome({ logs, records })).join('\n'),
      /logged 3 times: .* than the 1 loggers/,
      "without the auditor's death only one logger failed to mark it",
    );
  });

  it("passes an attempt's unconfirmed failure report logged again by the audit on the same instance, and fails it once the attempt's own report landed (default seed 42, history 431)", () => {
    const failed = {
      status: 'failed',
      reported_at: Timestamp.fromMillis(300_000),
      reported_by: 'audit-check',
    };
    const logs = [
      line(24_000, FAILED_AFTER_RETRIES, { runId: RUN, reporter: 'attempt-r' }),
      { ...line(28_000, REPORT_UNCONFIRMED, { runId: RUN }), level: 'WARNING' },
      line(300_000, FAILED_AFTER_RETRIES, {
        runId: RUN,
        reporter: 'audit-check',
      }),
    ];
    const records = new Map([[RUN, failed]]);
    const write = (reportedBy: string) => ({
      at: 300_000,
      machine: 'd0-i0-r0',
      runId: RUN,
      status: 'failed',
      reported: true,
      reportedBy,
    });

    assert.deepEqual(
      reportsLoggedOnceOrTwice(
        outcome({ logs, records, recordWrites: [write('audit-check')] }),
      ),
      [],
      "the audit's report write on the attempt's instance is not the attempt's",
    );
    assert.match(
      reportsLoggedOnceOrTwice(
        outcome({ logs, records, recordWrites: [write('attempt-r')] }),
      ).join('\n'),
      /logged 2 times: at most once more than the 0 loggers/,
    );
  });

  it('fails a report written and never logged (its writer died, no check logged it again)', () => {
    const records = new Map([[RUN, missedRecord]]);
    const crashesAfterWrite = [
      {
        at: 100_000,
        instance: 'auditor',
        write: 'report' as const,
        path: `runs/${RUN}`,
      },
    ];

    const found = reportsLoggedOnceOrTwice(
      outcome({ records, crashesAfterWrite }),
    );

    assert.match(
      found.join('\n'),
      /no "missed run" .* line was ever logged; its writer auditor died/,
    );
  });

  it('fails an overdue pause report never logged, and passes one logged once', () => {
    const pausedAt = Timestamp.fromMillis(60_000);
    const pause = {
      paused_at: pausedAt,
      overdue_reported_at: Timestamp.fromMillis(200_000),
    };
    const jobDocuments = new Map([['job-0', { pauses: [pause] }]]);
    const operatorPauses = [
      { deployment: 0, jobId: 'job-0', from: 60_000, to: 0, forgotten: true },
    ];
    const logged = line(200_000, 'pause outlived its bound', {
      jobName: 'job-0',
      document: 'job-0~check',
      pausedAt: pausedAt.toDate().toISOString(),
      bound: new Date(150_000).toISOString(),
    });

    const silent = reportsLoggedOnceOrTwice(
      outcome({ jobDocuments, operatorPauses }),
    );
    const once = reportsLoggedOnceOrTwice(
      outcome({ jobDocuments, operatorPauses, logs: [logged] }),
    );

    assert.match(silent.join('\n'), /logged 0 times/);
    assert.deepEqual(once, []);
  });

  it('fails a forgotten pause past its bound that no check reported, and passes one reported', () => {
    const operatorPauses = [
      {
        deployment: 0,
        jobId: 'job-0',
        from: 100_000,
        to: Infinity,
        forgotten: true,
      },
    ];
    const overdue = line(300_000, PAUSE_OVERDUE, {
      jobName: 'job-0',
      document: 'job-0~check',
      pausedAt: new Date(100_000).toISOString(),
      bound: new Date(190_000).toISOString(),
      note: 'sim',
    });
    const withoutBound = {
      ...overdue,
      fields: { ...overdue.fields, bound: undefined },
    };
    const otherScope = {
      ...overdue,
      fields: { ...overdue.fields, document: 'job-0~check~staging' },
    };

    assert.match(
      reportsLoggedOnceOrTwice(outcome({ operatorPauses })).join('\n'),
      /forgotten pause of job-0 .* passed its bound/,
    );
    assert.match(
      reportsLoggedOnceOrTwice(
        outcome({ operatorPauses, logs: [withoutBound] }),
      ).join('\n'),
      /forgotten pause of job-0/,
    );
    assert.match(
      reportsLoggedOnceOrTwice(
        outcome({ operatorPauses, logs: [otherScope] }),
      ).join('\n'),
      /forgotten pause of job-0/,
      "another scope's report is not this pause's",
    );
    assert.deepEqual(
      reportsLoggedOnceOrTwice(outcome({ operatorPauses, logs: [overdue] })),
      [],
    );
    assert.deepEqual(
      reportsLoggedOnceOrTwice(
        outcome({
          operatorPauses: [{ ...operatorPauses[0], to: 150_000 }],
        } as Partial<SimOutcome>),
      ),
      [],
    );
  });

  it('fails an overdue report of a pause before its bound: a week without --until', () => {
    const operatorPauses = [
      { deployment: 0, jobId: 'job-0', from: 100_000, to: 250_000 },
    ];
    const early = line(300_000, PAUSE_OVERDUE, {
      jobName: 'job-0',
      document: 'job-0~check',
      pausedAt: new Date(100_000).toISOString(),
      bound: new Date(190_000).toISOString(),
      note: 'sim',
    });

    assert.match(
      reportsLoggedOnceOrTwice(outcome({ operatorPauses, logs: [early] })).join(
        '\n',
      ),
      /reported "pause outlived its bound" at .* its bound is 1970-01-08T00:01:40.000Z/,
    );
    assert.match(
      reportsLoggedOnceOrTwice(outcome({ logs: [early] })).join('\n'),
      /for a pause of job-0 since .* no operator recorded/,
    );
  });

  it('fails a report logged three times', () => {
    const logs = [100_000, 200_000, 300_000].map((at) =>
      line(at, 'run failed after retries', { runId: RUN }),
    );
    const records = new Map([
      [RUN, { status: 'failed', reported_at: Timestamp.fromMillis(1) }],
    ]);

    assert.match(
      reportsLoggedOnceOrTwice(outcome({ logs, records })).join('\n'),
      /logged 3 times/,
    );
  });
});

const foreign = (fields: Partial<ForeignRecord>): ForeignRecord => ({
  at: 100_000,
  deployment: 0,
  jobId: 'job-0',
  kind: 'absent',
  ...fields,
});

const skippedBehind = (
  at: number,
  sentAt: number,
): { log: LogLine; delivery: Delivered } => ({
  log: {
    ...line(at, 'scheduled run: skipped', {
      outcome: 'skipped',
      jobName: 'job-0',
      scheduleTime: new Date(sentAt).toISOString(),
      blockedBy: HOLDER,
    }),
    level: 'INFO',
  },
  delivery: {
    deployment: 0,
    source: 'scheduler',
    jobId: 'job-0',
    scheduleTime: new Date(sentAt).toISOString(),
    sentAt,
    endedAt: at,
    status: 200,
    outcome: 'skipped',
    instance: 'd0-i0-r0',
    runId: undefined,
  },
});

describe("invariant 13: another version's pauses", () => {
  const NOW = Date.UTC(2026, 0, 5, 1);
  const DOCUMENT = 'job-0~check';
  const write = (kind: ForeignPauseKind, at: number) => ({
    at,
    deployment: 0,
    jobId: 'job-0',
    document: DOCUMENT,
    kind,
  });
  const warned = (at: number): LogLine => ({
    ...line(at, UNREADABLE_PAUSES, { jobName: 'job-0', document: DOCUMENT }),
    level: 'WARNING',
  });

  it('reads every kind as the product does: unreadable ones unreadable, edge ones as pauses', () => {
    for (const kind of FOREIGN_PAUSE_KINDS) {
      const read = readPauses(
        { pauses: foreignPauses(kind, NOW) },
        new Date(NOW),
      );
      assert.equal(
        read !== 'unreadable',
        isReadablePauseKind(kind),
        `${kind}: read ${JSON.stringify(read)}`,
      );
    }
  });

  it('fails unreadable pauses no check warned about, passes them warned after the write', () => {
    const foreignPauses = [write('overlapping', 100_000)];

    assert.match(
      foreignPausesSaid(outcome({ foreignPauses })).join('\n'),
      /\(overlapping\) on job-0~check .* are unreadable, and no check warned/,
    );
    assert.match(
      foreignPausesSaid(
        outcome({ foreignPauses, logs: [warned(90_000)] }),
      ).join('\n'),
      /no check warned/,
      'a warning before the write is about something else',
    );
    assert.deepEqual(
      foreignPausesSaid(outcome({ foreignPauses, logs: [warned(400_000)] })),
      [],
    );
  });

  it('fails readable edge pauses a check warned about', () => {
    const foreignPauses = [write('readable_most_pauses', 100_000)];

    assert.match(
      foreignPausesSaid(
        outcome({ foreignPauses, logs: [warned(400_000)] }),
      ).join('\n'),
      /\(readable_most_pauses\) .* are readable, but a check warned them unreadable/,
    );
    assert.deepEqual(foreignPausesSaid(outcome({ foreignPauses })), []);
  });
});

describe('invariant 13: another version’s records and locks', () => {
  it('passes a skip behind a holder without a record within the claim window (3 × 10 s)', () => {
    const { log, delivery } = skippedBehind(125_000, 125_000);
    const foreignRecords = new Map([[HOLDER, foreign({ lockedAt: 100_000 })]]);

    const found = noBlockBehindVanishedHolder(
      outcome({ logs: [log], deliveries: [delivery], foreignRecords }),
    );

    assert.deepEqual(found, []);
  });

  it('fails a skip behind a holder without a record past the claim window', () => {
    const { log, delivery } = skippedBehind(131_000, 131_000);
    const foreignRecords = new Map([[HOLDER, foreign({ lockedAt: 100_000 })]]);

    const found = noBlockBehindVanishedHolder(
      outcome({ logs: [log], deliveries: [delivery], foreignRecords }),
    );

    assert.match(found.join('\n'), /a vanished holder blocked it/);
  });

  it('fails any skip behind a holder whose record has an unknown status, before its repair', () => {
    const { log, delivery } = skippedBehind(105_000, 105_000);
    const foreignRecords = new Map([
      [
        HOLDER,
        foreign({
          kind: 'unknown_status',
          lockedAt: 100_000,
          deletedAt: 200_000,
        }),
      ],
    ]);

    const found = noBlockBehindVanishedHolder(
      outcome({ logs: [log], deliveries: [delivery], foreignRecords }),
    );

    assert.match(
      found.join('\n'),
      /status this version does not know: a silent block/,
    );
  });

  it('fails a record of unknown status no ERROR names, passes one an ERROR names', () => {
    const records = new Map([[RUN, { status: 'deferred', job_name: 'job-0' }]]);
    const foreignRecords = new Map([
      [RUN, foreign({ kind: 'unknown_status' })],
    ]);
    const silent = outcome({ records, foreignRecords });
    const said = outcome({
      records,
      foreignRecords,
      logs: [
        line(
          500_000,
          "missed-run check: a closed slot's record cannot be read",
          { runId: RUN },
        ),
      ],
    });

    assert.match(unknownStatusesSaid(silent).join('\n'), /passed silently/);
    assert.deepEqual(unknownStatusesSaid(said), []);
  });

  it('fails a delivery of a run of unknown status answered as a run that failed, passes unreadable_record', () => {
    const foreignRecords = new Map([
      [RUN, foreign({ kind: 'unknown_status' })],
    ]);
    const delivery = (answered: string): Delivered => ({
      deployment: 0,
      source: 'scheduler',
      jobId: 'job-0',
      scheduleTime: '1970-01-01T00:02:00Z',
      sentAt: 120_000,
      endedAt: 121_000,
      status: 500,
      outcome: answered,
      instance: 'd0-i0-r0',
      runId: RUN,
    });
    const answeredAs = (answered: string) =>
      unknownStatusesSaid(
        outcome({ deliveries: [delivery(answered)], foreignRecords }),
      );

    assert.match(
      answeredAs('failed').join('\n'),
      /answered failed .* status this version does not know/,
    );
    assert.deepEqual(answeredAs('unreadable_record'), []);
  });
});

describe('crashAfterWrite: which writes a log line follows', () => {
  const at = (ms: number) => Timestamp.fromMillis(ms);

  it('names a claim, a completion and a report, and nothing else', () => {
    const claimed = { status: 'in_progress', attempt_id: 'a1' };
    const completed = { status: 'completed', attempt_id: 'a1' };
    const reported = {
      status: 'missed',
      reported_at: at(5),
      reported_by: 'r~unlogged',
    };
    const acknowledged = { ...reported, reported_by: 'r' };

    assert.equal(loggedWriteOf(undefined, claimed), 'claim');
    assert.equal(
      loggedWriteOf({ status: 'failed', attempt_id: 'a0' }, claimed),
      'claim',
    );
    assert.equal(loggedWriteOf(claimed, completed), 'completion');
    assert.equal(loggedWriteOf(undefined, reported), 'report');
    assert.equal(loggedWriteOf(reported, acknowledged), undefined);
    assert.equal(
      loggedWriteOf(claimed, { ...claimed, leased_at: at(9) }),
      undefined,
    );
    assert.equal(loggedWriteOf(claimed, undefined), undefined);
  });

  it('names a pause’s overdue report on its job document, not its acknowledgement', () => {
    const pause = { paused_at: at(1), overdue_reported_at: null };
    const reported = {
      ...pause,
      overdue_reported_at: at(2),
      overdue_unlogged: true,
    };
    const acknowledged = { ...pause, overdue_reported_at: at(2) };

    assert.equal(
      overdueReportOf({ pauses: [pause] }, { pauses: [reported] }),
      'report',
    );
    assert.equal(
      overdueReportOf({ pauses: [reported] }, { pauses: [acknowledged] }),
      undefined,
    );
    assert.equal(
      overdueReportOf(undefined, { checked_before: at(3) }),
      undefined,
    );
  });
});
