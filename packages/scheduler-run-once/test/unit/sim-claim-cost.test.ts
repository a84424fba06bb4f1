/**
 * The simulator's invariant 48 (`test/sim/claim-cost-invariants.ts`, `claimsCostNoRead`) on
 * hand-built outcomes: a claim that landed as a create and was answered in time costs no read of
 * its run's record before the job starts. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimsCostNoRead } from '../sim/claim-cost-invariants.ts';
import type {
  Delivered,
  DeliveryOp,
  RecordWrite,
  SimOutcome,
} from '../sim/simulator.ts';
import { execution, SLOT_RUN } from './sim-execution.ts';

const PATH = `runs/${SLOT_RUN}`;

/** The create the request sent at 60.01 s, and what else `ops` adds. */
const create = (troubled = false): DeliveryOp => ({
  at: 60_010,
  kind: 'create',
  paths: [PATH],
  troubled,
});
const read: DeliveryOp = {
  at: 60_050,
  kind: 'get',
  paths: [PATH],
  troubled: false,
};

/** The create that landed, by the instance that ran the job. */
const landed: RecordWrite = {
  at: 60_020,
  machine: 'd0-i0-r0',
  runId: SLOT_RUN,
  status: 'in_progress',
};

/** An outcome of one execution (started at 60 s… 61 s here), its request's `ops` and these writes. */
function outcome(ops: DeliveryOp[], recordWrites: RecordWrite[]): SimOutcome {
  const delivered = {
    instance: 'd0-i0-r0',
    ranAs: 'attempt-1',
    ops,
  } as unknown as Delivered;
  return {
    emulator: false,
    executions: [execution({ start: 61_000 })],
    deliveries: [delivered],
    recordWrites,
  } as unknown as SimOutcome;
}

describe('invariant 48: a claim answered in time costs no read', () => {
  it('passes a create followed by the job, and fails one followed by a read of the record', () => {
    assert.deepEqual(claimsCostNoRead(outcome([create()], [landed])), []);

    const found = claimsCostNoRead(outcome([create(), read], [landed]));

    assert.equal(found.length, 1, found.join('\n'));
    assert.match(
      found[0] ?? '',
      /invariant 48: job-0@.* read its run's record at .*after its own create landed and was answered in time/,
    );
  });

  it('leaves a read alone after a create a fault met, one another request beat, or a takeover', () => {
    const other = { ...landed, machine: 'd0-i1-r0' };
    const before = { ...landed, at: 50_000, status: 'failed' };

    assert.deepEqual(
      claimsCostNoRead(outcome([create(true), read], [landed])),
      [],
    );
    assert.deepEqual(claimsCostNoRead(outcome([create(), read], [other])), []);
    assert.deepEqual(
      claimsCostNoRead(outcome([create(), read], [before, landed])),
      [],
    );
  });

  it("leaves a read alone after a create that met its own instance's `missed` record (stop 74, seed 6, the 217th)", () => {
    // A backfill's claim sent as the same instance's missed-run check wrote the slot's report: the
    // check's write landed first, the create met it, read it and took the run over.
    const missed = { ...landed, at: 60_012, status: 'missed' };
    const takeover = { ...landed, at: 60_060 };

    assert.deepEqual(
      claimsCostNoRead(outcome([create(), read], [missed, takeover])),
      [],
    );
  });

  it('leaves a read alone after a guarded create that failed and was sent again before the record landed (seed 1329802691, path 52)', () => {
    // Two backfill deliveries of one `wait` slot: this request's first commit (claim and lock) met
    // the other's lock write and failed; it read both documents and committed again, which landed.
    const commit = (at: number): DeliveryOp => ({
      at,
      kind: 'commit',
      paths: [PATH, 'runs_jobs/job-0~overlap'],
      troubled: false,
    });
    const lockRead: DeliveryOp = { ...read, at: 60_015, kind: 'getAll' };
    const secondLanded = { ...landed, at: 60_040 };
    const ops = [commit(60_010), lockRead, commit(60_030)];

    assert.deepEqual(claimsCostNoRead(outcome(ops, [secondLanded])), []);
    // The same read after a commit that was not sent again is a read on every run.
    const found = claimsCostNoRead(
      outcome([commit(60_010), lockRead], [{ ...landed, at: 60_012 }]),
    );
    assert.equal(found.length, 1, found.join('\n'));
  });
});
