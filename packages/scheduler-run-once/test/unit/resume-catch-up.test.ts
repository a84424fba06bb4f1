/** `resume --catch-up`'s choice of paused slots (`ops/resume-catch-up.ts`), pure. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MAX_RESUME_CATCH_UP,
  resumeCatchUp,
} from '../../src/ops/resume-catch-up.ts';
import type { CatchUpDeclaration } from '../../src/policy/catch-up.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';

const MINUTE = 60_000;
const NOW = Date.UTC(2026, 10, 3, 12, 0, 0);
const minutesAgo = (m: number) => new Date(NOW - m * MINUTE);

function perMinute(catchUp?: CatchUpDeclaration) {
  const declared = defineJob({
    id: 'tick',
    schedule: '* * * * *',
    run: () => {},
    ...(catchUp === undefined ? {} : { catchUp }),
  });
  return validateJobs([declared])[0] as ReturnType<typeof validateJobs>[0];
}

const iso = (dates: readonly Date[]) => dates.map((d) => d.toISOString());

describe('resume --catch-up: which paused slots run', () => {
  it('"latest" (the default) delivers only the newest paused slot, and counts the rest left', () => {
    const pause = { pausedAt: minutesAgo(10.5), resumedAt: minutesAgo(0.5) };
    const plan = resumeCatchUp(perMinute(), pause, new Date(NOW));
    assert.deepEqual(iso(plan.slots), iso([minutesAgo(1)]));
    assert.equal(plan.left, 9);
  });

  it('"all" delivers each paused slot oldest first, within the window only', () => {
    const job = perMinute({ slots: 'all', windowSeconds: 300 });
    const pause = { pausedAt: minutesAgo(10.5), resumedAt: minutesAgo(0.5) };
    const plan = resumeCatchUp(job, pause, new Date(NOW));
    assert.deepEqual(
      iso(plan.slots),
      iso([
        minutesAgo(5),
        minutesAgo(4),
        minutesAgo(3),
        minutesAgo(2),
        minutesAgo(1),
      ]),
    );
    assert.equal(plan.left, 5, 'older than the window: left paused');
  });

  it('"all" delivers at most the newest hundred', () => {
    const job = perMinute({ slots: 'all', windowSeconds: 86_400 });
    const pause = { pausedAt: minutesAgo(300.5), resumedAt: minutesAgo(0.5) };
    const plan = resumeCatchUp(job, pause, new Date(NOW));
    assert.equal(plan.slots.length, MAX_RESUME_CATCH_UP);
    assert.equal(plan.slots.at(-1)?.toISOString(), minutesAgo(1).toISOString());
    assert.equal(plan.left, 300 - MAX_RESUME_CATCH_UP);
  });

  it('delivers nothing for a pause that held no slot', () => {
    const pause = { pausedAt: minutesAgo(0.9), resumedAt: minutesAgo(0.2) };
    const plan = resumeCatchUp(perMinute(), pause, new Date(NOW));
    assert.deepEqual(plan, { slots: [], left: 0 });
  });
});
