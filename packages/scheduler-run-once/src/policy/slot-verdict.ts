/**
 * When a slot's window closes and what the missed-run check decides about it (the timeline:
 * docs/operations.md, "When a slot is judged, and by whom"; why: docs/how-it-works.md).
 */
import {
  isLeaseLive,
  judgedAt,
  type StoredRecord,
} from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { longestExecutionMs, retryWindowMs } from './retry-policy.ts';

/**
 * The earliest a check reads a slot after its time, ms: retry window + attempt deadline (default
 * 3750 s). Its verdict may come later ({@link slotVerdict} waits for the longest execution); the
 * cursors store this boundary (`closed_after_ms`), so it stays as older versions wrote it.
 */
export function closedAfterMs(job: DeclaredJob): number {
  return retryWindowMs(job) + job.attemptDeadlineSeconds * 1000;
}

/**
 * How long after its execution began a slot is closed to the missed-run check, ms: the execution's
 * longest run ({@link longestExecutionMs}) and one attempt deadline more (default 3960 s). `runs`
 * judges a slot missed, or its failure final, from the same moment (src/ops/slot-history.ts).
 */
export function executionClosedMs(job: DeclaredJob): number {
  return longestExecutionMs(job) + job.attemptDeadlineSeconds * 1000;
}

/**
 * When Scheduler's own execution of `slot` began, ms, as far as the records tell: at its first
 * claim, or, if a Force run's retry made that claim (nothing tells), when the execution
 * outstanding at the slot ended (`previousEnd`; `-Infinity` when unknown); never before the slot,
 * and at most one longest execution after it (Scheduler dispatches the slot once the execution
 * before it ended). Issue 40.
 */
export function executionStartMs(
  job: DeclaredJob,
  slot: Date,
  firstClaimedAt: Date | undefined,
  previousEnd: number,
): number {
  const s = slot.getTime();
  return Math.min(
    s + longestExecutionMs(job),
    Math.max(s, previousEnd, firstClaimedAt?.getTime() ?? previousEnd),
  );
}

/**
 * A slot's verdict at `now`, after an execution that ended by `previousEnd` (ms): `final` (nothing
 * to report), `open` (an attempt may still come: judge it later), `running` (closed, but its run
 * still holds a live lease: judge it later, and the slots after it now), `missed` / `failed`
 * (report it); `end`: the latest its execution ended, ms.
 */
export function slotVerdict(
  job: DeclaredJob,
  slot: Date,
  record: StoredRecord | undefined,
  previousEnd: number,
  now: Date,
): {
  readonly verdict: 'final' | 'open' | 'running' | 'missed' | 'failed';
  readonly end: number;
} {
  const run = record?.status === 'unreadable' ? undefined : record;
  const start = executionStartMs(job, slot, run?.firstClaimedAt, previousEnd);
  const latestEnd = start + longestExecutionMs(job);
  if (run?.status === 'completed') {
    return {
      verdict: 'final',
      end: Math.min(run.completedAt?.getTime() ?? latestEnd, latestEnd),
    };
  }
  if (run?.status === 'skipped') {
    return { verdict: 'final', end: latestEnd };
  }
  // A lease from the future is unreadable (`judgedAt`): neither reported nor to report.
  const judged = record === undefined ? undefined : judgedAt(record, now);
  if (
    judged !== undefined &&
    judged.status !== 'unreadable' &&
    judged.reportedAt !== undefined
  ) {
    const at =
      run?.status === 'failed'
        ? (run.failedAt?.getTime() ?? latestEnd)
        : latestEnd;
    return { verdict: 'final', end: Math.min(at, latestEnd) };
  }
  const closesAt = start + executionClosedMs(job);
  if (now.getTime() < closesAt) {
    return { verdict: 'open', end: latestEnd };
  }
  if (record !== undefined && isLeaseLive(record, now)) {
    return { verdict: 'running', end: latestEnd };
  }
  const status = judged?.status ?? 'missed'; // closed, so past the retry window
  if (status === 'missed') {
    return { verdict: 'missed', end: latestEnd };
  }
  if (status === 'failed' || status === 'in_progress') {
    return { verdict: 'failed', end: latestEnd };
  }
  return { verdict: 'final', end: latestEnd };
}
