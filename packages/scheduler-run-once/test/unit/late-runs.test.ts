/**
 * Catch-up and late runs without Firestore: the `catchUp` declaration as `validateJobs` checks it
 * (`src/policy/catch-up.ts`), and the two pure rules of `src/policy/late-runs.ts`: which slots a
 * scan finds late (`judgeLateSlots`) and what it does with a pending one (`pendingStep`). The
 * scan with its reads and writes is tested on the emulator in `test/catch-up.test.ts`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/core/errors.ts';
import {
  RunKind,
  type RunRecord,
  RunStatus,
} from '../../src/core/run-record.ts';
import { CATCH_UP_DEFAULTS } from '../../src/policy/catch-up.ts';
import {
  type DeclaredJob,
  type JobDeclaration,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import { judgeLateSlots, pendingStep } from '../../src/policy/late-runs.ts';
import type { Pause } from '../../src/policy/pauses.ts';

const MINUTE = 60_000;
const SECOND = 1000;

/** The problems `validateJobs` finds in a per-minute job declaring `catchUp`; `[]` if it accepts it. */
function catchUpProblems(catchUp: unknown): readonly string[] {
  const declaration = {
    id: 'sync',
    schedule: '* * * * *',
    catchUp,
    run: () => {},
  } as unknown as JobDeclaration;
  try {
    validateJobs([declaration]);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
  return [];
}

/** A per-minute job: catch-up of every slot, a 2-minute grace, an hour's window, 2 retries. */
const [job] = validateJobs([
  {
    id: 'sync',
    schedule: '* * * * *',
    retryCount: 2,
    maxRetryDurationSeconds: 0,
    minBackoffSeconds: 30,
    maxBackoffSeconds: 600,
    maxDoublings: 5,
    catchUp: { graceSeconds: 120, windowSeconds: 3600, slots: 'all' },
    run: () => {},
  },
]) as [DeclaredJob];

/** A slot's record: Scheduler's own run of it unless `fields` say otherwise. */
function record(fields: Partial<RunRecord>): RunRecord {
  return {
    status: RunStatus.Completed,
    attemptId: 'attempt-1',
    leaseExpires: undefined,
    attempts: 1,
    firstClaimedAt: undefined,
    claimedAt: undefined,
    completedAt: undefined,
    failedAt: undefined,
    lastError: undefined,
    reportedAt: undefined,
    reportedBy: undefined,
    jobName: 'sync',
    scheduleTime: undefined,
    kind: RunKind.Slot,
    rerunOf: undefined,
    withoutScheduleTime: false,
    caughtUpAt: undefined,
    blockedBy: undefined,
    notes: {},
    keyScope: '',
    ...fields,
  };
}

/** A slot as the scan reads it, with its record (none by default). */
function row(slot: Date, stored?: RunRecord) {
  return { slot, runId: `sync-${slot.toISOString()}`, record: stored };
}

const at = (base: Date, ms: number) => new Date(base.getTime() + ms);

describe('catchUp, as validateJobs checks it', () => {
  it('fills every default of an empty declaration, and of a partial one the fields left out', () => {
    const [empty, partial, none] = validateJobs([
      { id: 'a', schedule: '* * * * *', catchUp: {}, run: () => {} },
      {
        id: 'b',
        schedule: '* * * * *',
        catchUp: { slots: 'all', graceSeconds: undefined },
        run: () => {},
      },
      { id: 'c', schedule: '* * * * *', run: () => {} },
    ]);

    assert.deepEqual(empty?.catchUp, {
      graceSeconds: 120,
      windowSeconds: 3600,
      slots: 'latest',
    });
    assert.deepEqual(CATCH_UP_DEFAULTS, empty?.catchUp);
    assert.deepEqual(partial?.catchUp, {
      graceSeconds: 120,
      windowSeconds: 3600,
      slots: 'all',
    });
    assert.ok(Object.isFrozen(partial?.catchUp));
    assert.equal(none?.catchUp, undefined, 'off unless declared');
  });

  it('accepts each range at its ends', () => {
    for (const catchUp of [
      { graceSeconds: 30, windowSeconds: 60 },
      { graceSeconds: 86_400, windowSeconds: 86_400 },
    ]) {
      assert.deepEqual(catchUpProblems(catchUp), [], JSON.stringify(catchUp));
    }
  });

  it('refuses each duration out of its range or not whole, saying the range', () => {
    const cases: [object, string][] = [
      [
        { graceSeconds: 29 },
        'catchUp.graceSeconds 29 must be a whole number of seconds from 30 to 86400',
      ],
      [
        { graceSeconds: 86_401, windowSeconds: 86_400 },
        'catchUp.graceSeconds 86401 must be a whole number of seconds from 30 to 86400',
      ],
      [
        { graceSeconds: 90.5 },
        'catchUp.graceSeconds 90.5 must be a whole number of seconds from 30 to 86400',
      ],
      [
        { graceSeconds: 30, windowSeconds: 59 },
        'catchUp.windowSeconds 59 must be a whole number of seconds from 60 to 86400',
      ],
      [
        { windowSeconds: 86_401 },
        'catchUp.windowSeconds 86401 must be a whole number of seconds from 60 to 86400',
      ],
      [
        { windowSeconds: '3600' },
        'catchUp.windowSeconds "3600" must be a whole number of seconds from 60 to 86400',
      ],
    ];
    for (const [catchUp, message] of cases) {
      assert.deepEqual(
        catchUpProblems(catchUp),
        [`job "sync" (jobs[0]): ${message}`],
        JSON.stringify(catchUp),
      );
    }
  });

  it('refuses a window shorter than the grace: no late slot would be young enough', () => {
    assert.deepEqual(
      catchUpProblems({ graceSeconds: 600, windowSeconds: 300 }),
      [
        'job "sync" (jobs[0]): catchUp.windowSeconds (300) must be at least catchUp.graceSeconds (600): no late slot would be young enough to catch up',
      ],
    );
    assert.deepEqual(
      catchUpProblems({ graceSeconds: 300, windowSeconds: 300 }),
      [],
    );
  });

  it('refuses a key catchUp does not take (a typo would otherwise be ignored), naming the ones it takes', () => {
    const problems = catchUpProblems({ grace: 60 });
    assert.deepEqual(problems, [
      'job "sync" (jobs[0]): catchUp.grace is not a catch-up setting: use graceSeconds, windowSeconds, slots',
    ]);
  });

  it('refuses an unknown slots, naming the ones it takes, and a catchUp that is not an object', () => {
    assert.deepEqual(catchUpProblems({ slots: 'newest' }), [
      'job "sync" (jobs[0]): catchUp.slots "newest" must be one of latest, all',
    ]);
    for (const catchUp of [true, null, 'latest']) {
      const problems = catchUpProblems(catchUp);
      assert.equal(problems.length, 1, JSON.stringify(catchUp));
      assert.match(problems[0] ?? '', /catchUp must be an object, e\.g\. \{/);
    }
  });
});

describe('judgeLateSlots', () => {
  const now = new Date('2026-03-02T10:00:00Z');
  const end = at(now, -2 * MINUTE);
  const seen = { runSeen: true, end };

  it('finds a slot with no record late once its grace is over, and judges up to the mark end', () => {
    const slot = at(now, -3 * MINUTE);

    const judged = judgeLateSlots(job, undefined, [row(slot)], seen, [], now);

    assert.deepEqual(
      judged.late.map((late) => late.slot),
      [slot],
    );
    assert.equal(judged.judgedBefore, end);
  });

  it('counts a missed record no attempt wrote as no attempt, and a completed one as a run', () => {
    const missed = at(now, -4 * MINUTE);
    const completed = at(now, -3 * MINUTE);
    const rows = [
      row(missed, record({ status: RunStatus.Missed, attempts: 0 })),
      row(
        completed,
        record({ completedAt: at(completed, 5 * SECOND), attempts: 1 }),
      ),
    ];

    const judged = judgeLateSlots(job, undefined, rows, seen, [], now);

    assert.deepEqual(
      judged.late.map((late) => late.slot),
      [missed],
    );
  });

  it('leaves a slot whose grace is not over undecided: the next scan starts there', () => {
    const young = at(now, -119 * SECOND);

    const judged = judgeLateSlots(job, undefined, [row(young)], seen, [], now);

    assert.deepEqual(judged.late, []);
    assert.equal(judged.judgedBefore, young);
  });

  it('waits behind a live lease: the slot after a running one is not late, nor judged', () => {
    const running = at(now, -10 * MINUTE);
    const next = at(now, -9 * MINUTE);
    const before = row(
      running,
      record({
        status: RunStatus.InProgress,
        claimedAt: running,
        firstClaimedAt: running,
        leaseExpires: at(now, MINUTE),
      }),
    );

    const judged = judgeLateSlots(job, before, [row(next)], seen, [], now);

    assert.deepEqual(judged.late, []);
    assert.equal(judged.judgedBefore, next);
  });

  it('finds a slot inside a pause not late, and judges past it', () => {
    const slot = at(now, -3 * MINUTE);
    const pause: Pause = {
      pausedAt: at(now, -MINUTE * 30),
      until: undefined,
      note: 'maintenance',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    };

    const judged = judgeLateSlots(
      job,
      undefined,
      [row(slot)],
      seen,
      [pause],
      now,
    );

    assert.deepEqual(judged.late, []);
    assert.equal(judged.judgedBefore, end);
  });

  it("finds no slot before the job's first record late, and those after it late", () => {
    const first = at(now, -6 * MINUTE);
    const ran = at(now, -5 * MINUTE);
    const after = at(now, -4 * MINUTE);
    const rows = [
      row(first),
      row(ran, record({ completedAt: at(ran, 5 * SECOND) })),
      row(after),
    ];

    const judged = judgeLateSlots(
      job,
      undefined,
      rows,
      { runSeen: false, end },
      [],
      now,
    );

    assert.deepEqual(
      judged.late.map((late) => late.slot),
      [after],
    );
    assert.equal(judged.runSeen, true);
  });
});

describe('pendingStep', () => {
  const slot = new Date('2026-03-02T10:00:00Z');
  const failedAt = at(slot, 3 * MINUTE);
  /** A caught-up run of `slot` whose attempts failed, the last at `failedAt`. */
  const failedCatchUp = (attempts: number) =>
    record({
      status: RunStatus.Failed,
      attempts,
      firstClaimedAt: at(slot, 2 * MINUTE),
      claimedAt: at(failedAt, -10 * SECOND),
      failedAt,
      caughtUpAt: at(slot, 2 * MINUTE),
    });

  const cases: [
    string,
    RunRecord | undefined,
    Date,
    'deliver' | 'wait' | 'drop',
  ][] = [
    [
      'no attempt, within the window: deliver',
      undefined,
      at(slot, 10 * MINUTE),
      'deliver',
    ],
    [
      'no attempt, at the window end: deliver',
      undefined,
      at(slot, 3600 * SECOND),
      'deliver',
    ],
    [
      'no attempt, past the window: drop (reported missed)',
      undefined,
      at(slot, 3601 * SECOND),
      'drop',
    ],
    [
      'a missed record no attempt wrote, within the window: deliver',
      record({ status: RunStatus.Missed, attempts: 0 }),
      at(slot, 10 * MINUTE),
      'deliver',
    ],
    [
      'a failed caught-up run before its back-off (30 s) ends: wait',
      failedCatchUp(1),
      at(failedAt, 29 * SECOND),
      'wait',
    ],
    [
      'a failed caught-up run after its back-off, retries left: deliver',
      failedCatchUp(1),
      at(failedAt, 30 * SECOND),
      'deliver',
    ],
    [
      'the second retry waits the doubled back-off (60 s)',
      failedCatchUp(2),
      at(failedAt, 59 * SECOND),
      'wait',
    ],
    [
      'a failed caught-up run with its retries spent: drop (reported failed when its window closes)',
      failedCatchUp(3),
      at(failedAt, 10 * MINUTE),
      'drop',
    ],
    [
      "Scheduler's own failed run: drop (Scheduler retries it)",
      record({ ...failedCatchUp(1), caughtUpAt: undefined }),
      at(failedAt, 10 * MINUTE),
      'drop',
    ],
    [
      'a run whose lease is live: wait',
      record({
        status: RunStatus.InProgress,
        claimedAt: at(slot, 2 * MINUTE),
        leaseExpires: at(slot, 7 * MINUTE),
        caughtUpAt: at(slot, 2 * MINUTE),
      }),
      at(slot, 3 * MINUTE),
      'wait',
    ],
    [
      'a completed run: drop',
      record({ completedAt: at(slot, MINUTE) }),
      at(slot, 3 * MINUTE),
      'drop',
    ],
    [
      'a reported one: drop',
      record({ ...failedCatchUp(1), reportedAt: at(slot, 65 * MINUTE) }),
      at(slot, 66 * MINUTE),
      'drop',
    ],
  ];
  for (const [name, stored, now, step] of cases) {
    it(name, () => {
      assert.equal(pendingStep(job, row(slot, stored), now), step);
    });
  }
});
