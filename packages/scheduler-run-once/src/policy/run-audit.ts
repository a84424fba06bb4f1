/** The run audit: a job that checks every job's slots (docs/how-it-works.md, "The run audit"). */
import type { JobContext, JobRun } from '../core/job-context.ts';
import type { Logger } from '../core/logger.ts';
import type { Scope } from '../core/run-key.ts';
import type { DeclaredJob, JobDeclaration } from './job-declaration.ts';
import {
  type CatchUpSender,
  type LateRunScan,
  notDeliveredReason,
} from './late-runs.ts';
import type { MissedRunCheck } from './missed-runs.ts';
import type { PausesRead } from './pauses.ts';

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
  declaration: Omit<JobDeclaration, 'run' | 'overlap' | 'catchUp'>,
): JobDeclaration {
  // The audit catches up the other jobs; one that caught itself up would audit twice a slot.
  const { catchUp: _notForTheAudit, ...audit } = declaration as JobDeclaration;
  return { ...audit, overlap: 'allow', run: AUDIT_RUN };
}

/** Whether `job` was declared with {@link defineAuditJob}. */
export function isAuditJob(job: Pick<DeclaredJob, 'run'>): boolean {
  return job.run === AUDIT_RUN;
}

/** The audit's two checks of every job: missed runs (closed slots), and late runs (recent ones). */
export interface AuditChecks {
  readonly missedRuns: MissedRunCheck;
  readonly lateRuns: LateRunScan;
  /** Delivers a late slot of a job with `catchUp`; without it, late slots are only logged. */
  readonly send?: CatchUpSender;
}

/**
 * An audit's run: for every job in turn in `scope`, {@link MissedRunCheck.check}, then
 * {@link LateRunScan.scan}, reporting to `logger` (not bound to the audit's job name). A failed
 * check does not stop the others.
 * @throws Error naming each job whose check failed, so Scheduler retries the run.
 */
export function auditRun(
  checks: AuditChecks,
  jobs: readonly DeclaredJob[],
  scope: Scope,
  logger: Logger,
): (ctx: JobContext) => Promise<void> {
  return async (ctx) => {
    const failed: string[] = [];
    const counts = { reported: 0, late: 0, caughtUp: 0 };
    for (const job of jobs) {
      ctx.signal.throwIfAborted();
      const problems = await auditJob(checks, job, scope, logger, counts);
      failed.push(...problems.map((problem) => `${job.id} (${problem})`));
    }
    ctx.logger.info(
      { jobs: jobs.length, ...counts, failed: failed.length },
      'run audit done',
    );
    if (failed.length > 0) {
      throw new Error(`the run audit failed for ${failed.join(', ')}`);
    }
  };
}

/** One job's two checks, counted into `counts`; each failure's message, for the audit's error. */
async function auditJob(
  checks: AuditChecks,
  job: DeclaredJob,
  scope: Scope,
  logger: Logger,
  counts: { reported: number; late: number; caughtUp: number },
): Promise<string[]> {
  const problems: string[] = [];
  const why = (err: unknown) =>
    err instanceof Error ? err.message : String(err);
  // The pauses the check read: the scan needs them too, and need not read them again.
  let pauses: PausesRead | undefined;
  try {
    const checked = await checks.missedRuns.check(job, scope, logger);
    counts.reported += checked.reported;
    pauses = checked.pauses;
  } catch (err) {
    problems.push(`missed-run check: ${why(err)}`);
  }
  try {
    const scanned = await checks.lateRuns.scan(
      job,
      scope,
      logger,
      checks.send,
      pauses,
    );
    counts.late += scanned.late;
    const sent = scanned.caughtUp?.sent;
    // Counted only when it reached the run: a refused one is its own warning.
    const delivered =
      sent !== undefined && notDeliveredReason(sent) === undefined;
    counts.caughtUp += delivered ? 1 : 0;
  } catch (err) {
    problems.push(`late-run scan: ${why(err)}`);
  }
  return problems;
}
