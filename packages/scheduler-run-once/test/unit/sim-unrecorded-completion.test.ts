/**
 * The simulator's invariant 51 (`test/sim/unrecorded-completion-invariants.ts`,
 * `knownCompletionsNotRunAgain`) on hand-built outcomes: a job whose completion went unrecorded is
 * not run again on the same instance while the record still names its attempt in progress; on
 * another instance, or after another attempt wrote the record, it may be. No simulation, no
 * Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type {
  Execution,
  LogLine,
  RecordWrite,
  SimOutcome,
} from '../sim/simulator.ts';
import { knownCompletionsNotRunAgain } from '../sim/unrecorded-completion-invariants.ts';
import { execution, SLOT_RUN } from './sim-execution.ts';

const FIRST = 'attempt-1';
const SECOND = 'attempt-2';
const HERE = 'd0-i0-r0';

/** The first attempt's answer at 70 s: its job returned, its completion unrecorded. */
const UNRECORDED: LogLine = {
  at: 70_000,
  instance: HERE,
  level: 'ERROR',
  message: 'scheduled run: completed',
  fields: { outcome: 'completed', attemptId: FIRST, completion: 'unrecorded' },
};

/** A landed write at `at` leaving the record `status` under `attemptId`. */
function write(at: number, status: string, attemptId: string): RecordWrite {
  return { at, machine: HERE, runId: SLOT_RUN, status, attemptId };
}

/** The first attempt's claim at 59 s; the second attempt's takeover at 119 s. */
const CLAIM = write(59_000, 'in_progress', FIRST);
const TAKEOVER = write(119_000, 'in_progress', SECOND);

/** The first execution (60–70 s, returned) and a second of the same run from 120 s on `instance`. */
function outcome(
  instance: string,
  recordWrites: RecordWrite[],
  first: Partial<Execution> = {},
): SimOutcome {
  return {
    emulator: false,
    executions: [
      execution({ attemptId: FIRST, ...first }),
      execution({
        attemptId: SECOND,
        instance,
        start: 120_000,
        end: 125_000,
      }),
    ],
    logs: [UNRECORDED],
    recordWrites,
  } as unknown as SimOutcome;
}

describe('invariant 51: an unrecorded completion is recorded by its instance, not run again', () => {
  it('fails a run taken over on the same instance from the record its unrecorded completion left', () => {
    const found = knownCompletionsNotRunAgain(outcome(HERE, [CLAIM, TAKEOVER]));
    assert.equal(found.length, 1);
    assert.match(
      found[0] ?? '',
      /^invariant 51: job-0@1970-01-01T00:01:00.000Z ran again on d0-i0-r0 at 1970-01-01T00:02:00.000Z, though that instance's completion/,
    );
  });

  it('passes the same rerun on another instance, which cannot know of the completion', () => {
    assert.deepEqual(
      knownCompletionsNotRunAgain(outcome('d0-i1-r0', [CLAIM, TAKEOVER])),
      [],
    );
  });

  it('passes a rerun on the same instance after another attempt wrote the record meanwhile', () => {
    const failedElsewhere = write(100_000, 'failed', 'attempt-3');
    assert.deepEqual(
      knownCompletionsNotRunAgain(
        outcome(HERE, [CLAIM, failedElsewhere, TAKEOVER]),
      ),
      [],
    );
  });

  it('judges only a job that returned: a release is not a completion', () => {
    assert.deepEqual(
      knownCompletionsNotRunAgain(
        outcome(HERE, [CLAIM, TAKEOVER], { result: 'threw' }),
      ),
      [],
    );
  });
});
