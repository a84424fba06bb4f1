/**
 * YOUR JOB GOES HERE. The work is `runJobLogic`; when it runs is `job` at the bottom. More jobs:
 * list them in `jobs.ts`. The contract (return = done, throw = retry, pass `ctx.runId` downstream
 * as the idempotency key) is `JobContext` in `core/job-context.ts`.
 */
import type { JobContext } from './core/job-context.ts';
import { defineJob } from './policy/job-declaration.ts';

/**
 * The scheduled work: replace the body with yours.
 * @throws anything, to mark the attempt failed and have Cloud Scheduler retry it.
 */
export async function runJobLogic(ctx: JobContext): Promise<void> {
  ctx.logger.info({ startedLateMs: Date.now() - ctx.scheduleTime.getTime() }, 'job started');
  // Stands in for your work: a second, cut short if this attempt must stop (ctx.signal).
  await new Promise((resolve, reject) => {
    setTimeout(resolve, 1000);
    ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
  });
  ctx.logger.info('job finished');
}

/**
 * When the job runs: `id` is the Cloud Scheduler job id (and part of every run id); `schedule` is
 * unix-cron, read in `timeZone` (default `Etc/UTC`). Retry settings and `overlap`: docs/jobs.md.
 * `npm run jobs` shows the next fire times; `./deploy.sh` creates or updates the Scheduler job.
 */
export const job = defineJob({
  id: 'scheduled-job',
  schedule: '*/5 * * * *',
  timeZone: 'Etc/UTC',
  run: runJobLogic,
});
