/**
 * A hand-built execution of the simulator (`test/sim/simulator.ts`), for the unit tests of its
 * invariants: job-0's slot at 60 s (its run, {@link SLOT_RUN}) on `d0-i0-r0`, run from 60 s to
 * 70 s and returned, unless `fields` say otherwise.
 */
import { slotRunId } from '../../src/policy/run-history.ts';
import type { Execution } from '../sim/simulator.ts';

/** The run id of job-0's slot at 60 s without a key scope: a slot execution's run id. */
export const SLOT_RUN = slotRunId('job-0', new Date(60_000), []);

export const execution = (fields: Partial<Execution> = {}): Execution => ({
  deployment: 0,
  revision: 0,
  scope: '',
  jobId: 'job-0',
  scheduleTime: 60_000,
  kind: 'slot',
  runId: SLOT_RUN,
  attemptId: 'attempt-1',
  instance: 'd0-i0-r0',
  source: 'scheduler',
  triggerId: undefined,
  start: 60_000,
  end: 70_000,
  result: 'returned',
  pausedMs: 0,
  pauses: [],
  ...fields,
});
