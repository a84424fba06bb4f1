/**
 * Invariant 46: a final failure no retry can follow reports itself (docs/operations.md, "When a
 * slot is judged, and by whom": "an attempt reports only for a job Scheduler never retries (an
 * attempt deadline after the slot) or when still running that long"; its release "carries
 * `reported_at`/`reported_by` and the function logs `run failed after retries` once, just before
 * that write, at no extra read or write").
 *
 * A Scheduler delivery of a slot, at or after its time (by more than a Firestore answer's latency,
 * the lag of the instance's reading of Firestore's time), whose job threw, where the job's Scheduler
 * settings make no retry (`retryCount` 0, no `maxRetryDuration`: Cloud Scheduler's RetryConfig) and
 * the job threw an attempt deadline after the slot and after the run's first claim (by then no
 * attempt of the slot can still come, even one Scheduler held behind the previous execution), and
 * whose lease still held as its release was sent: its attempt logged `run failed after retries`
 * (`reportedBy: attempt`) between the job's end and the release. Leaving it to the next check
 * reports it minutes later (invariant 31 allows that). And no attempt reports itself once its job
 * ended a lease after the send of its last renewal that landed: its lease may have lapsed, and
 * another attempt may hold the run (src/core/run-once.ts, `#mayHaveLapsed`).
 *
 * Judged only where the attempt's writes tell it exactly: every write of the attempt met no fault,
 * no fault met its instance's operations between the job's end and the release (the clock read
 * that decides it), its instance was never paused while it ran, and its lease, from the send of
 * the last renewal answered before the job ended, held past the release's send by a margin. Memory store only: the emulator runs no missed-run check.
 */
import { FAILED_AFTER_RETRIES } from '../../src/policy/missed-runs.ts';
import type { Execution, LogLine, SimOutcome, WriteSpan } from './simulator.ts';

/** A margin for an instance's clock reads and timers around each bound, ms. */
const MARGIN_MS = 1_000;

/** A timer's granularity, ms. */
const TIMER_SLACK_MS = 10;

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
  return [...untoldFinalFailures(outcome), ...reportsAfterLapse(outcome)];
}

/** The final failures that must have reported themselves and did not. */
function untoldFinalFailures(outcome: SimOutcome): string[] {
  return outcome.executions.flatMap((e) => {
    const release = releaseToJudge(outcome, e);
    if (release === undefined || ownReport(outcome, e, release) !== undefined) {
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
    !lastAttemptCame(outcome, e, job, end)
  ) {
    return undefined;
  }
  const spans = outcome.attemptWriteSpans?.get(e.attemptId) ?? [];
  const release = releaseOf(outcome, e);
  if (
    release === undefined ||
    !spans.every((s) => s.clean) ||
    clockReadTroubled(outcome, e, end, release.sentAt) ||
    !leaseHeld(outcome, e, release)
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
  outcome: SimOutcome,
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
    (e.handledAt ?? 0) >= e.scheduleTime + deliveryMarginMs(outcome) &&
    end >= noLaterThan + MARGIN_MS
  );
}

/**
 * How long after its slot a delivery must reach its instance to be judged delivered at or after
 * it: the instance reads Firestore's time as of an earlier answer, which lags by up to one
 * answer's way back (the history's top latency), and a delivery that seems to come before its
 * slot is taken for a Force run's, which leaves its report to the check.
 */
function deliveryMarginMs(outcome: SimOutcome): number {
  const latency = outcome.history?.latency as readonly number[] | undefined;
  return (latency?.[1] ?? MARGIN_MS) + TIMER_SLACK_MS;
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
 * Whether `e`'s lease held past its release's send by {@link MARGIN_MS}: counted from the send of
 * the last renewal that landed and was answered before the job ended, or from the handler's call
 * (before its claim was sent) if none was.
 */
function leaseHeld(
  outcome: SimOutcome,
  e: Execution,
  release: WriteSpan,
): boolean {
  const end = e.end ?? 0;
  // A pause holds a write's landing and answer past their plan: the writes no longer tell it.
  if (e.pauses.length > 0) {
    return false;
  }
  const landed = landedWrites(outcome, e);
  const renewal = landed.findLast(
    (w) => w.sentAt > e.start && w.answeredBy <= end,
  );
  const claim = landed[0];
  const lease =
    renewal ??
    (claim === undefined
      ? undefined
      : { ...claim, sentAt: e.handledAt ?? e.start });
  return (
    lease !== undefined &&
    lease.sentAt + lease.leaseMs > release.sentAt + MARGIN_MS
  );
}

/** One landed lease write of an attempt: when it was sent and answered, and its lease, ms. */
interface LandedWrite {
  readonly sentAt: number;
  readonly answeredBy: number;
  readonly leaseMs: number;
}

/**
 * Each lease write of `e`'s attempt that landed, in order, with the latest write sent before it
 * landed: its own, or one sent later (never earlier, so a lease counted from it ends no sooner
 * than the product counts it; a pause can hold a landing past its write's planned answer); the
 * claim, sent before the job started and not among the attempt's writes, as sent and answered
 * when it landed.
 */
function landedWrites(outcome: SimOutcome, e: Execution): LandedWrite[] {
  const spans = outcome.attemptWriteSpans?.get(e.attemptId) ?? [];
  return (outcome.leaseEnds?.get(e.attemptId) ?? []).flatMap((w) => {
    if (w.landedAt <= e.start) {
      return [
        { sentAt: w.landedAt, answeredBy: w.landedAt, leaseMs: w.leaseMs },
      ];
    }
    const span = spans.findLast((s) => s.sentAt <= w.landedAt);
    return span === undefined ? [] : [{ ...span, leaseMs: w.leaseMs }];
  });
}

/** `e`'s release: the first write its attempt sent once the job ended (none if it died first). */
function releaseOf(outcome: SimOutcome, e: Execution): WriteSpan | undefined {
  const { end } = e;
  if (end === undefined) {
    return undefined;
  }
  const spans = outcome.attemptWriteSpans?.get(e.attemptId) ?? [];
  return spans.find((s) => s.sentAt >= end);
}

/**
 * `e`'s attempt's own final-failure report (`reportedBy: attempt`), logged on its instance between
 * the job's end and its `release`.
 */
function ownReport(
  outcome: SimOutcome,
  e: Execution,
  release: WriteSpan,
): LogLine | undefined {
  return outcome.logs.find(
    (l) =>
      l.message === FAILED_AFTER_RETRIES &&
      l.fields.reportedBy === 'attempt' &&
      l.fields.runId === e.runId &&
      l.instance === e.instance &&
      l.at >= (e.end ?? 0) &&
      l.at <= release.sentAt,
  );
}

/**
 * An attempt never reports its own failure once its lease may have lapsed: its job ended at least
 * a lease after the send of the last renewal of it that landed (the claim's too), so another
 * attempt may have taken the run over, and its report would be false.
 */
function reportsAfterLapse(outcome: SimOutcome): string[] {
  return outcome.executions.flatMap((e) => {
    const end = e.end;
    const release = releaseOf(outcome, e);
    const report =
      release === undefined ? undefined : ownReport(outcome, e, release);
    const lapsedAt = lapsedBySend(outcome, e);
    if (
      report === undefined ||
      end === undefined ||
      lapsedAt === undefined ||
      end < lapsedAt + MARGIN_MS
    ) {
      return [];
    }
    return [
      `${e.instance}: the job ${e.jobId}@${iso(e.scheduleTime)} ended at ${iso(end)} and its attempt reported its failure itself at ${iso(report.at)}, though its lease, from the send of its last renewal that landed, ran out by ${iso(lapsedAt)}: another attempt may hold the run`,
    ];
  });
}

/**
 * When `e`'s lease ran out at the latest, counted from the send of each of its lease writes sent
 * before the job ended that landed (the claim's from its landing): `undefined` when none is seen.
 */
function lapsedBySend(outcome: SimOutcome, e: Execution): number | undefined {
  const end = e.end ?? Number.POSITIVE_INFINITY;
  const ends = landedWrites(outcome, e)
    .filter((w) => w.sentAt < end)
    .map((w) => w.sentAt + w.leaseMs);
  return ends.length === 0 ? undefined : Math.max(...ends);
}
