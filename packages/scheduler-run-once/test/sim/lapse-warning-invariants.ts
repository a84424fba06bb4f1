/**
 * Invariant 45, a lapse told before the next write: an attempt whose lease ran out unrenewed logs
 * why (`lapseCause`: `stalled`, `extension_unanswered`, `job_timeout`; docs/operations.md, the
 * `lease lapsed: …` warnings), or that it lapsed (the lapse timer's warning, when it came first),
 * before it sends its next write to its run's record
 * (src/core/run-once.ts, `#warnIfLapsed`: "Warns once, before any round trip, that the lease
 * lapsed unrenewed"). Without it, the operator sees a takeover or a lost lease with no word of
 * the stall or the slow Firestore that let the lease run out.
 *
 * Judged where the attempt's own writes tell it exactly ({@link unbeatenTruth}: no fault settled
 * before the write, and no earlier write of the attempt in flight while its instance was paused): at the first write sent
 * more than a lease after the last renewal's answer, with no failed extension since that renewal
 * (then the cause is `extensions_failed`, told by the failures' own warnings). Only for jobs that
 * never note: each write of theirs after the claim is a beat or the final write, and both warn
 * first; a note is a renewal the job sends when it likes, without the warning.
 */
import { pausedWithin, unbeatenTruth } from './lease-loss-invariants.ts';
import { LAPSE_TIMER_WORDS, renewedBetween } from './report-invariants.ts';
import type { Execution, LogLine, SimOutcome } from './simulator.ts';

/** Slack for a lease's end against the write that finds it ran out, ms (a timer's granularity). */
const LAPSE_EDGE_MS = 1;

/** The words that open every lapse warning, the timer's and those with a cause. */
const LAPSE_WORDS = 'lease lapsed: ';

/** The words that open a failed extension's warning (src/core/run-once.ts, `#extend`). */
const FAILED_EXTENSION = 'lease extension failed';

const iso = (ms: number) => new Date(ms).toISOString();

/** Invariant 45 over every execution of a job that never noted, and every attempt's lapse lines. */
export function lapseToldBeforeNextWrite(outcome: SimOutcome): string[] {
  return [...untoldLapses(outcome), ...lapseCauseToldOnce(outcome)];
}

/**
 * A lapse's cause is told once (`#warnIfLapsed`: "Warns once"): after a `lease lapsed: …` line of
 * an attempt, whether the lapse timer's or one with its `lapseCause`, no `lapseCause` line of that
 * attempt follows until a renewal of it landed (memory store only: on the emulator no landing is
 * seen). The lapse timer's own line may follow a cause: it is the notice that aborts the job.
 */
function lapseCauseToldOnce(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const lastLapse = new Map<unknown, LogLine>();
  for (const line of outcome.logs) {
    if (!line.message.startsWith(LAPSE_WORDS)) {
      continue;
    }
    const previous = lastLapse.get(line.fields.attemptId);
    lastLapse.set(line.fields.attemptId, line);
    if (
      previous === undefined ||
      line.fields.lapseCause === undefined ||
      renewedBetween(outcome, previous, line)
    ) {
      continue;
    }
    found.push(
      `attempt ${String(line.fields.attemptId).slice(0, 8)} told its lease's lapse again at ${iso(line.at)} (${String(line.fields.lapseCause)}), after "${previous.message.slice(0, 60)}…" at ${iso(previous.at)}, with no renewal landed between: a lapse is told once`,
    );
  }
  return found;
}

/** Lapses not told before the attempt's next write, over every execution of a job that never noted. */
function untoldLapses(outcome: SimOutcome): string[] {
  return outcome.executions.flatMap((e) => {
    if (e.firstNoteAt !== undefined) {
      return [];
    }
    const lines = outcome.logs.filter(
      (l) => l.fields.attemptId === e.attemptId,
    );
    const untold = firstUntoldLapse(e, lines, outcome);
    return untold === undefined
      ? []
      : [
          `${e.instance}: the job ${e.jobId}@${iso(e.scheduleTime)} sent a write to its run's record at ${iso(untold.sentAt)}, after its lease ran out unrenewed at ${iso(untold.renewedAt + untold.leaseMs)} (${untold.cause}), with no lease-lapsed warning saying why before it`,
        ];
  });
}

/**
 * The first write of `e`'s attempt sent after its lease ran out unrenewed, with no `lapseCause`
 * warning of the attempt at or before it; `undefined` when every such write was told, or the
 * writes cannot tell.
 */
function firstUntoldLapse(
  e: Execution,
  lines: readonly LogLine[],
  outcome: SimOutcome,
):
  | { sentAt: number; renewedAt: number; leaseMs: number; cause: string }
  | undefined {
  const spans = outcome.attemptWriteSpans?.get(e.attemptId) ?? [];
  for (const [i, span] of spans.entries()) {
    if (span.sentAt <= e.start) {
      continue; // its claim
    }
    // A write in flight while the instance was paused is answered as it wakes, whatever its plan
    // said: from then on the writes cannot tell when the attempt learnt what.
    const heldInFlight = spans
      .slice(0, i)
      .some((earlier) =>
        pausedWithin(outcome, e.instance, earlier.sentAt, earlier.answeredBy),
      );
    if (heldInFlight) {
      return undefined;
    }
    const truth = unbeatenTruth(span.sentAt, e, outcome);
    if (
      truth === undefined ||
      truth.cause === 'renewed' ||
      span.sentAt - truth.renewedAt <= truth.leaseMs + LAPSE_EDGE_MS
    ) {
      continue;
    }
    const failedSince = lines.some(
      (l) =>
        l.message.startsWith(FAILED_EXTENSION) &&
        l.at >= truth.renewedAt &&
        l.at <= span.sentAt,
    );
    // The lapse timer's own warning counts when it came first: the simulator's clock fires the
    // timers a pause held in the order they were set, so the lapse timer, armed before the beat's
    // interval was restarted, can run before a beat that fell due sooner (Node, which takes its
    // timer lists by due time, would run the beat first).
    const told = lines.some(
      (l) =>
        (l.fields.lapseCause !== undefined ||
          l.message.startsWith(LAPSE_TIMER_WORDS)) &&
        l.at <= span.sentAt,
    );
    if (failedSince || told) {
      return undefined;
    }
    return { sentAt: span.sentAt, ...truth };
  }
  return undefined;
}
