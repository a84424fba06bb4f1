/**
 * The simulator's invariants 21 and 22 (`test/sim/record-invariants.ts`,
 * `test/sim/lease-loss-invariants.ts`) on hand-built outcomes: a record that says what its run's
 * executions did passes, one that lies fails; a lost lease's cause passes only when it happened.
 * No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { leaseLossCausesTrue } from '../sim/lease-loss-invariants.ts';
import { recordsTellTheTruth } from '../sim/record-invariants.ts';
import type {
  Execution,
  LogLine,
  SimOutcome,
  WriteSpan,
} from '../sim/simulator.ts';

const RUN = 'a'.repeat(64);
const SLOT = Date.UTC(2026, 0, 5, 1, 0, 0);
const at = (ms: number) => Timestamp.fromMillis(SLOT + ms);

/** An outcome with only the fields these invariants read; `history` holds only its faults. */
const outcome = (fields: Record<string, unknown>): SimOutcome =>
  ({
    emulator: false,
    executions: [],
    logs: [],
    records: new Map(),
    leaseEnds: new Map(),
    catchUps: [],
    deployments: [{ scope: '', keyScope: [], revisions: [] }],
    ...fields,
  }) as unknown as SimOutcome;

const execution = (fields: Partial<Execution>): Execution => ({
  deployment: 0,
  revision: 0,
  scope: '',
  jobId: 'job-0',
  scheduleTime: SLOT,
  kind: 'slot',
  runId: RUN,
  attemptId: 'attempt-1',
  instance: 'd0-i0-r0',
  source: 'scheduler',
  triggerId: undefined,
  start: SLOT + 100,
  end: SLOT + 2_000,
  result: 'returned',
  pausedMs: 0,
  pauses: [],
  context: {
    jobName: 'job-0',
    firstClaimedAt: SLOT + 50,
    leaseExpires: SLOT + 30_050,
    slot: SLOT,
  },
  ...fields,
});

const completed = {
  status: 'completed',
  attempt_id: 'attempt-1',
  attempts: 1,
  job_name: 'job-0',
  key_scope: '',
  schedule_time: at(0),
  leased_at: at(50),
  lease_ms: 30_000,
  claimed_at: at(50),
  first_claimed_at: at(50),
  completed_at: at(2_000),
  expire_at: at(7_200_000),
};

const judged = (record: Record<string, unknown>, e: Execution) =>
  recordsTellTheTruth(
    outcome({
      executions: [e],
      records: new Map([[RUN, record]]),
      leaseEnds: new Map([
        [
          'attempt-1',
          [{ landedAt: SLOT + 50, expires: SLOT + 30_050, leaseMs: 30_000 }],
        ],
      ]),
    }),
  );

/**
 * {@link judged}, with the record created at its slot (before the execution started); a catch-up
 * sent for the run when `e` came from one.
 */
const judgedCreated = (record: Record<string, unknown>, e: Execution) =>
  recordsTellTheTruth(
    outcome({
      executions: [e],
      records: new Map([[RUN, record]]),
      createTimes: new Map([[RUN, SLOT]]),
      catchUps: e.source === 'catchup' ? [{ runId: RUN }] : [],
      leaseEnds: new Map([
        [
          'attempt-1',
          [{ landedAt: SLOT + 50, expires: SLOT + 30_050, leaseMs: 30_000 }],
        ],
      ]),
    }),
  );

describe('invariant 21: records that tell the truth', () => {
  it('passes a completion by the attempt that returned', () => {
    assert.deepEqual(judged(completed, execution({})), []);
  });

  it('passes a re-run naming its slot’s run and a catch-up stamped caught_up_at; fails either without', () => {
    const slotRun = 'b'.repeat(64);
    const rerun = execution({
      kind: 'rerun',
      context: { ...execution({}).context, rerunOf: slotRun },
    } as Partial<Execution>);
    const caughtUp = execution({
      source: 'catchup',
      context: { ...execution({}).context, caughtUp: true },
    } as Partial<Execution>);
    const rerunRecord = { ...completed, run_kind: 'rerun', rerun_of: slotRun };
    const stamped = { ...completed, caught_up_at: at(40) };

    assert.deepEqual(judgedCreated(rerunRecord, rerun), []);
    assert.deepEqual(judgedCreated(stamped, caughtUp), []);
    assert.match(
      judgedCreated({ ...rerunRecord, rerun_of: undefined }, rerun).join('\n'),
      /names rerun_of undefined, but ran as a rerun run of bbbb/,
    );
    assert.match(
      judgedCreated({ ...completed, rerun_of: slotRun }, execution({})).join(
        '\n',
      ),
      /names rerun_of bbbb.*, but ran as a slot run$/m,
    );
    assert.match(
      judgedCreated(completed, caughtUp).join('\n'),
      /has no caught_up_at, but ran as a catch-up of its slot/,
    );
  });

  it('fails a record stamped caught up with no catch-up sent, or sent without a schedule time but run from Scheduler', () => {
    const forced = execution({ source: 'force', kind: 'forced' });

    assert.deepEqual(
      judgedCreated({ ...completed, schedule_time_sent: false }, forced).filter(
        (p) => /schedule time was sent/.test(p),
      ),
      [],
    );
    assert.match(
      judgedCreated({ ...completed, caught_up_at: at(40) }, execution({})).join(
        '\n',
      ),
      /has caught_up_at, but no catch-up was sent for its run/,
    );
    assert.match(
      judgedCreated(
        { ...completed, schedule_time_sent: false },
        execution({}),
      ).join('\n'),
      /says no schedule time was sent, but ran from a scheduler delivery/,
    );
  });

  it('fails a completion naming an attempt that threw', () => {
    const found = judged(completed, execution({ result: 'threw' }));
    assert.match(found.join('\n'), /never returned/);
  });

  it('fails a completion without completed_at, and a record without expire_at', () => {
    const { completed_at: _c, expire_at: _e, ...bare } = completed;
    const found = judged(bare, execution({}));
    assert.match(found.join('\n'), /completed_at undefined/);
    assert.match(found.join('\n'), /no expire_at/);
  });

  it('fails a record filed under another job or slot, or counting fewer attempts than ran', () => {
    const wrong = {
      ...completed,
      job_name: 'job-1',
      schedule_time: at(60_000),
      attempts: 0,
    };
    const found = judged(wrong, execution({})).join('\n');
    assert.match(found, /names job job-1, but ran job-0/);
    assert.match(found, /names schedule time/);
    assert.match(found, /counts 0 attempts, but 1 executed/);
  });

  it('fails a failure without its error, and a skipped run that executed', () => {
    const failed = {
      ...completed,
      status: 'failed',
      completed_at: undefined,
      leased_at: undefined,
      lease_ms: undefined,
      failed_at: at(2_000),
      last_error: '',
    };
    assert.match(
      judged(failed, execution({ result: 'threw' })).join('\n'),
      /a failure keeps when and why/,
    );
    const skipped = {
      status: 'skipped',
      attempts: 0,
      job_name: 'job-0',
      key_scope: '',
      schedule_time: at(0),
      blocked_by: 'b'.repeat(64),
      expire_at: at(7_200_000),
    };
    assert.match(
      judged(skipped, execution({})).join('\n'),
      /the record hides a run/,
    );
  });

  it('fails a run left in progress under the lease a check reported, not one re-opened since', () => {
    const lapsed = {
      ...completed,
      status: 'in_progress',
      completed_at: undefined,
      reported_at: at(400_000),
      reported_by: 'check-1',
    };
    const crashed = execution({ result: 'running', end: undefined });
    assert.match(
      judged(lapsed, crashed).join('\n'),
      /still in progress under the lease a check reported lapsed/,
    );
    const reopened = {
      ...lapsed,
      leased_at: at(500_000),
      claimed_at: at(500_000),
    };
    assert.deepEqual(judged(reopened, crashed), []);
  });

  it("fails a job's context whose lease or first claim is not the history's", () => {
    const e = execution({
      context: {
        jobName: 'job-0',
        firstClaimedAt: SLOT + 40,
        leaseExpires: SLOT + 10_050,
        slot: SLOT,
      },
    });
    const found = judged(completed, e).join('\n');
    assert.match(found, /firstClaimedAt .* is not its record's/);
    assert.match(
      found,
      /leaseExpires .* is no lease its attempt's writes landed/,
    );
  });
});

describe("invariant 22: a lost lease's cause told truly", () => {
  const loss = (leaseLoss: string): LogLine => ({
    at: SLOT + 90_000,
    instance: 'd0-i0-r0',
    level: 'WARNING',
    message: 'lease lost: …',
    fields: { fence: 'completion', leaseLoss, attemptId: 'attempt-1' },
  });
  const failedExtension: LogLine = {
    at: SLOT + 20_000,
    instance: 'd0-i0-r0',
    level: 'WARNING',
    message: 'lease extension failed; retrying at the next beat',
    fields: { attemptId: 'attempt-1', failedExtensions: 1 },
  };
  const history = { lateAnswers: 0, events: [] };

  it('passes extensions_failed after a failed extension, fails it without one', () => {
    const e = execution({});
    const judge = (logs: LogLine[]) =>
      leaseLossCausesTrue(outcome({ executions: [e], logs, history }));
    assert.deepEqual(judge([failedExtension, loss('extensions_failed')]), []);
    assert.match(
      judge([loss('extensions_failed')]).join('\n'),
      /no extension of it had failed/,
    );
  });

  it('fails unknown after a failed extension with no renewal landed since, and passes it after one', () => {
    const e = execution({});
    const judge = (landedAt: number) =>
      leaseLossCausesTrue(
        outcome({
          executions: [e],
          logs: [failedExtension, loss('unknown')],
          history,
          leaseEnds: new Map([
            [
              'attempt-1',
              [{ landedAt, expires: landedAt + 30_000, leaseMs: 30_000 }],
            ],
          ]),
        }),
      );
    assert.match(
      judge(SLOT + 50).join('\n'),
      /lost to unknown .* 1 extension\(s\) of it had failed, and no renewal landed since/,
    );
    assert.deepEqual(judge(SLOT + 40_000), []);
  });

  it('passes stalled only for a paused instance, extension_unanswered for late answers too, and unknown where the writes cannot tell', () => {
    const judge = (cause: string, e: Execution, lateAnswers = 0) =>
      leaseLossCausesTrue(
        outcome({
          executions: [e],
          logs: [loss(cause), loss('unknown')],
          history: { ...history, lateAnswers },
        }),
      );
    assert.deepEqual(judge('stalled', execution({ pausedMs: 70_000 })), []);
    assert.match(
      judge('stalled', execution({}), 0.2).join('\n'),
      /never paused/,
      'late answers leave beats sent: they never stall the heartbeat',
    );
    assert.match(judge('stalled', execution({})).join('\n'), /never paused/);
    assert.deepEqual(
      judge('extension_unanswered', execution({ pausedMs: 70_000 })),
      [],
    );
    assert.deepEqual(judge('extension_unanswered', execution({}), 0.2), []);
    assert.match(
      judge('extension_unanswered', execution({})).join('\n'),
      /never answered late/,
    );
  });

  describe("by the attempt's own writes, where they tell", () => {
    // The claim (30 s lease) answered as the job starts, 100 ms into the slot; the first beat
    // sent at 10 s and answered at 10.05 s (a 30 s lease from then on); then a pause.
    const CLAIM_LEASE_MS = 30_000;
    const widening = {
      sentAt: SLOT + 10_000,
      answeredBy: SLOT + 10_050,
      clean: true,
    };
    /** The claim's lease write, and one landing halfway through each write of `landed`. */
    const leases = (landed: WriteSpan[]) => [
      {
        landedAt: SLOT + 60,
        expires: SLOT + 30_060,
        leaseMs: CLAIM_LEASE_MS,
        runId: RUN,
      },
      ...landed.map((span) => {
        const landedAt = (span.sentAt + span.answeredBy) / 2;
        return {
          landedAt,
          expires: landedAt + 30_000,
          leaseMs: 30_000,
          runId: RUN,
        };
      }),
    ];
    const judge = (
      cause: string,
      spans: WriteSpan[],
      toldAt: number,
      pausedUntil: number,
      landed = spans.filter((span) => span.clean),
    ) =>
      leaseLossCausesTrue({
        ...outcome({
          executions: [execution({ end: SLOT + 95_000, pausedMs: 20_000 })],
          logs: [{ ...loss(cause), at: SLOT + toldAt }],
          history,
          leaseEnds: new Map([['attempt-1', leases(landed)]]),
        }),
        leaseMs: 30_000,
        firestoreTimeoutMs: 10_000,
        instancePauses: [
          {
            instance: 'd0-i0-r0',
            from: SLOT + 15_000,
            until: SLOT + pausedUntil,
          },
        ],
        attemptWriteSpans: new Map([['attempt-1', spans]]),
        recordWrites: [],
      });

    it('passes stalled when no write was sent within the lease after the last answer, and fails extension_unanswered then', () => {
      // Paused from 15 s to 85 s: no beat ran from 10.05 s to 40.05 s.
      assert.deepEqual(judge('stalled', [widening], 90_000, 85_000), []);
      assert.match(
        judge('extension_unanswered', [widening], 90_000, 85_000).join('\n'),
        /its writes say stalled: its last renewal was answered at .*00:10\.050Z/,
      );
    });

    it('passes extension_unanswered for a write sent in time and unanswered by the line, and fails stalled then', () => {
      // Paused from 15 s to 34 s: the beat due at 20.05 s sent on waking, never answered; the
      // lease (to 40.05 s) lapses before its Firestore timeout (at 44 s).
      const hung = {
        sentAt: SLOT + 34_000,
        answeredBy: Number.POSITIVE_INFINITY,
        clean: false,
      };
      assert.deepEqual(
        judge('extension_unanswered', [widening, hung], 42_000, 34_000),
        [],
      );
      assert.match(
        judge('stalled', [widening, hung], 42_000, 34_000).join('\n'),
        /its writes say extension_unanswered/,
      );
    });

    it('fails either cause told less than a lease after a renewal was answered', () => {
      const recent = {
        sentAt: SLOT + 85_000,
        answeredBy: SLOT + 85_040,
        clean: true,
      };
      assert.match(
        judge('stalled', [widening, recent], 90_000, 84_000).join('\n'),
        /less than a lease before/,
      );
    });

    it('takes a write that met a conflict and never landed for no renewal', () => {
      // The beat at 85 s met another writer's write and did not land: the last renewal is still
      // the widening at 10.05 s, and no write was sent in the lease after it.
      const conflicted = {
        sentAt: SLOT + 85_000,
        answeredBy: SLOT + 85_040,
        clean: true,
      };
      assert.deepEqual(
        judge('stalled', [widening, conflicted], 90_000, 85_000, [widening]),
        [],
      );
    });

    it('judges nothing where a renewal was in flight while the instance was paused', () => {
      const paused = {
        sentAt: SLOT + 14_990,
        answeredBy: SLOT + 15_040,
        clean: true,
      };
      assert.deepEqual(
        judge('extension_unanswered', [widening, paused], 90_000, 85_000),
        [],
      );
    });

    it('fails unknown where its writes say stalled, and passes it less than a lease after a renewal', () => {
      assert.match(
        judge('unknown', [widening], 90_000, 85_000).join('\n'),
        /lost to unknown .* its writes say stalled: its last renewal was answered at .*00:10\.050Z, more than a lease before/,
      );
      const recent = {
        sentAt: SLOT + 85_000,
        answeredBy: SLOT + 85_040,
        clean: true,
      };
      assert.deepEqual(
        judge('unknown', [widening, recent], 90_000, 84_000),
        [],
      );
    });

    it('judges nothing where a fault settled a write before the line', () => {
      const failed = { ...widening, clean: false };
      assert.deepEqual(
        judge('extension_unanswered', [failed], 90_000, 85_000),
        [],
      );
    });
  });

  it('fails job_timeout for a job that ran less than JOB_TIMEOUT_SECONDS', () => {
    const found = leaseLossCausesTrue(
      outcome({
        executions: [execution({})],
        logs: [loss('job_timeout')],
        history,
      }),
    );
    assert.match(found.join('\n'), /within JOB_TIMEOUT_SECONDS/);
  });

  it("passes stalled for the run audit's attempt (no execution) when its instance was paused (seed 808)", () => {
    const judge = (instancePauses: SimOutcome['instancePauses']) =>
      leaseLossCausesTrue({
        ...outcome({ executions: [], logs: [loss('stalled')], history }),
        leaseMs: 30_000,
        instancePauses,
      });
    const pause = { from: SLOT + 60_000, until: SLOT + 75_000 };
    assert.deepEqual(judge([{ instance: 'd0-i0-r0', ...pause }]), []);
    assert.match(
      judge([{ instance: 'd0-i1-r0', ...pause }]).join('\n'),
      /never paused/,
      "another instance's pause explains nothing",
    );
  });

  it("judges job_timeout of the run audit's attempt (no execution) by its answer's duration (seed 505)", () => {
    const answer = (durationMs: number): LogLine => ({
      at: SLOT + 91_000,
      instance: 'd0-i0-r0',
      level: 'ERROR',
      message: 'scheduled run: failed',
      fields: { attemptId: 'attempt-1', outcome: 'failed', durationMs },
    });
    const judge = (durationMs: number) =>
      leaseLossCausesTrue(
        outcome({
          executions: [],
          logs: [loss('job_timeout'), answer(durationMs)],
          history: { ...history, jobTimeoutSeconds: 45 },
        }),
      );
    assert.deepEqual(judge(90_000), [], 'it ran 89 s by the lapse');
    assert.match(judge(5_000).join('\n'), /within JOB_TIMEOUT_SECONDS/);
  });
});
