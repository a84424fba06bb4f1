/**
 * The simulator's invariant 15 for a job's second note (`test/sim/note-cases.ts`): valid notes
 * answered and kept as noted, invalid ones refused with a `RunOnceError` and never stored.
 * Hand-built outcomes; no simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { notesKept } from '../sim/invariants.ts';
import { NOTE_CASES, type NoteCase } from '../sim/note-cases.ts';
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
        : [['run-0', { status: 'completed', attempt_id: e.attemptId, notes }]],
    ),
  }) as unknown as SimOutcome;

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
        outcome(execution({ note: invalid, refused: 'RunOnceError' }), {}),
      ),
      [],
    );
  });
});
