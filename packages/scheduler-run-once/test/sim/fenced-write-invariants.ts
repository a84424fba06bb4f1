/**
 * Invariant 50: an answer line's `completion` or `release` says what became of the write, judged
 * against the writes that landed, not against the product's own reading of the record. `recorded`
 * only if a write leaving its run's record in that status (`completed`, `failed`) under its attempt
 * landed once the job had started (its own, or a missed-run check's that ended its lapsed lease
 * `failed`: the record says the attempt failed either way); `lease_lost` only if no such write of
 * the attempt's own request landed, or if after it more than one attempt claimed the run, or
 * another attempt's failure or completion landed, before the answer. A record held by a retry
 * that failed in turn reads as a takeover's (an attempt that took the lapsed lease over and failed
 * as this one did): the product cannot tell them apart, so it warns that the job may have run
 * twice, and this invariant lets it. A fenced write whose earlier
 * try landed with its answer lost, and whose retry then met a Scheduler retry's claim of the run,
 * was recorded (`releasedBefore` in `src/core/ledger.ts`); one that found another attempt's takeover
 * was not. A report that says otherwise tells the operator a failure was lost, or a lost one
 * recorded. (`unrecorded` is not judged: a write that failed every try may still have landed.)
 *
 * Memory store only (the emulator's outcomes carry no landed writes).
 */
import type { Execution, LogLine, SimOutcome } from './simulator.ts';

/** The words that open a delivery's answer line (src/function/handler.ts). */
const ANSWER = 'scheduled run: ';

/** The status each fenced write sets, by the answer field that tells its result. */
const STATUS_OF = { completion: 'completed', release: 'failed' } as const;

/** Invariant 50 over every answer line of a job that ran. */
export function fencedWriteResultsTrue(outcome: SimOutcome): string[] {
  const writes = outcome.recordWrites;
  if (outcome.emulator || writes === undefined) {
    return [];
  }
  const byAttempt = new Map(outcome.executions.map((e) => [e.attemptId, e]));
  const found: string[] = [];
  for (const line of outcome.logs) {
    const e = byAttempt.get(String(line.fields.attemptId));
    if (
      !line.message.startsWith(ANSWER) ||
      e === undefined ||
      outcome.foreignRecords?.has(e.runId) === true
    ) {
      continue;
    }
    for (const field of ['completion', 'release'] as const) {
      const problem = resultProblem(outcome, line, e, field);
      if (problem !== undefined) {
        found.push(
          // No attempt id in the message: ids are random, and a replayed history must read the same.
          `invariant 50: the answer of ${e.jobId}@${new Date(e.scheduleTime).toISOString()} (the attempt that started at ${new Date(e.start).toISOString()} on ${e.instance}, answered at ${new Date(line.at).toISOString()}) ${problem}`,
        );
      }
    }
  }
  return found;
}

/** Why `line`'s `field` misstates what became of `e`'s write, or `undefined`. */
function resultProblem(
  outcome: SimOutcome,
  line: LogLine,
  e: Execution,
  field: keyof typeof STATUS_OF,
): string | undefined {
  const said = line.fields[field];
  if (said !== 'recorded' && said !== 'lease_lost') {
    return undefined;
  }
  const status = STATUS_OF[field];
  const leftSo = (outcome.recordWrites ?? []).filter(
    (w) =>
      w.runId === e.runId &&
      w.attemptId === e.attemptId &&
      w.status === status &&
      w.at >= e.start &&
      w.at <= line.at,
  );
  if (said === 'recorded' && leftSo.length === 0) {
    return `says its ${field} was recorded, but no write leaving the record ${status} under its attempt landed`;
  }
  const own = leftSo.find((w) => w.sentBy === e.attemptId);
  if (said === 'lease_lost' && own !== undefined) {
    const after = (outcome.recordWrites ?? []).filter(
      (w) => w.runId === e.runId && w.at > own.at && w.at <= line.at,
    );
    const claimants = new Set(
      after.filter((w) => w.status === 'in_progress').map((w) => w.attemptId),
    );
    const othersEnded = after.some(
      (w) => w.status !== 'in_progress' && w.attemptId !== e.attemptId,
    );
    if (claimants.size <= 1 && !othersEnded) {
      return `says its ${field} found the lease lost, but its own write leaving the record ${status} landed at ${new Date(own.at).toISOString()}, and the record then held that or one retry's claim after it`;
    }
  }
  return undefined;
}
