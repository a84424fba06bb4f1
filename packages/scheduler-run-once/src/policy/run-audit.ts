/** The run audit: a job that checks every job's slots (docs/how-it-works.md, "The run audit"). */
import type { JobContext, JobRun } from '../core/job-context.ts';
import type { Logger } from '../core/logger.ts';
import type { Scope } from '../core/run-key.ts';
import type { DeclaredJob, JobDeclaration } from './job-declaration.ts';
import type { MissedRunCheck } from './missed-runs.ts';

/** The `run` every audit is declared with: it marks the job; the function runs {@link auditRun}. */
const AUDIT_RUN: JobRun = () => {
  throw new Error(
    'the run audit runs only inside the scheduled-job function, which hands it the declared jobs and the run history',
  );
};

/**
 * Declares the run audit (as `src/jobs.ts` does), a job without `run` and `overlap`: the function
 * supplies `run`, with the declared jobs and the run history; called anywhere else, it throws.
 */
export function defineAuditJob(
  declaration: Omit<JobDeclaration, 'run' | 'overlap'>,
): JobDeclaration {
  return { ...declaration, overlap: 'allow', run: AUDIT_RUN };
}

/** Whether `job` was declared with {@link defineAuditJob}. */
export function isAuditJob(job: Pick<DeclaredJob, 'run'>): boolean {
  return job.run === AUDIT_RUN;
}

/**
 * An audit's run: {@link MissedRunCheck.check} for every job in turn in `scope`, reporting to
 * `logger` (not bound to the audit's job name). A failed check does not stop the others.
 * @throws Error naming each job whose check failed, so Scheduler retries the run.
 */
export function auditRun(
  check: MissedRunCheck,
  jobs: readonly DeclaredJob[],
  scope: Scope,
  logger: Logger,
): (ctx: JobContext) => Promise<void> {
  return async (ctx) => {
    const failed: string[] = [];
    let reported = 0;
    for (const job of jobs) {
      ctx.signal.throwIfAborted();
      try {
        reported += (await check.check(job, scope, logger)).reported;
      } catch (err) {
        failed.push(
          `${job.id} (${err instanceof Error ? err.message : String(err)})`,
        );
      }
    }
    ctx.logger.info(
      { jobs: jobs.length, reported, failed: failed.length },
      'run audit done',
    );
    if (failed.length > 0) {
      throw new Error(`the missed-run check failed for ${failed.join(', ')}`);
    }
  };
}
