/**
 * Invariant 51: a job whose completion went unrecorded (every try of the write failed) is not run
 * again by a later delivery to the same instance while the run's record still names its attempt in
 * progress. That instance's ledger remembers the completion and records it instead of running the
 * job again (`RunLedger.complete`: "a later claim here records the completion instead of running
 * it again"; docs/how-it-works.md, "If the job succeeded but the completion cannot be recorded").
 * Another instance, a new one in a crashed one's place, or a record another attempt wrote
 * meanwhile (a takeover, a deletion) may run it again: that is the documented limit, and
 * invariant 1 excuses it.
 *
 * Judged by the writes that landed: the last write on the record before the later job started,
 * other than the later attempt's own claim, left it `in_progress` under the earlier attempt. Memory
 * store only (the emulator's outcomes carry no landed writes).
 */
import type { Execution, SimOutcome } from './simulator.ts';

/** Invariant 51 over every execution whose completion went unrecorded. */
export function knownCompletionsNotRunAgain(outcome: SimOutcome): string[] {
  const writes = outcome.recordWrites;
  if (outcome.emulator || writes === undefined) {
    return [];
  }
  const found: string[] = [];
  for (const earlier of outcome.executions) {
    if (!completionUnrecorded(earlier, outcome)) {
      continue;
    }
    for (const later of outcome.executions) {
      const sameRunHere =
        later.runId === earlier.runId &&
        later.instance === earlier.instance &&
        later.start > earlier.start;
      if (!sameRunHere || outcome.foreignRecords?.has(later.runId) === true) {
        continue;
      }
      const readByLater = writes.findLast(
        (w) =>
          w.runId === later.runId &&
          w.at < later.start &&
          w.attemptId !== later.attemptId,
      );
      const stillEarlier =
        readByLater?.status === 'in_progress' &&
        readByLater.attemptId === earlier.attemptId;
      if (stillEarlier) {
        found.push(
          // No attempt id in the message: ids are random, and a replayed history must read the same.
          `invariant 51: ${later.jobId}@${new Date(later.scheduleTime).toISOString()} ran again on ${later.instance} at ${new Date(later.start).toISOString()}, though that instance's completion of the run (the attempt that started at ${new Date(earlier.start).toISOString()}) went unrecorded and the record still named that attempt in progress: its ledger should have recorded the completion instead`,
        );
      }
    }
  }
  return found;
}

/** `e`'s job returned and its answer says its completion went unrecorded. */
function completionUnrecorded(e: Execution, outcome: SimOutcome): boolean {
  return (
    e.result === 'returned' &&
    outcome.logs.some(
      (l) =>
        l.fields.attemptId === e.attemptId &&
        l.fields.completion === 'unrecorded',
    )
  );
}
