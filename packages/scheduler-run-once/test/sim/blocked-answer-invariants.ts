/**
 * Invariant 40: a run its overlap policy blocks is answered as docs/operations.md says ("Overlap
 * policy" and "Manual runs"), and the answer tells its reader what to do next:
 *
 * - a manual run or a re-run (a person asked) is answered 409 `waiting`, and its answer says to
 *   run it again once that run ends or to pass `--allow-overlap` ("Run it again once that run
 *   ends, or pass `--allow-overlap`");
 * - a backfilled slot is answered 409 `waiting` saying it stays missed ("answers 409 `waiting` and
 *   the slot stays missed, never `skipped`");
 * - a slot Scheduler delivered that waits is answered 409 `waiting` saying to retry later
 *   ("`wait`: is answered 409 `waiting`, so Scheduler retries it later");
 * - a job whose every revision is `wait` is never answered `skipped` ("`wait`: is answered 409
 *   `waiting`, so Scheduler retries it later");
 * - a manual run or re-run sent with `--allow-overlap` is never answered `waiting` or `skipped`: it
 *   runs beside ("`--allow-overlap` runs it beside"); and nothing waits or is skipped behind it.
 *
 * Judged on every answered request and its answer's message; the advice, on the `waiting` answers
 * that name the run blocking them (`blockedBy`), not on a lock other runs kept taking.
 */

import { answerLine } from './malformed-lock-invariants.ts';
import type { Delivered, SimOutcome } from './simulator.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** What a `waiting` answer must say, by who sent the request (docs/operations.md). */
const ADVICE: Readonly<Partial<Record<Delivered['source'], string>>> = {
  scheduler: 'retry later',
  manual: '--allow-overlap',
  rerun: '--allow-overlap',
  backfill: 'stays missed',
};

/** Invariant 40 over every answered request of the history. */
export function blockedAnswersSayWhatToDo(outcome: SimOutcome): string[] {
  return [...adviceGiven(outcome), ...nothingWaitsForOverlappers(outcome)];
}

/**
 * No request is answered `skipped` or `waiting` behind a run sent with `--allow-overlap`: such a
 * run takes no lock ("Such a run takes no lock, so the job's next slot does not wait for it
 * either"), judged on the answers' log lines (`blockedBy`).
 */
function nothingWaitsForOverlappers(outcome: SimOutcome): string[] {
  const overlappers = new Set(
    outcome.executions
      .filter((e) => e.allowOverlap === true)
      .map((e) => e.runId),
  );
  return outcome.logs
    .filter(
      (l) =>
        (l.fields.outcome === 'skipped' || l.fields.outcome === 'waiting') &&
        overlappers.has(String(l.fields.blockedBy)),
    )
    .map(
      (l) =>
        `${String(l.fields.jobName)}@${String(l.fields.scheduleTime)} was answered ${String(l.fields.outcome)} at ${iso(l.at)} behind ${String(l.fields.blockedBy).slice(0, 12)}, a run sent with --allow-overlap, which takes no lock`,
    );
}

/** The advice of blocked answers, and the answers `--allow-overlap` and `wait` never get. */
function adviceGiven(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const d of outcome.deliveries) {
    const what = `a ${d.source} request of ${d.jobId}@${d.scheduleTime || '(no schedule time)'} answered ${String(d.outcome)} at ${iso(d.endedAt ?? 0)}`;
    const advice = ADVICE[d.source];
    if (
      d.outcome === 'waiting' &&
      advice !== undefined &&
      namesItsBlocker(outcome, d) &&
      d.message?.includes(advice) !== true
    ) {
      found.push(
        `${what} does not say "${advice}": ${JSON.stringify(d.message)}`,
      );
    }
    if (
      d.allowOverlap === true &&
      (d.outcome === 'waiting' || d.outcome === 'skipped')
    ) {
      found.push(
        `${what}, though it was sent with --allow-overlap: it runs beside any other run of its job`,
      );
    }
    if (d.outcome === 'skipped' && waitEverywhere(outcome, d)) {
      found.push(
        `${what}, though every revision declares it overlap "wait": a blocked run waits, Scheduler retries it`,
      );
    }
  }
  return found;
}

/**
 * Whether `d`'s answer named the run that blocked it (`blockedBy` on its log line): a run the
 * policy blocked, not one whose lock others kept taking (`lockContended`, "retry later").
 */
function namesItsBlocker(outcome: SimOutcome, d: Delivered): boolean {
  return answerLine(outcome, d)?.fields.blockedBy !== undefined;
}

/** Whether every revision of `d`'s deployment that declares its job declares it `wait`. */
function waitEverywhere(outcome: SimOutcome, d: Delivered): boolean {
  const revisions = outcome.deployments[d.deployment]?.revisions ?? [];
  const declared = revisions
    .map((r) => r.jobs.find((j) => j.id === d.jobId))
    .filter((job) => job !== undefined);
  return declared.length > 0 && declared.every((job) => job.overlap === 'wait');
}
