/**
 * The simulator's reading of a schedule change (`test/sim/schedule-segments.ts`): which schedule
 * Scheduler delivered when, and which slots the documented rules leave unjudged between the old
 * rule's last sighting by a run audit and the new rule's first. Hand-built outcomes; no simulation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { slotRunId } from '../../src/policy/run-history.ts';
import { NO_GAPS } from '../sim/model.ts';
import {
  isJudgedSlot,
  missedReportsNameSlots,
  scheduleSegments,
  unjudgedAcrossChange,
} from '../sim/schedule-segments.ts';
import type { SimOutcome } from '../sim/simulator.ts';

const at = (hhmm: string, seconds = 0) =>
  Date.parse(`2026-01-05T${hhmm}:00Z`) + seconds * 1000;

const job = (schedule: string, overlap: 'allow' | 'skip' = 'allow') =>
  validateJobs([defineJob({ id: 'job-0', schedule, overlap, run: () => {} })]);

/** Every five minutes, then every minute from 01:22, then `skip` (the same rule) from 01:30. */
const DEPLOYMENT = {
  scope: '',
  keyScope: [],
  revisions: [
    { at: at('01:00'), jobs: job('*/5 * * * *') },
    { at: at('01:22'), jobs: job('* * * * *') },
    { at: at('01:30'), jobs: job('* * * * *', 'skip') },
  ],
};

/**
 * A run audit on `instance` that started at `start` and logged `run audit done` at `done`, with
 * `failed` checks.
 */
function audit(instance: string, start: number, done: number, failed = 0) {
  return {
    execution: { jobId: 'run-audit', instance, start },
    line: {
      at: done,
      instance,
      level: 'INFO',
      message: 'run audit done',
      fields: { jobs: 1, failed },
    },
  };
}

const AUDITS = [
  audit('d0-i0-r0', at('01:20', 5), at('01:20', 10)),
  audit('d0-i1-r1', at('01:25', 5), at('01:25', 10)),
];

/** A completed slot record of job-0 at `hhmm`, its first claim stamping `schedule` (if any). */
function claimed(
  hhmm: string,
  schedule?: string,
): [string, Record<string, unknown>] {
  const slot = new Date(at(hhmm));
  const stamp =
    schedule === undefined ? {} : { schedule, time_zone: 'Etc/UTC' };
  return [
    slotRunId('job-0', slot, []),
    {
      job_name: 'job-0',
      schedule_time: Timestamp.fromDate(slot),
      status: 'completed',
      attempts: 1,
      ...stamp,
    },
  ];
}

/** Records claimed under each schedule: 01:10 (every five), 01:24 (every minute). */
const RECORDS = new Map([
  claimed('01:10', '*/5 * * * *'),
  claimed('01:24', '* * * * *'),
]);

const OUTCOME = {
  records: RECORDS,
  deployments: [DEPLOYMENT],
  executions: AUDITS.map((a) => a.execution),
  logs: AUDITS.map((a) => a.line),
  finalMs: at('01:45'),
} as unknown as SimOutcome;

describe('sim schedule segments', () => {
  it('splits a job at each change of rule, not at a change of its overlap', () => {
    const segments = scheduleSegments(DEPLOYMENT as never, 'job-0');
    assert.deepEqual(
      segments.map((s) => [s.job.schedule, s.job.overlap, s.from, s.to]),
      [
        ['*/5 * * * *', 'allow', Number.NEGATIVE_INFINITY, at('01:22')],
        ['* * * * *', 'skip', at('01:22'), Number.POSITIVE_INFINITY],
      ],
    );
  });

  it("leaves unjudged only the slots one rule has between the old rule's last audit and the new one's first", () => {
    const segments = scheduleSegments(DEPLOYMENT as never, 'job-0');
    const unjudged = (hhmm: string, index: number) =>
      unjudgedAcrossChange(OUTCOME, 0, segments, index, at(hhmm));
    assert.equal(unjudged('01:15', 0), false, 'both rules have it');
    assert.equal(unjudged('01:19', 0), false, 'before the last old audit');
    assert.equal(unjudged('01:20', 0), false, 'both rules have it');
    assert.equal(
      unjudged('01:21', 0),
      true,
      'the new rule alone, in the window',
    );
    assert.equal(
      unjudged('01:23', 1),
      true,
      'the new rule alone, in the window',
    );
    assert.equal(unjudged('01:25', 1), false, 'both rules have it');
    assert.equal(unjudged('01:26', 1), false, 'after the first new audit');
  });

  it('leaves unjudged a slot of a rule no audit saw that the rule seen next does not have', () => {
    const narrowing = {
      scope: '',
      keyScope: [],
      revisions: [
        { at: at('01:00'), jobs: job('* * * * *') },
        { at: at('01:22'), jobs: job('*/5 * * * *') },
      ],
    };
    const outcome = {
      ...OUTCOME,
      deployments: [narrowing],
      logs: [AUDITS[1]?.line],
    } as unknown as SimOutcome;
    const segments = scheduleSegments(narrowing as never, 'job-0');
    const unjudged = (hhmm: string) =>
      unjudgedAcrossChange(outcome, 0, segments, 0, at(hhmm));
    assert.equal(
      unjudged('01:11'),
      true,
      'every minute, never seen; */5 lacks it',
    );
    assert.equal(unjudged('01:10'), false, 'the rule seen next has it');
  });

  it('takes no sighting from an audit one of whose checks failed', () => {
    const segments = scheduleSegments(DEPLOYMENT as never, 'job-0');
    const failedNewAudit = {
      ...OUTCOME,
      logs: [
        AUDITS[0]?.line,
        audit('d0-i1-r1', at('01:25', 5), at('01:25', 10), 1).line,
      ],
    } as unknown as SimOutcome;
    // The first new sighting is then the final check's (01:45): 01:26 is still in the window.
    assert.equal(
      unjudgedAcrossChange(failedNewAudit, 0, segments, 1, at('01:26')),
      true,
    );
    assert.equal(
      unjudgedAcrossChange(OUTCOME, 0, segments, 1, at('01:26')),
      false,
    );
  });

  it('leaves unjudged a slot between two sighted rules that not both have, whatever was deployed unseen between them', () => {
    // */5, then every minute for a minute no audit saw, then */2: 01:24 is */2's alone.
    const throughUnseen = {
      scope: '',
      keyScope: [],
      revisions: [
        { at: at('01:00'), jobs: job('*/5 * * * *') },
        { at: at('01:21'), jobs: job('* * * * *') },
        { at: at('01:22'), jobs: job('*/2 * * * *') },
      ],
    };
    const outcome = {
      ...OUTCOME,
      deployments: [throughUnseen],
      logs: [
        AUDITS[0]?.line,
        audit('d0-i1-r2', at('01:25', 5), at('01:25', 10)).line,
      ],
    } as unknown as SimOutcome;
    const segments = scheduleSegments(throughUnseen as never, 'job-0');
    const unjudged = (hhmm: string) =>
      unjudgedAcrossChange(outcome, 0, segments, 2, at(hhmm));
    assert.equal(
      unjudged('01:24'),
      true,
      '*/2 alone, before its first sighting',
    );
    assert.equal(unjudged('01:22'), true, '*/2 alone, at its deploy');
    assert.equal(unjudged('01:26'), false, 'after the first */2 audit');
  });

  it("takes no sighting from an audit raced for the cursor by a delivery's check of another rule", () => {
    const segments = scheduleSegments(DEPLOYMENT as never, 'job-0');
    // An instance of the old revision still serving checks job-0 as the 01:25 audit does.
    const delivery = {
      jobId: 'job-0',
      instance: 'd0-i2-r0',
      start: at('01:25', 2),
      attemptId: 'delivery-1',
    };
    const raced = {
      ...OUTCOME,
      executions: [...OUTCOME.executions, delivery],
      checkReads: new Map([['delivery-1', ['job-0~check']]]),
    } as unknown as SimOutcome;
    // The first certain new sighting is then the final check's (01:45): 01:26 is in the window.
    assert.equal(
      unjudgedAcrossChange(raced, 0, segments, 1, at('01:26')),
      true,
    );
    assert.equal(
      unjudgedAcrossChange(OUTCOME, 0, segments, 1, at('01:26')),
      false,
    );
  });

  it('judges a time only if the schedule of its time has it', () => {
    assert.equal(isJudgedSlot(OUTCOME, 0, 'job-0', at('01:10')), true);
    assert.equal(
      isJudgedSlot(OUTCOME, 0, 'job-0', at('01:11')),
      false,
      'not a slot of */5, in force then',
    );
    assert.equal(isJudgedSlot(OUTCOME, 0, 'job-0', at('01:23')), false);
    assert.equal(isJudgedSlot(OUTCOME, 0, 'job-0', at('01:27')), true);
  });
});

/** A `missed run` line for job-0's `hhmm`, logged by the final check. */
function missedLine(hhmm: string) {
  return {
    at: at('01:45'),
    instance: 'd0-auditor',
    level: 'ERROR',
    message: 'missed run',
    fields: {
      jobName: 'job-0',
      slot: new Date(at(hhmm)).toISOString(),
      runId: slotRunId('job-0', new Date(at(hhmm)), []),
    },
  };
}

describe('sim invariant 53: a slot reported missed was a slot then', () => {
  const reported = (
    hhmm: string,
    outcome: {
      gaps?: object;
      executions?: unknown[];
      logs?: unknown[];
      records?: unknown;
      foreignRecords?: unknown;
      startMs?: number;
    },
  ) =>
    missedReportsNameSlots({
      ...OUTCOME,
      gaps: NO_GAPS,
      ...outcome,
      logs: [...(outcome.logs ?? OUTCOME.logs), missedLine(hhmm)],
    } as unknown as SimOutcome);

  it('passes a report of a slot of the schedule of its time, old or new', () => {
    assert.deepEqual(reported('01:10', {}), []);
    assert.deepEqual(reported('01:27', {}), []);
  });

  it("excuses it when no record of the old schedule's span stamps its rule (another version's, or claimed late by the new revision)", () => {
    const unstamped = { records: new Map([claimed('01:10')]) };
    assert.deepEqual(reported('01:11', unstamped), []);
    const lateClaim = { records: new Map([claimed('01:10', '* * * * *')]) };
    assert.deepEqual(reported('01:11', lateClaim), []);
    assert.equal(reported('01:11', {}).length, 1);
  });

  it('fails a report of a slot before the history began, when Scheduler had no job (stop 74)', () => {
    const begun = { startMs: at('01:05') };
    assert.deepEqual(reported('01:10', begun), []);
    assert.match(
      reported('01:00', begun).join('\n'),
      /job-0@2026-01-05T01:00:00.000Z was reported "missed run" .*before the history began \(2026-01-05T01:05:00.000Z\): Scheduler had no job then/,
    );
  });

  it('fails a report of a time the schedule of its time has no slot at', () => {
    assert.match(
      reported('01:11', {}).join('\n'),
      /job-0@2026-01-05T01:11:00.000Z was reported "missed run" \(d0-auditor, .*\), but the schedule deployed then \(\*\/5 \* \* \* \*\) has no slot there/,
    );
  });
});
