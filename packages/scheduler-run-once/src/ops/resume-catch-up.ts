/**
 * `run-once resume JOB --catch-up`: after a resume, delivers the paused range's slots by the job's
 * catch-up policy (`catchUp`, or its defaults when the job declares none), marked as the run
 * audit marks its own deliveries (`X-Run-Once-Catch-Up: true`), one at a time, each waited for.
 * A plain resume runs nothing.
 */
import { CATCH_UP_HEADER } from '../function/scheduler-request.ts';
import { CATCH_UP_DEFAULTS } from '../policy/catch-up.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import type { Pause } from '../policy/pauses.ts';
import { slotsBetween, toUtcRfc3339 } from '../policy/schedule.ts';
import {
  answerLine,
  type DeliveryTarget,
  deliver,
  schedulerHeaders,
} from './deliver.ts';

/** The most slots one `resume --catch-up` delivers (the newest; the rest stay paused). */
export const MAX_RESUME_CATCH_UP = 100;

/** What `resume --catch-up` delivers, oldest first, and how many paused slots it leaves. */
export interface ResumeCatchUp {
  readonly slots: readonly Date[];
  readonly left: number;
}

/**
 * The paused slots to deliver at `now` (pure): those of the pause within the job's catch-up window
 * of `now`; `latest` keeps only the newest, `all` each (at most {@link MAX_RESUME_CATCH_UP}).
 */
export function resumeCatchUp(
  job: DeclaredJob,
  pause: Pick<Pause, 'pausedAt' | 'resumedAt'>,
  now: Date,
): ResumeCatchUp {
  const policy = job.catchUp ?? CATCH_UP_DEFAULTS;
  const windowStart = now.getTime() - policy.windowSeconds * 1000;
  const from = new Date(Math.max(pause.pausedAt.getTime(), windowStart));
  const to = pause.resumedAt ?? now;
  const paused = pausedSlots(job, pause, to);
  const inWindow = from < to ? slotsBetween(job, from, to).slots : [];
  const newest =
    policy.slots === 'latest'
      ? inWindow.slice(-1)
      : inWindow.slice(-MAX_RESUME_CATCH_UP);
  return { slots: newest, left: paused - newest.length };
}

/** How many slots the pause held (counted up to the schedule library's limit). */
function pausedSlots(
  job: DeclaredJob,
  pause: Pick<Pause, 'pausedAt'>,
  to: Date,
): number {
  if (pause.pausedAt >= to) {
    return 0;
  }
  return slotsBetween(job, pause.pausedAt, to).slots.length;
}

/** What the deliveries need: where to, and the key scope's headers and query parameters. */
export interface CatchUpTarget {
  readonly target: DeliveryTarget;
  readonly scope: {
    readonly headers: Readonly<Record<string, string>>;
    readonly query: Readonly<Record<string, string>>;
  };
}

/**
 * Delivers `plan`'s slots in order, each answer printed; resolves to how many the function
 * answered with an error status (a 409 `in_progress` or `waiting` counts: the slot did not run).
 * @throws {CommandError} if the function cannot be reached.
 */
export async function deliverResumeCatchUp(
  job: DeclaredJob,
  plan: ResumeCatchUp,
  how: CatchUpTarget,
): Promise<number> {
  const policy = job.catchUp === undefined ? ' (catchUp defaults)' : '';
  console.log(
    `resume --catch-up: ${plan.slots.length} paused slot(s) of ${job.id} to deliver${policy}; ${plan.left} left paused`,
  );
  let failed = 0;
  for (const slot of plan.slots) {
    const headers = schedulerHeaders(job.id, slot, {
      ...how.scope.headers,
      [CATCH_UP_HEADER]: 'true',
    });
    const answer = await deliver(how.target, headers, how.scope.query);
    console.log(answerLine(`catch-up ${toUtcRfc3339(slot)}`, answer));
    if (answer.status >= 400) {
      failed++;
    }
  }
  return failed;
}
