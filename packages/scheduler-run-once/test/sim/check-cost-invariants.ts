/**
 * Invariant 34: a job's deliveries check its closed slots when docs/operations.md says they do
 * ("Checks run in two places"), no more often and no less: "a processed delivery of the first slot
 * of an hour checks its own job".
 *
 * - **No less.** Without the run audit, these checks are what reports a missed or finally failed
 *   slot within hours ("66 minutes to about 2.5 hours", docs/limits.md); a delivery that skips its
 *   check leaves the slots it would have judged to a later hour, or to nothing. The simulator's
 *   final check would report them all the same, so only this judges the delivery's own check.
 * - **No more.** A check reads the job's cursor document and its closed slots' records: on every
 *   delivery it would multiply a run's cost, which is its claim and its completion (the mission's
 *   "cost per run is a product feature").
 *
 * Judged against the check documents each execution's attempt read (`checkReads`, noted as the
 * reads are sent), per execution of a slot of a job other than the run audit (which checks every
 * job by design). The first slot of an hour is computed here with croner from the job's schedule,
 * in hours of the epoch (UTC), independently of `isDueSlot` (src/policy/missed-runs.ts). A delivery
 * whose instance's last check left the cursor two hours behind checks too (`isDue`): simulated
 * histories span minutes, so none does.
 */

import { Cron } from 'croner';
import { AUDIT_JOB_ID } from './model.ts';
import { v1CheckDocumentId } from './run-id-invariants.ts';
import type { Execution, SimOutcome } from './simulator.ts';

/** An hour, ms: the period of a delivery's check. */
const HOUR_MS = 3_600_000;

/** The warning of a delivery whose check failed (src/function/handler.ts, `checkClosedSlots`). */
const CHECK_FAILED =
  'the missed-run check of closed slots failed; the run is not affected';

type Job =
  SimOutcome['deployments'][number]['revisions'][number]['jobs'][number];

/** Whether `slotMs` is the first slot of its hour (of the epoch, UTC) in `job`'s schedule. */
function firstOfItsHour(job: Job, slotMs: number): boolean {
  const hourStart = Math.floor(slotMs / HOUR_MS) * HOUR_MS;
  const cron = new Cron(job.schedule, { timezone: job.timeZone ?? 'UTC' });
  return cron.nextRun(new Date(hourStart - 1))?.getTime() === slotMs;
}

/** The job `exec` ran, as its revision declared it. */
function jobOf(outcome: SimOutcome, exec: Execution): Job | undefined {
  const dep = outcome.deployments[exec.deployment];
  const revision = dep?.revisions[exec.revision] ?? dep?.revisions.at(-1);
  return revision?.jobs.find((job) => job.id === exec.jobId);
}

/** Whether `exec`'s check could have gone unsent: its instance died, or its check failed first. */
function checkExcused(outcome: SimOutcome, exec: Execution): boolean {
  if (exec.result === 'crashed' || exec.crashedBeforeAnswer === true) {
    return true;
  }
  return outcome.logs.some(
    (line) =>
      line.message === CHECK_FAILED &&
      line.fields.runId === exec.runId &&
      line.instance === exec.instance,
  );
}

/** Invariant 34: a delivery checks its job's closed slots at the first slot of an hour, only then. */
export function deliveryChecksAsDocumented(outcome: SimOutcome): string[] {
  if (outcome.checkReads === undefined || outcome.emulator) {
    return [];
  }
  const found: string[] = [];
  for (const exec of outcome.executions) {
    const job = jobOf(outcome, exec);
    if (exec.kind !== 'slot' || exec.jobId === AUDIT_JOB_ID || !job) {
      continue;
    }
    const dep = outcome.deployments[exec.deployment];
    if (dep === undefined) {
      continue;
    }
    const own = v1CheckDocumentId(exec.jobId, dep.keyScope);
    const read = (outcome.checkReads.get(exec.attemptId) ?? []).filter(
      (id) => id === own,
    );
    const due = firstOfItsHour(job, exec.scheduleTime);
    const slot = new Date(exec.scheduleTime).toISOString();
    const where = `${exec.jobId} slot ${slot} (${exec.instance}, attempt ${exec.attemptId.slice(0, 8)})`;
    if (read.length > 0 && !due) {
      found.push(
        `a delivery checked its job's closed slots though its slot is not the first of its hour (a check on every run multiplies its cost): ${where}`,
      );
    }
    if (read.length === 0 && due && !checkExcused(outcome, exec)) {
      found.push(
        `a delivery of the first slot of an hour did not check its job's closed slots (without the audit, nothing reports them for an hour more): ${where}`,
      );
    }
  }
  return found;
}
