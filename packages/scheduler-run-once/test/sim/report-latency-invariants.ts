/**
 * Invariant 31: a missed or finally failed slot is known within minutes ("did it run, and if not,
 * do I know within minutes?"). Once its verdict is due, the first run audit of its deployment
 * scheduled after that time which checked every job without a failure (`run audit done` with
 * `failed: 0`) has logged its report by the time it says it is done. Without this, a report left
 * to the final check (hours later in production) passes invariant 2.
 *
 * A slot's verdict is due when the Scheduler model's execution of it could have ended
 * (`reportDueMs`: waiting behind the previous execution, then its own attempts and retries, then
 * an attempt deadline), every lease written on its run's record has run out (a claim whose job
 * never started, its instance paused, holds it too): a live lease holds the run, and every
 * execution of it has ended and written its completion or release (a job running on past its lease
 * races a check's report write, and wins: found by `--faults --seed 1`, history 87).
 * A slot Scheduler held behind an execution dispatched late waits for that execution as it
 * actually ran: its verdict is due no sooner than a whole execution and an attempt deadline after
 * the last attempt Scheduler sent of an earlier slot of its job ended.
 * A report whose writer died before its log line is logged by the first check two minutes after
 * the write (docs/how-it-works.md, "Missed runs": `REPORT_LOG_GRACE_MS`), so its verdict is due
 * no sooner.
 */

import { schedulerExecutionMs } from './cloud-scheduler.ts';
import { unreadableCursorWithin } from './cursor-invariants.ts';
import {
  pausedSince,
  WRITES_AFTER_END_TIMEOUTS,
} from './lease-loss-invariants.ts';
import type { Execution, LogLine, SimOutcome } from './simulator.ts';

/** How long a written report may wait for its writer's log line: two minutes, as documented. */
const REPORT_LOG_GRACE_MS = 120_000;

/** The audit's line once it checked every job (src/policy/run-audit.ts). */
const AUDIT_DONE = 'run audit done';

/** One run audit that checked every job of its deployment without a failure. */
interface CleanAudit {
  readonly deployment: number;
  /** Its schedule time, ms: its checks read Firestore's time no sooner. */
  readonly scheduledMs: number;
  /** When it logged that it was done, ms. */
  readonly doneAt: number;
}

/** A reported slot to judge, as invariant 2 found it. */
export interface ReportedSlot {
  readonly d: number;
  /** Its job, as its deployment declared it. */
  readonly job: Parameters<typeof schedulerExecutionMs>[0] & {
    readonly id: string;
  };
  /** The slot, as the violation names it. */
  readonly what: string;
  readonly slotMs: number;
  /** When its verdict was due by the Scheduler model (`reportDueMs` after the slot), ms. */
  readonly executionEndsMs: number;
  /** Until when its job was declared in the deployment (a later revision may drop it), ms. */
  readonly declaredUntil: number;
  readonly executions: readonly Execution[];
  /** Its run id (the slot's own; a forced run taken for it is named by its executions). */
  readonly runId?: string;
  /** When its first counted report was logged, ms. */
  readonly firstReportAt: number;
  /** When its record's report was written, ms, if it was. */
  readonly reportWrittenAt: number | undefined;
}

const cleanAuditsOf = new WeakMap<SimOutcome, readonly CleanAudit[]>();

/** The deployment a log line's instance belongs to (`d{N}-…`), if named so. */
function deploymentOf(line: LogLine): number | undefined {
  const match = /^d(\d+)-i/.exec(line.instance);
  return match === null ? undefined : Number(match[1]);
}

/** Every audit that checked every job without a failure, in the order they said so. */
function cleanAudits(outcome: SimOutcome): readonly CleanAudit[] {
  const known = cleanAuditsOf.get(outcome);
  if (known !== undefined) {
    return known;
  }
  const audits = outcome.logs.flatMap((line) => {
    const deployment = deploymentOf(line);
    const scheduledMs = Date.parse(String(line.fields.scheduleTime));
    if (
      line.message !== AUDIT_DONE ||
      line.fields.failed !== 0 ||
      deployment === undefined ||
      Number.isNaN(scheduledMs)
    ) {
      return [];
    }
    return [{ deployment, scheduledMs, doneAt: line.at }];
  });
  cleanAuditsOf.set(outcome, audits);
  return audits;
}

/**
 * When the last lease written on the slot's run record ran out, ms (0 if none landed): by the
 * attempts of its executions, and by claims whose job never started (its instance paused).
 */
function lastLeaseEnd(outcome: SimOutcome, slot: ReportedSlot): number {
  const runIds = new Set(slot.executions.map((e) => e.runId));
  if (slot.runId !== undefined) {
    runIds.add(slot.runId);
  }
  let end = 0;
  for (const leases of outcome.leaseEnds.values()) {
    for (const lease of leases) {
      // A backfill's run of the slot after its report holds nothing of the report's due time.
      if (runIds.has(lease.runId) && lease.landedAt < slot.firstReportAt) {
        end = Math.max(end, lease.expires);
      }
    }
  }
  return end;
}

/**
 * When the slot's last execution started before its first report ended and its final write (a
 * completion or release) had landed, ms: a job that runs on past its lease (its signal aborted,
 * the heartbeat stopped) still holds its run, and a check that judges it meanwhile has its report
 * write refused by that final write, so the run is judged again by the next check. The landing
 * is the attempt's last write on the run's record within the bound invariant 25 gives an attempt's
 * writes after its job ended (`WRITES_AFTER_END_TIMEOUTS` Firestore timeouts, and its instance's
 * pauses since), or that bound if none landed; when its instance died, then. Infinity while one
 * still runs at the end. A backfill's run after the report holds nothing.
 */
function lastExecutionEnd(outcome: SimOutcome, slot: ReportedSlot): number {
  let end = 0;
  for (const e of slot.executions) {
    if (e.start >= slot.firstReportAt) {
      continue;
    }
    if (e.end === undefined) {
      end = Math.max(end, e.diedAt ?? Number.POSITIVE_INFINITY);
      continue;
    }
    const endedAt = e.end;
    const bound =
      endedAt +
      pausedSince(outcome, e.instance, endedAt) +
      WRITES_AFTER_END_TIMEOUTS * outcome.firestoreTimeoutMs;
    const until = Math.min(bound, e.diedAt ?? bound);
    const landed = (outcome.recordWrites ?? []).filter(
      (w) =>
        w.runId === e.runId &&
        w.machine === e.instance &&
        w.at >= endedAt &&
        w.at <= until,
    );
    const finalWriteAt =
      landed.length === 0 ? until : Math.max(...landed.map((w) => w.at));
    end = Math.max(end, finalWriteAt);
  }
  return end;
}

/**
 * When a report written but not logged by its writer may be logged by another check, ms (0 when
 * its writer logged it: the writer's line follows its write's answer within a Firestore timeout).
 */
function loggedByFinderAfter(outcome: SimOutcome, slot: ReportedSlot): number {
  const writtenAt = slot.reportWrittenAt;
  const answerMs = outcome.firestoreTimeoutMs;
  if (writtenAt === undefined || slot.firstReportAt <= writtenAt + answerMs) {
    return 0;
  }
  // A check that claimed logging it again and died before its line holds it a grace more: the
  // record holds its claim (`relog_by`; it died after another write of its own: `--regressions`,
  // seed 2104191038).
  let claimedAt = writtenAt;
  for (const crash of outcome.crashesAfterWrite ?? []) {
    if (
      crash.write === 'report' &&
      slot.runId !== undefined &&
      crash.path.endsWith(`/${slot.runId}`) &&
      crash.at < slot.firstReportAt
    ) {
      claimedAt = Math.max(claimedAt, crash.at);
    }
  }
  for (const claim of unloggedRelogClaims(outcome, slot, writtenAt)) {
    claimedAt = Math.max(claimedAt, claim);
  }
  return claimedAt + REPORT_LOG_GRACE_MS;
}

/**
 * When the slot's run record took a write while it held a relog claim (`relog_by`: a check that
 * claimed logging the report again), after the report was written and before its first report
 * line, ms: the product holds such a report a grace from the record's last update
 * (`isYoungReport`, src/policy/missed-runs.ts), whoever wrote it.
 */
function unloggedRelogClaims(
  outcome: SimOutcome,
  slot: ReportedSlot,
  writtenAt: number,
): number[] {
  const { runId } = slot;
  if (runId === undefined) {
    return [];
  }
  return (outcome.recordWrites ?? [])
    .filter(
      (w) =>
        w.runId === runId &&
        w.relogBy !== undefined &&
        w.at > writtenAt &&
        w.at < slot.firstReportAt,
    )
    .map((w) => w.at);
}

/**
 * When a slot waiting behind its job's earlier executions, as Scheduler actually sent them, could
 * have its own execution end and be judged, ms: a whole execution and an attempt deadline after
 * the last earlier attempt ended (or its deadline, if it never did).
 */
function heldBehindEarlierSlots(
  outcome: SimOutcome,
  slot: ReportedSlot,
): number {
  const deadlineMs = slot.job.attemptDeadlineSeconds * 1000;
  let earlierEnd = Number.NEGATIVE_INFINITY;
  for (const attempt of outcome.schedulerAttempts[slot.d] ?? []) {
    if (attempt.jobId === slot.job.id && attempt.slotMs < slot.slotMs) {
      const ended = attempt.endedAt ?? attempt.sentAt + deadlineMs;
      earlierEnd = Math.max(earlierEnd, ended);
    }
  }
  return earlierEnd + schedulerExecutionMs(slot.job) + deadlineMs;
}

/**
 * The slot's report was written before `doneAt` and its line came within a Firestore timeout of
 * the write: another check (a delivery's, at its hour's first slot) wrote it first, and an audit
 * that finds a young report unlogged leaves it to its writer, whose line follows its write's
 * answer (seed 20261212, history 1387: the answer came a timeout late, 9 s after the audit).
 */
function writtenBefore(
  outcome: SimOutcome,
  slot: ReportedSlot,
  doneAt: number,
): boolean {
  const writtenAt = slot.reportWrittenAt;
  return (
    writtenAt !== undefined &&
    writtenAt <= doneAt &&
    slot.firstReportAt <= writtenAt + outcome.firestoreTimeoutMs
  );
}

/**
 * Invariant 31 for one reported slot: the violation if a clean audit scheduled after its verdict
 * was due said it was done before the slot's first report.
 */
export function reportedLate(
  outcome: SimOutcome,
  slot: ReportedSlot,
): string | undefined {
  const dueMs = Math.max(
    slot.executionEndsMs,
    lastLeaseEnd(outcome, slot),
    lastExecutionEnd(outcome, slot),
    loggedByFinderAfter(outcome, slot),
    heldBehindEarlierSlots(outcome, slot),
  );
  const audit = cleanAudits(outcome).find(
    (a) =>
      a.deployment === slot.d &&
      a.scheduledMs >= dueMs &&
      a.doneAt < slot.declaredUntil,
  );
  if (audit === undefined || audit.doneAt >= slot.firstReportAt) {
    return undefined;
  }
  if (
    unreadableCursorWithin(
      outcome,
      slot.d,
      slot.job.id,
      dueMs,
      slot.firstReportAt,
    )
  ) {
    return undefined; // no check judged the job then: it said why (invariant 54)
  }
  if (writtenBefore(outcome, slot, audit.doneAt)) {
    return undefined;
  }
  const iso = (ms: number) => new Date(ms).toISOString();
  return `slot ${slot.what} was first reported at ${iso(slot.firstReportAt)}, after the run audit of ${iso(audit.scheduledMs)} checked every job (done at ${iso(audit.doneAt)}); its verdict was due at ${iso(dueMs)}`;
}
