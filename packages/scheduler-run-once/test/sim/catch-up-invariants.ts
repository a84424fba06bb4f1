/**
 * The promise of late runs and catch-up (issue 42, src/policy/late-runs.ts), checked after every
 * simulated history with the run audit, against what the jobs actually executed:
 *
 * 16. A slot executes at most once, a caught-up one included: every execution of a slot (Scheduler's
 *     delivery, early or late, the audit's catch-up, a backfill) runs under the slot's one run id,
 *     so invariant 1 (no run executes twice) covers them together.
 * 17. A paused slot is never caught up, nor named late.
 * 18. At most one catch-up delivery of a job per audit check (one audit request's scan of it), and
 *     never two deliveries of one slot at once: the late-run mark fences concurrent checks.
 * 19. Every `late run` line is followed, by the end of the history, by an execution of that slot, a
 *     report of it (missed, or failed after retries), or its skip by a `skip` job's policy, unless
 *     its report was not yet due at the final check, or its job was dropped.
 * 20. No catch-up of a slot already reported (missed, or failed after retries): the ledger never
 *     runs a reported slot again (only a backfill reopens one), so such a delivery is refused, and
 *     under `slots: 'all'` the slots behind it wait for nothing.
 */
import { CLAIM_WAIT_MS } from '../../src/function/catch-up-delivery.ts';
import { LATE_RUN } from '../../src/policy/late-runs.ts';
import {
  FAILED_AFTER_RETRIES,
  MISSED_RUN,
} from '../../src/policy/missed-runs.ts';
import { unjudgedBySaidCheck } from './cursor-invariants.ts';
import { pausedSlot, reportDueMs } from './invariants.ts';
import { AUDIT_JOB_ID } from './model.ts';
import { isJudgedSlot } from './schedule-segments.ts';
import { deploymentOf, type Execution, type SimOutcome } from './simulator.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** The violations of invariants 16 to 19 in `outcome`. */
export function catchUpViolations(outcome: SimOutcome): string[] {
  return [
    ...oneRunPerSlot(outcome),
    ...pausedNeverCaughtUp(outcome),
    ...oneCatchUpPerAudit(outcome),
    ...lateLinesFollowed(outcome),
    ...noCatchUpOfReported(outcome),
  ];
}

function describe(e: Execution): string {
  return `${e.jobId}@${iso(e.scheduleTime)} (${e.source}) on ${e.instance} [${iso(e.start)}, ${e.result}]`;
}

/** Invariant 16: the slot executions of a job's slot in a deployment share one run id. */
function oneRunPerSlot(outcome: SimOutcome): string[] {
  const bySlot = new Map<string, Execution[]>();
  for (const e of outcome.executions) {
    if (e.kind !== 'slot') {
      continue;
    }
    const key = `${e.jobId}@${iso(e.scheduleTime)} (deployment ${e.deployment})`;
    bySlot.set(key, [...(bySlot.get(key) ?? []), e]);
  }
  const found: string[] = [];
  for (const [slot, list] of bySlot) {
    const runs = new Set(list.map((e) => e.runId));
    if (runs.size > 1) {
      found.push(
        `slot ${slot} executed as ${runs.size} runs: ${list.map(describe).join('; ')}`,
      );
    }
  }
  return found;
}

/** The `late run` lines of the jobs (not of the audit itself), with their slot and deployment. */
function lateLines(outcome: SimOutcome) {
  return outcome.logs.flatMap((line) => {
    const d = deploymentOf(line);
    const jobId = String(line.fields.jobName);
    if (
      line.message !== LATE_RUN ||
      d === undefined ||
      jobId === AUDIT_JOB_ID
    ) {
      return [];
    }
    const slotMs = Date.parse(String(line.fields.slot));
    return [{ line, d, jobId, slotMs, runId: String(line.fields.runId) }];
  });
}

/** Invariant 17: no catch-up delivery, and no `late run` line, of a slot the operator paused. */
function pausedNeverCaughtUp(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const c of outcome.catchUps ?? []) {
    if (pausedSlot(outcome, c.deployment, c.jobId, c.slot)) {
      found.push(
        `slot ${c.jobId}@${iso(c.slot)} was paused by the operator, yet the audit of ${c.auditSlot} caught it up at ${iso(c.sentAt)}`,
      );
    }
  }
  for (const { line, d, jobId, slotMs } of lateLines(outcome)) {
    if (pausedSlot(outcome, d, jobId, slotMs)) {
      found.push(
        `slot ${jobId}@${iso(slotMs)} was paused by the operator, yet named "${LATE_RUN}" at ${iso(line.at)}`,
      );
    }
  }
  return found;
}

type CatchUp = NonNullable<SimOutcome['catchUps']>[number];

function describeCatchUp(c: CatchUp): string {
  return `${c.jobId}@${iso(c.slot)} by the audit of ${c.auditSlot} on ${c.auditInstance} at ${iso(c.sentAt)} (${JSON.stringify(c.sent)})`;
}

/**
 * Invariant 18: one catch-up delivery of a job per audit check (one audit request's scan of the
 * job); and never two of one slot at once, whichever checks sent them: a second while the first
 * still waits for its claim is a check that did not see the first (the late-run mark's fencing).
 */
function oneCatchUpPerAudit(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const byCheck = new Map<string, CatchUp[]>();
  const bySlot = new Map<string, CatchUp[]>();
  for (const c of outcome.catchUps ?? []) {
    const check = `${c.deployment}/${c.jobId}/${c.auditRequest}`;
    byCheck.set(check, [...(byCheck.get(check) ?? []), c]);
    const slot = `${c.deployment}/${c.jobId}/${c.slot}`;
    bySlot.set(slot, [...(bySlot.get(slot) ?? []), c]);
  }
  for (const list of byCheck.values()) {
    if (list.length > 1) {
      found.push(
        `${list.length} catch-up deliveries of one job by one audit check: ${list.map(describeCatchUp).join('; ')}`,
      );
    }
  }
  for (const list of bySlot.values()) {
    for (const [i, later] of list.entries()) {
      // A sender whose audit's instance died never resolves: it waited at most CLAIM_WAIT_MS.
      const overlapping = list
        .slice(0, i)
        .filter(
          (earlier) =>
            later.sentAt <
            (earlier.resolvedAt ?? earlier.sentAt + CLAIM_WAIT_MS),
        );
      for (const earlier of overlapping) {
        found.push(
          `two catch-up deliveries of one slot at once: ${describeCatchUp(earlier)} and ${describeCatchUp(later)}`,
        );
      }
    }
  }
  return found;
}

/**
 * Invariant 19: a `late run` line is followed by an execution of its slot or a report of it, by
 * the final check; excused when the slot's report was not due by then, or its job was dropped.
 */
function lateLinesFollowed(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const { line, d, jobId, slotMs, runId } of lateLines(outcome)) {
    const dep = outcome.deployments[d];
    const job = dep?.revisions.at(-1)?.jobs.find((j) => j.id === jobId);
    if (job === undefined || slotMs + reportDueMs(job) > outcome.finalMs) {
      continue;
    }
    if (unjudgedBySaidCheck(outcome, d, jobId, slotMs)) {
      continue; // another version's cursor keeps the check off, said (invariant 54)
    }
    if (!isJudgedSlot(outcome, d, jobId, slotMs)) {
      // A slot only one rule has, between two rules' sightings: the missed-run check never
      // judges it (docs/limits.md, "Schedule changes"), so this line is the one word on it.
      continue;
    }
    const ran = outcome.executions.some(
      (e) =>
        e.deployment === d &&
        e.jobId === jobId &&
        e.kind === 'slot' &&
        e.scheduleTime === slotMs,
    );
    const reported = outcome.logs.some(
      (l) =>
        (l.message === MISSED_RUN || l.message === FAILED_AFTER_RETRIES) &&
        l.fields.runId === runId,
    );
    // A `skip` job's slot blocked by its running run: its policy's verdict (invariant 2).
    const skipped = outcome.records.get(runId)?.status === 'skipped';
    if (!ran && !reported && !skipped) {
      found.push(
        `slot ${jobId}@${iso(slotMs)} was named "${LATE_RUN}" at ${iso(line.at)} (${String(line.fields.follows)}), then neither ran, was skipped, nor was reported by the final check at ${iso(outcome.finalMs)}`,
      );
    }
  }
  return found;
}

/** Invariant 20: no catch-up sent after its slot's report was logged. */
function noCatchUpOfReported(outcome: SimOutcome): string[] {
  const reportedAt = new Map<string, number>();
  for (const line of outcome.logs) {
    const report =
      line.message === MISSED_RUN || line.message === FAILED_AFTER_RETRIES;
    const runId = String(line.fields.runId);
    if (report && !reportedAt.has(runId)) {
      reportedAt.set(runId, line.at);
    }
  }
  const found: string[] = [];
  for (const c of outcome.catchUps ?? []) {
    const at = reportedAt.get(c.runId);
    if (at !== undefined && at < c.sentAt) {
      found.push(
        `slot ${c.jobId}@${iso(c.slot)} was reported at ${iso(at)}, yet caught up: ${describeCatchUp(c)}`,
      );
    }
  }
  return found;
}
