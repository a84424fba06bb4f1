/**
 * The simulator's lease invariants (`test/sim/invariants.ts` 1's second half,
 * `test/sim/lease-loss-invariants.ts` 23 to 25, 42 and 43) on hand-built outcomes: a job told to stop in
 * time, a lease kept while healthy, the heartbeat's cost. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { violations } from '../sim/invariants.ts';
import {
  beatsKeepTheirThird,
  firstBeatOnTime,
  heartbeatCostKept,
  jobTimeoutsKept,
  leaseKeptWhileHealthy,
  noAbortAfterEnd,
  oneWriteAtATime,
  stillRunningWarned,
  toldToStopAtLeaseEnd,
  toldToStopAtSigterm,
} from '../sim/lease-loss-invariants.ts';
import type { History } from '../sim/model.ts';
import type { Execution, LeaseEnd, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const LEASE_MS = 30_000;

/** A history without faults or events, unless `fields` add some. */
const history = (fields: Partial<History> = {}): History =>
  ({
    seed: 1,
    leaseSeconds: LEASE_MS / 1000,
    jobs: [],
    scopes: [''],
    instances: 1,
    spanMs: 600_000,
    duplicates: 0,
    dropAnswers: 0,
    latency: [1, 5],
    faultRate: 0,
    lateAnswers: 0,
    clockOffsetMs: 0,
    events: [],
    ...fields,
  }) as History;

const outcome = (
  executions: Execution[],
  fields: {
    history?: History;
    leaseEnds?: Map<string, LeaseEnd[]>;
    logs?: SimOutcome['logs'];
  } = {},
): SimOutcome =>
  ({
    history: fields.history ?? history(),
    emulator: true,
    startMs: 0,
    stopMs: 600_000,
    finalMs: 900_000,
    executions,
    logs: fields.logs ?? [],
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
    leaseMs: LEASE_MS,
    leaseEnds: fields.leaseEnds ?? new Map(),
    gaps: {},
  }) as unknown as SimOutcome;

/** The lease writes of an attempt that landed at `times` (ms), each for a whole lease. */
const leases = (attemptId: string, times: number[]) =>
  new Map([
    [
      attemptId,
      times.map((at) => ({
        landedAt: at,
        expires: at + LEASE_MS,
        leaseMs: LEASE_MS,
        runId: 'run-1',
      })),
    ],
  ]);

describe('invariant 23: no job aborted for a lost lease while nothing threatens it', () => {
  it('finds a job aborted for its lease on a healthy instance, Firestore answering', () => {
    const aborted = execution({ result: 'threw', abortReason: 'lease_lost' });

    assert.match(
      leaseKeptWhileHealthy(outcome([aborted])).join('\n'),
      /aborted for a lost lease/,
    );
  });

  it('accepts it when its instance was paused, or Firestore answered late', () => {
    const paused = execution({
      result: 'threw',
      abortReason: 'lease_lost',
      pausedMs: 40_000,
    });
    const slow = execution({ result: 'threw', abortReason: 'lease_lost' });

    assert.deepEqual(leaseKeptWhileHealthy(outcome([paused])), []);
    assert.deepEqual(
      leaseKeptWhileHealthy(
        outcome([slow], { history: history({ lateAnswers: 0.05 }) }),
      ),
      [],
    );
  });

  it('ignores an abort for a shutdown', () => {
    const stopped = execution({ result: 'threw', abortReason: 'shutdown' });

    assert.deepEqual(leaseKeptWhileHealthy(outcome([stopped])), []);
  });
});

describe('invariant 24: a job told to stop once its stored lease ran out', () => {
  it('finds a job that ran on past the end of a lease nothing renewed', () => {
    const job = execution({ start: 0, end: 50_000 });

    assert.match(
      toldToStopAtLeaseEnd(
        outcome([job], { leaseEnds: leases('attempt-1', [0]) }),
      ).join('\n'),
      /ran 20000 ms past its stored lease's end/,
    );
  });

  it('accepts a job renewed in time, or told to stop as the lease ended', () => {
    const renewed = execution({ start: 0, end: 50_000 });
    const told = execution({
      start: 0,
      end: 30_500,
      result: 'threw',
      abortedAt: 30_000,
    });

    assert.deepEqual(
      toldToStopAtLeaseEnd(
        outcome([renewed], {
          leaseEnds: leases('attempt-1', [0, 10_000, 20_000, 30_000]),
        }),
      ),
      [],
    );
    assert.deepEqual(
      toldToStopAtLeaseEnd(
        outcome([told], { leaseEnds: leases('attempt-1', [0]) }),
      ),
      [],
    );
  });

  it('gives a paused instance until it wakes', () => {
    const paused = execution({
      start: 0,
      end: 70_000,
      abortedAt: 60_000,
      result: 'threw',
      pauses: [{ from: 20_000, until: 60_000 }],
    });

    assert.deepEqual(
      toldToStopAtLeaseEnd(
        outcome([paused], { leaseEnds: leases('attempt-1', [0]) }),
      ),
      [],
    );
  });

  it('gives an instance paused twice in a row until it wakes from the second pause', () => {
    // A stall, then a pause that begins while the instance still sleeps: it wakes at 90 s.
    const pauses = [
      { from: 20_000, until: 60_000 },
      { from: 50_000, until: 90_000 },
    ];
    const toldAtWake = execution({
      start: 0,
      end: 91_000,
      abortedAt: 90_000,
      result: 'threw',
      pauses,
    });
    const toldLate = { ...toldAtWake, end: 131_000, abortedAt: 130_000 };

    assert.deepEqual(
      toldToStopAtLeaseEnd(
        outcome([toldAtWake], { leaseEnds: leases('attempt-1', [0]) }),
      ),
      [],
    );
    assert.match(
      toldToStopAtLeaseEnd(
        outcome([toldLate], { leaseEnds: leases('attempt-1', [0]) }),
      ).join('\n'),
      /past its stored lease's end/,
    );
  });
});

describe('invariant 25: the heartbeat writes a lease no more often than a third of it', () => {
  it('finds an attempt that renewed every second', () => {
    const times = Array.from({ length: 40 }, (_, i) => i * 1_000);
    const job = execution({ start: 0, end: 40_000 });

    assert.match(
      heartbeatCostKept(
        outcome([job], { leaseEnds: leases('attempt-1', times) }),
      ).join('\n'),
      /wrote its lease 40 times in 40000 ms/,
    );
  });

  it('accepts a claim, its widening and a beat a third of a lease', () => {
    const job = execution({ start: 0, end: 40_000 });

    assert.deepEqual(
      heartbeatCostKept(
        outcome([job], {
          leaseEnds: leases('attempt-1', [0, 2_000, 12_000, 22_000, 32_000]),
        }),
      ),
      [],
    );
  });
});

describe("invariant 42: the heartbeat's first beat on time", () => {
  // The request arrives at 1 000, the claim is sent at 1 010 and answered as the job starts at
  // 1 020: a third of the claim's 30 s lease after its send is 11 010.
  const CLAIM_LEASE_MS = 30_000;
  const judged = (
    job: Execution,
    writes: number[],
    pauses: SimOutcome['instancePauses'] = [],
  ) =>
    firstBeatOnTime({
      ...outcome([job], {
        leaseEnds: new Map([
          [
            'attempt-1',
            [
              {
                landedAt: 1_015,
                expires: 1_015 + CLAIM_LEASE_MS,
                leaseMs: CLAIM_LEASE_MS,
                runId: 'run-1',
              },
            ],
          ],
        ]),
      }),
      attemptWrites: new Map([['attempt-1', writes]]),
      instancePauses: pauses,
    } as SimOutcome);
  const running = (fields: Partial<Execution> = {}) =>
    execution({
      handledAt: 1_000,
      claimSentAt: 1_010,
      start: 1_020,
      end: 40_000,
      ...fields,
    });

  it('passes a first extension sent a third of the lease after the claim was sent', () => {
    assert.deepEqual(judged(running(), [11_010, 21_010, 40_000]), []);
  });

  it('passes a short job that sends only its completion, and a note sent as the job starts', () => {
    assert.deepEqual(judged(running({ end: 5_000 }), [5_000]), []);
    const noting = running({ firstNoteAt: 1_020 });
    assert.deepEqual(judged(noting, [1_020, 11_010, 40_000]), []);
  });

  it('finds a first extension sent late, or none while the job ran', () => {
    assert.match(
      judged(running(), [11_030, 40_000]).join('\n'),
      /sent no extension by .*11\.011Z/,
    );
    assert.match(judged(running(), [40_000]).join('\n'), /sent no extension/);
  });

  it('finds an extension sent as the job starts, with no note to explain it', () => {
    assert.match(
      judged(running(), [1_020, 11_010, 40_000]).join('\n'),
      /sent an extension at .*01\.020Z, sooner than a third/,
    );
  });

  it('excuses an instance paused before the extension was due', () => {
    const pause = { instance: 'd0-i0-r0', from: 5_000, until: 20_000 };
    assert.deepEqual(judged(running(), [20_000, 40_000], [pause]), []);
  });
});

describe('invariant 42: the beats after the first a third of the lease apart', () => {
  // A 10 s claim lease (3 × a 3.33 s timeout) widened to the 30 s LEASE_SECONDS by the first
  // beat, sent at 3 s and answered at 3.02 s: the next beats are due at 13.02, 23.02, 33.02 s.
  const CLAIM_LEASE_MS = 10_000;
  const judged = (
    writes: number[],
    end = 40_000,
    fields: Partial<History> = {},
  ) =>
    beatsKeepTheirThird({
      ...outcome([execution({ handledAt: 0, start: 10, end })], {
        history: history(fields),
        leaseEnds: new Map([
          [
            'attempt-1',
            [
              {
                landedAt: 5,
                expires: 5 + CLAIM_LEASE_MS,
                leaseMs: CLAIM_LEASE_MS,
                runId: 'run-1',
              },
            ],
          ],
        ]),
      }),
      attemptWriteSpans: new Map([
        [
          'attempt-1',
          [3_000, ...writes].map((sentAt) => ({
            sentAt,
            answeredBy: sentAt + 20,
            clean: true,
          })),
        ],
      ]),
      recordWrites: [],
      instancePauses: [],
    } as SimOutcome);

  it('passes beats a third of the widened lease apart, from the widening answered', () => {
    assert.deepEqual(judged([13_020, 23_020, 33_020, 40_000]), []);
  });

  it('stops at JOB_TIMEOUT_SECONDS, whatever aborted the job before (seed 374, path 47, --faults)', () => {
    // A stubborn job told to stop at its SIGTERM runs on to 60 s; the heartbeat stopped at its
    // 30 s timeout, so no beat was due at 33.02 s.
    const timedOut = { jobTimeoutSeconds: 30 };
    assert.deepEqual(judged([13_020, 23_020, 60_000], 60_000, timedOut), []);
  });

  it('finds a beat counted from its own answer, or one missing, or one too many', () => {
    assert.match(
      judged([13_020, 23_040, 33_060, 40_000]).join('\n'),
      /one was due at .*00:23\.020Z/,
    );
    assert.match(
      judged([13_020, 33_020, 40_000]).join('\n'),
      /one was due at .*00:23\.020Z/,
    );
    assert.match(
      judged([13_020, 23_020, 33_020, 36_000, 40_000]).join('\n'),
      /none was due at .*00:36\.000Z/,
    );
  });
});

describe('invariant 43: one write at a time', () => {
  const judged = (spans: { sentAt: number; answeredBy: number }[]) =>
    oneWriteAtATime({
      ...outcome([execution()]),
      attemptWriteSpans: new Map([
        ['attempt-1', spans.map((span) => ({ ...span, clean: true }))],
      ]),
    } as SimOutcome);

  it('passes writes each sent after the one before was answered, or given up', () => {
    const beat = { sentAt: 70_000, answeredBy: 70_050 };
    assert.deepEqual(
      judged([beat, { sentAt: 70_050, answeredBy: 70_090 }]),
      [],
    );
    const hung = { sentAt: 70_000, answeredBy: Number.POSITIVE_INFINITY };
    // FIRESTORE_TIMEOUT_SECONDS (10 s here) after a write is sent, the attempt gives it up.
    assert.deepEqual(
      judged([hung, { sentAt: 80_000, answeredBy: 80_040 }]),
      [],
    );
  });

  it('finds a completion sent while a beat was in flight', () => {
    const beat = { sentAt: 70_000, answeredBy: 70_050 };
    assert.match(
      judged([beat, { sentAt: 70_020, answeredBy: 70_090 }]).join('\n'),
      /sent a write to its run's record at .*10\.020Z while its write sent at .*10\.000Z was still unanswered/,
    );
  });
});

describe('invariant 26: JOB_TIMEOUT_SECONDS kept', () => {
  const timedOut = history({ jobTimeoutSeconds: 45 });

  it('finds a job aborted for its timeout too soon, or not aborted at it', () => {
    const early = execution({
      start: 0,
      end: 20_000,
      abortedAt: 20_000,
      abortReason: 'job_timeout',
      result: 'threw',
    });
    const late = execution({ start: 0, end: 80_000 });

    assert.match(
      jobTimeoutsKept(outcome([early], { history: timedOut })).join('\n'),
      /aborted for its timeout after 20000 ms/,
    );
    assert.match(
      jobTimeoutsKept(outcome([late], { history: timedOut })).join('\n'),
      /ran 80000 ms before it was told to stop/,
    );
  });

  it('accepts a job aborted at its timeout, and the default hour', () => {
    const atTimeout = execution({
      start: 0,
      end: 45_000,
      abortedAt: 45_000,
      abortReason: 'job_timeout',
      result: 'threw',
    });
    const long = execution({ start: 0, end: 80_000 });

    assert.deepEqual(
      jobTimeoutsKept(outcome([atTimeout], { history: timedOut })),
      [],
    );
    assert.deepEqual(jobTimeoutsKept(outcome([long])), []);
  });
});

describe('invariant 27: the still-running warning', () => {
  const warning = (at: number) => ({
    at,
    instance: 'd0-i0-r0',
    level: 'warn',
    message: 'the job is still running 5000 ms after its signal was aborted',
    fields: { attemptId: 'attempt-1' },
  });
  const aborted = (end: number) =>
    execution({
      start: 0,
      abortedAt: 10_000,
      end,
      result: 'threw',
      stubborn: true,
    });

  it('finds a job that ran on unwarned, or one warned though it stopped', () => {
    assert.match(
      stillRunningWarned(outcome([aborted(30_000)])).join('\n'),
      /no still-running warning came/,
    );
    assert.match(
      stillRunningWarned(
        outcome([aborted(10_000)], { logs: [warning(15_000)] as never }),
      ).join('\n'),
      /yet was warned of as still running/,
    );
  });

  it('accepts one warning for a job that ran on, none for one that stopped', () => {
    assert.deepEqual(
      stillRunningWarned(
        outcome([aborted(30_000)], { logs: [warning(15_000)] as never }),
      ),
      [],
    );
    assert.deepEqual(stillRunningWarned(outcome([aborted(10_000)])), []);
  });
});

describe('invariant 28: no signal aborts after its job ended', () => {
  it('finds a signal aborted after the job threw, and passes one aborted while it ran', () => {
    const after = execution({
      end: 70_000,
      abortedAt: 88_000,
      abortReason: 'shutdown',
      result: 'threw',
    });
    const during = execution({
      end: 70_000,
      abortedAt: 70_000,
      abortReason: 'shutdown',
      result: 'threw',
    });

    assert.match(
      noAbortAfterEnd(outcome([after])).join('\n'),
      /aborted \(shutdown\) 18000 ms after it ended/,
    );
    assert.deepEqual(noAbortAfterEnd(outcome([during])), []);
  });
});

describe('invariant 1: two executions of a run at once', () => {
  const lost = (at: number) => ({
    at,
    instance: 'd0-i0-r0',
    level: 40,
    message: 'lease lapsed: no extension was confirmed within the lease',
    fields: { attemptId: 'attempt-1' },
  });
  const earlier = (fields: Partial<Execution>) =>
    execution({
      start: 0,
      end: 60_000,
      result: 'threw',
      pausedMs: 40_000,
      abortReason: 'lease_lost',
      abortMessage: 'the lease lapsed unrenewed',
      ...fields,
    });
  const later = execution({ attemptId: 'attempt-2', start: 45_000 });
  // Each delivery's answer line (invariant 29): the first job threw, the later one returned.
  const answers = [
    {
      at: 60_000,
      instance: 'd0-i0-r0',
      level: 'ERROR',
      message: 'scheduled run: failed',
      fields: {
        attemptId: 'attempt-1',
        outcome: 'failed',
        release: 'recorded',
      },
    },
    {
      at: 70_000,
      instance: 'd0-i1-r0',
      level: 'INFO',
      message: 'scheduled run: processed',
      fields: {
        attemptId: 'attempt-2',
        outcome: 'processed',
        completion: 'recorded',
      },
    },
  ];

  it('is a double run when the first job was told to stop only after the takeover started', () => {
    const first = earlier({ abortedAt: 55_000 });

    assert.match(
      violations(
        outcome([first, later], { logs: [lost(55_000)] as never }),
      ).join('\n'),
      /told to stop only 10000 ms after the takeover started/,
    );
  });

  it('is excused when the first job was told before, or its instance was paused then', () => {
    const told = earlier({ abortedAt: 40_000 });
    const paused = earlier({
      abortedAt: 55_000,
      pauses: [{ from: 10_000, until: 50_000 }],
    });

    // Still running 5 s after it was told, the first job is warned of (invariant 27).
    const stillRunning = {
      ...lost(0),
      message: 'the job is still running 5000 ms after its signal was aborted',
    };
    for (const first of [told, paused]) {
      const logs = [
        lost(40_000),
        { ...stillRunning, at: (first.abortedAt ?? 0) + 5_000 },
        ...answers,
      ];
      assert.deepEqual(
        violations(outcome([first, later], { logs: logs as never })),
        [],
      );
    }
  });
});

describe('invariant 30: a SIGTERM tells running jobs to stop', () => {
  it('finds a job never told, or killed with its instance untold', () => {
    const ranOn = execution({ start: 0, end: 40_000, sigtermAt: 20_000 });
    const killed = execution({
      start: 0,
      end: undefined,
      result: 'crashed',
      diedAt: 30_000,
      sigtermAt: 20_000,
    });

    assert.match(
      toldToStopAtSigterm(outcome([ranOn])).join('\n'),
      /ran on at its instance's SIGTERM .* never told to stop/,
    );
    assert.match(
      toldToStopAtSigterm(outcome([killed])).join('\n'),
      /never told to stop/,
    );
  });

  it('accepts a job told at the SIGTERM or as its instance woke, and one that ended on its own', () => {
    const told = execution({
      start: 0,
      end: 20_100,
      result: 'threw',
      abortedAt: 20_000,
      abortReason: 'shutdown',
      sigtermAt: 20_000,
    });
    const pausedThen = {
      ...told,
      abortedAt: 50_000,
      end: 50_100,
      pauses: [{ from: 10_000, until: 50_000 }],
    };
    const endedOnItsOwn = execution({
      start: 0,
      end: 20_500,
      sigtermAt: 20_000,
    });

    assert.deepEqual(
      toldToStopAtSigterm(outcome([told, pausedThen, endedOnItsOwn])),
      [],
    );
  });

  it('accepts lease_lost from a job that slept through the SIGTERM past its lease, not from one awake (--faults seed 1)', () => {
    const sleptThrough = execution({
      start: 0,
      end: 50_100,
      result: 'threw',
      abortedAt: 50_000,
      abortReason: 'lease_lost',
      sigtermAt: 40_000,
      pauses: [{ from: 5_000, until: 50_000 }],
    });
    const awake = {
      ...sleptThrough,
      abortedAt: 40_000,
      end: 40_100,
      pauses: [],
    };
    const leaseEnds = leases(sleptThrough.attemptId, [0]);

    assert.deepEqual(
      toldToStopAtSigterm(outcome([sleptThrough], { leaseEnds })),
      [],
    );
    // Its lease ran out after the SIGTERM, still asleep: both fell due before it woke (review).
    const lapsedAsleep = leases(sleptThrough.attemptId, [15_000]);
    assert.deepEqual(
      toldToStopAtSigterm(outcome([sleptThrough], { leaseEnds: lapsedAsleep })),
      [],
    );
    assert.match(
      toldToStopAtSigterm(outcome([awake], { leaseEnds })).join('\n'),
      /told to stop at its instance's SIGTERM with lease_lost, not shutdown/,
    );
  });
});
