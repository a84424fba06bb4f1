/**
 * What `npm run jobs` prints, as pure functions of the declared jobs: a table for people, JSON for
 * programs, and the tab-separated lines `deploy.sh` reads.
 */

import type { JobInfo } from '../core/job-context.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { judgingDelayMs, retryWindowMs } from '../policy/retry-policy.ts';
import { nextSlots, toUtcRfc3339 } from '../policy/schedule.ts';
import { toZonedRfc3339 } from './slots.ts';
import { formatTable } from './table.ts';

/** A job and its next fire times. */
export interface Upcoming extends JobInfo {
  /** The next slots, ascending (UTC instants). */
  readonly next: readonly Date[];
}

/** How many fire times `npm run jobs -- --count N` shows at most (`MAX_COUNT`) and by default. */
export const COUNT = { default: 3, max: 1000 } as const;

/**
 * Reads `--count`: a whole number from 1 to {@link COUNT}`.max`, so a listing stays bounded.
 *
 * @throws Error saying what to write, for anything else.
 * @example parseCount('10') // 10
 */
export function parseCount(text: string): number {
  if (
    !/^\d{1,4}$/.test(text.trim()) ||
    Number(text) < 1 ||
    Number(text) > COUNT.max
  ) {
    throw new Error(
      `--count "${text}" is not a whole number from 1 to ${COUNT.max}, e.g. --count 10`,
    );
  }
  return Number(text);
}

/**
 * Each job with its next `count` fire times strictly after `after`.
 *
 * @example upcoming(validateJobs(jobs), new Date(), 3)
 */
export function upcoming(
  jobs: readonly DeclaredJob[],
  after: Date,
  count: number = COUNT.default,
): Upcoming[] {
  return jobs.map((job) => ({
    id: job.id,
    schedule: job.schedule,
    timeZone: job.timeZone,
    next: nextSlots(job, after, count),
  }));
}

/**
 * `[{ "id", "schedule", "timeZone", "next": ["2026-10-16T12:00:00Z", …], "nextLocal":
 * ["2026-10-16T14:00:00+02:00", …] }]`, pretty-printed: `next` in RFC 3339 UTC as Scheduler sends
 * it in `X-CloudScheduler-ScheduleTime`, `nextLocal` the same instants in the job's zone with
 * their offset, which shows a daylight-saving change (`+01:00` then `+02:00`).
 *
 * @example JSON.parse(jobsJson(upcoming(jobs, new Date('2026-03-29T00:30:00Z'), 2)))[0].nextLocal
 * // ['2026-03-29T01:00:00+01:00', '2026-03-29T03:00:00+02:00'] for an hourly job in Europe/Berlin
 */
export function jobsJson(jobs: readonly Upcoming[]): string {
  return JSON.stringify(
    jobs.map(({ id, schedule, timeZone, next }) => ({
      id,
      schedule,
      timeZone,
      next: next.map(toUtcRfc3339),
      nextLocal: next.map((t) => toZonedRfc3339(t, timeZone)),
    })),
    null,
    2,
  );
}

/**
 * A table: one row per fire time, the job's id, schedule and zone on its first row, each time in UTC
 * and in the job's zone (with its offset, which shows daylight saving time).
 *
 * @example
 * // JOB            SCHEDULE     TIME ZONE      NEXT (UTC)            NEXT (LOCAL)
 * // nightly-report  0 2 * * *    Europe/Berlin  2026-10-25T00:00:00Z  2026-10-25T02:00:00+02:00
 */
export function jobsTable(jobs: readonly Upcoming[]): string {
  const rows: string[][] = [
    ['JOB', 'SCHEDULE', 'TIME ZONE', 'NEXT (UTC)', 'NEXT (LOCAL)'],
  ];
  for (const job of jobs) {
    const times = job.next.length > 0 ? job.next : [undefined];
    for (const [i, t] of times.entries()) {
      const first = i === 0;
      rows.push([
        first ? job.id : '',
        first ? job.schedule : '',
        first ? job.timeZone : '',
        t === undefined ? '(never again)' : toUtcRfc3339(t),
        t === undefined ? '' : toZonedRfc3339(t, job.timeZone),
      ]);
    }
  }
  return formatTable(rows);
}

/** The fields of each line of {@link deployLines}, in order. */
export const DEPLOY_FIELDS = [
  'id',
  'schedule',
  'timeZone',
  'attemptDeadlineSeconds',
  'retryCount',
  'maxRetryDurationSeconds',
  'minBackoffSeconds',
  'maxBackoffSeconds',
  'maxDoublings',
] as const satisfies readonly (keyof DeclaredJob)[];

/** The last field of a {@link deployLines} line for a job without `catchUp`. */
export const NO_CATCH_UP = 'none';

/**
 * One line per job, its {@link DEPLOY_FIELDS} separated by tabs, then its retry window and its
 * judging delay in whole seconds (`retryWindowMs` and `judgingDelayMs` of
 * `src/policy/retry-policy.ts`, rounded up: the formulas the function checks `RETENTION_SECONDS`
 * against at cold start, which `deploy.sh` checks it against too), then its `catchUp.slots` or
 * {@link NO_CATCH_UP} (with catch-up, `deploy.sh` lets the runtime account invoke the function),
 * for `deploy.sh` to read with `IFS=$'\t' read -r`. Safe without quoting: validated ids, zones and
 * schedules hold no tab or newline (schedules have one space between fields), and the rest are
 * whole numbers or words.
 */
export function deployLines(jobs: readonly DeclaredJob[]): string {
  return jobs
    .map((job) =>
      [
        ...DEPLOY_FIELDS.map((field) => String(job[field])),
        String(Math.ceil(retryWindowMs(job) / 1000)),
        String(Math.ceil(judgingDelayMs(job) / 1000)),
        job.catchUp?.slots ?? NO_CATCH_UP,
      ].join('\t'),
    )
    .join('\n');
}

/**
 * The fields of a {@link deployLines} line after {@link DEPLOY_FIELDS}: retry window, judging
 * delay, catch-up.
 */
const DERIVED_FIELDS = 3;

/**
 * Reads {@link deployLines} back into each job's settings, without its `run`: what a process that
 * schedules the jobs but must not import them needs (`npm run dev` re-reads them after every edit
 * through `node ops/jobs.ts --deploy`, since Node caches imported modules).
 *
 * @throws {Error} for a line without every field or with a setting that is not a whole number.
 * @example parseDeployLines('every-five\t*\/5 * * * *\tEtc/UTC\t180\t3\t3600\t30\t600\t5\t3570\t7740\tnone')[0].retryCount // 3
 */
export function parseDeployLines(
  text: string,
): Pick<DeclaredJob, (typeof DEPLOY_FIELDS)[number]>[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const values = line.split('\t');
      // The fields, then the retry window, judging delay and catch-up (deploy.sh's; not read back).
      const expected = DEPLOY_FIELDS.length + DERIVED_FIELDS;
      if (values.length !== expected) {
        throw new Error(`expected ${expected} tab-separated fields: ${line}`);
      }
      const [id = '', schedule = '', timeZone = '', ...numbers] = values.slice(
        0,
        DEPLOY_FIELDS.length,
      );
      const settings = numbers.map((value) => {
        if (!/^\d+$/.test(value)) {
          throw new Error(`"${value}" is not a whole number: ${line}`);
        }
        return Number(value);
      });
      const [
        attemptDeadlineSeconds = 0,
        retryCount = 0,
        maxRetryDurationSeconds = 0,
        minBackoffSeconds = 0,
        maxBackoffSeconds = 0,
        maxDoublings = 0,
      ] = settings;
      return {
        id,
        schedule,
        timeZone,
        attemptDeadlineSeconds,
        retryCount,
        maxRetryDurationSeconds,
        minBackoffSeconds,
        maxBackoffSeconds,
        maxDoublings,
      };
    });
}
