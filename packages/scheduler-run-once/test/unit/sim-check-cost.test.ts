/**
 * The simulator's invariant 34 (`test/sim/check-cost-invariants.ts`) on hand-built outcomes: a
 * delivery checks its job's closed slots at the first slot of an hour, and only then. No
 * simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deliveryChecksAsDocumented } from '../sim/check-cost-invariants.ts';
import type { Execution, LogLine, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

/** 01:00 UTC on the simulator's day: the first slot of its hour for an every-minute job. */
const HOUR_START = Date.UTC(2026, 0, 5, 1, 0, 0);
const CHECK_DOCUMENT = 'job-0~check';

const outcome = (
  executions: readonly Execution[],
  checkReads: ReadonlyMap<string, readonly string[]>,
  logs: readonly LogLine[] = [],
): SimOutcome =>
  ({
    emulator: false,
    executions,
    logs,
    checkReads,
    deployments: [
      {
        scope: '',
        keyScope: [],
        revisions: [{ at: 0, jobs: [{ id: 'job-0', schedule: '* * * * *' }] }],
      },
    ],
  }) as unknown as SimOutcome;

const at = (slotMs: number, attemptId: string) =>
  execution({ scheduleTime: slotMs, start: slotMs, attemptId });

describe('invariant 34: a delivery checks at the first slot of an hour, only then', () => {
  it('passes a check at 01:00 and none at 01:01', () => {
    const first = at(HOUR_START, 'a1');
    const next = at(HOUR_START + 60_000, 'a2');
    const reads = new Map([['a1', [CHECK_DOCUMENT]]]);
    assert.deepEqual(
      deliveryChecksAsDocumented(outcome([first, next], reads)),
      [],
    );
  });

  it('fails a check at 01:01 (the cost of a check on every run)', () => {
    const next = at(HOUR_START + 60_000, 'a2');
    const reads = new Map([['a2', [CHECK_DOCUMENT]]]);
    const found = deliveryChecksAsDocumented(outcome([next], reads));
    assert.equal(found.length, 1);
    assert.match(found[0] ?? '', /not the first of its hour/);
  });

  it('fails 01:00 without a check, unless its check failed or its instance died', () => {
    const first = at(HOUR_START, 'a1');
    const found = deliveryChecksAsDocumented(outcome([first], new Map()));
    assert.match(found[0] ?? '', /did not check/);
    const failed: LogLine = {
      at: HOUR_START,
      instance: first.instance,
      level: 'WARNING',
      message:
        'the missed-run check of closed slots failed; the run is not affected',
      fields: { runId: first.runId },
    };
    assert.deepEqual(
      deliveryChecksAsDocumented(outcome([first], new Map(), [failed])),
      [],
    );
    const crashed = { ...first, result: 'crashed' as const };
    assert.deepEqual(
      deliveryChecksAsDocumented(outcome([crashed], new Map())),
      [],
    );
  });

  it('judges only slot executions of the job itself: another document, a manual run', () => {
    const manual = { ...at(HOUR_START + 60_000, 'a3'), kind: 'manual' };
    const other = at(HOUR_START + 120_000, 'a4');
    const reads = new Map([
      ['a3', [CHECK_DOCUMENT]],
      ['a4', ['job-1~check']],
    ]);
    assert.deepEqual(
      deliveryChecksAsDocumented(outcome([manual, other], reads)),
      [],
    );
  });
});
