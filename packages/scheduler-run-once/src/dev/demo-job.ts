/**
 * The demo's job, a copy of the example job `src/job.ts` ships: it logs, then "works" for
 * `workMs`, or less if the attempt must stop (`ctx.signal`). `npm run demo` and the tests of the
 * example's behaviour (`test/unit/demo-job.test.ts`) use this copy, never the user's job, so
 * replacing `src/job.ts` changes neither.
 */
import type { JobContext } from '../core/job-context.ts';

/**
 * Logs `job started`, waits `workMs` (1000 by default) or until the attempt's signal aborts,
 * then logs `job finished`.
 *
 * @throws the signal's reason (an `AttemptAbortedError`) when the attempt must stop.
 * @example await demoJob(ctx, 50);
 */
export async function demoJob(ctx: JobContext, workMs = 1000): Promise<void> {
  ctx.logger.info(
    { startedLateMs: Date.now() - ctx.scheduleTime.getTime() },
    'job started',
  );
  await new Promise((resolve, reject) => {
    setTimeout(resolve, workMs);
    ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), {
      once: true,
    });
  });
  ctx.logger.info('job finished');
}
