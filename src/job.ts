/**
 * YOUR JOB GOES HERE: the work is `runJobLogic`, when it runs is `job`; more jobs go in `jobs.ts`.
 * The contract (return = done, throw = retry, `ctx.runId` the idempotency key): `JobContext`.
 */
import { defineJob, type JobContext } from 'scheduler-run-once';

/** The scheduled work: replace the body with yours. @throws anything, for Scheduler to retry. */
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
 * When it runs: `id` is the Cloud Scheduler job id (in every run id), `schedule` unix-cron read in
 * `timeZone`; retries, `overlap`: docs/jobs.md. `npm run jobs` shows it, `./deploy.sh` deploys it.
 */
export const job = defineJob({
  id: 'scheduled-job',
  schedule: '*/5 * * * *',
  timeZone: 'Etc/UTC',
  run: runJobLogic,
});
