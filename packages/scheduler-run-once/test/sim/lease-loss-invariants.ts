/**
 * The invariants of an attempt's lease and signal (issue 40, mutation testing of
 * src/core/run-once.ts).
 *
 * Invariant 22, a lost lease told truly: the `leaseLoss` an attempt's completion or release logs
 * (`LEASE_LOSS_MESSAGES` in src/core/run-once.ts, answered to Scheduler and documented in
 * docs/operations.md), and the `lapseCause` of its lapse warning, name a cause that happened,
 * judged against the history: `extensions_failed` only after the attempt logged a failed
 * extension, `stalled` and `extension_unanswered` only when its instance was paused while the job
 * ran (or Firestore's answers came late), `job_timeout` only for a job that ran past
 * JOB_TIMEOUT_SECONDS. Where the attempt's own writes tell exactly (sent when, answered when, no
 * fault and no other writer), `stalled` and `extension_unanswered` are judged by them: a write sent
 * within the lease after the last renewal's answer, or none. `unknown` (another writer changed the
 * record) is false where one of those causes was there. A wrong cause sends the operator after the wrong
 * fault, and the invariants of a double run (invariant 1) excuse a run by these causes.
 *
 * Invariants 23 to 28, 42 and 43 follow, each at its function.
 */
import { jobTimeoutMs, pauseEndMs } from './model.ts';
import type {
  Execution,
  LogLine,
  RecordWrite,
  SimOutcome,
} from './simulator.ts';

/**
 * Slack for a timer of the product against the job's own start and end, ms: the attempt's timers
 * start as its claim is answered, a moment before its job starts.
 */
const TIMER_SLACK_MS = 1_000;

/** JOB_TIMEOUT_SECONDS of `outcome`'s deployments, ms (the default, an hour, when it sets none). */
function timeoutOf(outcome: SimOutcome): number {
  const history = outcome.history as SimOutcome['history'] | undefined;
  return jobTimeoutMs(history ?? {});
}

/**
 * An execution as a violation names it: its instance, job, slot and start. Never its attempt id, a
 * random UUID: a replayed history must say the same words.
 */
export function jobOf(e: Execution): string {
  return `${e.instance}: the job ${e.jobId}@${new Date(e.scheduleTime).toISOString()} started at ${new Date(e.start).toISOString()}`;
}

/**
 * Whether Firestore could hold a renewal unanswered for a whole lease in `outcome`: answers that
 * come late, or a hanging connection. The product then tells a stall too (no extension failed, none
 * confirmed), although its instance ran: see docs/tests.md, "Mutation testing".
 */
function slowAnswers(outcome: SimOutcome): boolean {
  const history = outcome.history as SimOutcome['history'] | undefined;
  return (
    history === undefined ||
    (history.lateAnswers ?? 0) > 0 ||
    history.events.some((event) => event.type === 'hang')
  );
}

/**
 * Why `cause`, told by `line`, could not have happened to `e`'s attempt, or `undefined` if it
 * could.
 */
export function falseCause(
  cause: unknown,
  line: LogLine,
  e: Execution | undefined,
  outcome: SimOutcome,
): string | undefined {
  const { logs } = outcome;
  if (cause === 'extensions_failed') {
    const failed = logs.some(
      (l) =>
        l.fields.attemptId === line.fields.attemptId &&
        l.at <= line.at &&
        l.message.startsWith('lease extension failed'),
    );
    return failed ? undefined : 'no extension of it had failed';
  }
  if (cause === 'stalled' || cause === 'extension_unanswered') {
    return falseUnbeatenCause(cause, line, e, outcome);
  }
  if (cause === 'unknown') {
    return falseUnknown(line, e, outcome);
  }
  if (cause === 'job_timeout') {
    const start =
      e?.start ?? untrackedAttemptStart(outcome, line.fields.attemptId);
    if (start === undefined) {
      return undefined;
    }
    const ranMs = (e?.end ?? line.at) - start;
    return ranMs >= timeoutOf(outcome) - TIMER_SLACK_MS
      ? undefined
      : `the job ran ${ranMs} ms, within JOB_TIMEOUT_SECONDS`;
  }
  return undefined;
}

/**
 * Why `stalled` or `extension_unanswered`, told by `line`, is false for `e`'s attempt: first by
 * what could cause either (a pause, or Firestore slow), then, where the attempt's writes tell
 * exactly ({@link unbeatenTruth}), by what they say.
 */
function falseUnbeatenCause(
  cause: 'stalled' | 'extension_unanswered',
  line: LogLine,
  e: Execution | undefined,
  outcome: SimOutcome,
): string | undefined {
  const paused =
    (e !== undefined && e.pausedMs > 0) ||
    pausedAround(outcome, line, e?.start);
  // No extension sent for a whole lease: only a paused (or starved) instance skips its beats.
  if (cause === 'stalled' && !paused) {
    return 'its instance was never paused while the job ran, so its heartbeat never stalled';
  }
  // An extension sent and unanswered for a lease: Firestore slow, or the instance paused with
  // the answer on its way.
  if (cause === 'extension_unanswered' && !paused && !slowAnswers(outcome)) {
    return 'its instance was never paused while the job ran, and Firestore never answered late nor hung';
  }
  const truth =
    e === undefined ? undefined : unbeatenTruth(line.at, e, outcome);
  if (truth === undefined || truth.cause === cause) {
    return undefined;
  }
  return truth.cause === 'renewed'
    ? `its last renewal was answered at ${new Date(truth.renewedAt).toISOString()}, less than a lease before`
    : `its writes say ${truth.cause}: its last renewal was answered at ${new Date(truth.renewedAt).toISOString()}, and ${truth.cause === 'stalled' ? 'it sent no write within the lease after it' : 'it sent a write within the lease after it, unanswered'}`;
}

/**
 * Why `unknown`, told by `line` (`another attempt took this run over` with no cause the attempt
 * could see: docs/operations.md), is false for `e`'s attempt: a cause it could see was there. An
 * extension of it had failed with no renewal landed since (`extensions_failed`), or, within
 * JOB_TIMEOUT_SECONDS, its own writes say no renewal landed for more than a whole lease
 * ({@link unbeatenTruth}: `stalled` or `extension_unanswered`). Told `unknown` instead, the
 * operator looks for another writer that was never there.
 */
function falseUnknown(
  line: LogLine,
  e: Execution | undefined,
  outcome: SimOutcome,
): string | undefined {
  const attemptId = String(line.fields.attemptId);
  const failed = outcome.logs.findLast(
    (l) =>
      l.fields.attemptId === attemptId &&
      l.at <= line.at &&
      l.message.startsWith('lease extension failed'),
  );
  const renewedSince = (landedLeases(outcome).get(attemptId) ?? []).some(
    (l) => failed !== undefined && l.landedAt > failed.at,
  );
  if (failed !== undefined && !renewedSince) {
    return `${String(failed.fields.failedExtensions)} extension(s) of it had failed, and no renewal landed since`;
  }
  if (
    e === undefined ||
    line.at - e.start >= timeoutOf(outcome) - TIMER_SLACK_MS
  ) {
    return undefined;
  }
  const truth = unbeatenTruth(line.at, e, outcome);
  if (
    truth === undefined ||
    truth.cause === 'renewed' ||
    line.at - truth.renewedAt <= truth.leaseMs + UNBEATEN_SLACK_MS
  ) {
    return undefined;
  }
  return `its writes say ${truth.cause}: its last renewal was answered at ${new Date(truth.renewedAt).toISOString()}, more than a lease before`;
}

/** Slack for a lease's end against the line that tells it ran out, ms (a timer's granularity). */
const UNBEATEN_SLACK_MS = 1;

/**
 * What `e`'s attempt's own writes say at `at`, when they tell it exactly (docs/operations.md, the
 * lease-loss causes): `renewed` when a renewal was answered less than a lease before; else
 * `extension_unanswered` when it sent a write (an extension, a note, its completion or release)
 * within the lease after its last renewal was answered, `stalled` when it sent none. A renewal is
 * a write of its that landed on the run's record `in_progress` (a lease write: a fenced write that
 * met a conflict never lands, its retry may). Undefined where the writes cannot tell: a write that
 * met a fault before `at` (its answer, or its retry, comes at a time the plan does not give), a
 * renewal in flight while the instance was paused (the client's timeout may have fired first as it
 * woke), or an answer due in the very millisecond of `at`.
 */
export function unbeatenTruth(
  at: number,
  e: Execution,
  outcome: SimOutcome,
):
  | {
      cause: 'renewed' | 'stalled' | 'extension_unanswered';
      renewedAt: number;
      leaseMs: number;
    }
  | undefined {
  const spans = outcome.attemptWriteSpans?.get(e.attemptId);
  const leases = landedLeases(outcome).get(e.attemptId) ?? [];
  const claimLeaseMs = leases[0]?.leaseMs;
  if (spans === undefined || claimLeaseMs === undefined) {
    return undefined;
  }
  const sent = spans.filter((span) => span.sentAt <= at);
  const settledFaulty = sent.some(
    (span) =>
      !span.clean &&
      (span.answeredBy <= at || span.sentAt + outcome.firestoreTimeoutMs <= at),
  );
  const atEdge = sent.some((span) => span.answeredBy === at);
  const renewals = sent.filter(
    (span) =>
      span.clean &&
      span.answeredBy < at &&
      leases.some(
        (l) => l.landedAt >= span.sentAt && l.landedAt <= span.answeredBy,
      ),
  );
  const pausedInFlight = renewals.some((span) =>
    pausedWithin(outcome, e.instance, span.sentAt, span.answeredBy),
  );
  if (settledFaulty || atEdge || pausedInFlight) {
    return undefined;
  }
  const renewedAt = Math.max(
    e.start,
    ...renewals.map((span) => span.answeredBy),
  );
  // The claim's short lease until a renewal is answered; each renewal writes LEASE_SECONDS.
  const leaseMs = renewals.length === 0 ? claimLeaseMs : outcome.leaseMs;
  if (at - renewedAt <= leaseMs - UNBEATEN_SLACK_MS) {
    return { cause: 'renewed', renewedAt, leaseMs };
  }
  const sentInTime = sent.some(
    (span) => span.sentAt >= renewedAt && span.sentAt <= renewedAt + leaseMs,
  );
  return {
    cause: sentInTime ? 'extension_unanswered' : 'stalled',
    renewedAt,
    leaseMs,
  };
}

/**
 * Whether `e`'s run's record took a write by anyone but `e`'s attempt from its start to `at`: one
 * from another machine, a missed-run check's mark ({@link isCheckMark}, which may come from the
 * attempt's own instance), or more from its own machine than the attempt sent (`ownSent`).
 */
function writtenByOthers(
  e: Execution,
  ownSent: number,
  at: number,
  outcome: SimOutcome,
): boolean {
  const ofRun = (outcome.recordWrites ?? []).filter((w) => w.runId === e.runId);
  let inWindow = 0;
  let others = false;
  for (const [i, w] of ofRun.entries()) {
    if (w.at <= e.start || w.at > at) {
      continue;
    }
    inWindow += 1;
    others ||= w.machine !== e.instance || isCheckMark(w, ofRun[i - 1]);
  }
  return others || inWindow > ownSent;
}

/**
 * Whether landed write `w` is a missed-run check's mark on a reported record (its acknowledgement,
 * `reported_by`, or its claim to log the report again, `relog_by`): it changed who reported or
 * relogs and left the status as `previous`, the record's write before, had it. A backfill or re-run
 * of a reported slot keeps the report, and a check of another delivery on the same instance may
 * mark it while the job runs (`--seed=633017263 --path 380`, a regression in `FIXED`): the
 * attempt's extension fenced before the mark is then refused, read and sent again.
 */
function isCheckMark(
  w: RecordWrite,
  previous: RecordWrite | undefined,
): boolean {
  return (
    previous !== undefined &&
    w.status === previous.status &&
    (w.reportedBy !== previous.reportedBy || w.relogBy !== previous.relogBy)
  );
}

/**
 * Whether `line`'s instance was paused within a lease before its job started (`start`; the run
 * audit's attempts have none) and the line: a pause as the claim was answered, before the job or
 * the audit's work began, starves the heartbeat as much as one while it runs.
 */
function pausedAround(
  outcome: SimOutcome,
  line: LogLine,
  start: number | undefined,
): boolean {
  const from =
    (start ??
      untrackedAttemptStart(outcome, line.fields.attemptId) ??
      line.at) - outcome.leaseMs;
  return (outcome.instancePauses ?? []).some(
    (p) => p.instance === line.instance && p.from <= line.at && p.until >= from,
  );
}

/**
 * When an attempt with no {@link Execution} started (the run audit's: the environment's check, not
 * a job's run), from its answer line: its time less its `durationMs`; `undefined` if it was never
 * answered (its instance died), so nothing can be judged.
 */
function untrackedAttemptStart(
  outcome: SimOutcome,
  attemptId: unknown,
): number | undefined {
  const answer = outcome.logs.find(
    (l) =>
      l.fields.attemptId === attemptId &&
      typeof l.fields.outcome === 'string' &&
      typeof l.fields.durationMs === 'number',
  );
  return answer === undefined
    ? undefined
    : answer.at - Number(answer.fields.durationMs);
}

/** Invariant 22: every logged lease loss names a cause that happened to its attempt. */
export function leaseLossCausesTrue(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const byAttempt = new Map(outcome.executions.map((e) => [e.attemptId, e]));
  for (const line of outcome.logs) {
    const cause = line.fields.leaseLoss ?? line.fields.lapseCause;
    if (typeof cause !== 'string') {
      continue;
    }
    const e = byAttempt.get(String(line.fields.attemptId));
    const why = falseCause(cause, line, e, outcome);
    if (why !== undefined) {
      found.push(
        `${line.instance} logged a lease of run ${String(line.fields.runId ?? e?.runId).slice(0, 12)} lost to ${cause} at ${new Date(line.at).toISOString()}, but ${why}`,
      );
    }
  }
  return found;
}

/**
 * Whether something in `outcome` could cost `e`'s attempt its lease: Firestore's faults, late
 * answers or a hanging connection (slowAnswers), its instance paused while it ran, or a pause in its
 * deployment within a lease before it started (between its claim and its start).
 */
function leaseAtRisk(e: Execution, outcome: SimOutcome): boolean {
  const history = outcome.history as SimOutcome['history'] | undefined;
  if (history === undefined || slowAnswers(outcome) || faulty(outcome)) {
    return true;
  }
  if (e.pausedMs > 0) {
    return true;
  }
  const end = e.end ?? outcome.finalMs;
  return history.events.some((event) => {
    const pausedUntil = pauseEndMs(event, outcome.startMs, outcome.leaseMs);
    if (pausedUntil === 0 || event.deployment !== e.deployment) {
      return false;
    }
    const pausedFrom = outcome.startMs + event.at;
    return pausedFrom <= end && pausedUntil >= e.start - outcome.leaseMs;
  });
}

/**
 * Invariant 23, a lease kept while nothing threatens it: a job is told its lease is lost (its
 * signal aborted with `lease_lost`) only when something could have cost it the lease
 * ({@link leaseAtRisk}). Otherwise the heartbeat (docs/how-it-works.md, "Long jobs: the lease
 * heartbeat") must keep the lease of a job of any length: a job aborted on a healthy instance with
 * Firestore answering is a run lost to the product itself, retried or reported failed.
 */
export function leaseKeptWhileHealthy(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    if (e.abortReason !== 'lease_lost' || leaseAtRisk(e, outcome)) {
      continue;
    }
    found.push(
      `${jobOf(e)} was aborted for a lost lease ${e.end === undefined ? '' : `after ${e.end - e.start} ms `}(lease ${outcome.leaseMs} ms), with its instance never paused and Firestore answering every call in time`,
    );
  }
  return found;
}

/** Each attempt's landed lease writes; none in outcomes made by hand without them. */
function landedLeases(outcome: SimOutcome): SimOutcome['leaseEnds'] {
  const leaseEnds = outcome.leaseEnds as SimOutcome['leaseEnds'] | undefined;
  return leaseEnds ?? new Map();
}

/**
 * Slack for the holder's lapse timer against the stored lease's end, ms: the timer is armed from
 * when the renewal was sent, before it landed, so it fires first; the slack covers the timer's
 * own granularity.
 */
const LAPSE_SLACK_MS = 1_000;

/**
 * When `e`'s stored lease first ran out with no landed write of its attempt renewing it in time
 * (the claim's short lease, then each extension's), ms; undefined when it never ran out while the
 * job ran, or nothing of it landed (the emulator's writes are not seen).
 */
function storedLeaseRanOut(
  e: Execution,
  runningUntil: number,
  outcome: SimOutcome,
): number | undefined {
  const writes = [...(landedLeases(outcome).get(e.attemptId) ?? [])].sort(
    (a, b) => a.landedAt - b.landedAt,
  );
  const [first, ...rest] = writes;
  if (first === undefined) {
    return undefined;
  }
  let expires = first.expires;
  for (const write of rest) {
    if (write.landedAt > expires || expires >= runningUntil) {
      break;
    }
    expires = Math.max(expires, write.expires);
  }
  return expires < runningUntil ? expires : undefined;
}

/**
 * When an instance paused at `ms` (or within {@link LAPSE_SLACK_MS} after it) woke: pauses that
 * begin before it wakes chain into one (a stall, then a pause), so it wakes after the last.
 */
function wokeAfter(
  ms: number,
  pauses: readonly { from: number; until: number }[],
): number {
  let wokeAt = ms;
  const ordered = [...pauses].sort((a, b) => a.from - b.from);
  for (const pause of ordered) {
    if (pause.from <= wokeAt + LAPSE_SLACK_MS) {
      wokeAt = Math.max(wokeAt, pause.until);
    }
  }
  return wokeAt;
}

/**
 * Invariant 24, a job told to stop when its lease ends: once the stored lease of a running job's
 * attempt ran out (no write of its attempt renewed it in time), the job's signal is aborted within
 * {@link LAPSE_SLACK_MS}, or as soon as its instance wakes if it was paused then. From that moment
 * another delivery may take the run over (docs/how-it-works.md, "Long jobs: the lease
 * heartbeat"): a job that goes on past its lease runs beside the takeover.
 */
export function toldToStopAtLeaseEnd(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    if (e.result === 'crashed') {
      continue;
    }
    const runningUntil = e.abortedAt ?? e.end ?? outcome.finalMs;
    const ranOut = storedLeaseRanOut(e, runningUntil, outcome);
    if (ranOut === undefined) {
      continue;
    }
    const wokeAt = wokeAfter(ranOut, e.pauses);
    if (runningUntil <= wokeAt + LAPSE_SLACK_MS) {
      continue;
    }
    found.push(
      `${jobOf(e)} ran ${runningUntil - ranOut} ms past its stored lease's end at ${new Date(ranOut).toISOString()} before it was told to stop`,
    );
  }
  return found;
}

/**
 * How many notes `e`'s job sent to Firestore: its start note, a case note not refused first, the
 * notes of a fill answered or refused by Firestore (not by the bound's `RunOnceError`), and its
 * progress note.
 */
function notesSent(e: Execution): number {
  const start = e.noted === true || e.noteRefused !== undefined ? 1 : 0;
  const tried = e.caseNote;
  const sent =
    tried !== undefined &&
    (tried.answered === true ||
      (tried.refused !== undefined && tried.refused !== 'RunOnceError'));
  const fill = e.noteFill;
  const fillSent =
    fill === undefined
      ? 0
      : fill.answered +
        (fill.refused !== undefined && fill.refused.name !== 'RunOnceError'
          ? 1
          : 0);
  const progress = e.progressNote;
  const progressSent =
    progress !== undefined &&
    (progress.answered === true ||
      (progress.refused !== undefined && progress.refused !== 'RunOnceError'))
      ? 1
      : 0;
  return start + (sent ? 1 : 0) + fillSent + progressSent;
}

/** Whether Firestore's calls fail now and then in `outcome` (a fault rate). */
function faulty(outcome: SimOutcome): boolean {
  const history = outcome.history as SimOutcome['history'] | undefined;
  return history === undefined || history.faultRate > 0;
}

/**
 * Invariant 25, the heartbeat's cost: an attempt writes its claim, one extension that widens the
 * claim's short lease, then one extension a third of a lease while its job runs (and one beat in
 * flight as it stops), and a renewal per note (docs/performance.md: a processed run of a short job
 * costs the claim and the completion). Counted by its landed writes that leave it holding the run;
 * where Firestore's answers fail or come late, each may land twice (the client sends it again).
 */
export function heartbeatCostKept(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const beatMs = outcome.leaseMs / 3;
  for (const e of outcome.executions) {
    const writes = landedLeases(outcome).get(e.attemptId)?.length ?? 0;
    const ranMs = (e.end ?? outcome.finalMs) - e.start;
    const notes = notesSent(e);
    const renewals = 1 + notes + Math.ceil(ranMs / beatMs) + 1;
    // The Firestore client sends a write again when its answer failed or came late: it may land twice.
    const resent = slowAnswers(outcome) || faulty(outcome) ? renewals : 0;
    const allowed = 1 + renewals + resent;
    if (writes > allowed) {
      found.push(
        `${jobOf(e)} wrote its lease ${writes} times in ${ranMs} ms of work, more than the ${allowed} its heartbeat needs (lease ${outcome.leaseMs} ms)`,
      );
    }
  }
  return found;
}

/**
 * How near its due time an attempt's first extension is sent, ms: the product's timers and the
 * simulated network run on the virtual clock, to the millisecond.
 */
const FIRST_BEAT_SLACK_MS = 1;

/** Whether `instance` was paused at any moment from `from` to `until`. */
export function pausedWithin(
  outcome: SimOutcome,
  instance: string,
  from: number,
  until: number,
): boolean {
  return (outcome.instancePauses ?? []).some(
    (p) => p.instance === instance && p.from <= until && p.until >= from,
  );
}

/**
 * When `e`'s attempt stopped beating, ms: its job returned or threw, its instance crashed, or it ran
 * JOB_TIMEOUT_SECONDS (the heartbeat stops at the timeout, whatever aborted the job's signal
 * before), whichever came first.
 */
function beatingUntil(e: Execution, outcome: SimOutcome): number {
  return Math.min(
    e.end ?? Number.POSITIVE_INFINITY,
    e.start + timeoutOf(outcome),
  );
}

/**
 * Invariant 42, the heartbeat's first beat on time (docs/how-it-works.md, "The layout", the
 * steps' table, its `extend` row): an attempt's first extension is sent a third of its claim's
 * short lease after the claim was sent, or at once if the claim's answer came later, and not
 * sooner. Sent later, it lets the short lease of a claim answered late lapse under a running job;
 * sent sooner, it costs a job that ends within the third a write more than its claim and its
 * completion (docs/performance.md). Judged where the instance was never paused from the handler's
 * call to the due time: `runOnce` took the claim's start between the handler's call (`handledAt`)
 * and its request's last write to the run's record before the job started (`claimSentAt`: its
 * claim, or the claim's last round; a `wait` job's request may have claimed before, and waited).
 */
export function firstBeatOnTime(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    const window = firstBeatWindow(e, outcome);
    if (window === undefined) {
      continue;
    }
    const { claimLeaseMs, notBefore, dueBy } = window;
    const sent = outcome.attemptWrites?.get(e.attemptId) ?? [];
    const stoppedAt = beatingUntil(e, outcome);
    const beatingAtDue = stoppedAt > dueBy;
    const firstSent = sent[0];
    if (beatingAtDue && (firstSent === undefined || firstSent > dueBy)) {
      found.push(
        `${jobOf(e)} sent no extension by ${new Date(dueBy).toISOString()}, a third of its claim's ${claimLeaseMs} ms lease after the claim was sent (or as its answer came), though its job still ran then`,
      );
    }
    // A write before the third is an extension unless the job had called `ctx.note` by then.
    const early = sent.find(
      (at) =>
        at < notBefore &&
        at < stoppedAt &&
        (e.firstNoteAt === undefined || at < e.firstNoteAt),
    );
    if (early !== undefined) {
      found.push(
        `${jobOf(e)} sent an extension at ${new Date(early).toISOString()}, sooner than a third of its claim's ${claimLeaseMs} ms lease after its request arrived: a short job pays a write more than its claim and its completion`,
      );
    }
  }
  return found;
}

/**
 * When `e`'s first extension may be sent (`notBefore`) and must be sent by (`dueBy`), ms, with its
 * claim's lease; undefined when its instance was paused meanwhile, or its claim is not known.
 */
function firstBeatWindow(
  e: Execution,
  outcome: SimOutcome,
): { claimLeaseMs: number; notBefore: number; dueBy: number } | undefined {
  const claimLeaseMs = landedLeases(outcome).get(e.attemptId)?.[0]?.leaseMs;
  const { handledAt, claimSentAt } = e;
  if (
    claimLeaseMs === undefined ||
    handledAt === undefined ||
    claimSentAt === undefined
  ) {
    return undefined;
  }
  const thirdMs = claimLeaseMs / 3;
  const dueBy = Math.max(claimSentAt + thirdMs, e.start) + FIRST_BEAT_SLACK_MS;
  const notBefore = handledAt + thirdMs - FIRST_BEAT_SLACK_MS;
  if (pausedWithin(outcome, e.instance, handledAt, dueBy)) {
    return undefined;
  }
  return { claimLeaseMs, notBefore, dueBy };
}

/**
 * Invariant 42, the beats after the first (docs/how-it-works.md, "Long jobs: the lease
 * heartbeat": an extension "every third of the lease"): after the first extension, an attempt's
 * extensions keep a third of its lease apart, counted from when the first was answered if that
 * widened the claim's short lease (the lease is `LEASE_SECONDS` from then on), from when it was
 * sent if not, none skipped and none added, until its job stops. Judged on attempts whose writes
 * met no fault and no other writer, whose job noted nothing (a note is a renewal of its own) and
 * whose instance never paused: there the schedule is exact.
 */
export function beatsKeepTheirThird(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    const beats = scheduledBeats(e, outcome);
    if (beats === undefined) {
      continue;
    }
    const { sent, fromMs, everyMs, stoppedAt } = beats;
    const expected: number[] = [];
    for (
      let at = fromMs + everyMs;
      at < stoppedAt - FIRST_BEAT_SLACK_MS;
      at += everyMs
    ) {
      expected.push(at);
    }
    const off = expected.findIndex(
      (at, i) =>
        Math.abs((sent[i] ?? Number.POSITIVE_INFINITY) - at) >
        FIRST_BEAT_SLACK_MS,
    );
    const extra =
      sent.length > expected.length ? sent[expected.length] : undefined;
    if (off >= 0 || extra !== undefined) {
      const when = off >= 0 ? expected[off] : undefined;
      found.push(
        `${jobOf(e)} sent extensions at ${sent.map((at) => new Date(at).toISOString()).join(', ')} after its first; a third of its ${Math.round(everyMs * 3)} ms lease apart from ${new Date(fromMs).toISOString()}, ${when === undefined ? `none was due at ${new Date(extra as number).toISOString()}` : `one was due at ${new Date(when).toISOString()}`}`,
      );
    }
  }
  return found;
}

/**
 * The extensions of `e`'s attempt after its first, sent before its job stopped, and the schedule
 * they keep (from when, how often, until when), ms; undefined where the schedule is not exact
 * ({@link beatsKeepTheirThird}) or nothing after the first beat is due.
 */
function scheduledBeats(
  e: Execution,
  outcome: SimOutcome,
):
  | { sent: number[]; fromMs: number; everyMs: number; stoppedAt: number }
  | undefined {
  const spans = outcome.attemptWriteSpans?.get(e.attemptId);
  const claimLeaseMs = landedLeases(outcome).get(e.attemptId)?.[0]?.leaseMs;
  const stoppedAt = Math.min(beatingUntil(e, outcome), outcome.finalMs);
  if (
    spans === undefined ||
    claimLeaseMs === undefined ||
    e.firstNoteAt !== undefined ||
    e.handledAt === undefined
  ) {
    return undefined;
  }
  // A beat due in the same millisecond the job stops may fire before it or not.
  const beats = spans.filter(
    (span) => span.sentAt < stoppedAt - FIRST_BEAT_SLACK_MS,
  );
  const [first, ...rest] = beats;
  const unclean = spans.some((span) => !span.clean);
  const exact =
    first !== undefined &&
    !unclean &&
    !writtenByOthers(e, beats.length, stoppedAt, outcome) &&
    !pausedWithin(outcome, e.instance, e.handledAt, stoppedAt);
  if (!exact) {
    return undefined;
  }
  const widened = outcome.leaseMs !== claimLeaseMs;
  return {
    sent: rest.map((span) => span.sentAt),
    fromMs: widened ? first.answeredBy : first.sentAt,
    everyMs: (widened ? outcome.leaseMs : claimLeaseMs) / 3,
    stoppedAt,
  };
}

/**
 * Invariant 43, one write at a time (src/core/run-once.ts: a note "runs between beats, never
 * beside one", the final write "waits for a beat in flight"): an attempt sends no write to its
 * run's record (an extension, a note, its completion or release) while another of its writes
 * there is unanswered and not yet given up (`FIRESTORE_TIMEOUT_SECONDS` after it was sent). Two
 * at once race on the record's update time, which fences each: the one that loses costs a read
 * and a write more, and a note's loss aborts the job. Judged by each write's earliest answer, so
 * a pause that delays an answer only loosens it.
 */
export function oneWriteAtATime(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const timeoutMs = outcome.firestoreTimeoutMs;
  for (const e of outcome.executions) {
    const spans = outcome.attemptWriteSpans?.get(e.attemptId) ?? [];
    for (const [i, span] of spans.entries()) {
      const next = spans[i + 1];
      const freeAt = Math.min(span.answeredBy, span.sentAt + timeoutMs);
      if (next !== undefined && next.sentAt < freeAt) {
        found.push(
          `${jobOf(e)} sent a write to its run's record at ${new Date(next.sentAt).toISOString()} while its write sent at ${new Date(span.sentAt).toISOString()} was still unanswered (${Number.isFinite(span.answeredBy) ? `its answer came ${new Date(span.answeredBy).toISOString()} at the earliest` : 'it was never answered'})`,
        );
      }
    }
  }
  return found;
}

/**
 * How long after its job ended an attempt may still write its run's record, in Firestore timeouts
 * (`FIRESTORE_TIMEOUT_SECONDS`): the beat in flight it waits for, then its completion or release,
 * three tries of a fenced write with a read after each conflict and the client's own resends, each
 * bounded by the timeout. Generous on purpose: a heartbeat left beating writes for hours.
 */
export const WRITES_AFTER_END_TIMEOUTS = 12;

/**
 * Invariant 25, the heartbeat stops: an attempt sends no write to its run's record later than
 * {@link WRITES_AFTER_END_TIMEOUTS} Firestore timeouts after its job ended (plus the time its
 * instance was paused since): the heartbeat ends with the job (docs/how-it-works.md, "Long jobs:
 * the lease heartbeat"), whatever the lease's fate; a beat left running writes a run's record every
 * third of a lease for as long as its instance lives.
 */
export function heartbeatStopsWithJob(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const sentByAttempt = outcome.attemptWrites;
  if (sentByAttempt === undefined) {
    return found;
  }
  for (const e of outcome.executions) {
    if (e.end === undefined || e.result === 'crashed') {
      continue;
    }
    const pausedMs = pausedSince(outcome, e.instance, e.end);
    const boundMs =
      e.end + pausedMs + WRITES_AFTER_END_TIMEOUTS * outcome.firestoreTimeoutMs;
    const late = (sentByAttempt.get(e.attemptId) ?? []).filter(
      (at) => at > boundMs,
    );
    if (late.length > 0) {
      found.push(
        `${jobOf(e)} ended at ${new Date(e.end).toISOString()}, and its attempt still sent ${late.length} write(s) to its run's record more than ${WRITES_AFTER_END_TIMEOUTS} Firestore timeouts later, the last at ${new Date(late.at(-1) as number).toISOString()}: its heartbeat did not stop`,
      );
    }
  }
  return found;
}

/** How long `instance` was paused from `from` on, ms (the pauses that end after it). */
export function pausedSince(
  outcome: SimOutcome,
  instance: string,
  from: number,
): number {
  return (outcome.instancePauses ?? [])
    .filter((p) => p.instance === instance && p.until > from)
    .reduce((sum, p) => sum + (p.until - Math.max(p.from, from)), 0);
}

/**
 * Invariant 26, JOB_TIMEOUT_SECONDS kept (docs/configuration.md): a job is aborted for its timeout
 * (`job_timeout`) only once it ran that long, and a job still running then is told to stop by then,
 * later only by its instance's pauses (a paused instance's timers wait with it).
 */
export function jobTimeoutsKept(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const timeoutMs = timeoutOf(outcome);
  for (const e of outcome.executions) {
    if (e.result === 'crashed') {
      continue;
    }
    const job = jobOf(e);
    const abortedAfterMs =
      e.abortedAt === undefined ? undefined : e.abortedAt - e.start;
    if (
      e.abortReason === 'job_timeout' &&
      abortedAfterMs !== undefined &&
      abortedAfterMs < timeoutMs - TIMER_SLACK_MS
    ) {
      found.push(
        `${job} was aborted for its timeout after ${abortedAfterMs} ms, within JOB_TIMEOUT_SECONDS (${timeoutMs} ms)`,
      );
    }
    const pausedMs = e.pauses.reduce((sum, p) => sum + p.until - p.from, 0);
    const ranMs = (e.abortedAt ?? e.end ?? outcome.finalMs) - e.start;
    if (ranMs > timeoutMs + pausedMs + TIMER_SLACK_MS) {
      found.push(
        `${job} ran ${ranMs} ms before it was told to stop, past JOB_TIMEOUT_SECONDS (${timeoutMs} ms)`,
      );
    }
  }
  return found;
}

/** How long after its signal aborts a job still running is warned about, ms (run-once.ts's default). */
const STILL_RUNNING_WARNING_MS = 5_000;

/**
 * Invariant 27, the still-running warning (docs/jobs.md: a job should stop and throw when its
 * signal aborts): a job still running {@link STILL_RUNNING_WARNING_MS} after its signal aborted is
 * warned about once (naming its attempt), then or as its instance wakes; a job that stopped sooner is
 * not. Judged with {@link TIMER_SLACK_MS} either side.
 */
export function stillRunningWarned(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    if (e.abortedAt === undefined || e.result === 'crashed') {
      continue;
    }
    const abortedAt = e.abortedAt;
    const warnings = outcome.logs.filter(
      (l) =>
        l.fields.attemptId === e.attemptId &&
        l.at >= abortedAt &&
        l.message.startsWith('the job is still running'),
    );
    const pausedMs = e.pauses
      .filter((p) => p.until >= abortedAt)
      .reduce((sum, p) => sum + p.until - Math.max(p.from, abortedAt), 0);
    const ranOnMs = (e.end ?? outcome.finalMs) - abortedAt;
    const job = jobOf(e);
    if (
      ranOnMs > STILL_RUNNING_WARNING_MS + pausedMs + TIMER_SLACK_MS &&
      warnings.length === 0
    ) {
      found.push(
        `${job} ran ${ranOnMs} ms after its signal aborted, and no still-running warning came`,
      );
    }
    if (
      ranOnMs < STILL_RUNNING_WARNING_MS - TIMER_SLACK_MS &&
      warnings.length > 0
    ) {
      found.push(
        `${job} stopped ${ranOnMs} ms after its signal aborted, yet was warned of as still running`,
      );
    }
    if (warnings.length > 1) {
      found.push(
        `${job} was warned of as still running ${warnings.length} times`,
      );
    }
  }
  return found;
}

/**
 * Invariant 28, a settled attempt stays quiet: a job's signal never aborts after the job returned
 * or threw (`AttemptScope.settle`, src/core/run-once.ts). A job's clean-up on its signal must not
 * run for a run already over, whatever comes later: its timeout, a SIGTERM, a lapse.
 */
export function noAbortAfterEnd(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    if (e.abortedAt === undefined || e.end === undefined) {
      continue;
    }
    if (e.abortedAt > e.end) {
      found.push(
        `${jobOf(e)} had its signal aborted (${e.abortReason}) ${e.abortedAt - e.end} ms after it ended`,
      );
    }
  }
  return found;
}

/**
 * Whether `reason`, the abort of a job whose instance was paused at its SIGTERM, fell due while it
 * slept: its stored lease ran out before it woke (`lease_lost`), or it had run JOB_TIMEOUT_SECONDS
 * by then (`job_timeout`). Waking, the instance meets both; either is true.
 */
function dueBeforeSigterm(
  e: Execution,
  reason: string | undefined,
  sigtermAt: number,
  outcome: SimOutcome,
): boolean {
  const wokeAt = wokeAfter(sigtermAt, e.pauses);
  if (wokeAt <= sigtermAt) {
    return false;
  }
  // Waking, the instance runs every timer that fell due while it slept, in the order they were
  // set: the lease's and the timeout's were set before the SIGTERM's, so either may come first.
  if (reason === 'lease_lost') {
    return storedLeaseRanOut(e, wokeAt + LAPSE_SLACK_MS, outcome) !== undefined;
  }
  return (
    reason === 'job_timeout' &&
    e.start + timeoutOf(outcome) <= wokeAt + TIMER_SLACK_MS
  );
}

/**
 * Invariant 30, a SIGTERM tells running jobs to stop (docs/how-it-works.md, "Graceful shutdown": the drain
 * aborts every running job's signal with `shutdown`, so it can stop and release its run before the
 * instance is killed): a job running when its instance got SIGTERM, or started after it, has its
 * signal aborted then (by then for another reason), later only by its instance's pauses.
 */
export function toldToStopAtSigterm(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    const { sigtermAt } = e;
    if (sigtermAt === undefined) {
      continue;
    }
    const dueBy = wokeAfter(sigtermAt, e.pauses) + TIMER_SLACK_MS;
    // A job that ended on its own by then needed no telling; one killed with its instance (SIGKILL,
    // 10 s after the SIGTERM) was due to be told before.
    const endedAt = e.end ?? e.diedAt ?? Number.POSITIVE_INFINITY;
    const endedUntold = e.abortedAt === undefined && endedAt <= dueBy;
    const toldAt = e.abortedAt ?? Number.POSITIVE_INFINITY;
    // Told first at the SIGTERM, it must be told why: the instance is shutting down, unless it
    // slept through the SIGTERM and woke to a cause due before it (its lease, its timeout).
    const toldFirstAtSigterm = toldAt >= sigtermAt && toldAt <= dueBy;
    const why = e.abortReason;
    if (
      toldFirstAtSigterm &&
      why !== 'shutdown' &&
      !dueBeforeSigterm(e, why, sigtermAt, outcome)
    ) {
      found.push(
        `${jobOf(e)} was told to stop at its instance's SIGTERM with ${e.abortReason}, not shutdown`,
      );
    }
    if (!endedUntold && toldAt > dueBy) {
      const told =
        e.abortedAt === undefined
          ? 'never told to stop'
          : `told to stop only ${toldAt - sigtermAt} ms later (${e.abortReason})`;
      found.push(
        `${jobOf(e)} ran on at its instance's SIGTERM at ${new Date(sigtermAt).toISOString()}, ${told}`,
      );
    }
  }
  return found;
}
