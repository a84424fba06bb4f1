/**
 * Invariant 33 (test/sim/cursor-invariants.ts) on hand-built outcomes: the final check's cursor
 * may stand at the first slot the records do not settle, or past it; behind it is a violation.
 * Slots before the job's first record and a history whose last check died are not judged. And
 * invariant 54: another version's cursor, unreadable, said by a check; readable, read silently;
 * 55: this version's own cursor never said unreadable, and said ahead of a longer window only
 * after a deploy that lengthened it; 56: a cursor started afresh only where one days old stood;
 * 57: a cursor written only to change it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { checkDocumentId } from '../../src/policy/missed-run-cursor.ts';
import {
  CURSOR_OF_SHORTER_WINDOW,
  UNREADABLE_CURSOR,
} from '../../src/policy/missed-runs.ts';
import { slotRunId, unloggedReporter } from '../../src/policy/run-history.ts';
import {
  cursorsKeptUp,
  cursorWrittenOnlyToChange,
  foreignCursorsSaid,
  ownCursorsSaid,
  startedAfreshOnlyWhenStale,
} from '../../test/sim/cursor-invariants.ts';
import type { ForeignCursorKind } from '../../test/sim/model.ts';
import type { SimOutcome } from '../../test/sim/simulator.ts';

const MINUTE = 60_000;
const START = Date.parse('2026-01-05T00:00:00Z');
const [job] = validateJobs([
  defineJob({
    id: 'job-0',
    schedule: '* * * * *',
    attemptDeadlineSeconds: 15,
    retryCount: 0,
    run: () => {},
  }),
]);
if (job === undefined) {
  throw new Error('no job');
}
/** Long enough after the start that the first ten slots are closed by any reading. */
const FINAL = START + 3 * 3_600_000;

/** An outcome whose slots 1..n (minutes after the start) have `records`, and a cursor at `cursorMinute`. */
function outcomeWith(
  records: Record<number, Record<string, unknown>>,
  cursorMinute: number | undefined,
  deaths: { at: number; instance: string }[] = [],
) {
  const stored = new Map(
    Object.entries(records).map(([minute, record]) => [
      slotRunId(job?.id ?? '', new Date(START + Number(minute) * MINUTE), []),
      record,
    ]),
  );
  const cursor =
    cursorMinute === undefined
      ? { job_name: 'job-0' }
      : { checked_before: Timestamp.fromMillis(START + cursorMinute * MINUTE) };
  return {
    emulator: false,
    startMs: START,
    finalMs: FINAL,
    deaths,
    deployments: [
      { scope: '', keyScope: [], revisions: [{ at: START, jobs: [job] }] },
    ],
    records: stored,
    jobDocuments: new Map([[checkDocumentId('job-0', []), cursor]]),
  } as never;
}

const COMPLETED = { status: 'completed' };
const REPORTED = {
  status: 'missed',
  reported_at: Timestamp.fromMillis(FINAL),
  reported_by: 'check-1',
};
const UNLOGGED = { ...REPORTED, reported_by: unloggedReporter('check-1') };

describe('invariant 33: the final check keeps each cursor up', () => {
  it('passes a cursor at the first slot the records leave open, one past it, and one just past the last settled slot', () => {
    const records = { 1: COMPLETED, 2: REPORTED, 3: { status: 'failed' } };

    assert.deepEqual(cursorsKeptUp(outcomeWith(records, 3)), []);
    assert.deepEqual(cursorsKeptUp(outcomeWith(records, 4)), []);
    // Between the last settled slot and the first open one: no settled slot is ahead of it.
    assert.deepEqual(cursorsKeptUp(outcomeWith(records, 2.5)), []);
  });

  it('flags a cursor behind slots the records settle', () => {
    const found = cursorsKeptUp(
      outcomeWith({ 1: COMPLETED, 2: REPORTED, 3: { status: 'failed' } }, 2),
    );

    assert.equal(found.length, 1);
    assert.match(
      found[0] ?? '',
      /job-0's cursor .* at 2026-01-05T00:02:00\.000Z: settled slot 2026-01-05T00:02:00\.000Z is not behind it \(the first slot to judge again is 2026-01-05T00:03:00\.000Z\)/,
    );
  });

  it('flags a check document without a cursor once slots were settled', () => {
    const found = cursorsKeptUp(
      outcomeWith({ 1: COMPLETED, 2: { status: 'failed' } }, undefined),
    );

    assert.equal(found.length, 1);
    assert.match(
      found[0] ?? '',
      /left no job-0's cursor .*: settled slot 2026-01-05T00:01:00\.000Z is not behind it/,
    );
    assert.deepEqual(
      cursorsKeptUp(outcomeWith({ 1: { status: 'failed' } }, undefined)),
      [],
    );
  });

  it('takes a report not yet logged, and a slot with no record after the first, as still to judge', () => {
    assert.deepEqual(
      cursorsKeptUp(outcomeWith({ 1: COMPLETED, 2: UNLOGGED }, 2)),
      [],
    );
    assert.deepEqual(
      cursorsKeptUp(outcomeWith({ 1: COMPLETED, 3: COMPLETED }, 2)),
      [],
    );
  });

  it('judges nothing before the first record, nor after a death in the last check', () => {
    assert.deepEqual(
      cursorsKeptUp(outcomeWith({ 5: COMPLETED, 6: { status: 'failed' } }, 6)),
      [],
    );
    assert.equal(
      cursorsKeptUp(outcomeWith({ 5: COMPLETED, 6: { status: 'failed' } }, 5))
        .length,
      1,
    );
    // The auditor died: the operator's check came after it and is judged; it died too: not.
    const auditorDied = { at: FINAL + 1, instance: 'd0-auditor' };
    const operatorDied = {
      at: FINAL + 5 * MINUTE + 1,
      instance: 'd0-operator',
    };
    const settled = { 1: COMPLETED, 2: COMPLETED };
    assert.equal(
      cursorsKeptUp(outcomeWith(settled, 1, [auditorDied])).length,
      1,
    );
    assert.deepEqual(
      cursorsKeptUp(outcomeWith(settled, 1, [auditorDied, operatorDied])),
      [],
    );
  });
});

/** A cursor another version wrote on job-0's check document at `minute` after the start. */
function foreignCursor(
  kind: ForeignCursorKind,
  minute: number,
  repairedAt?: number,
) {
  return {
    at: START + minute * MINUTE,
    deployment: 0,
    jobId: 'job-0',
    document: checkDocumentId('job-0', []),
    kind,
    ...(repairedAt === undefined ? {} : { repairedAt }),
  };
}

/** A line a check logged at `minute` after the start. */
function line(
  minute: number,
  message: string,
  fields: Record<string, unknown>,
) {
  return {
    at: START + minute * MINUTE,
    instance: 'd0-auditor',
    level: 'ERROR',
    message,
    fields,
  };
}

const CURSOR_ERROR = line(30, UNREADABLE_CURSOR, {
  jobName: 'job-0',
  document: checkDocumentId('job-0', []),
  reason: 'rules is not a list of 1 to 8 rules',
});

/** An outcome with only another version's cursors and the checks' `logs`. */
function withForeignCursors(
  foreignCursors: ReturnType<typeof foreignCursor>[],
  logs: ReturnType<typeof line>[],
): SimOutcome {
  return { foreignCursors, logs } as unknown as SimOutcome;
}

describe("invariant 54: another version's cursor is said or read", () => {
  it('flags an unreadable cursor left standing that no check said, and passes it said or repaired', () => {
    const unreadable = foreignCursor('rules_empty', 20);
    assert.equal(
      foreignCursorsSaid(withForeignCursors([unreadable], [])).length,
      1,
    );
    assert.deepEqual(
      foreignCursorsSaid(withForeignCursors([unreadable], [CURSOR_ERROR])),
      [],
    );
    const earlyError = { ...CURSOR_ERROR, at: START + 10 * MINUTE };
    assert.equal(
      foreignCursorsSaid(withForeignCursors([unreadable], [earlyError])).length,
      1,
      'an ERROR before the write says nothing of it',
    );
    const repaired = foreignCursor('rules_empty', 20, START + 25 * MINUTE);
    assert.deepEqual(
      foreignCursorsSaid(withForeignCursors([repaired], [])),
      [],
    );
  });

  it('flags an ERROR whose reason is missing or names another field than the form broke (stop 72)', () => {
    const unreadable = foreignCursor('rules_empty', 20);
    const judged = (reason: unknown) =>
      foreignCursorsSaid(
        withForeignCursors(
          [unreadable],
          [{ ...CURSOR_ERROR, fields: { ...CURSOR_ERROR.fields, reason } }],
        ),
      ).length;
    assert.equal(judged(undefined), 1, 'no reason');
    assert.equal(judged('seen_at is not a timestamp'), 1, 'another field');
    assert.equal(judged('rules[0] has a schedule …'), 0);
    const seenAhead = foreignCursor('seen_at_ahead', 20);
    assert.deepEqual(
      foreignCursorsSaid(
        withForeignCursors(
          [seenAhead],
          [
            {
              ...CURSOR_ERROR,
              fields: {
                ...CURSOR_ERROR.fields,
                reason: "seen_at is ahead of Firestore's now",
              },
            },
          ],
        ),
      ),
      [],
    );
  });

  it("flags a readable cursor a check said unreadable, while it is the document's first", () => {
    const readable = foreignCursor('readable_extra_fields', 20);
    assert.deepEqual(
      foreignCursorsSaid(withForeignCursors([readable], [])),
      [],
    );
    assert.equal(
      foreignCursorsSaid(withForeignCursors([readable], [CURSOR_ERROR])).length,
      1,
    );
  });

  it('flags a stale cursor no check started afresh, and passes one it did', () => {
    const stale = foreignCursor('readable_stale', 20);
    assert.equal(foreignCursorsSaid(withForeignCursors([stale], [])).length, 1);
    const afresh = line(
      30,
      'missed-run check: nothing checked job job-0 from … to …',
      {
        jobName: 'job-0',
      },
    );
    assert.deepEqual(
      foreignCursorsSaid(withForeignCursors([stale], [afresh])),
      [],
    );
  });
});

/** job-0 as a revision deployed at `minute` declares it, with `retryCount` retries. */
function revision(minute: number, retryCount: number) {
  return {
    at: START + minute * MINUTE,
    jobs: [{ ...job, retryCount, maxRetryDurationSeconds: 0 }],
  };
}

/** An outcome of one deployment with these revisions, another version's cursors and logs. */
function withRevisions(
  revisions: ReturnType<typeof revision>[],
  foreignCursors: ReturnType<typeof foreignCursor>[],
  logs: ReturnType<typeof line>[],
): SimOutcome {
  return {
    deployments: [{ scope: '', keyScope: [], revisions }],
    foreignCursors,
    logs,
  } as unknown as SimOutcome;
}

/** The WARNING of a cursor ahead of a longer window's boundary at `minute`, reading again at `again`. */
function shorterWindowLine(minute: number, again: number) {
  return {
    ...line(minute, CURSOR_OF_SHORTER_WINDOW, {
      jobName: 'job-0',
      document: checkDocumentId('job-0', []),
      reason:
        "checked_before is ahead of the job's closed boundary, as a cursor …",
      readsAgainAt: new Date(START + again * MINUTE).toISOString(),
    }),
    instance: 'd0-i1-r1',
    level: 'WARNING',
  };
}

describe("invariant 55: what a check says of this version's own cursor (stop 73)", () => {
  it('flags an unreadable ERROR on a document no other version wrote, and passes it after one did', () => {
    const revisions = [revision(0, 0)];
    assert.equal(
      ownCursorsSaid(withRevisions(revisions, [], [CURSOR_ERROR])).length,
      1,
    );
    const written = foreignCursor('rules_empty', 20);
    assert.deepEqual(
      ownCursorsSaid(withRevisions(revisions, [written], [CURSOR_ERROR])),
      [],
    );
  });

  it('passes the shorter-window WARNING only after a deploy that lengthened the retries, with a time to come', () => {
    const lengthened = [revision(0, 0), revision(10, 2)];
    const warning = shorterWindowLine(20, 25);
    assert.deepEqual(
      ownCursorsSaid(withRevisions(lengthened, [], [warning])),
      [],
    );
    const unchanged = [revision(0, 2), revision(10, 2)];
    assert.equal(
      ownCursorsSaid(withRevisions(unchanged, [], [warning])).length,
      1,
      'no deploy lengthened them',
    );
    const past = shorterWindowLine(20, 5);
    assert.equal(
      ownCursorsSaid(withRevisions(lengthened, [], [past])).length,
      1,
      'a readsAgainAt its check had passed',
    );
  });
});

/** The WARN of a check that started job-0's cursor afresh, at `minute`, over [from, to]. */
function afreshLine(minute: number, from: number, to: number, hours: number) {
  return {
    ...line(
      minute,
      `missed-run check: nothing checked job job-0 from … to … (…); see them with npm run runs -- --job job-0 --since ${hours}h --check`,
      {
        jobName: 'job-0',
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
      },
    ),
    instance: 'd0-auditor',
    level: 'WARNING',
  };
}

describe('invariant 56: a cursor started afresh only from one days old (stop 73)', () => {
  const DAY = 86_400_000;
  const staleAt = START + 20 * MINUTE;
  const from = staleAt - 3 * DAY;
  const to = START + 25 * MINUTE;
  const outcome = (
    cursors: ReturnType<typeof foreignCursor>[],
    warn: ReturnType<typeof afreshLine>,
  ) => withForeignCursors(cursors, [warn]);

  it("passes a WARN after another version's stale cursor, naming its range and a look-back that reaches it", () => {
    const stale = foreignCursor('readable_stale', 20);
    assert.deepEqual(
      startedAfreshOnlyWhenStale(
        outcome([stale], afreshLine(30, from, to, 73)),
      ),
      [],
    );
  });

  it('flags a WARN with no stale cursor, one that reaches too short a way back, or a range past the line', () => {
    const stale = foreignCursor('readable_stale', 20);
    assert.equal(
      startedAfreshOnlyWhenStale(outcome([], afreshLine(30, from, to, 73)))
        .length,
      1,
      'no cursor days old',
    );
    assert.equal(
      startedAfreshOnlyWhenStale(outcome([stale], afreshLine(30, from, to, 1)))
        .length,
      1,
      '--since 1h does not reach three days back',
    );
    const beyond = START + 40 * MINUTE;
    assert.equal(
      startedAfreshOnlyWhenStale(
        outcome([stale], afreshLine(30, from, beyond, 73)),
      ).length,
      1,
      'a range ending after the line',
    );
  });
});

describe('invariant 57: a cursor written only to change it (stop 73)', () => {
  const stored = {
    checked_before: Timestamp.fromMillis(START),
    run_seen: true,
    closed_after_ms: 30_000,
    rules: [{ schedule: '* * * * *', time_zone: 'Etc/UTC' }],
    seen_at: Timestamp.fromMillis(START + MINUTE),
  };
  const write = (after: Record<string, unknown>) =>
    ({
      checkDocumentWrites: [
        {
          at: START + 6 * MINUTE,
          machine: 'd0-auditor',
          document: 'job-0~check',
          before: stored,
          after: { ...stored, ...after },
        },
      ],
    }) as unknown as SimOutcome;

  it('flags a write that only moves seen_at on, within the hour', () => {
    const seen = Timestamp.fromMillis(START + 6 * MINUTE);
    assert.equal(cursorWrittenOnlyToChange(write({ seen_at: seen })).length, 1);
  });

  it('passes a write that moves the cursor, and the hourly heartbeat', () => {
    const seen = Timestamp.fromMillis(START + 6 * MINUTE);
    const moved = Timestamp.fromMillis(START + 5 * MINUTE);
    assert.deepEqual(
      cursorWrittenOnlyToChange(
        write({ seen_at: seen, checked_before: moved }),
      ),
      [],
    );
    const hourOn = Timestamp.fromMillis(START + 61 * MINUTE);
    assert.deepEqual(cursorWrittenOnlyToChange(write({ seen_at: hourOn })), []);
  });
});
