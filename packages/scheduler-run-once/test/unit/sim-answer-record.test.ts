/**
 * Invariant 44 (test/sim/answer-record-invariants.ts) on hand-built outcomes: a run answered
 * `skipped` never ran, the request that recorded its run `skipped` says so, a run that is done
 * is never answered `waiting` (but under `wait`), and an answer says the job ran only when its
 * own request ran it. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { answersSayWhatBecameOfTheRun } from '../sim/answer-record-invariants.ts';

const SENT = Date.parse('2026-01-05T01:01:00.100Z');
const RUN = 'b'.repeat(64);

/** A Scheduler request of job-0's 01:01 slot on d0-i0-r0, answered `status` `outcome`. */
function request(outcome: string, status: number, extra: object = {}) {
  return {
    deployment: 0,
    source: 'scheduler',
    jobId: 'job-0',
    scheduleTime: '2026-01-05T01:01:00Z',
    sentAt: SENT,
    endedAt: SENT + 200,
    status,
    outcome,
    instance: 'd0-i0-r0',
    runId: RUN,
    ...extra,
  };
}

/** A write to the run's record landing `ms` after the request was sent, leaving `status`. */
function write(
  ms: number,
  status: string | undefined,
  machine = 'd0-i0-r0',
  reported = false,
) {
  return { at: SENT + ms, machine, runId: RUN, status, reported };
}

/** An outcome of job-0 declared `overlap`, with these requests, record writes and executions. */
function outcomeOf(
  overlap: string,
  deliveries: object[],
  recordWrites: object[],
  executions: object[] = [],
) {
  return {
    emulator: false,
    deployments: [{ revisions: [{ jobs: [{ id: 'job-0', overlap }] }] }],
    deliveries,
    recordWrites,
    executions,
    troubledOps: [],
  } as never;
}

describe('invariant 44: an answer says what became of its run', () => {
  it("passes the product's own answers: skipped as it recorded skipped, a duplicate of a done run", () => {
    const skipped = outcomeOf(
      'skip',
      [request('skipped', 200)],
      [write(50, 'skipped')],
    );
    assert.deepEqual(answersSayWhatBecameOfTheRun(skipped), []);
    const duplicate = outcomeOf(
      'skip',
      [
        request('duplicate', 200, {
          sentAt: SENT + 60_000,
          endedAt: SENT + 60_100,
        }),
      ],
      [
        write(50, 'in_progress', 'd0-i1-r0'),
        write(30_000, 'completed', 'd0-i1-r0'),
      ],
      [{ runId: RUN, instance: 'd0-i1-r0', start: SENT + 60 }],
    );
    assert.deepEqual(answersSayWhatBecameOfTheRun(duplicate), []);
  });

  it('fails a run answered skipped that ran', () => {
    const outcome = outcomeOf(
      'skip',
      [
        request('skipped', 200, {
          sentAt: SENT + 60_000,
          endedAt: SENT + 60_100,
        }),
      ],
      [
        write(50, 'in_progress', 'd0-i1-r0'),
        write(30_000, 'completed', 'd0-i1-r0'),
      ],
      [{ runId: RUN, instance: 'd0-i1-r0', start: SENT + 60 }],
    );
    assert.match(
      answersSayWhatBecameOfTheRun(outcome).join('\n'),
      /was answered skipped at .*, but its run bbbbbbbbbbbb ran on d0-i1-r0/,
    );
  });

  it('fails the request that recorded its run skipped answered otherwise, unless it failed or a fault met its write', () => {
    const judge = (
      status: number,
      outcome: string,
      troubledOps: object[] = [],
    ) =>
      answersSayWhatBecameOfTheRun({
        ...(outcomeOf(
          'skip',
          [request(outcome, status)],
          [write(50, 'skipped')],
        ) as object),
        troubledOps,
      } as never);
    assert.match(
      judge(200, 'duplicate').join('\n'),
      /recorded skipped at .* on d0-i0-r0, but no request of it there was answered skipped: .* answered 200 duplicate/,
    );
    assert.deepEqual(judge(500, 'unavailable'), []);
    const lostAnswer = {
      at: SENT + 40,
      machine: 'd0-i0-r0',
      paths: [`runs/${RUN}`],
    };
    assert.deepEqual(judge(200, 'duplicate', [lostAnswer]), []);
  });

  it('fails a done run answered waiting under skip, and passes it under wait', () => {
    const waiting = [
      request('waiting', 409, {
        sentAt: SENT + 60_000,
        endedAt: SENT + 60_100,
      }),
    ];
    const writes = [write(50, 'in_progress'), write(30_000, 'completed')];
    assert.match(
      answersSayWhatBecameOfTheRun(outcomeOf('skip', waiting, writes)).join(
        '\n',
      ),
      /answered 409 waiting at .*, but its run bbbbbbbbbbbb was completed since .*: Scheduler retries a run that is done/,
    );
    assert.deepEqual(
      answersSayWhatBecameOfTheRun(outcomeOf('wait', waiting, writes)),
      [],
    );
    const unfinished = [write(50, 'in_progress')];
    assert.deepEqual(
      answersSayWhatBecameOfTheRun(outcomeOf('skip', waiting, unfinished)),
      [],
    );
  });

  it('fails a reported run answered waiting, and passes a run that became final only after the request was sent', () => {
    const waiting = [
      request('waiting', 409, {
        sentAt: SENT + 60_000,
        endedAt: SENT + 60_100,
      }),
    ];
    const reported = [write(50, 'missed', 'operator', true)];
    assert.match(
      answersSayWhatBecameOfTheRun(outcomeOf('skip', waiting, reported)).join(
        '\n',
      ),
      /but its run bbbbbbbbbbbb was reported since .*, before the request was sent/,
    );
    const finalLater = [write(50, 'in_progress'), write(60_050, 'completed')];
    assert.deepEqual(
      answersSayWhatBecameOfTheRun(outcomeOf('skip', waiting, finalLater)),
      [],
    );
  });

  it('judges a waiting answer by the revision that answered it (its instance)', () => {
    const waiting = (instance: string) => [
      request('waiting', 409, {
        sentAt: SENT + 60_000,
        endedAt: SENT + 60_100,
        instance,
      }),
    ];
    const writes = [write(50, 'in_progress'), write(30_000, 'completed')];
    const revisions = (outcome: object) => ({
      ...outcome,
      deployments: [
        {
          revisions: [
            { jobs: [{ id: 'job-0', overlap: 'wait' }] },
            { jobs: [{ id: 'job-0', overlap: 'skip' }] },
          ],
        },
      ],
    });
    const judged = (instance: string) =>
      answersSayWhatBecameOfTheRun(
        revisions(
          outcomeOf('skip', waiting(instance), writes) as object,
        ) as never,
      );
    assert.deepEqual(judged('d0-i0-r0'), []);
    assert.match(
      judged('d0-i1-r1').join('\n'),
      /Scheduler retries a run that is done/,
    );
  });

  it('passes a run answered skipped after its record was deleted, though it ran before', () => {
    const skipped = [
      request('skipped', 200, {
        sentAt: SENT + 60_000,
        endedAt: SENT + 60_100,
      }),
    ];
    const writes = [
      write(50, 'in_progress', 'd0-i1-r0'),
      write(40_000, undefined, 'operator'),
      write(60_050, 'skipped'),
    ];
    const ranBefore = [{ runId: RUN, instance: 'd0-i1-r0', start: SENT + 60 }];
    assert.deepEqual(
      answersSayWhatBecameOfTheRun(
        outcomeOf('skip', skipped, writes, ranBefore),
      ),
      [],
    );
  });

  it('fails an answer that says the job ran when its own request never ran it', () => {
    const claimedElsewhere = [write(50, 'in_progress', 'd0-i1-r0')];
    const ranHere = request('failed', 500, { ranAs: 'attempt-1' });
    assert.deepEqual(
      answersSayWhatBecameOfTheRun(
        outcomeOf('allow', [ranHere], claimedElsewhere),
      ),
      [],
    );
    for (const said of ['processed', 'failed']) {
      const status = said === 'processed' ? 200 : 500;
      const neverRan = request(said, status);
      assert.match(
        answersSayWhatBecameOfTheRun(
          outcomeOf('allow', [neverRan], claimedElsewhere),
        ).join('\n'),
        new RegExp(`answered ${status} ${said} .* its own job never ran`),
      );
    }
    const onTheEmulator = {
      ...(outcomeOf('allow', [request('failed', 500)], []) as object),
      emulator: true,
    } as never;
    assert.equal(answersSayWhatBecameOfTheRun(onTheEmulator).length, 1);
  });
});
