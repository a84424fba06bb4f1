/**
 * Declarations under which `catchUp` cannot do what it says, told once when an instance starts
 * (docs/jobs.md, "Catch-up"): no run audit to catch up, or a slot reported missed before the
 * audit can find it late.
 */
import { lateGraceMs } from './catch-up.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { isAuditJob } from './run-audit.ts';
import { slotsBetween } from './schedule.ts';
import { closedAfterMs } from './slot-verdict.ts';

/** The log message (WARNING) of each {@link catchUpWarnings} problem. */
export const CATCH_UP_UNREACHABLE = 'catch-up cannot run';

/** How far ahead the audit's gaps are read, ms: a day shows every daily pattern. */
const GAP_HORIZON_MS = 86_400_000;

/** The longest gap between the audit's slots in the day after `now`, ms; `undefined`: none. */
function longestAuditGapMs(audit: DeclaredJob, now: Date): number | undefined {
  const until = new Date(now.getTime() + GAP_HORIZON_MS);
  const { slots } = slotsBetween(audit, now, until, 2_000);
  let longest: number | undefined;
  for (let i = 1; i < slots.length; i++) {
    const gap = (slots[i] as Date).getTime() - (slots[i - 1] as Date).getTime();
    longest = Math.max(longest ?? 0, gap);
  }
  return longest;
}

/**
 * What stops each job's `catchUp` among `jobs` at `now`, one sentence each (`[]`: nothing):
 * - no run audit is declared: nothing ever catches a slot up;
 * - the job's grace plus the longest gap between audits reaches its closing delay (retry window
 *   plus attempt deadline): the missed-run check reports a late slot missed before an audit finds
 *   it late, and a reported slot is never caught up.
 */
export function catchUpWarnings(
  jobs: readonly DeclaredJob[],
  now: Date,
): { readonly jobName: string; readonly problem: string }[] {
  const audit = jobs.find((job) => isAuditJob(job));
  const warnings: { jobName: string; problem: string }[] = [];
  for (const job of jobs) {
    if (job.catchUp === undefined) {
      continue;
    }
    if (audit === undefined) {
      warnings.push({
        jobName: job.id,
        problem: `${job.id} declares catchUp, but no run audit is declared: add defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' }) to jobs, or nothing catches its slots up`,
      });
      continue;
    }
    const gapMs = longestAuditGapMs(audit, now) ?? 0;
    const foundLateMs = lateGraceMs(job) + gapMs;
    const closedMs = closedAfterMs(job);
    if (foundLateMs >= closedMs) {
      warnings.push({
        jobName: job.id,
        problem: `${job.id}: a slot Scheduler never delivered is reported missed ${closedMs / 1000} s after its time (retry window plus attempt deadline), but the run audit may find it late only ${foundLateMs / 1000} s after it (catchUp.graceSeconds plus the longest gap between audits, ${gapMs / 1000} s), and a reported slot is never caught up: lower graceSeconds, run the audit more often, or raise retryCount, maxRetryDurationSeconds or attemptDeadlineSeconds`,
      });
    }
  }
  return warnings;
}
