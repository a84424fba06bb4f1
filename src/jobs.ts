/**
 * The jobs this function runs, each its own Scheduler job: add a `defineJob(…)` with a unique id
 * (docs/jobs.md, "Several jobs in one function"); a removed one stays until `./deploy.sh --prune`.
 */

import { defineAuditJob, type JobDeclaration } from 'scheduler-run-once';
import { job } from './job.ts';

export const jobs: readonly JobDeclaration[] = [
  job,
  // The run audit: every 5 minutes it checks every job here for missed and finally failed slots,
  // even when a job's deliveries stopped (docs/operations.md; remove it to check only hourly).
  defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' }),
];
