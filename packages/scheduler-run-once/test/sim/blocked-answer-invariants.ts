/**
 * Invariant 40: a run its overlap policy blocks is answered as docs/operations.md says ("Overlap
 * policy" and "Manual runs"), and the answer tells its reader what to do next:
 *
 * - a manual run or a re-run (a person asked) is answered 409 `waiting`, and its answer says to
 *   run it again once that run ends or to pass `--allow-overlap` ("Run it again once that run
 *   ends, or pass `--allow-overlap`");
 * - a backfilled slot is answered 409 `waiting` saying it stays missed ("answers 409 `waiting` and
 *   the slot stays missed, never `skipped`");
 * - a job whose every revision is `wait` is never answered `skipped` ("`wait`: is answered 409
 *   `waiting`, so Scheduler retries it later").
 *
 * Judged on every answered request and its answer's message; the advice, on the `waiting` answers
 * that name the run blocking them (`blockedBy`), not on a lock other runs kept taking.
 */

import type { Delivered, SimOutcome } from './simulator.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** What a `waiting` answer must say, by who sent the request (docs/operations.md). */
const ADVICE: Readonly<Partial<Record<Delivered['source'], string>>> = {
  manual: '--allow-overlap',
  rerun: '--allow-overlap',
  backfill: 'stays missed',
};

/** Invariant 40 over every answered request of the history. */
export function blockedAnswersSayWhatToDo(outcome: SimOutcome): string[] {
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
  return outcome.logs.some(
    (l) =>
      l.at === d.endedAt &&
      l.instance === d.instance &&
      l.fields.jobName === d.jobId &&
      l.fields.outcome === d.outcome &&
      l.fields.blockedBy !== undefined,
  );
}

/** Whether every revision of `d`'s deployment that declares its job declares it `wait`. */
function waitEverywhere(outcome: SimOutcome, d: Delivered): boolean {
  const revisions = outcome.deployments[d.deployment]?.revisions ?? [];
  const declared = revisions
    .map((r) => r.jobs.find((j) => j.id === d.jobId))
    .filter((job) => job !== undefined);
  return declared.length > 0 && declared.every((job) => job.overlap === 'wait');
}
