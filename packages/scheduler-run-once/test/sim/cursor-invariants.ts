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
import type { SimOutcome } from './simulator.ts';

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

/** When the last final check began: the operator's after a death, else the auditor's. */
function lastCheckMs(outcome: SimOutcome): number {
  const died = (outcome.deaths ?? []).some(
    (death) => death.at >= outcome.finalMs,
  );
  return died ? outcome.finalMs + LATER_CHECK_MS : outcome.finalMs;
}

/**
 * The first slot of `job` in `dep`, from its first record on, the records do not settle, before
 * `boundary` (ms); `boundary` if none.
 */
function firstUnsettled(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
  boundary: number,
): number {
  const { slots } = slotsBetween(
    job,
    new Date(outcome.startMs - 1),
    new Date(boundary - 1),
    10_000,
  );
  const records = slots.map((slot) =>
    outcome.records.get(slotRunId(job.id, slot, dep.keyScope)),
  );
  // The check never judges a slot before the job's first record (the job may not have existed).
  const first = records.findIndex((record) => record !== undefined);
  if (first < 0) {
    return boundary;
  }
  const open = records.findIndex(
    (record, i) => i >= first && !isSettled(record),
  );
  return open < 0 ? boundary : (slots[open] as Date).getTime();
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
      const cursor = cursorAt(outcome, job, dep);
      if (cursor === undefined) {
        continue;
      }
      const closedMs =
        schedulerExecutionMs(job) + job.attemptDeadlineSeconds * 1000;
      const boundary = outcome.finalMs - closedMs;
      const due = firstUnsettled(outcome, job, dep, boundary);
      if (cursor < due) {
        found.push(
          `the final check left ${job.id}'s cursor (scope ${JSON.stringify(dep.scope)}) at ${new Date(cursor).toISOString()}, behind settled slots: the first slot to judge again is ${new Date(due).toISOString()}`,
        );
      }
    }
  }
  return found;
}
