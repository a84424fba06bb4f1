/**
 * A hand-built execution of the simulator (`test/sim/simulator.ts`), for the unit tests of its
 * invariants: job-0's slot at 60 s on `d0-i0-r0`, run from 60 s to 70 s and returned, unless
 * `fields` say otherwise.
 */
import type { Execution } from '../sim/simulator.ts';

export const execution = (fields: Partial<Execution> = {}): Execution => ({
  deployment: 0,
  revision: 0,
  scope: '',
  jobId: 'job-0',
  scheduleTime: 60_000,
  kind: 'slot',
  runId: 'run-0',
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
