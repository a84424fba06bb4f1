/**
 * The simulator's invariant 50 (`test/sim/fenced-write-invariants.ts`, `fencedWriteResultsTrue`)
 * on hand-built outcomes: an answer's `release` (or `completion`) says `recorded` only if a write
 * leaving the record in that status under its attempt landed, and `lease_lost` only if no such
 * write of its own request did. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fencedWriteResultsTrue } from '../sim/fenced-write-invariants.ts';
import type { LogLine, RecordWrite, SimOutcome } from '../sim/simulator.ts';
import { execution, SLOT_RUN } from './sim-execution.ts';

const ATTEMPT = 'attempt-1';

/** The answer line of the attempt's delivery at 70 s, its release as `release` says. */
function answer(release: string): LogLine {
  return {
    at: 70_000,
    instance: 'd0-i0-r0',
    level: 'ERROR',
    message: 'scheduled run: failed',
    fields: { outcome: 'failed', attemptId: ATTEMPT, release },
  };
}

/** A write at 65 s leaving the record failed under the attempt, sent by `sentBy`'s request. */
function failedWrite(sentBy?: string): RecordWrite {
  return {
    at: 65_000,
    machine: 'd0-i0-r0',
    runId: SLOT_RUN,
    status: 'failed',
    attemptId: ATTEMPT,
    ...(sentBy === undefined ? {} : { sentBy }),
  };
}

function outcome(line: LogLine, recordWrites: RecordWrite[]): SimOutcome {
  return {
    emulator: false,
    executions: [
      execution({ attemptId: ATTEMPT, start: 61_000, result: 'threw' }),
    ],
    logs: [line],
    recordWrites,
  } as unknown as SimOutcome;
}

describe('invariant 50: an answer says what became of its completion or release', () => {
  it('passes a release said recorded whose own write landed, and fails one said recorded with none', () => {
    assert.deepEqual(
      fencedWriteResultsTrue(
        outcome(answer('recorded'), [failedWrite(ATTEMPT)]),
      ),
      [],
    );
    const found = fencedWriteResultsTrue(outcome(answer('recorded'), []));
    assert.equal(found.length, 1);
    assert.match(found[0] ?? '', /says its release was recorded, but no write/);
  });

  it('takes a check’s write ending the attempt’s lapsed lease failed for recorded', () => {
    assert.deepEqual(
      fencedWriteResultsTrue(
        outcome(answer('recorded'), [failedWrite('another-request')]),
      ),
      [],
    );
  });

  it('fails a release said lease_lost whose own write landed, and passes one whose record only a check wrote', () => {
    const found = fencedWriteResultsTrue(
      outcome(answer('lease_lost'), [failedWrite(ATTEMPT)]),
    );
    assert.equal(found.length, 1);
    assert.match(found[0] ?? '', /found the lease lost, but its own write/);

    assert.deepEqual(
      fencedWriteResultsTrue(
        outcome(answer('lease_lost'), [failedWrite('another-request')]),
      ),
      [],
    );
  });

  it('lets a release say lease_lost when a retry claimed after its own write and failed in turn (a takeover reads the same)', () => {
    const claimed: RecordWrite = {
      at: 66_000,
      machine: 'd0-i1-r0',
      runId: SLOT_RUN,
      status: 'in_progress',
      attemptId: 'attempt-2',
    };
    const failedInTurn: RecordWrite = {
      ...claimed,
      at: 68_000,
      status: 'failed',
      sentBy: 'attempt-2',
    };
    assert.equal(
      fencedWriteResultsTrue(
        outcome(answer('lease_lost'), [failedWrite(ATTEMPT), claimed]),
      ).length,
      1,
      'one retry holding the run after its failure: the release was recorded',
    );
    assert.deepEqual(
      fencedWriteResultsTrue(
        outcome(answer('lease_lost'), [
          failedWrite(ATTEMPT),
          claimed,
          failedInTurn,
        ]),
      ),
      [],
    );
  });

  it('does not judge an unrecorded write, nor a write that landed before the job started', () => {
    assert.deepEqual(
      fencedWriteResultsTrue(outcome(answer('unrecorded'), [])),
      [],
    );
    const early = { ...failedWrite(ATTEMPT), at: 60_000 };
    assert.equal(
      fencedWriteResultsTrue(outcome(answer('recorded'), [early])).length,
      1,
    );
  });
});
