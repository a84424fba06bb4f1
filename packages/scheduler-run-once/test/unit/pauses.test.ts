/**
 * Pauses as the function, `npm run runs` and the local Scheduler read them (`src/policy/pauses.ts`):
 * the bounds the CLI and the function both hold to, which slots a pause covers, what a stored
 * pause this code would never write reads as, and when a pause is past its bound. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import {
  pauseNoteProblem,
  pauseUntilProblem,
} from '../../src/ops/pause-records.ts';
import { pausedRow, type SlotRow } from '../../src/ops/slot-history.ts';
import {
  DEFAULT_PAUSE_BOUND_MS,
  MAX_PAUSE_NOTE_LENGTH,
  overduePause,
  type Pause,
  pauseAt,
  pausesField,
  readPauses,
} from '../../src/policy/pauses.ts';

const NOW = Date.now();
const at = (minutes: number) => new Date(NOW + minutes * 60_000);
const pause = (from: number, to?: number, until?: number): Pause => ({
  pausedAt: at(from),
  until: until === undefined ? undefined : at(until),
  note: 'db maintenance',
  resumedAt: to === undefined ? undefined : at(to),
  overdueReportedAt: undefined,
});
const row = (
  minutes: number,
  state: SlotRow['state'],
  attempts = 0,
): SlotRow => ({
  job: 'j',
  slot: at(minutes),
  runId: 'r',
  state,
  final: state !== 'pending',
  attempts,
  startedLateMs: undefined,
  durationMs: undefined,
  attemptId: undefined,
  lastError: undefined,
  reported: false,
  rerunOf: undefined,
  notes: {},
  kind: 'slot',
});

describe('the bounds of a pause', () => {
  it('refuses an --until in the past, under a minute ahead, or more than 30 days ahead, saying what to give', () => {
    const now = at(0);

    assert.match(
      pauseUntilProblem(at(-5), now) ?? '',
      /not after now .*give a time in the future/,
    );
    assert.match(
      pauseUntilProblem(at(0.5), now) ?? '',
      /less than a minute after now/,
    );
    assert.match(
      pauseUntilProblem(at(30 * 1440 + 1), now) ?? '',
      /more than 30 days/,
    );
    assert.equal(pauseUntilProblem(at(30 * 1440), now), undefined);
  });

  it('refuses a note too long or holding a control character', () => {
    assert.match(
      pauseNoteProblem('x'.repeat(MAX_PAUSE_NOTE_LENGTH + 1)) ?? '',
      /at most 500/,
    );
    assert.match(pauseNoteProblem('two\nlines') ?? '', /control character/);
    assert.equal(pauseNoteProblem('db maintenance, ticket OPS-12'), undefined);
  });
});

describe('which slots a pause covers', () => {
  it('covers its start up to its resume, and every slot after while it lasts', () => {
    const pauses = [pause(0, 10), pause(20)];

    assert.deepEqual(
      [-1, 0, 9, 10, 19, 20, 5000].map(
        (m) => pauseAt(pauses, at(m)) !== undefined,
      ),
      [false, true, true, false, false, true, true],
    );
  });

  it('shows a slot with no record inside a pause as paused with its note, never one that ran or failed', () => {
    const pauses = [pause(0)];

    assert.deepEqual(
      [
        row(5, 'missed'),
        row(6, 'pending'),
        row(7, 'completed', 1),
        row(8, 'failed', 2),
        row(-5, 'missed'),
      ]
        .map((r) => pausedRow(r, pauses))
        .map((r) => [r.state, r.pauseNote]),
      [
        ['paused', 'db maintenance'],
        ['paused', 'db maintenance'],
        ['completed', undefined],
        ['failed', undefined],
        ['missed', undefined],
      ],
    );
  });
});

describe('readPauses', () => {
  it('reads back what it stores', () => {
    const pauses = [pause(0, 10), pause(20, undefined, 120)];

    assert.deepEqual(
      readPauses({ pauses: pausesField(pauses) }, at(30)),
      pauses,
    );
    assert.deepEqual(readPauses(undefined, at(30)), []);
  });

  it('reads pauses this code would never write as unreadable: bad types, an --until out of bounds, overlapping pauses', () => {
    const good = pausesField([pause(0)])[0] as Record<string, unknown>;

    for (const stored of [
      [{ ...good, paused_at: '2026-12-01T00:00:00Z' }],
      [{ ...good, note: 'x'.repeat(501) }],
      [{ ...good, until: Timestamp.fromDate(at(40 * 1440)) }],
      [pausesField([pause(0)])[0], pausesField([pause(5)])[0]],
      'paused',
    ]) {
      assert.equal(
        readPauses({ pauses: stored }, at(10)),
        'unreadable',
        JSON.stringify(stored),
      );
    }
  });

  it('reads a pause with a time in the future of Firestore (beyond a minute) or a resume before it as unreadable', () => {
    const now = at(60);
    const tenYears = 3650 * 1440;

    for (const stored of [
      pausesField([pause(0, tenYears)]), // resumed in ten years: would pause every slot till then
      pausesField([pause(62)]), // paused after now
      pausesField([pause(0, 62)]),
      pausesField([{ ...pause(0), overdueReportedAt: at(tenYears) }]),
      pausesField([pause(10, 5)]),
    ]) {
      assert.equal(
        readPauses({ pauses: stored }, now),
        'unreadable',
        JSON.stringify(stored),
      );
    }
    // Within the clock margin: a reader whose estimate of Firestore's time is a little behind.
    assert.notEqual(
      readPauses({ pauses: pausesField([pause(0, 60.5)]) }, now),
      'unreadable',
    );
  });
});

describe('overduePause', () => {
  it('is the lasting pause once past its --until, or a week without one, and not once reported', () => {
    const bounded = [pause(0, undefined, 60)];
    const unbounded = [pause(0)];
    const week = DEFAULT_PAUSE_BOUND_MS / 60_000;

    assert.equal(overduePause(bounded, at(59)), undefined);
    assert.equal(overduePause(bounded, at(60)), bounded[0]);
    assert.equal(overduePause(unbounded, at(week - 1)), undefined);
    assert.equal(overduePause(unbounded, at(week)), unbounded[0]);
    assert.equal(
      overduePause(
        [{ ...pause(0), overdueReportedAt: at(week) }],
        at(week + 5),
      ),
      undefined,
    );
    assert.equal(overduePause([pause(0, 5)], at(week + 5)), undefined);
  });
});
