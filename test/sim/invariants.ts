/**
 * The promise, checked after every simulated history against what the jobs actually executed:
 *
 * 1. No slot executes twice (re-runs and manual runs are runs of their own): a later execution of
 *    a slot is allowed only after every earlier one ended without success through the environment
 *    (it threw, its instance crashed, its completion could not be recorded, or its instance was
 *    paused past the lease), and a lease loss while the earlier one ran must be logged.
 * 2. Every slot whose retry window closed is completed, skipped by its policy within its window
 *    (blocked by a run of the same job and scope), or reported exactly once as missed / failed
 *    after retries; nothing reported completes later (backfill excepted: it runs reported slots).
 * 3. `skip` / `wait` never let two runs of a job (and scope) overlap.
 * 4. One execution per trigger id.
 * 5. Cloud Scheduler's on-time delivery of a slot runs as that slot, never as a forced run.
 * 6. Nothing throws where the product should never throw.
 *
 * Each violation is a sentence naming the runs, so a failing seed reads as a bug report.
 */
import { REPORT_WITHDRAWN } from '../../src/policy/final-failure.ts';
import { FAILED_AFTER_RETRIES, MISSED_RUN } from '../../src/policy/missed-runs.ts';
import { judgingDelayMs } from '../../src/policy/retry-policy.ts';
import { slotRunId } from '../../src/policy/run-history.ts';
import { slotsBetween } from '../../src/policy/schedule.ts';
import type { Execution, SimOutcome } from './simulator.ts';

const iso = (ms: number) => new Date(ms).toISOString();

function describe(e: Execution): string {
  return `${e.jobId}@${iso(e.scheduleTime)} ${e.kind} (${e.source}) on ${e.instance} [${iso(e.start)} – ${e.end === undefined ? 'open' : iso(e.end)}, ${e.result}]`;
}

/**
 * Why an execution may be followed by another of the same run: the environment ended it. A job
 * that returned as its instance crashed is excused only if its completion never landed: a landed
 * one leaves the run completed, and a retry that ran it again is a double run.
 */
function excused(e: Execution, outcome: SimOutcome): boolean {
  if (e.result === 'threw' || e.result === 'crashed') return true;
  if (e.crashedBeforeAnswer && e.completionLanded !== true) return true;
  return leaseLostToEnvironment(e, outcome);
}

/**
 * The environment took the lease of `e` while it ran: its instance was paused past a heartbeat,
 * or its extensions failed (Firestore unreachable). Then another run may hold the job meanwhile.
 */
function leaseLostToEnvironment(e: Execution, outcome: SimOutcome): boolean {
  if (e.pausedMs >= outcome.leaseMs / 3) return true;
  // Its completion could not be recorded (Firestore unavailable): the product says so.
  return outcome.logs.some(
    (l) =>
      l.fields.attemptId === e.attemptId &&
      (l.fields.completion === 'unrecorded' ||
        l.fields.leaseLoss === 'extensions_failed' ||
        l.fields.leaseLoss === 'stalled'),
  );
}

/**
 * The lease loss of `e` is logged, or `e` could not learn of it: its completion or release found
 * Firestore unavailable (the log says so, and that a later delivery may run the job again).
 */
function leaseLossLogged(e: Execution, outcome: SimOutcome): boolean {
  return outcome.logs.some(
    (l) =>
      ((l.fields.attemptId === e.attemptId || l.fields.runId === e.runId) &&
        /^lease (lost|lapsed)/.test(l.message) &&
        l.at >= e.start) ||
      (l.fields.attemptId === e.attemptId &&
        (l.fields.completion === 'unrecorded' || l.fields.release === 'unrecorded')),
  );
}

/** The violations of `outcome`; empty when the history kept every promise. */
export function violations(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const { executions, gaps } = outcome;
  const byRun = new Map<string, Execution[]>();
  for (const e of executions) byRun.set(e.runId, [...(byRun.get(e.runId) ?? []), e]);

  // 1. No slot (or any run) executes twice.
  for (const [runId, list] of byRun) {
    list.sort((a, b) => a.start - b.start);
    for (const [i, later] of list.entries()) {
      for (const earlier of list.slice(0, i)) {
        if (!excused(earlier, outcome)) {
          found.push(
            `run ${runId.slice(0, 12)} executed twice: ${describe(earlier)} then ${describe(later)}`,
          );
        } else if (
          (earlier.end === undefined || earlier.end > later.start) &&
          earlier.result !== 'crashed' &&
          !leaseLossLogged(earlier, outcome)
        ) {
          found.push(
            `run ${runId.slice(0, 12)} ran twice at once without a logged lease loss: ${describe(earlier)} and ${describe(later)}`,
          );
        }
      }
    }
  }

  // 5. An on-time delivery is its slot; and a slot and its backfill are one run.
  for (const e of executions) {
    if (e.source === 'scheduler' && e.kind !== 'slot') {
      found.push(`Cloud Scheduler's on-time delivery ran as a ${e.kind} run: ${describe(e)}`);
    }
    if (e.source === 'backfill' && e.kind !== 'slot') {
      found.push(`a backfill delivery ran as a ${e.kind} run: ${describe(e)}`);
    }
  }

  // 4. One run per trigger id of a job and key scope (the trigger id names a run of its job).
  const byTrigger = new Map<string, Execution[]>();
  for (const e of executions) {
    if (e.triggerId === undefined) continue;
    const key = `${e.triggerId} (${e.jobId}${e.scope ? `, scope ${e.scope}` : ''})`;
    byTrigger.set(key, [...(byTrigger.get(key) ?? []), e]);
  }
  for (const [triggerId, list] of byTrigger) {
    const runs = new Set(list.map((e) => e.runId));
    if (runs.size > 1) {
      found.push(`trigger id ${triggerId} ran ${runs.size} runs: ${list.map(describe).join('; ')}`);
    }
  }

  // 3. skip / wait: no two runs of a job and scope at once.
  for (const [d, dep] of outcome.deployments.entries()) {
    const guarded = new Set<string>();
    const everAllow = new Set<string>();
    for (const revision of dep.revisions) {
      for (const job of revision.jobs) {
        if (job.overlap === 'allow') everAllow.add(job.id);
        else guarded.add(job.id);
      }
    }
    for (const jobId of guarded) {
      if (everAllow.has(jobId)) continue; // a revision allowed overlap: its runs may overlap
      const runs = executions
        .filter((e) => e.deployment === d && e.jobId === jobId)
        .filter((e) => !gaps.overlapAllKinds || e.kind === 'slot')
        .sort((a, b) => a.start - b.start);
      for (const [i, a] of runs.entries()) {
        for (const b of runs.slice(i + 1)) {
          const aEnd = a.end ?? outcome.finalMs;
          if (b.start >= aEnd) continue;
          if (a.runId === b.runId) continue; // judged by invariant 1
          if (leaseLostToEnvironment(a, outcome)) continue;
          found.push(`overlap policy broken for ${jobId}: ${describe(a)} overlaps ${describe(b)}`);
        }
      }
    }
  }

  // 2. Every closed slot: completed, skipped by its policy, or reported exactly once.
  const reports = new Map<
    string,
    { at: number; message: string; instance: string; byAttempt: boolean; reporter: unknown }[]
  >();
  for (const line of outcome.logs) {
    const runId = String(line.fields.runId);
    if (line.message === REPORT_WITHDRAWN) {
      // The attempt's report, logged before its release found the lease lost: it did not land.
      const list = reports.get(runId) ?? [];
      const own = list.findLastIndex((r) => r.instance === line.instance && r.byAttempt);
      if (own >= 0) list.splice(own, 1);
      continue;
    }
    if (line.message !== MISSED_RUN && line.message !== FAILED_AFTER_RETRIES) continue;
    const report = {
      at: line.at,
      message: line.message,
      instance: line.instance,
      byAttempt: line.fields.reportedBy === 'attempt' || line.fields.unconfirmed === true,
      reporter: line.fields.reporter,
    };
    reports.set(runId, [...(reports.get(runId) ?? []), report]);
  }
  const skippedBy = (runId: string) =>
    outcome.answers
      .filter((a) => a.runId === runId && a.outcome === 'skipped')
      .map((a) => a.source);
  const runScope = new Map(executions.map((e) => [e.runId, e]));
  for (const [d, dep] of outcome.emulator ? [] : outcome.deployments.entries()) {
    const declared = new Map<
      string,
      { job: (typeof dep.revisions)[number]['jobs'][number]; until: number }
    >();
    for (const [r, revision] of dep.revisions.entries()) {
      const next = dep.revisions[r + 1]?.at ?? Number.POSITIVE_INFINITY;
      for (const job of revision.jobs) declared.set(job.id, { job, until: next });
      // A job the next revision drops is judged only up to the drop.
      for (const [id, entry] of declared) {
        if (!revision.jobs.some((j) => j.id === id) && entry.until === Number.POSITIVE_INFINITY) {
          declared.set(id, { ...entry, until: revision.at });
        }
      }
    }
    for (const [jobId, { job, until }] of declared) {
      const stillDeclared = dep.revisions.at(-1)?.jobs.some((j) => j.id === jobId) ?? false;
      // The latest a slot is judged: behind an outstanding execution, a window later (`slotVerdict`).
      const closeMs = judgingDelayMs(job);
      const lastSlot = Math.min(
        outcome.finalMs - closeMs,
        stillDeclared ? Infinity : until - closeMs,
      );
      if (lastSlot < outcome.startMs) continue;
      const { slots } = slotsBetween(
        job,
        new Date(outcome.startMs - 1),
        new Date(lastSlot),
        10_000,
      );
      let seenRecord = false;
      for (const slot of slots) {
        const runId = slotRunId(job.id, slot, dep.keyScope);
        const record = outcome.records.get(runId);
        const status = record?.status;
        // An attempt logs its report before its release writes it, and a check logs one whose
        // write it could not confirm: if the write never landed, a later check reports the slot
        // again (at worst twice, never not at all).
        const logged = reports.get(runId) ?? [];
        // A check's report logged again by a later check (its writer died before acknowledging
        // it) names the same reporter: one report, logged at worst twice.
        const distinct = logged.filter(
          (r, i) =>
            r.reporter === undefined || logged.findIndex((o) => o.reporter === r.reporter) === i,
        );
        const reported =
          distinct.length > 1
            ? distinct.filter((r) => !r.byAttempt || r.reporter === record?.reported_by)
            : distinct;
        const ran = (byRun.get(runId) ?? []).filter((e) => e.result === 'returned');
        const what = `${jobId}@${slot.toISOString()}${dep.scope ? ` (scope ${dep.scope})` : ''}`;
        if (record !== undefined) seenRecord = true;
        if (reported.length > 1) found.push(`slot ${what} reported ${reported.length} times`);
        const firstReport = reported[0];
        if (firstReport !== undefined) {
          // A zombie (its lease taken by a pause or outage) may end after the report; its
          // completion must not land (checked below: the record stays reported, not completed).
          const late = ran.filter(
            (e) =>
              e.source !== 'backfill' &&
              (e.end ?? 0) > firstReport.at &&
              !leaseLostToEnvironment(e, outcome),
          );
          if (late.length > 0) {
            found.push(
              `slot ${what} reported "${firstReport.message}" at ${iso(firstReport.at)}, then completed: ${late.map(describe).join('; ')}`,
            );
          }
          if (status === 'completed' && ran.every((e) => e.source !== 'backfill')) {
            found.push(`slot ${what} is both reported ("${firstReport.message}") and completed`);
          }
          continue;
        }
        if (status === 'completed') {
          if (ran.length === 0)
            found.push(`slot ${what} is recorded completed but never ran to its end`);
          continue;
        }
        if (status === 'skipped') {
          const blockedBy = String(record?.blocked_by ?? '');
          const blocker = runScope.get(blockedBy);
          if (
            job.overlap !== 'skip' &&
            !dep.revisions.some((r) => r.jobs.some((j) => j.id === jobId && j.overlap === 'skip'))
          ) {
            found.push(`slot ${what} recorded skipped, but its policy is ${job.overlap}`);
          } else if (
            blocker !== undefined &&
            (blocker.deployment !== d || blocker.jobId !== jobId)
          ) {
            found.push(
              `slot ${what} skipped, blocked by a run of another job or scope: ${describe(blocker)}`,
            );
          } else if (skippedBy(runId).includes('backfill')) {
            found.push(
              `slot ${what} skipped by a backfill delivery: the missed slot is recorded done, never run`,
            );
          }
          continue;
        }
        // Before the job's first record the check does not report (the job may not have existed).
        if (!seenRecord && record === undefined) continue;
        found.push(
          `slot ${what} was lost silently: record ${status ?? 'absent'}, no report, executions: ${
            (byRun.get(runId) ?? []).map(describe).join('; ') || 'none'
          }`,
        );
      }
    }
  }

  // 6. Nothing throws where it should not.
  for (const err of outcome.errors) {
    found.push(
      `thrown where nothing should throw: ${err instanceof Error ? err.stack : String(err)}`,
    );
  }
  return found;
}
