/** Which schedule times a delivery may carry: docs/how-it-works.md, under that heading. Pure. */
import type { DeclaredJob } from './job-declaration.ts';
import {
  judgingDelayMs,
  longestExecutionMs,
  retryWindowMs,
} from './retry-policy.ts';
import {
  nextSlots,
  type ScheduleSpec,
  SLOT_RANGE,
  toUtcRfc3339,
} from './schedule.ts';

/** The shortest gap between the first 1,000 slots of {@link SLOT_RANGE}, ms (any instance's). */
export function shortestGapMs(job: ScheduleSpec): number | undefined {
  const slots = nextSlots(
    job,
    new Date(SLOT_RANGE.from.getTime() - 1),
    1000,
  ).map(Number);
  const gaps = slots.slice(1).map((t, i) => t - (slots[i] as number));
  return gaps.length === 0 ? undefined : Math.min(...gaps);
}

/** {@link shortestGapMs} by schedule and zone, computed once. */
const gaps = new Map<string, number | undefined>();

/** How early a delivery may be and still its slot's run, ms: `configuredMs`, ≤ half the least gap. */
export function forcedRunToleranceMs(
  job: ScheduleSpec,
  configuredMs: number,
): number {
  const key = `${job.schedule}\u0000${job.timeZone}`;
  if (!gaps.has(key)) {
    gaps.set(key, shortestGapMs(job));
  }
  const gap = gaps.get(key);
  return gap === undefined
    ? configuredMs
    : Math.min(configuredMs, Math.floor(gap / 2));
}

/** The oldest schedule time a delivery may carry at `now`: `retentionMs` back, less the tolerance. */
export function oldestAcceptedTime(
  now: Date,
  retentionMs: number,
  toleranceMs: number,
): Date {
  return new Date(
    Math.max(
      SLOT_RANGE.from.getTime(),
      now.getTime() - retentionMs + toleranceMs,
    ),
  );
}

/** The latest schedule time a delivery of `job` may carry at `now`: its next slot past the tolerance. */
export function newestAcceptedTime(
  job: ScheduleSpec,
  now: Date,
  toleranceMs: number,
): Date {
  const after = new Date(now.getTime() + toleranceMs);
  return nextSlots(job, after, 1)[0] ?? after;
}

/** Why a delivery of `job` may not carry `scheduleTime` at Firestore's `now` (what to fix), if so. */
export function scheduleTimeProblem(
  job: ScheduleSpec,
  scheduleTime: Date,
  {
    now,
    retentionMs,
    toleranceMs,
  }: { now: Date; retentionMs: number; toleranceMs: number },
): string | undefined {
  const t = scheduleTime.getTime();
  const shown = `X-CloudScheduler-ScheduleTime ${Number.isFinite(t) ? toUtcRfc3339(scheduleTime) : 'is invalid'}`;
  if (!Number.isFinite(t) || t < SLOT_RANGE.from.getTime()) {
    return `${shown} is before ${toUtcRfc3339(SLOT_RANGE.from)}: Cloud Scheduler sends the time a run was scheduled for; send a recent slot of the job.`;
  }
  const oldest = oldestAcceptedTime(now, retentionMs, toleranceMs);
  if (t < oldest.getTime()) {
    return (
      `${shown} is older than RETENTION_SECONDS (${retentionMs / 1000} s, oldest accepted ${toUtcRfc3339(oldest)}): ` +
      'its record may have been deleted by the TTL policy, so nothing shows whether it ran; the job was not run. Run it by hand as a manual run (npm run trigger -- JOB) if it must run.'
    );
  }
  // The next slot past `now` + tolerance lies later still: only a time past that bound needs it.
  if (t <= now.getTime() + toleranceMs) {
    return undefined;
  }
  const newest = newestAcceptedTime(job, now, toleranceMs);
  if (t > newest.getTime()) {
    return (
      `${shown} is after the job's next slot (${toUtcRfc3339(newest)}): Cloud Scheduler sends a slot at or after its time, and "Force run" sends the next one; ` +
      'send a slot that has come, or run the job now with npm run trigger -- JOB.'
    );
  }
  return undefined;
}

/** The cold-start check of the retention (ms): a sentence per job it does not outlast (+ tolerance). */
export function retentionProblems(
  jobs: readonly DeclaredJob[],
  retentionMs: number,
  configuredToleranceMs: number,
): string[] {
  return jobs.flatMap((job) => {
    // The tolerance is at most the configured one: no slot arithmetic needed.
    if (retentionMs > judgingDelayMs(job) + configuredToleranceMs) {
      return [];
    }
    const windowMs = retryWindowMs(job);
    const toleranceMs = forcedRunToleranceMs(job, configuredToleranceMs);
    if (retentionMs <= windowMs + toleranceMs) {
      return [
        `RETENTION_SECONDS (${retentionMs / 1000}) must exceed the retry window of job ${job.id} ` +
          `(${windowMs / 1000} s: its last retry can come that long after the schedule time) plus its forced-run tolerance (${toleranceMs / 1000} s); ` +
          "raise RETENTION_SECONDS (default 2592000, 30 days) or shorten the job's retries",
      ];
    }
    if (retentionMs > judgingDelayMs(job) + toleranceMs) {
      return [];
    }
    return [
      `RETENTION_SECONDS (${retentionMs / 1000}) must exceed the judging delay of job ${job.id} ` +
        `(${judgingDelayMs(job) / 1000} s: missed-run detection judges a slot up to twice its longest execution of ${longestExecutionMs(job) / 1000} s plus one attempt deadline after its time, judgingDelayMs) plus its forced-run tolerance (${toleranceMs / 1000} s), ` +
        "or a missed slot's absence would be judged after its record could be gone and never be reported; raise RETENTION_SECONDS or shorten the job's retries",
    ];
  });
}
