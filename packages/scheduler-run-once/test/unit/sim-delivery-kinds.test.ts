/**
 * The simulator's invariant 5 (`test/sim/invariants.ts`, `deliveriesRunAsSent`) on hand-built
 * executions: each delivery runs as what it was sent as. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { slotRunId } from '../../src/policy/run-history.ts';
import { deliveriesRunAsSent } from '../sim/invariants.ts';
import type { Execution, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

const outcome = (executions: Execution[]): SimOutcome =>
  ({
    executions,
    deployments: [{ scope: '', keyScope: [], revisions: [] }],
  }) as unknown as SimOutcome;

const context = {
  jobName: 'job-0',
  firstClaimedAt: 60_000,
  leaseExpires: 120_000,
  slot: 60_000,
};
const slotRun = slotRunId('job-0', new Date(60_000), []);

describe('invariant 5: each delivery runs as what it was sent as', () => {
  it('passes a slot, a catch-up with caughtUp, a manual run and a re-run of its slot', () => {
    const runs = [
      execution({ context }),
      execution({ source: 'catchup', context: { ...context, caughtUp: true } }),
      execution({ source: 'manual', kind: 'manual', context }),
      execution({
        source: 'rerun',
        kind: 'rerun',
        context: { ...context, rerunOf: slotRun },
      }),
    ];

    assert.deepEqual(deliveriesRunAsSent(outcome(runs)), []);
  });

  it('finds a manual trigger run as a slot, a re-run of another run, and caughtUp on the wrong delivery', () => {
    const found = deliveriesRunAsSent(
      outcome([
        execution({ source: 'manual', kind: 'slot', context }),
        execution({
          source: 'rerun',
          kind: 'rerun',
          context: { ...context, rerunOf: 'another-run' },
        }),
        execution({ context: { ...context, caughtUp: true } }),
        execution({ source: 'catchup', context }),
        execution({ source: 'backfill', kind: 'forced', context }),
      ]),
    ).join('\n');

    assert.match(found, /a manual trigger ran as a slot run/);
    assert.match(
      found,
      /a re-run ran as a rerun run of another-run, not a re-run of its slot's run/,
    );
    assert.match(found, /a scheduler delivery ran with caughtUp true/);
    assert.match(found, /a catchup delivery ran with caughtUp false/);
    assert.match(found, /a backfill delivery ran as a forced run/);
  });
});
