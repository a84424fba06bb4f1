/**
 * Invariant 49: a request is answered `unavailable` (500, "Firestore is unavailable") only when
 * Firestore failed it: one of its operations met a fault (refused, lost, never answered, retried,
 * or answered past `FIRESTORE_TIMEOUT_SECONDS`), its instance was paused while it was open (its
 * answers come late), or its instance was shutting down. A write the store refuses for what the
 * product sent (a field it cannot store, an empty document) is otherwise answered as Firestore's
 * failure: Scheduler retries it, and a `skip` job's blocked slot, whose `skipped` record never
 * lands, runs late instead of being skipped, which no other invariant tells from a fault. The
 * same holds for every log line that names Firestore's failure (a check's write, a relog claim).
 *
 * Memory store only (the emulator's outcomes carry no operations).
 */
import { machineOf } from './report-line-invariants.ts';
import type { Delivered, SimOutcome } from './simulator.ts';

/** The answer this invariant judges. */
const UNAVAILABLE = 'unavailable';

/** The error type the product gives Firestore's failures (`LedgerUnavailableError`). */
const FIRESTORE_FAILURE = 'LedgerUnavailableError';

/** Invariant 49 over every request and every log line of the history. */
export function unavailableOnlyWhenFirestoreFailed(
  outcome: SimOutcome,
): string[] {
  if (outcome.emulator) {
    return [];
  }
  return [...unexplainedAnswers(outcome), ...unexplainedLines(outcome)];
}

/** The requests answered `unavailable` that no fault, pause or shutdown explains. */
function unexplainedAnswers(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const d of outcome.deliveries) {
    if (d.outcome !== UNAVAILABLE || d.ops === undefined) {
      continue;
    }
    const ended = d.endedAt ?? Number.POSITIVE_INFINITY;
    const faulted = (d.ops ?? []).some((op) => op.troubled);
    if (
      !faulted &&
      !isShutdownAnswer(d) &&
      !isExplained(outcome, d.instance, d.sentAt, ended)
    ) {
      found.push(
        `invariant 49: ${d.source} request of ${d.jobId}@${d.scheduleTime || '(no schedule time)'} on ${d.instance}, sent at ${new Date(d.sentAt).toISOString()}, was answered unavailable, but none of its ${d.ops.length} Firestore operations met a fault, its instance was not paused and was not shutting down: ${d.message ?? ''}`,
      );
    }
  }
  return found;
}

/**
 * Whether a fault or a pause of `instance` explains a failure seen between `from` and `until`. A
 * fault counts if it met an operation the instance sent in that time, or up to a Firestore timeout
 * before, whichever request sent it: a request for a run whose claim another request on its
 * instance is already making waits on that claim, and sends nothing of its own.
 */
function isExplained(
  outcome: SimOutcome,
  instance: string,
  from: number,
  until: number,
): boolean {
  const timeoutMs = outcome.firestoreTimeoutMs;
  const faulted = (outcome.troubledOps ?? []).some(
    (op) =>
      op.machine === instance && op.at >= from - timeoutMs && op.at <= until,
  );
  const paused = (outcome.instancePauses ?? []).some(
    (p) => p.instance === instance && p.from <= until && p.until >= from,
  );
  return faulted || paused;
}

/** The answer of an instance shutting down (SIGTERM): it takes no new run. */
function isShutdownAnswer(d: Delivered): boolean {
  return /shutting down/i.test(d.message ?? '');
}

/**
 * The log lines naming Firestore's failure (an `err` of {@link FIRESTORE_FAILURE}) that no fault
 * met on their machine (an instance, or the final checks' `auditor` and `operator`) within two Firestore timeouts before the line (the failed operation, and
 * the client's own retry of it), nor a pause of the instance, explains: a missed-run check's
 * write, a relog claim or an acknowledgement the store refused for what the product sent, which no
 * answer shows (a failed check never fails its run).
 */
function unexplainedLines(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const windowMs = 2 * outcome.firestoreTimeoutMs;
  for (const line of outcome.logs) {
    const err = line.fields.err as { type?: unknown } | undefined;
    if (err?.type !== FIRESTORE_FAILURE) {
      continue;
    }
    if (!isExplained(outcome, machineOf(line), line.at - windowMs, line.at)) {
      const said = (err as { message?: unknown }).message;
      found.push(
        `invariant 49: "${line.message}" on ${line.instance} at ${new Date(line.at).toISOString()} names Firestore's failure, but no Firestore operation of its instance met a fault in the ${windowMs / 1000} s before it and the instance was not paused: ${String(said)}`,
      );
    }
  }
  return found;
}
