/**
 * The simulator's invariant 5 (`test/sim/invariants.ts`, `deliveriesRunAsSent`) on hand-built
 * executions: each delivery runs as what it was sent as; and invariant 3's answers of blocked runs
 * (`blockedAnswersByPolicy`). No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { forcedRunId, slotRunId } from '../../src/policy/run-history.ts';
import {
  blockedAnswersByPolicy,
  deliveriesRunAsSent,
  forceRunsWithoutTimeRunOnce,
  overlapPolicyKept,
  rerunsOfRunningSlotsToldToWait,
  rerunsOnlyOfFinishedSlots,
  strayDeliveriesRefused,
  triggersNeverRefused,
} from '../sim/invariants.ts';
import { KNOWN_GAPS } from '../sim/model.ts';
import type { Answered, Execution, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const outcome = (executions: Execution[]): SimOutcome =>
  ({
    executions,
    deployments: [{ scope: '', keyScope: [], revisions: [] }],
  }) as unknown as SimOutcome;

const context = {
  jobName: 'job-0',
  firstClaimedAt: 60_000,
  leaseExpires: 120_000,
  slot: 60_000,
};
const slotRun = slotRunId('job-0', new Date(60_000), []);

describe('invariant 5: each delivery runs as what it was sent as', () => {
  it('passes a slot, a catch-up with caughtUp, a manual run and a re-run of its slot', () => {
    const runs = [
      execution({ runId: slotRun, context }),
      execution({
        runId: slotRun,
        source: 'catchup',
        context: { ...context, caughtUp: true },
      }),
      execution({ runId: slotRun, source: 'manual', kind: 'manual', context }),
      execution({
        runId: slotRun,
        source: 'rerun',
        kind: 'rerun',
        context: { ...context, rerunOf: slotRun },
      }),
    ];

    assert.deepEqual(deliveriesRunAsSent(outcome(runs)), []);
  });

  it('finds a manual trigger run as a slot, a re-run of another run, and caughtUp on the wrong delivery', () => {
    const found = deliveriesRunAsSent(
      outcome([
        execution({ runId: slotRun, source: 'manual', kind: 'slot', context }),
        execution({
          runId: slotRun,
          source: 'rerun',
          kind: 'rerun',
          context: { ...context, rerunOf: 'another-run' },
        }),
        execution({ runId: slotRun, context: { ...context, caughtUp: true } }),
        execution({ runId: slotRun, source: 'catchup', context }),
        execution({
          runId: slotRun,
          source: 'backfill',
          kind: 'forced',
          context,
        }),
      ]),
    ).join('\n');

    assert.match(found, /a manual trigger ran as a slot run/);
    assert.match(
      found,
      /a re-run ran as a rerun run of another-run, not a re-run of its slot's run/,
    );
    assert.match(found, /a scheduler delivery ran with caughtUp true/);
    assert.match(found, /a catchup delivery ran with caughtUp false/);
    assert.match(found, /a backfill delivery ran as a forced run/);
  });

  it("finds a slot's run under another run id than its slot's", () => {
    assert.match(
      deliveriesRunAsSent(
        outcome([execution({ runId: 'run-0', context })]),
      ).join('\n'),
      /a slot's run ran as run run-0, not the slot's run id/,
    );
  });
});

describe("invariant 5: a Force run runs under its slot's forced run id", () => {
  const forced = (runId: string) =>
    execution({ runId, source: 'force', kind: 'forced', context });

  it("passes a forced run under its slot's forced run id", () => {
    const forcedRun = forcedRunId('job-0', new Date(60_000), []);
    assert.deepEqual(deliveriesRunAsSent(outcome([forced(forcedRun)])), []);
  });

  it("finds a forced run under the slot's own run id: the slot's delivery would find it done", () => {
    assert.match(
      deliveriesRunAsSent(outcome([forced(slotRun)])).join('\n'),
      /a forced run ran as run .*, not its slot's forced run id .*: a Force run is a run of its own/,
    );
  });
});

describe('invariant 3 on one instance: the previous slot held where it still runs', () => {
  const SKIP = { id: 'job-0', schedule: '* * * * *', overlap: 'skip' };
  const previous = execution({
    runId: 'run-previous',
    scheduleTime: 60_000,
    start: 60_100,
    end: 150_000,
    stubborn: true,
    abortedAt: 105_100,
  });
  const next = (instance: string) =>
    execution({
      runId: 'run-next',
      attemptId: 'attempt-2',
      scheduleTime: 120_000,
      start: 120_100,
      end: 130_000,
      instance,
    });
  const outcomeOf = (
    executions: Execution[],
    recordWrites: object[] = [],
  ): SimOutcome =>
    ({
      executions,
      deliveries: [],
      recordWrites,
      troubledOps: [],
      finalMs: 600_000,
      leaseEnds: new Map(),
      logs: [],
      instancePauses: [],
      deployments: [
        { scope: '', keyScope: [], revisions: [{ at: 0, jobs: [SKIP] }] },
      ],
    }) as unknown as SimOutcome;

  it("finds the next slot started on the instance where the previous slot's run still executes, even past its stop", () => {
    assert.match(
      overlapPolicyKept(outcomeOf([previous, next('d0-i0-r0')])).join('\n'),
      /started on the instance where the previous slot's run still executed, held there/,
    );
  });

  it('passes it on another instance past the stop it ignored, or once another machine wrote the run', () => {
    assert.deepEqual(
      overlapPolicyKept(outcomeOf([previous, next('d0-i1-r0')])),
      [],
    );
    const takenOver = {
      at: 110_000,
      machine: 'd0-i1-r0',
      runId: 'run-previous',
    };
    assert.deepEqual(
      overlapPolicyKept(outcomeOf([previous, next('d0-i0-r0')], [takenOver])),
      [],
    );
  });
});

describe('invariant 3: a blocked run answered by its policy', () => {
  const skipJob = { id: 'job-0', overlap: 'skip' };
  const outcomeOf = (
    answers: Partial<Answered>[],
    createTimes = new Map<string, number>(),
  ): SimOutcome =>
    ({
      emulator: false,
      answers: answers.map((a) => ({
        at: 61_000,
        deployment: 0,
        source: 'scheduler',
        jobId: 'job-0',
        scheduleTime: '1970-01-01T00:01:00Z',
        status: 409,
        outcome: 'waiting',
        runId: 'run-0',
        ...a,
      })),
      createTimes,
      deployments: [
        { scope: '', keyScope: [], revisions: [{ at: 0, jobs: [skipJob] }] },
      ],
    }) as unknown as SimOutcome;

  it('finds a skip job slot answered waiting with no record, and a manual run answered skipped', () => {
    assert.match(
      blockedAnswersByPolicy(outcomeOf([{}])).join('\n'),
      /overlap policy skip\) was answered waiting .* though its run had no record/,
    );
    assert.match(
      blockedAnswersByPolicy(
        outcomeOf([{ source: 'manual', outcome: 'skipped', status: 200 }]),
      ).join('\n'),
      /a manual delivery .* was answered skipped/,
    );
  });

  it('passes waiting when the run had a record first (an earlier attempt), and a backfill waiting', () => {
    assert.deepEqual(
      blockedAnswersByPolicy(outcomeOf([{}], new Map([['run-0', 60_500]]))),
      [],
    );
    assert.deepEqual(
      blockedAnswersByPolicy(outcomeOf([{ source: 'backfill' }])),
      [],
    );
  });

  it('judges by the writes that landed where they are seen: a record a repair deleted after the answer, created again later, was there (fault-biased seed 39, history 24)', () => {
    const write = (at: number, status: string | undefined) => ({
      at,
      machine: 'd0-i0-r0',
      runId: 'run-0',
      status,
    });
    const recreated = new Map([['run-0', 90_000]]);
    const answered = (recordWrites: ReturnType<typeof write>[]) =>
      blockedAnswersByPolicy({
        ...outcomeOf([{}], recreated),
        recordWrites,
      } as SimOutcome);

    assert.deepEqual(
      answered([write(60_100, 'failed'), write(70_000, undefined)]),
      [],
    );
    assert.match(
      answered([
        write(60_100, 'failed'),
        write(60_900, undefined),
        write(90_000, 'in_progress'),
      ]).join('\n'),
      /though its run had no record/,
      'deleted before the answer: no record then',
    );
  });
});

describe('invariant 5: a manual trigger and a re-run of a finished slot are never refused', () => {
  const slot = '1970-01-01T00:01:00Z';
  const run = slotRunId('job-0', new Date(slot), []);
  const outcomeOf = (outcomeName: string, completedAtMs: number): SimOutcome =>
    ({
      emulator: false,
      deliveries: [
        {
          deployment: 0,
          source: 'rerun',
          jobId: 'job-0',
          scheduleTime: slot,
          sentAt: 200_000,
          endedAt: 200_100,
          status: 400,
          outcome: outcomeName,
          instance: 'd0-i0-r0',
          runId: undefined,
        },
      ],
      records: new Map([
        [
          run,
          {
            status: 'completed',
            completed_at: Timestamp.fromMillis(completedAtMs),
          },
        ],
      ]),
      // Revision 0 declares the job; revision 1, a redeploy that dropped it, does not.
      deployments: [
        {
          scope: '',
          keyScope: [],
          revisions: [{ jobs: [{ id: 'job-0' }] }, { jobs: [] }],
        },
      ],
    }) as unknown as SimOutcome;

  it('finds a re-run of a slot completed before it refused invalid_request, and a manual run or a Force run refused', () => {
    assert.match(
      triggersNeverRefused(outcomeOf('invalid_request', 100_000)).join('\n'),
      /refused invalid_request though the slot's run completed/,
    );
    const manual = outcomeOf('invalid_request', 300_000);
    const deliveries = manual.deliveries.map((d) => ({
      ...d,
      source: 'manual' as const,
    }));
    assert.match(
      triggersNeverRefused({ ...manual, deliveries }).join('\n'),
      /a manual trigger of job-0, sent at .* was refused invalid_request/,
    );
    const forced = manual.deliveries.map((d) => ({
      ...d,
      source: 'force' as const,
    }));
    assert.match(
      triggersNeverRefused({ ...manual, deliveries: forced }).join('\n'),
      /a Force run of job-0, sent at .* was refused invalid_request/,
    );
  });

  it('excuses a trigger refused by a revision that no longer declares its job (a redeploy dropped it)', () => {
    const manual = outcomeOf('invalid_request', 300_000);
    for (const source of ['manual', 'force'] as const) {
      const deliveries = manual.deliveries.map((d) => ({
        ...d,
        source,
        instance: 'd0-i1-r1',
      }));
      assert.deepEqual(triggersNeverRefused({ ...manual, deliveries }), []);
    }
  });

  it('passes a refusal of a slot completed only after the re-run was sent, and a re-run that ran', () => {
    assert.deepEqual(
      triggersNeverRefused(outcomeOf('invalid_request', 300_000)),
      [],
    );
    assert.deepEqual(triggersNeverRefused(outcomeOf('processed', 100_000)), []);
  });
});

describe('invariant 5: a re-run runs only a slot whose run had finished', () => {
  const rerun = execution({
    source: 'rerun',
    kind: 'rerun',
    runId: 'rerun-1',
    claimSentAt: 200_000,
    start: 200_050,
    end: 210_000,
    context: { ...context, rerunOf: slotRun },
  });
  const outcomeWith = (record: Record<string, unknown> | undefined) =>
    ({
      emulator: false,
      executions: [rerun],
      records: new Map(record === undefined ? [] : [[slotRun, record]]),
      deployments: [{ scope: '', keyScope: [], revisions: [] }],
    }) as unknown as SimOutcome;
  const completedAt = (ms: number) => ({
    status: 'completed',
    completed_at: Timestamp.fromMillis(ms),
  });

  it('passes a re-run of a slot completed before its claim, or skipped', () => {
    assert.deepEqual(
      rerunsOnlyOfFinishedSlots(outcomeWith(completedAt(150_000))),
      [],
    );
    assert.deepEqual(
      rerunsOnlyOfFinishedSlots(outcomeWith(completedAt(200_000))),
      [],
    );
    assert.deepEqual(
      rerunsOnlyOfFinishedSlots(outcomeWith({ status: 'skipped' })),
      [],
    );
  });

  it('finds a re-run beside a slot that completed only after its claim, failed, was missed or still runs', () => {
    assert.match(
      rerunsOnlyOfFinishedSlots(outcomeWith(completedAt(205_000))).join('\n'),
      /a re-run of job-0@.* ran .* had not finished \(it completed only at 1970-01-01T00:03:25.000Z\)/,
    );
    for (const status of ['failed', 'missed', 'in_progress']) {
      assert.match(
        rerunsOnlyOfFinishedSlots(outcomeWith({ status })).join('\n'),
        new RegExp(`had not finished \\(it ended ${status}\\)`),
      );
    }
  });

  it('leaves records it cannot judge: a status another version wrote, a deleted record, the emulator', () => {
    assert.deepEqual(
      rerunsOnlyOfFinishedSlots(outcomeWith({ status: 'deferred' })),
      [],
    );
    assert.deepEqual(rerunsOnlyOfFinishedSlots(outcomeWith(undefined)), []);
    const emulated = { ...outcomeWith({ status: 'failed' }), emulator: true };
    assert.deepEqual(rerunsOnlyOfFinishedSlots(emulated as SimOutcome), []);
  });
});

describe('invariant 5: a delivery naming a schedule time none may carry is refused and runs nothing', () => {
  const stray = (outcomeName: string | undefined) => ({
    deployment: 0,
    source: 'stray' as const,
    jobId: 'job-0',
    scheduleTime: '2026-01-04T23:03:00Z',
    sentAt: 200_000,
    endedAt: outcomeName === undefined ? undefined : 200_100,
    status: outcomeName === undefined ? undefined : 200,
    outcome: outcomeName,
    instance: 'd0-i0-r0',
    runId: undefined,
  });
  const outcomeOf = (deliveries: unknown[], executions: Execution[] = []) =>
    ({ deliveries, executions }) as unknown as SimOutcome;

  it('passes a refusal, an answer in an outage, and a delivery its instance never answered', () => {
    assert.deepEqual(
      strayDeliveriesRefused(
        outcomeOf([
          stray('invalid_request'),
          stray('unavailable'),
          stray(undefined),
        ]),
      ),
      [],
    );
  });

  it('finds a stray delivery answered otherwise, and one that ran', () => {
    assert.match(
      strayDeliveriesRefused(outcomeOf([stray('skipped')])).join('\n'),
      /naming schedule time 2026-01-04T23:03:00Z, .* was answered 200 skipped, not 400 invalid_request/,
    );
    const ran = execution({ source: 'stray' });
    assert.match(
      strayDeliveriesRefused(outcomeOf([], [ran])).join('\n'),
      /ran for a delivery whose schedule time no delivery may carry/,
    );
  });
});

describe('invariant 5: a re-run of a slot running under a live lease is told to wait', () => {
  const refused = {
    deployment: 0,
    source: 'rerun' as const,
    jobId: 'job-0',
    scheduleTime: '1970-01-01T00:01:00Z',
    sentAt: 65_000,
    endedAt: 65_100,
    status: 400,
    outcome: 'invalid_request',
    instance: 'd0-i0-r0',
    runId: undefined,
  };
  const outcomeWith = (expires: number, outcomeName = 'invalid_request') =>
    ({
      emulator: false,
      deliveries: [{ ...refused, outcome: outcomeName }],
      executions: [execution()],
      leaseEnds: new Map([['attempt-1', [{ landedAt: 60_000, expires }]]]),
      deployments: [{ scope: '', keyScope: [], revisions: [] }],
    }) as unknown as SimOutcome;

  it('finds a refusal invalid_request while the run held a live lease', () => {
    assert.match(
      rerunsOfRunningSlotsToldToWait(outcomeWith(90_000)).join('\n'),
      /was refused invalid_request while its slot's run executed under a live lease/,
    );
  });

  it('passes the refusal of a run whose lease lapsed, and an answer in_progress', () => {
    assert.deepEqual(rerunsOfRunningSlotsToldToWait(outcomeWith(65_050)), []);
    assert.deepEqual(
      rerunsOfRunningSlotsToldToWait(outcomeWith(90_000, 'in_progress')),
      [],
    );
  });
});

describe('invariant 5: one Force run without a schedule time runs the job once', () => {
  const forced = (attemptId: string, runId: string, start: number) =>
    execution({
      source: 'force',
      kind: 'forced',
      attemptId,
      runId,
      start,
      end: start + 10_000,
    });
  const sent = (ranAs: string, sentAt: number) => ({
    deployment: 0,
    source: 'force' as const,
    jobId: 'job-0',
    scheduleTime: '',
    sentAt,
    endedAt: sentAt + 10_000,
    status: 500,
    outcome: 'processed',
    instance: 'd0-i0-r0',
    runId: undefined,
    ranAs,
    schedulerExecution: 4,
  });
  const outcomeOf = (secondRun: string) =>
    ({
      deliveries: [sent('a1', 30_000), sent('a2', 90_000)],
      executions: [
        forced('a1', 'forced-1', 30_000),
        forced('a2', secondRun, 90_000),
      ],
      records: new Map([
        [
          'forced-1',
          {
            status: 'completed',
            attempt_id: 'a1',
            completed_at: Timestamp.fromMillis(40_100),
          },
        ],
      ]),
    }) as unknown as SimOutcome;

  it('finds a retry that ran another forced run after the first completed', () => {
    assert.match(
      forceRunsWithoutTimeRunOnce(outcomeOf('forced-2')).join('\n'),
      /one Force run of job-0 without a schedule time \(Scheduler's execution 4 of deployment 0\) ran the job twice/,
    );
  });

  it("passes two deployments' Force runs that their Schedulers numbered alike (seed 44, history 47)", () => {
    const twoDeployments = outcomeOf('forced-2');
    const deliveries = twoDeployments.deliveries.map((d, i) => ({
      ...d,
      deployment: i,
    }));

    assert.deepEqual(
      forceRunsWithoutTimeRunOnce({ ...twoDeployments, deliveries }),
      [],
    );
  });

  it('excuses, while KNOWN_GAPS.forceRunHandledLate is open, only a run of a delivery handled past its attempt deadline (seed 20261209, history 632)', () => {
    const handledAfter = (ms: number) => {
      const base = outcomeOf('forced-2');
      return {
        ...base,
        gaps: { ...KNOWN_GAPS, forceRunHandledLate: true },
        deployments: [
          {
            scope: '',
            keyScope: [],
            revisions: [
              { at: 0, jobs: [{ id: 'job-0', attemptDeadlineSeconds: 15 }] },
            ],
          },
        ],
        executions: base.executions.map((e) =>
          e.attemptId === 'a2' ? { ...e, handledAt: 90_000 + ms } : e,
        ),
        deliveries: base.deliveries.map((d) =>
          d.ranAs === 'a2' ? { ...d, sentAt: 90_000 } : d,
        ),
      } as unknown as SimOutcome;
    };

    assert.deepEqual(forceRunsWithoutTimeRunOnce(handledAfter(20_000)), []);
    assert.match(
      forceRunsWithoutTimeRunOnce(handledAfter(100)).join('\n'),
      /ran the job twice/,
    );
    const strict = {
      ...handledAfter(20_000),
      gaps: { ...KNOWN_GAPS, forceRunHandledLate: false },
    } as SimOutcome;
    assert.match(
      forceRunsWithoutTimeRunOnce(strict).join('\n'),
      /ran the job twice/,
    );
  });

  it('leaves a retry of the same run to invariant 1, and attempts of a Force run that never completed', () => {
    assert.deepEqual(forceRunsWithoutTimeRunOnce(outcomeOf('forced-1')), []);
    const failed = outcomeOf('forced-2');
    const records = new Map([
      ['forced-1', { status: 'failed', attempt_id: 'a1' }],
    ]);
    assert.deepEqual(forceRunsWithoutTimeRunOnce({ ...failed, records }), []);
  });
});
