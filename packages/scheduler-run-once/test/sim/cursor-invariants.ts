/**
 * Invariant 33: the final missed-run check leaves each job's cursor no further back than the first
 * slot it could not settle. A check moves its cursor past every closed slot that is settled (its
 * run completed or skipped, or its report written and logged) up to the first one it must judge
 * again (still open, running, an unlogged report, a raced write), or to the closed boundary. A
 * cursor left behind settled slots re-reads them at every check (docs/how-it-works.md, "Missed
 * runs": a processed run costs the claim and the completion; the check reads only what closed since
 * its cursor), and once their records expire (the TTL) it would judge them again as missed: a
 * report for a slot that ran.
 *
 * Judged against the records the history left, not the check's own verdicts: a slot counts as
 * settled only when its record says so for certain, so every doubt (no record, a paused slot, a
 * forced run in its place, a record this version cannot read) lowers the bound, never raises it.
 * The boundary is the Scheduler model's (a longest execution and an attempt deadline after the
 * slot, `reportDueMs` less one execution), never later than the product's.
 */

import { checkDocumentId } from '../../src/policy/missed-run-cursor.ts';
import { slotRunId, unloggedReportBy } from '../../src/policy/run-history.ts';
import { slotsBetween } from '../../src/policy/schedule.ts';
import { schedulerExecutionMs } from './cloud-scheduler.ts';
import { hasLaterCheck, type SimOutcome } from './simulator.ts';

type Deployment = SimOutcome['deployments'][number];
type Job = Deployment['revisions'][number]['jobs'][number];

/** The statuses whose run is over for good: nothing reports or runs the slot again. */
const FINAL_STATUSES = new Set(['completed', 'skipped']);

/** How long the operator's check after a death comes after the final check (simulator.ts). */
const LATER_CHECK_MS = 5 * 60_000;

/** Whether `record` settles its slot for certain: a final run, or a report written and logged. */
function isSettled(record: Readonly<Record<string, unknown>> | undefined) {
  if (record === undefined) {
    return false;
  }
  if (FINAL_STATUSES.has(String(record.status))) {
    return true;
  }
  const reportedBy =
    typeof record.reported_by === 'string' ? record.reported_by : undefined;
  return (
    record.reported_at !== undefined &&
    reportedBy !== undefined &&
    unloggedReportBy(reportedBy) === undefined
  );
}

/**
 * The job of `dep` to judge: declared by its last revision with one schedule throughout (a
 * schedule change leaves the cursor on the old rule's slots, which this invariant does not
 * enumerate).
 */
function steadyJobs(dep: Deployment): Job[] {
  const last = dep.revisions.at(-1)?.jobs ?? [];
  return last.filter((job) =>
    dep.revisions.every((revision) =>
      revision.jobs.every(
        (other) => other.id !== job.id || other.schedule === job.schedule,
      ),
    ),
  );
}

/** The cursor's `checked_before`, ms, or `undefined` without a readable one. */
function cursorAt(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
): number | undefined {
  const document = outcome.jobDocuments?.get(
    checkDocumentId(job.id, dep.keyScope),
  );
  const at = document?.checked_before as
    | { toMillis?: () => number }
    | undefined;
  return typeof at?.toMillis === 'function' ? at.toMillis() : undefined;
}

/**
 * When the last final check began: the operator's after a death, twin checks (which leave a
 * cursor at a slot they raced for) or a faulty check, else the auditor's.
 */
function lastCheckMs(outcome: SimOutcome): number {
  const died = (outcome.deaths ?? []).some(
    (death) => death.at >= outcome.finalMs,
  );
  return hasLaterCheck(outcome.history, died)
    ? outcome.finalMs + LATER_CHECK_MS
    : outcome.finalMs;
}

/**
 * The slots of `job` in `dep` the records settle, from its first record on (the check never judges
 * a slot before the job's first record: the job may not have existed) up to the first they do not
 * settle or `boundary` (ms), and that first slot (`due`, `boundary` if none).
 */
function settledSlots(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
  boundary: number,
): { readonly settled: readonly number[]; readonly due: number } {
  const { slots } = slotsBetween(
    job,
    new Date(outcome.startMs - 1),
    new Date(boundary - 1),
    10_000,
  );
  const records = slots.map((slot) =>
    outcome.records.get(slotRunId(job.id, slot, dep.keyScope)),
  );
  const first = records.findIndex((record) => record !== undefined);
  if (first < 0) {
    return { settled: [], due: boundary };
  }
  const open = records.findIndex(
    (record, i) => i >= first && !isSettled(record),
  );
  const end = open < 0 ? slots.length : open;
  return {
    settled: slots.slice(first, end).map((slot) => slot.getTime()),
    due: open < 0 ? boundary : (slots[open] as Date).getTime(),
  };
}

/** Invariant 33 (see the file's comment). */
export function cursorsKeptUp(outcome: SimOutcome): string[] {
  if (outcome.emulator || outcome.jobDocuments === undefined) {
    return [];
  }
  // A final check that died mid-way leaves its cursor where it died: the next check moves it.
  const checkedAt = lastCheckMs(outcome);
  const deathsAfter = (outcome.deaths ?? []).filter(
    (death) => death.at >= checkedAt,
  );
  if (deathsAfter.length > 0) {
    return [];
  }
  const found: string[] = [];
  for (const dep of outcome.deployments) {
    for (const job of steadyJobs(dep)) {
      const problem = cursorProblem(outcome, job, dep);
      if (problem !== undefined) {
        found.push(problem);
      }
    }
  }
  return found;
}

/** What is wrong with `job`'s cursor in `dep` after the final check, if anything. */
function cursorProblem(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
): string | undefined {
  const closedMs =
    schedulerExecutionMs(job) + job.attemptDeadlineSeconds * 1000;
  const { settled, due } = settledSlots(
    outcome,
    job,
    dep,
    outcome.finalMs - closedMs,
  );
  const cursor = cursorAt(outcome, job, dep);
  // The first settled slot the cursor has not passed.
  const behind = settled.find((slot) => cursor === undefined || slot >= cursor);
  if (behind === undefined) {
    return undefined;
  }
  const where = `${job.id}'s cursor (scope ${JSON.stringify(dep.scope)})`;
  const what = `settled slot ${new Date(behind).toISOString()} is not behind it (the first slot to judge again is ${new Date(due).toISOString()})`;
  return cursor === undefined
    ? `the final check left no ${where}: ${what}`
    : `the final check left ${where} at ${new Date(cursor).toISOString()}: ${what}`;
}
