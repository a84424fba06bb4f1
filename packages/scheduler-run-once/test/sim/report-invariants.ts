/**
 * Invariant 29, an attempt's reports say what happened, and to whom (issue 40, mutation testing of
 * src/core/run-once.ts). The warnings of an attempt's lease and the reason its signal aborted are
 * how an operator and a job learn that a run may have run twice or was stopped
 * (docs/how-it-works.md, "Long jobs: the lease heartbeat"; docs/jobs.md, `ctx.signal`). Judged
 * against what the executions saw and what the history did:
 *
 * - a job's signal aborts with an `AttemptAbortedError` that says why: a known reason and a message;
 * - a job aborted for a lost lease was warned about first: `lease lapsed: …` or `lease lost: …`,
 *   naming its attempt;
 * - every WARNING and ERROR says something (a message that is not empty);
 * - every lease warning names its attempt; a failed extension's warning counts the failures
 *   in a row (1, 2, …) and carries the lease and the error;
 * - `lease lost: another attempt took this run over …` gives the count it logs, and a cause that
 *   happened (invariant 22's judge), once per attempt, and no write of the attempt follows it while
 *   its job runs, nor its lapse timer's warning: the heartbeat stops there;
 * - a fenced write's report names the write the attempt made: the completion of a job that
 *   returned, the release of one that threw;
 * - a delivery's answer line (`scheduled run: OUTCOME`, docs/operations.md) of a job that ran says
 *   `processed` for a job that returned, with its `completion`, and `failed` for one that threw,
 *   with its `release`; one that says the write went `unrecorded` follows the ERROR that names it,
 *   and one says `lease_lost` exactly when the lease-lost warning of that write came before it;
 *   the answer sent to the caller then gives the cause that warning gave.
 */
import { falseCause, jobOf } from './lease-loss-invariants.ts';
import { answerLine } from './malformed-lock-invariants.ts';
import type { Execution, LogLine, SimOutcome } from './simulator.ts';

/** The reasons `AttemptAbortedError.reason` takes (docs/jobs.md, `ctx.signal`). */
const ABORT_REASONS = new Set(['lease_lost', 'shutdown', 'job_timeout']);

/** The words that open a warning about an attempt's lease (docs/how-it-works.md). */
const LEASE_WARNING = /^lease (lapsed|lost): /;
const FAILED_EXTENSION = 'lease extension failed';
/** An attempt id: a UUID (`randomUUID`, src/core/ledger.ts). */
const ATTEMPT_ID =
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const LEASE_LOST = 'lease lost: ';
const TAKEN_OVER = 'lease lost: another attempt took this run over ';
/**
 * The words that open the lapse timer's own warning (`LEASE_LAPSED_MESSAGE`, `#lapsed`): it says the
 * lease lapsed, not why (invariants 29 and 45).
 */
export const LAPSE_TIMER_WORDS = 'lease lapsed: no extension was confirmed';

/** A job's signal aborts with a reason it can read: a known `reason` and a message. */
function abortExplained(e: Execution): string[] {
  if (e.abortedAt === undefined) {
    return [];
  }
  const found: string[] = [];
  if (!ABORT_REASONS.has(e.abortReason ?? '')) {
    found.push(
      `${jobOf(e)} had its signal aborted without a known reason (${e.abortReason})`,
    );
  }
  if ((e.abortMessage ?? '') === '') {
    found.push(
      `${jobOf(e)} had its signal aborted (${e.abortReason}) with no message saying why`,
    );
  }
  return found;
}

/** A job aborted for a lost lease was warned about, naming its attempt, by the time it aborted. */
function leaseAbortWarned(e: Execution, outcome: SimOutcome): string[] {
  if (e.abortReason !== 'lease_lost' || e.abortedAt === undefined) {
    return [];
  }
  const abortedAt = e.abortedAt;
  const warned = outcome.logs.some(
    (line) =>
      line.fields.attemptId === e.attemptId &&
      line.at <= abortedAt &&
      LEASE_WARNING.test(line.message),
  );
  return warned
    ? []
    : [
        `${jobOf(e)} was aborted for a lost lease at ${new Date(abortedAt).toISOString()} with no lease warning naming its attempt`,
      ];
}

/** Whether `value` is a whole number of at least 1. */
function countable(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1;
}

/**
 * A failed extension's warning carries its error and lease, and counts the failures in a row: 1
 * after a renewal landed (or the claim), one more than the attempt's last count otherwise.
 */
function failedExtensionTold(
  line: LogLine,
  previous: LogLine | undefined,
  outcome: SimOutcome,
): string | undefined {
  const { failedExtensions, leaseMs, err } = line.fields;
  if (!countable(failedExtensions)) {
    return `counts ${String(failedExtensions)} failed extensions`;
  }
  const previousCount = Number(previous?.fields.failedExtensions ?? 0);
  const startsAgain =
    failedExtensions === 1 &&
    (previous === undefined || renewedBetween(outcome, previous, line));
  if (!startsAgain && failedExtensions !== previousCount + 1) {
    return `counts ${failedExtensions} failed extensions after ${previousCount}`;
  }
  if (typeof leaseMs !== 'number' || leaseMs <= 0) {
    return 'names no lease';
  }
  return err === undefined ? 'carries no error' : undefined;
}

/**
 * Whether a renewal of the attempt `previous` and `line` name landed between them (a count starts
 * again at 1 only after one did). On the emulator no write is seen landing: any count of 1 passes.
 */
export function renewedBetween(
  outcome: SimOutcome,
  previous: LogLine,
  line: LogLine,
): boolean {
  if (outcome.emulator) {
    return true;
  }
  const leaseEnds = outcome.leaseEnds as SimOutcome['leaseEnds'] | undefined;
  const landed = leaseEnds?.get(String(line.fields.attemptId)) ?? [];
  return landed.some((w) => w.landedAt >= previous.at && w.landedAt <= line.at);
}

/** The cause a `lease lost: another attempt took this run over …` warning gives, by its words. */
function takeoverCause(message: string): string | undefined {
  if (/after \d+ failed extension\(s\)/.test(message)) {
    return 'extensions_failed';
  }
  if (message.includes('no extension ran for a whole lease')) {
    return 'stalled';
  }
  if (message.includes('had no answer from Firestore')) {
    return 'extension_unanswered';
  }
  if (message.includes('no extension had failed')) {
    return 'unknown';
  }
  return undefined;
}

/** A takeover's warning gives the count of failures it logs, and a cause that happened. */
function takeoverTold(
  line: LogLine,
  e: Execution | undefined,
  outcome: SimOutcome,
): string | undefined {
  const failures = line.fields.failedExtensions;
  const cause = takeoverCause(line.message);
  if (cause === undefined) {
    return 'gives no cause';
  }
  const counted = line.message.match(/after (\d+) failed extension/)?.[1];
  if (cause === 'extensions_failed' && Number(counted) !== failures) {
    return `says ${counted} failed extensions, and logs ${String(failures)}`;
  }
  if (cause !== 'extensions_failed' && failures !== 0) {
    return `logs ${String(failures)} failed extensions, and its words give another cause (${cause})`;
  }
  return falseCause(cause, line, e, outcome);
}

/** A fenced write's report names the write the attempt made (`fence`). */
function fenceNamed(
  line: LogLine,
  e: Execution | undefined,
): string | undefined {
  const { fence } = line.fields;
  if (fence === undefined || e === undefined || e.result === 'running') {
    return undefined;
  }
  const expected =
    e.result === 'returned'
      ? 'completion'
      : e.result === 'threw'
        ? 'release'
        : undefined;
  if (expected === undefined || fence === expected) {
    return undefined;
  }
  return `names the ${String(fence)} of a job that ${e.result}`;
}

/** The words that open a delivery's answer line (src/function/handler.ts). */
const ANSWER = 'scheduled run: ';
/** How a fenced write may end, as an answer line's `completion` or `release` says it. */
const FENCE_RESULTS = new Set(['recorded', 'lease_lost', 'unrecorded']);
/** The words of the ERROR for a fenced write that went unrecorded, by the write. */
const UNRECORDED_WORDS = { completion: 'completion', release: 'released' };

/**
 * Why the answer line of a delivery whose job ran (`e`) misreports it, or `undefined`: its outcome
 * must follow the job's result, its write's result be one of {@link FENCE_RESULTS}, and an
 * `unrecorded` write follow the ERROR naming it (`earlier`: the attempt's lines before it).
 */
function answerMisreports(
  line: LogLine,
  e: Execution,
  earlier: readonly LogLine[],
): string | undefined {
  const outcome = line.fields.outcome;
  const expected =
    e.result === 'returned'
      ? { outcome: 'processed', write: 'completion' as const }
      : e.result === 'threw'
        ? { outcome: 'failed', write: 'release' as const }
        : undefined;
  if (expected === undefined) {
    return undefined;
  }
  if (outcome !== expected.outcome) {
    return `says ${String(outcome)} for a job that ${e.result}`;
  }
  const written = line.fields[expected.write];
  if (!FENCE_RESULTS.has(String(written))) {
    return `names no result of its ${expected.write} (${String(written)})`;
  }
  const lossWarned = earlier.some(
    (l) =>
      l.fields.fence === expected.write && l.fields.leaseLoss !== undefined,
  );
  if (written === 'lease_lost' && !lossWarned) {
    return `says its ${expected.write} found the lease lost, with no lease-lost warning naming that write before it`;
  }
  if (written !== 'lease_lost' && lossWarned) {
    return `says its ${expected.write} was ${String(written)}, after a warning that it found the lease lost`;
  }
  if (written !== 'unrecorded') {
    return undefined;
  }
  const told = earlier.some(
    (l) =>
      l.level === 'ERROR' &&
      l.fields.fence === expected.write &&
      l.message.includes(UNRECORDED_WORDS[expected.write]),
  );
  return told
    ? undefined
    : `says its ${expected.write} went unrecorded, with no ERROR naming that write before it`;
}

/**
 * A job that returned or threw on an instance that lived to answer has its delivery's answer line,
 * naming its attempt: how an operator finds what became of a run (docs/operations.md).
 */
function answerLogged(e: Execution, lines: readonly LogLine[]): string[] {
  const ended = e.result === 'returned' || e.result === 'threw';
  if (!ended || e.crashedBeforeAnswer === true || e.diedAt !== undefined) {
    return [];
  }
  return lines.some((line) => line.message.startsWith(ANSWER))
    ? []
    : [`${jobOf(e)} ${e.result}, and no answer line names its attempt`];
}

/** Why `line`, a warning or error of an attempt, misreports it, or `undefined`. */
function lineMisreports(
  line: LogLine,
  e: Execution | undefined,
  previousFailure: LogLine | undefined,
  outcome: SimOutcome,
): string | undefined {
  // A WARNING or ERROR is read by a person, and matched by alerts: it says something.
  if (line.message.trim() === '') {
    return 'says nothing';
  }
  const aboutLease =
    LEASE_WARNING.test(line.message) ||
    line.message.startsWith(FAILED_EXTENSION);
  // The run audit's own attempts run no simulated job: their id is judged by its form only.
  if (aboutLease && !ATTEMPT_ID.test(String(line.fields.attemptId))) {
    return `names no attempt (${String(line.fields.attemptId)})`;
  }
  if (line.message.startsWith(FAILED_EXTENSION)) {
    return failedExtensionTold(line, previousFailure, outcome);
  }
  // A fenced write's loss (`fence`) gives its cause as `leaseLoss`, judged by invariant 22; the
  // heartbeat's (no `fence`) says who took the run, and why, in its words.
  if (line.message.startsWith(LEASE_LOST) && line.fields.fence === undefined) {
    return line.message.startsWith(TAKEN_OVER)
      ? takeoverTold(line, e, outcome)
      : `is the heartbeat's lease-lost warning but does not say that another attempt took the run over ("${TAKEN_OVER.trim()} …")`;
  }
  return fenceNamed(line, e);
}

/** Invariant 29: every attempt's report says what happened, and names the attempt it concerns. */
export function attemptReportsTrue(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const byAttempt = new Map(outcome.executions.map((e) => [e.attemptId, e]));
  const lastFailure = new Map<string, LogLine>();
  const linesOf = new Map<string, LogLine[]>();
  for (const line of outcome.logs) {
    const attemptId = String(line.fields.attemptId);
    const e = byAttempt.get(attemptId);
    if (e !== undefined) {
      const earlier = linesOf.get(attemptId) ?? [];
      const wrong = line.message.startsWith(ANSWER)
        ? answerMisreports(line, e, earlier)
        : undefined;
      if (wrong !== undefined) {
        found.push(
          `${jobOf(e)} was answered "${line.message}", which ${wrong}`,
        );
      }
      earlier.push(line);
      linesOf.set(attemptId, earlier);
    }
    if (line.level !== 'WARNING' && line.level !== 'ERROR') {
      continue;
    }
    const why = lineMisreports(line, e, lastFailure.get(attemptId), outcome);
    if (why !== undefined) {
      const who = e === undefined ? line.instance : jobOf(e);
      found.push(
        `${who} logged "${line.message.slice(0, 60)}" at ${new Date(line.at).toISOString()}, which ${why}`,
      );
    }
    if (line.message.startsWith(FAILED_EXTENSION)) {
      lastFailure.set(attemptId, line);
    }
  }
  for (const e of outcome.executions) {
    found.push(...abortExplained(e), ...leaseAbortWarned(e, outcome));
    found.push(...answerLogged(e, linesOf.get(e.attemptId) ?? []));
  }
  found.push(...takeoverStopsHeartbeat(outcome));
  found.push(...answersTellTheLossWarned(outcome));
  return found;
}

/**
 * A delivery whose job ran and whose completion or release found the lease lost is answered with
 * the cause its attempt's warning gave: the caller reads the answer, the operator the log, and
 * both must name the same cause (`leaseLoss`).
 */
function answersTellTheLossWarned(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const d of outcome.deliveries ?? []) {
    if (d.outcome !== 'processed' && d.outcome !== 'failed') {
      continue;
    }
    const line = answerLine(outcome, d);
    const lost =
      line?.fields.completion === 'lease_lost' ||
      line?.fields.release === 'lease_lost';
    const warning = lost
      ? outcome.logs.find(
          (l) =>
            l.fields.attemptId === line?.fields.attemptId &&
            l.fields.fence !== undefined &&
            typeof l.fields.leaseLoss === 'string',
        )
      : undefined;
    if (warning === undefined || d.message?.includes(warning.message)) {
      continue;
    }
    found.push(
      `a ${d.source} request of ${d.jobId}@${d.scheduleTime || '(no schedule time)'} was answered ${d.outcome} at ${new Date(d.endedAt ?? 0).toISOString()} saying ${JSON.stringify(d.message)}, while its attempt warned that its lease was lost to ${String(warning.fields.leaseLoss)}: "${warning.message}"`,
    );
  }
  return found;
}

/**
 * An attempt learns once that another attempt took its run over, and its heartbeat stops there
 * (docs/how-it-works.md, "Long jobs: the lease heartbeat"): its `lease lost: another attempt took
 * this run over …` warning (the heartbeat's, without a `fence`) comes at most once, and while its
 * job still runs after it, the attempt sends no write to the run's record (the completion or
 * release as the job ends is the one left), and its lapse timer never warns after it (the job's
 * signal was aborted with the takeover's words; a lapse warning after them would tell a lapse
 * that no longer matters). A heartbeat that beat on would write, and warn, for a
 * run it no longer holds, a third of a lease at a time.
 */
function takeoverStopsHeartbeat(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const byAttempt = new Map(outcome.executions.map((e) => [e.attemptId, e]));
  const warned = new Set<string>();
  for (const line of outcome.logs) {
    if (
      !line.message.startsWith(TAKEN_OVER) ||
      line.fields.fence !== undefined
    ) {
      continue;
    }
    const attemptId = String(line.fields.attemptId);
    const e = byAttempt.get(attemptId);
    const who = e === undefined ? `attempt ${attemptId.slice(0, 8)}` : jobOf(e);
    if (warned.has(attemptId)) {
      found.push(
        `${who} was warned again that another attempt took its run over, at ${new Date(line.at).toISOString()}: its heartbeat must stop at the first`,
      );
    }
    warned.add(attemptId);
    const end = e?.end ?? outcome.finalMs;
    const later = (outcome.attemptWrites?.get(attemptId) ?? []).filter(
      (at) => at > line.at && at < end,
    );
    if (later.length > 0) {
      found.push(
        `${who} sent ${later.length} write(s) to its run's record after it learnt another attempt took the run over, while its job still ran: its heartbeat must stop there`,
      );
    }
    const lapseTimer = outcome.logs.find(
      (l) =>
        l.at >= line.at &&
        l !== line &&
        l.fields.attemptId === line.fields.attemptId &&
        l.message.startsWith(LAPSE_TIMER_WORDS),
    );
    if (lapseTimer !== undefined) {
      found.push(
        `${who} warned at ${new Date(lapseTimer.at).toISOString()} that its lease lapsed unconfirmed ("${lapseTimer.message.slice(0, 60)}…"), after it learnt another attempt took the run over: its heartbeat, lapse timer included, must stop there`,
      );
    }
  }
  return found;
}
