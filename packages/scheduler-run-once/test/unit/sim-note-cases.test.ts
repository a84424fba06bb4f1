/**
 * The simulator's invariant 15 for a job's second note (`test/sim/note-cases.ts`): valid notes
 * answered and kept as noted, invalid ones refused with a `RunOnceError` and never stored.
 * Hand-built outcomes; no simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { noteProblem } from '../../src/core/notes.ts';
import { notesKept } from '../sim/invariants.ts';
import {
  firestoreSize,
  NOTE_CASES,
  NOTE_FILLS,
  type NoteCase,
  type NoteFill,
  notesSize,
  type PlannedNote,
} from '../sim/note-cases.ts';
import { noteAnsweredAfterTakeover } from '../sim/note-invariants.ts';
import type { Execution, SimOutcome } from '../sim/simulator.ts';
import { execution as executionOf } from './sim-execution.ts';

const caseOf = (valid: boolean): NoteCase =>
  NOTE_CASES.find((c) => c.valid === valid) as NoteCase;

const execution = (caseNote: Execution['caseNote']): Execution =>
  executionOf({ caseNote });

const outcome = (
  e: Execution,
  notes: Record<string, unknown> | undefined,
): SimOutcome =>
  ({
    executions: [e],
    records: new Map(
      notes === undefined
        ? []
        : [[e.runId, { status: 'completed', attempt_id: e.attemptId, notes }]],
    ),
  }) as unknown as SimOutcome;

/** What invariant 15 says of the first invalid case refused with the message `messageOf(name)`. */
const refusedWith = (messageOf: (name: string) => string): string => {
  const invalid = caseOf(false);
  const refused = execution({
    note: invalid,
    refused: 'RunOnceError',
    refusedMessage: messageOf(invalid.name),
  });
  return notesKept(outcome(refused, {})).join('\n');
};

describe('invariant 15: a job’s second note', () => {
  it('finds an invalid note accepted, or refused with another error', () => {
    const invalid = caseOf(false);

    assert.match(
      notesKept(
        outcome(execution({ note: invalid, answered: true }), undefined),
      ).join('\n'),
      /invalid note .* accepted/,
    );
    assert.match(
      notesKept(
        outcome(execution({ note: invalid, refused: 'TypeError' }), undefined),
      ).join('\n'),
      /refused with TypeError, not a RunOnceError/,
    );
  });

  it('finds a valid note refused with a RunOnceError', () => {
    const valid = caseOf(true);

    assert.match(
      notesKept(
        outcome(execution({ note: valid, refused: 'RunOnceError' }), undefined),
      ).join('\n'),
      /valid note .* refused/,
    );
  });

  it('finds a completed record holding another value than the one noted, or an invalid note', () => {
    const valid = caseOf(true);
    const invalid = caseOf(false);

    assert.match(
      notesKept(
        outcome(execution({ note: valid, answered: true }), {
          [valid.name]: 'something else',
        }),
      ).join('\n'),
      /holds "something else" for its note/,
    );
    assert.match(
      notesKept(
        outcome(execution({ note: invalid, refused: 'RunOnceError' }), {
          [invalid.name]: 1,
        }),
      ).join('\n'),
      /holds the invalid note/,
    );
  });

  it('accepts a valid note answered and stored as noted, and an invalid one refused', () => {
    const valid = caseOf(true);
    const invalid = caseOf(false);

    assert.deepEqual(
      notesKept(
        outcome(execution({ note: valid, answered: true }), {
          [valid.name]: valid.value(),
        }),
      ),
      [],
    );
    assert.deepEqual(
      notesKept(
        outcome(
          execution({
            note: invalid,
            refused: 'RunOnceError',
            refusedMessage: `ctx.note: note ${invalid.name} is wrong (${invalid.says})`,
          }),
          {},
        ),
      ),
      [],
    );
  });

  it('finds a refusal whose message does not name the note', () => {
    assert.match(
      refusedWith(() => 'ctx.note: a note is wrong'),
      /refused with a message that does not name it/,
    );
  });
});

/** The notes of `planned` but its last, after `held`: what fits the bound. */
const fitting = (
  held: Record<string, unknown>,
  planned: readonly PlannedNote[],
): Record<string, unknown> => ({
  ...held,
  ...Object.fromEntries(planned.slice(0, -1).map((n) => [n.name, n.value])),
});

const startNote = { started: { attempt: 'a'.repeat(36), at: 1_000 } };
const fillOf = (bound: NoteFill['bound']): NoteFill =>
  NOTE_FILLS.find((f) => f.bound === bound) as NoteFill;

describe('the invalid note cases', () => {
  it('are each refused by ctx.note’s check, naming the note and saying what breaks', () => {
    for (const c of NOTE_CASES.filter((c) => !c.valid)) {
      const problem = noteProblem(c.name, c.value()) ?? 'accepted';
      assert.ok(problem.includes(c.name), `${c.label}: ${problem}`);
      assert.ok(problem.includes(c.says ?? ''), `${c.label}: ${problem}`);
    }
  });

  it('finds a refusal that does not say what breaks', () => {
    assert.match(
      refusedWith((name) => `ctx.note: note ${name} is wrong`),
      /does not say "letter"/,
    );
  });
});

describe('the fills of a run’s notes (NOTE_FILLS)', () => {
  it('sizes strings, numbers, booleans and maps by Firestore’s storage sizes', () => {
    assert.equal(firestoreSize('abc'), 4);
    assert.equal(firestoreSize('é'), 3);
    assert.equal(firestoreSize(1.5), 8);
    assert.equal(firestoreSize(true), 1);
    assert.equal(firestoreSize({ a: 'bc', n: 1 }), 2 + 3 + 2 + 8);
  });

  it('fills a record to exactly 100 notes, then plans a 101st', () => {
    const planned = fillOf('count').plan(startNote);
    const fits = fitting(startNote, planned);

    assert.equal(Object.keys(fits).length, 100);
    assert.equal(new Set(planned.map((n) => n.name)).size, planned.length);
  });

  it('fills a record to exactly 256 KiB with notes the documentation allows, then one more', () => {
    const planned = fillOf('bytes').plan(startNote);
    const fits = fitting(startNote, planned);
    const last = planned.at(-1) as PlannedNote;

    assert.equal(notesSize(fits), 256 * 1024);
    assert.ok(notesSize({ ...fits, [last.name]: last.value }) > 256 * 1024);
    assert.ok(Object.keys(fits).length < 100);
    for (const { value } of planned) {
      const values =
        typeof value === 'object' ? Object.values(value ?? {}) : [value];
      assert.ok(values.length <= 20);
      assert.ok(values.every((v) => typeof v !== 'string' || v.length <= 1500));
    }
  });
});

describe('invariant 15: a fill of a run’s notes', () => {
  const count = fillOf('count');
  const planned = count.plan(startNote);
  const filler = (tried: Partial<NonNullable<Execution['noteFill']>>) =>
    executionOf({
      noteFill: { fill: count, planned, answered: 0, ...tried },
    });
  const lastName = (planned.at(-1) as PlannedNote).name;

  it('finds the note past the bound accepted, or one within it refused', () => {
    assert.match(
      notesKept(outcome(filler({ answered: planned.length }), undefined)).join(
        '\n',
      ),
      /past the bound accepted/,
    );
    assert.match(
      notesKept(
        outcome(
          filler({
            answered: 10,
            refused: { name: 'RunOnceError', message: 'note fill10: full' },
          }),
          undefined,
        ),
      ).join('\n'),
      /note 10 of 99 within the bound refused/,
    );
  });

  it('finds the note past the bound refused without its name, and a record not holding the fill', () => {
    const refusedUnnamed = filler({
      answered: planned.length - 1,
      refused: { name: 'RunOnceError', message: 'too many notes' },
    });
    assert.match(
      notesKept(outcome(refusedUnnamed, undefined)).join('\n'),
      /does not name fill99/,
    );
    const refused = filler({
      answered: planned.length - 1,
      refused: { name: 'RunOnceError', message: `note ${lastName}: full` },
    });
    assert.match(
      notesKept(outcome(refused, { started: 1, fill0: true })).join('\n'),
      /filled its notes to 100 \(count\), holds 2/,
    );
    assert.deepEqual(
      notesKept(outcome(refused, fitting(startNote, planned))),
      [],
    );
  });

  it('accepts a fill cut short by a lost lease or Firestore’s failure', () => {
    assert.deepEqual(
      notesKept(
        outcome(
          filler({
            answered: 40,
            refused: { name: 'LedgerUnavailableError', message: 'unavailable' },
          }),
          undefined,
        ),
      ),
      [],
    );
  });
});

describe('invariant 15: no note answered after a takeover', () => {
  const noted = executionOf({
    start: 60_000,
    progressNote: { calledAt: 100_000, answered: true },
  });
  const leaseOf = (attemptId: string, landedAt: number) =>
    new Map([
      [
        attemptId,
        [
          {
            landedAt,
            expires: landedAt + 30_000,
            leaseMs: 30_000,
            runId: noted.runId,
          },
        ],
      ],
    ]);

  it("finds a progress note answered after another attempt's claim of its run landed", () => {
    assert.match(
      noteAnsweredAfterTakeover(noted, leaseOf('attempt-2', 95_000)).join('\n'),
      /had its progress note answered at .*, after another attempt's claim of its run landed at .*: the note was never stored/,
    );
  });

  it('passes one answered before the takeover, its own lease, and a note refused', () => {
    assert.deepEqual(
      noteAnsweredAfterTakeover(noted, leaseOf('attempt-2', 105_000)),
      [],
    );
    assert.deepEqual(
      noteAnsweredAfterTakeover(noted, leaseOf('attempt-1', 95_000)),
      [],
    );
    const refused = executionOf({
      start: 60_000,
      progressNote: { calledAt: 100_000, refused: 'AttemptAbortedError' },
    });
    assert.deepEqual(
      noteAnsweredAfterTakeover(refused, leaseOf('attempt-2', 95_000)),
      [],
    );
  });
});
