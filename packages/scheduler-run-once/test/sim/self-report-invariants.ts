/**
 * Invariant 46: a final failure no retry can follow reports itself (docs/operations.md, "When a
 * slot is judged, and by whom": "an attempt reports only for a job Scheduler never retries (an
 * attempt deadline after the slot) or when still running that long"; its release "carries
 * `reported_at`/`reported_by` and the function logs `run failed after retries` once, just before
 * that write, at no extra read or write").
 *
 * A Scheduler delivery of a slot, at or after its time, whose job threw, where the job's Scheduler
 * settings make no retry (`retryCount` 0, no `maxRetryDuration`: Cloud Scheduler's RetryConfig) and
 * the job threw an attempt deadline after the slot and after the run's first claim (by then no
 * attempt of the slot can still come, even one Scheduler held behind the previous execution), and
 * whose lease still held as its release was sent: its attempt logged `run failed after retries`
 * (`reportedBy: attempt`) between the job's end and the release. Leaving it to the next check
 * reports it minutes later (invariant 31 allows that); reporting it after the lease lapsed could
 * report a run another attempt took over.
 *
 * Judged only where the attempt's writes tell it exactly: every write of the attempt met no fault,
 * no fault met its instance's operations between the job's end and the release (the clock read
 * that decides it), and its lease, from the last renewal sent before the job ended, held past the
 * release's send by a margin. Memory store only: the emulator runs no missed-run check.
 */
import { FAILED_AFTER_RETRIES } from '../../src/policy/missed-runs.ts';
import type { Execution, SimOutcome, WriteSpan } from './simulator.ts';

/** A margin for an instance's clock reads and timers around each bound, ms. */
const MARGIN_MS = 1_000;

const iso = (ms: number) => new Date(ms).toISOString();

/** The job's Scheduler settings the judge reads (`DeclaredJob`). */
interface RetrySettings {
  readonly retryCount: number;
  readonly maxRetryDurationSeconds: number;
  readonly attemptDeadlineSeconds: number;
}

/** Invariant 46 over every Scheduler delivery of a slot whose job threw. */
export function finalFailuresReportThemselves(outcome: SimOutcome): string[] {
  if (outcome.emulator) {
    return [];
  }
  return outcome.executions.flatMap((e) => {
    const release = releaseToJudge(outcome, e);
    if (release === undefined || toldItself(outcome, e, release)) {
      return [];
    }
    return [
      `${e.instance}: the job ${e.jobId}@${iso(e.scheduleTime)} threw at ${iso(e.end ?? 0)}, its last attempt (no retry of it could still come, and its lease held), yet it did not report its failure before its release at ${iso(release.sentAt)}: no "${FAILED_AFTER_RETRIES}" with reportedBy attempt`,
    ];
  });
}

/** `e`'s release, when `e` must report its own failure and its writes tell it exactly. */
function releaseToJudge(
  outcome: SimOutcome,
  e: Execution,
): WriteSpan | undefined {
  const job = settingsOf(outcome, e);
  const end = e.end;
  if (
    job === undefined ||
    end === undefined ||
    e.result !== 'threw' ||
    e.source !== 'scheduler' ||
    e.kind !== 'slot' ||
    !neverRetried(job) ||
    !lastAttemptCame(e, job, end)
  ) {
    return undefined;
  }
  const spans = outcome.attemptWriteSpans?.get(e.attemptId) ?? [];
  const release = spans.find((s) => s.sentAt >= end);
  if (
    release === undefined ||
    !spans.every((s) => s.clean) ||
    clockReadTroubled(outcome, e, end, release.sentAt) ||
    !leaseHeld(outcome, e, spans, release)
  ) {
    return undefined;
  }
  return release;
}

/** The Scheduler settings of `e`'s job in the revision that ran it. */
function settingsOf(
  outcome: SimOutcome,
  e: Execution,
): RetrySettings | undefined {
  return outcome.deployments[e.deployment]?.revisions[e.revision]?.jobs.find(
    (j) => j.id === e.jobId,
  );
}

/** Cloud Scheduler's RetryConfig makes no retry: no `retryCount`, no `maxRetryDuration`. */
function neverRetried(job: RetrySettings): boolean {
  return job.retryCount === 0 && job.maxRetryDurationSeconds === 0;
}

/**
 * Whether no attempt of `e`'s slot can come after the job's end: delivered at or after the slot
 * (a Force run taken for it came before, and Scheduler's own delivery is still to come), and an
 * attempt deadline after the slot (Scheduler's execution may have waited behind the previous one
 * that long) and after the run's first claim.
 */
function lastAttemptCame(
  e: Execution,
  job: RetrySettings,
  end: number,
): boolean {
  const deadlineMs = job.attemptDeadlineSeconds * 1000;
  const noLaterThan = Math.max(
    e.context?.firstClaimedAt ?? e.start,
    e.scheduleTime + deadlineMs,
  );
  return (
    (e.handledAt ?? 0) >= e.scheduleTime + MARGIN_MS &&
    end >= noLaterThan + MARGIN_MS
  );
}

/** A fault met an operation of `e`'s instance between the job's end and its release. */
function clockReadTroubled(
  outcome: SimOutcome,
  e: Execution,
  from: number,
  to: number,
): boolean {
  return (outcome.troubledOps ?? []).some(
    (op) => op.machine === e.instance && op.at >= from && op.at <= to,
  );
}

/**
 * Whether `e`'s lease held past its release's send by {@link MARGIN_MS}: the lease of the last write
 * that landed before the job ended, counted from the send of the last renewal that landed (the
 * claim's from the handler's call, before its claim was sent).
 */
function leaseHeld(
  outcome: SimOutcome,
  e: Execution,
  spans: readonly WriteSpan[],
  release: WriteSpan,
): boolean {
  const end = e.end ?? 0;
  const landed = (outcome.leaseEnds?.get(e.attemptId) ?? []).filter(
    (w) => w.landedAt <= end,
  );
  const leaseMs = landed.at(-1)?.leaseMs;
  if (leaseMs === undefined) {
    return false;
  }
  const renewals = spans.filter(
    (s) =>
      s.sentAt > e.start &&
      s.sentAt < end &&
      landed.some((w) => w.landedAt >= s.sentAt && w.landedAt <= s.answeredBy),
  );
  const leaseSentAt = renewals.at(-1)?.sentAt ?? e.handledAt ?? e.start;
  return leaseSentAt + leaseMs > release.sentAt + MARGIN_MS;
}

/** `e`'s attempt logged its own final-failure report between the job's end and its release. */
function toldItself(
  outcome: SimOutcome,
  e: Execution,
  release: WriteSpan,
): boolean {
  return outcome.logs.some(
    (l) =>
      l.message === FAILED_AFTER_RETRIES &&
      l.fields.runId === e.runId &&
      l.fields.reportedBy === 'attempt' &&
      l.at >= (e.end ?? 0) &&
      l.at <= release.sentAt,
  );
}
