/**
 * The jobs this function runs, in one list. Each is a Cloud Scheduler job of its own (its id, its
 * schedule, its time zone, its retry settings), all calling this one function; the delivery's
 * `X-CloudScheduler-JobName` says which job's `run` to call. `deploy.sh` and `npm run jobs` read
 * this list; the function validates it at cold start.
 *
 * To add a job, declare it with `defineJob` (here, or in a file of its own that you import) and put
 * it in the list. Ids must be unique. Removing a job from the list does not delete its Scheduler job:
 * `./deploy.sh` reports it, and `./deploy.sh --prune` deletes it.
 */
import { job } from './job.ts';
import type { JobDeclaration } from './policy/job-declaration.ts';
import { defineAuditJob } from './policy/run-audit.ts';

export const jobs: readonly JobDeclaration[] = [
  job,
  // The run audit: every 5 minutes it checks every job here for missed and finally failed slots,
  // including jobs whose Scheduler job stopped delivering, so a missed slot is reported within
  // 10 minutes of its window closing (docs/operations.md; remove it to check only hourly).
  defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' }),
  // A second job, e.g. a report at 02:00 Berlin time on weekdays:
  //
  // defineJob({                          // import { defineJob } from './policy/job-declaration.ts';
  //   id: 'nightly-report',
  //   schedule: '0 2 * * MON-FRI',
  //   timeZone: 'Europe/Berlin',
  //   retryCount: 5,                     // Scheduler's settings, defaults in job-declaration.ts
  //   run: async (ctx) => {
  //     const res = await fetch('https://reports.example.com/nightly', {
  //       method: 'POST',
  //       headers: { 'Idempotency-Key': ctx.runId },
  //       signal: ctx.signal,
  //     });
  //     if (!res.ok) throw new Error(`reports answered ${res.status}`);
  //   },
  // }),
];
