/** The run lifecycle for any idempotency key: claim, run (a heartbeat), complete or release. */
import {
  AttemptAbortedError,
  describeThrown,
  LedgerUnavailableError,
} from './errors.ts';
import type {
  Claim,
  ClaimResult,
  FenceResult,
  Holder,
  Ledger,
} from './ledger.ts';
import type { Logger } from './logger.ts';
import { type NoteValue, noteProblem, notesBoundProblem } from './notes.ts';
import type { GuardedWrite } from './run-documents.ts';
import type { RunDetails, RunRecord, UnreadableRecord } from './run-record.ts';

/** The attempt that won the claim, as the work sees it: its claim's fields, the lease current. */
export interface Attempt
  extends Omit<Claim, 'fencingToken' | 'leaseMs' | 'notes'> {
  /** Aborted (reason: an {@link AttemptAbortedError}) when the attempt must stop: stop and throw. */
  readonly signal: AbortSignal;
  /**
   * Notes `value` under `name` in the run's record now (`Ledger.note`), so a crash keeps it.
   * @throws {AttemptAbortedError} if the lease was lost; `RunOnceError` for a note the record cannot
   *   hold (`noteProblem`); {@link LedgerUnavailableError} if Firestore fails.
   */
  note(name: string, value: NoteValue): Promise<void>;
}

/** Why a fenced write found the lease lost, as far as this attempt can tell. */
export type LeaseLossCause =
  | 'job_timeout'
  | 'extensions_failed'
  | 'extension_unanswered'
  | 'stalled'
  | 'unknown';

/** What an outcome of an attempt that ran carries: the attempt, why it lost its lease if it did. */
type WithAttempt = {
  readonly attempt: Attempt;
  readonly leaseLoss?: LeaseLossCause;
};

/**
 * What happened to one delivery. `unrecorded`: Firestore failed the fenced write after every retry
 * (a completion's work is done but not recorded; a released claim stays until its lease lapses).
 */
export type RunOutcome =
  | (WithAttempt & {
      readonly outcome: 'processed';
      readonly completion: FenceResult | 'unrecorded';
    })
  | { readonly outcome: 'duplicate'; readonly record: RunRecord }
  | { readonly outcome: 'in_progress'; readonly holder: Holder | undefined }
  | { readonly outcome: 'unreadable_record'; readonly record: UnreadableRecord }
  | (WithAttempt & {
      readonly outcome: 'failed';
      readonly error: unknown;
      readonly release: FenceResult | 'unrecorded';
      /** `finalFailure` gave a reporter id: the release carried the report (lost if `lease_lost`). */
      readonly reported: boolean;
    })
  | { readonly outcome: 'unavailable'; readonly error: LedgerUnavailableError }
  /** The claim's guarded write found its document changed: nothing ran or was written. */
  | { readonly outcome: 'guard_changed' };

/** Options of {@link runOnce}. */
export interface RunOnceOptions {
  readonly details?: RunDetails;
  /** A write committed atomically with the claim (`Ledger.claim`): the work runs only if both landed. */
  readonly guard?: GuardedWrite;
  /** Run it even if it was reported missed or failed after retries (a backfill); else a `duplicate`. */
  readonly reopenReported?: boolean;
  /** Where lost leases, unrecorded writes and jobs that ignore their abort are reported. */
  readonly logger: Logger;
  /** Aborted when the instance shuts down: the work's signal is aborted with reason `shutdown`. */
  readonly shutdown?: AbortSignal;
  /** Longest the work may run, ms: then its signal aborts (`job_timeout`) and the heartbeat stops. */
  readonly maxRunMs?: number;
  /** How long after its signal aborted a still-running job is reported with a warning, ms (5000). */
  readonly abortWarningMs?: number;
  /**
   * Asked after the work failed, with the failure as stored: an id to store as `reported_by` when
   * no retry can follow, else `undefined` (or a throw). It logs the report before the release.
   */
  readonly finalFailure?: (
    attempt: Attempt,
    failure: string,
  ) => Promise<string | undefined>;
}

/** The warning for a lost lease, by the cause this attempt can see. */
export const LEASE_LOSS_MESSAGES = {
  job_timeout:
    'lease lost: the job ran past JOB_TIMEOUT_SECONDS and ignored its aborted signal, the heartbeat had stopped, and another attempt took the run over, so the job may have run twice — make the job stop and throw when ctx.signal aborts',
  extensions_failed:
    'lease lost: lease extensions failed (Firestore unreachable) for about two thirds of a lease and another attempt took the run over, so the job may have run twice',
  extension_unanswered:
    "lease lost: a write this instance sent in time (a lease extension, or the run's completion or release) had no answer from Firestore within the lease (Firestore slow), and another attempt took the run over, so the job may have run twice",
  stalled:
    'lease lost: no lease extension ran for a whole lease because this instance was paused or starved of CPU, and another attempt took the run over, so the job may have run twice',
  unknown:
    'lease lost: another attempt took this run over (its record changed under this attempt), so the job may have run twice',
} as const satisfies Record<LeaseLossCause, string>;

/**
 * Logged when no extension was confirmed within the lease: from then on another attempt may take
 * the run over (or a `skip`/`wait` job's next slot start), so the job's signal is aborted.
 */
const LEASE_LAPSED_MESSAGE =
  'lease lapsed: no extension was confirmed within the lease (Firestore slow or unreachable, or this instance paused), so another attempt may take the run over; aborting the job';

/**
 * The warning for a lease that lapsed while no heartbeat ran, by why none ran: a timed-out job that
 * kept running (its heartbeat was stopped at the timeout, on purpose), or an instance that could
 * not run the heartbeat at all (paused, or starved of CPU). Issue 43: the second text was given for
 * the first cause, naming a pause that never happened.
 */
export const LEASE_LAPSED_UNBEATEN_MESSAGES = {
  job_timeout:
    'lease lapsed: the job ran past JOB_TIMEOUT_SECONDS and kept running for a whole lease after its signal aborted (the heartbeat stops at the timeout), so another attempt may have taken the run over and run the job beside this one — make the job stop and throw when ctx.signal aborts',
  extension_unanswered:
    'lease lapsed: a lease extension this instance sent had no answer from Firestore within the lease (Firestore slow), so another attempt may have taken the run over and run the job beside this one',
  stalled:
    'lease lapsed: no extension ran for a whole lease (this instance was paused or starved of CPU), so another attempt may have taken the run over and run the job beside this one',
} as const;

/**
 * Runs `work` at most once per `runId` across every instance sharing the ledger, once the claim is
 * written; its throw releases the claim, keeping the failure, so a retry can run at once. In a
 * downstream service: docs/how-it-works.md, "Downstream idempotency: `runOnce` for any key".
 * @returns the outcome: Firestore failures are `unavailable` (before the work ran) or `unrecorded`.
 * @throws {RunOnceError} for a run id Firestore cannot take as a document id (`RunLedger.claim`).
 */
export async function runOnce(
  ledger: Ledger,
  runId: string,
  work: (attempt: Attempt) => Promise<void> | void,
  options: RunOnceOptions,
): Promise<RunOutcome> {
  // The claim's lease began after this: its first beat counts from here, not from the answer.
  const claimStartedAt = performance.now();
  let claimed: ClaimResult;
  try {
    claimed = await ledger.claim(
      runId,
      options.details,
      options.guard,
      options,
    );
  } catch (error) {
    if (error instanceof LedgerUnavailableError) {
      return { outcome: 'unavailable', error };
    }
    throw error;
  }
  if (claimed.state === 'completed') {
    return { outcome: 'duplicate', record: claimed.record };
  }
  if (claimed.state === 'in_progress') {
    return { outcome: 'in_progress', holder: claimed.holder };
  }
  if (claimed.state === 'unreadable') {
    return { outcome: 'unreadable_record', record: claimed.record };
  }
  if (claimed.state === 'guard_changed') {
    return { outcome: 'guard_changed' };
  }
  const scope = new AttemptScope(
    ledger,
    runId,
    claimed.claim,
    options,
    claimStartedAt,
  );
  let failure: { thrown: unknown } | undefined;
  try {
    await work(scope.attempt);
  } catch (thrown) {
    failure = { thrown };
  }
  // Settled before the release or completion is written: a timeout, SIGTERM or lapse meanwhile
  // must not abort the signal of a job that already ended.
  scope.settle();
  return failure === undefined
    ? scope.completed()
    : scope.failed(failure.thrown);
}

/** Beats per lease: at a third, two beats in a row can fail before the lease lapses. */
const BEATS_PER_LEASE = 3;
const MIN_BEAT_MS = 100;

/**
 * One claimed attempt: its abort signal, the heartbeat that extends its lease while the work runs
 * (docs/how-it-works.md, "Long jobs: the lease heartbeat"), and the fenced write that ends it.
 */
class AttemptScope {
  readonly attempt: Attempt;
  readonly #ledger: Ledger;
  readonly #options: RunOnceOptions;
  readonly #controller = new AbortController();
  /** The claim with the latest fencing token and lease end. */
  #claim: Claim;
  #beatTimer: NodeJS.Timeout | undefined;
  /** The renewal in flight (an extension or a note): both move the fencing token, one at a time. */
  #beat: Promise<unknown> | undefined;
  /** Extensions that failed transiently since the last one that landed. */
  #failures = 0;
  #lapseWarned = false;
  /** A renewal found the run taken over by another attempt: nothing this attempt writes can land. */
  #takenOver = false;
  /** `performance.now()` of the claim or the last renewal that landed (monotonic, ms). */
  #renewedAt = performance.now();
  /** `performance.now()` when the write that began the current lease was sent: it began later. */
  #leaseSentAt: number;
  /** `performance.now()` of the last renewal sent (an extension or a note), landed or not. */
  #renewalSentAt = Number.NEGATIVE_INFINITY;
  /** Fires when the lease lapses by this instance's clock with no renewal confirmed (`#lapsed`). */
  #lapseTimer: NodeJS.Timeout | undefined;
  readonly #runTimer: NodeJS.Timeout | undefined;
  #timedOut = false;
  #settled = false;
  readonly #onShutdown = () =>
    this.#controller.abort(
      new AttemptAbortedError('shutdown', 'the instance is shutting down'),
    );

  /** `claimStartedAt`: `performance.now()` before the claim was sent; its lease began after it. */
  constructor(
    ledger: Ledger,
    runId: string,
    claim: Claim,
    options: RunOnceOptions,
    claimStartedAt: number,
  ) {
    this.#ledger = ledger;
    this.#options = options;
    this.#claim = claim;
    this.#leaseSentAt = claimStartedAt;
    // A claim can be answered long after its write landed (found by a read in a later round): the
    // first beat is due a third of its lease after it was sent, at once if that has passed.
    const claimTookMs = performance.now() - claimStartedAt;
    this.#startBeating(
      Math.max(0, claim.leaseMs / BEATS_PER_LEASE - claimTookMs),
    );
    this.#armLapse(claimStartedAt);
    const { signal } = this.#controller;
    const leaseExpires = () => this.#claim.leaseExpires;
    this.attempt = {
      runId,
      attemptId: claim.attemptId,
      get leaseExpires() {
        return leaseExpires();
      },
      takeover: claim.takeover,
      firstClaimedAt: claim.firstClaimedAt,
      attempts: claim.attempts,
      signal,
      note: (name, value) => this.#note(name, value),
    };
    signal.addEventListener('abort', () => this.#warnIfStillRunning(), {
      once: true,
    });
    if (options.shutdown?.aborted) {
      this.#onShutdown();
    }
    options.shutdown?.addEventListener('abort', this.#onShutdown, {
      once: true,
    });
    const { maxRunMs } = options;
    this.#runTimer =
      maxRunMs === undefined
        ? undefined
        : setTimeout(() => this.#timeOut(maxRunMs), maxRunMs);
  }
  /**
   * Beats every third of the current lease (the claim's short one, then the widened one), the first
   * beat after `firstBeatMs` if that is sooner.
   */
  #startBeating(firstBeatMs?: number): void {
    const beatMs = Math.max(MIN_BEAT_MS, this.#claim.leaseMs / BEATS_PER_LEASE);
    const beat = () => {
      this.#beat ??= this.#extend().finally(() => {
        this.#beat = undefined;
      });
    };
    if (firstBeatMs === undefined || firstBeatMs >= beatMs) {
      this.#beatTimer = setInterval(beat, beatMs).unref();
      return;
    }
    // clearInterval clears this timeout too (Node's timers share one clear), so stopping works alike.
    this.#beatTimer = setTimeout(() => {
      this.#beatTimer = setInterval(beat, beatMs).unref();
      beat();
    }, firstBeatMs).unref();
  }
  /** The work returned or threw: no more warnings, timeout or shutdown abort. */
  settle(): void {
    this.#settled = true;
    clearTimeout(this.#runTimer);
    this.#options.shutdown?.removeEventListener('abort', this.#onShutdown);
  }
  /** The work threw: release the claim with the failure (reported, if `finalFailure` says so). */
  async failed(thrown: unknown): Promise<RunOutcome> {
    this.#settled = true;
    const { signal } = this.#controller;
    // A job that stops on its signal usually throws a bare AbortError: report why it was aborted.
    const error = signal.aborted ? signal.reason : thrown;
    const claim = await this.#stopBeating();
    const failure = describeThrown(error);
    const reporter = this.#mayHaveLapsed()
      ? undefined
      : await this.#options
          .finalFailure?.(this.attempt, failure)
          .catch(() => undefined);
    const [release, loss] = await this.#fenced('release', () =>
      this.#ledger.release(claim, failure, reporter),
    );
    const reported = reporter !== undefined;
    return {
      outcome: 'failed',
      attempt: this.attempt,
      error,
      release,
      reported,
      ...loss,
    };
  }
  /** The work returned: mark the run completed. */
  async completed(): Promise<RunOutcome> {
    const claim = await this.#stopBeating();
    const [completion, loss] = await this.#fenced('completion', () =>
      this.#ledger.complete(claim),
    );
    return { outcome: 'processed', attempt: this.attempt, completion, ...loss };
  }
  /** The work ran `maxRunMs`: stop beating and abort its signal (`job_timeout`). */
  #timeOut(maxRunMs: number): void {
    this.#timedOut = true;
    void this.#stopBeating();
    const message = `the job ran longer than ${maxRunMs} ms`;
    this.#controller.abort(new AttemptAbortedError('job_timeout', message));
  }
  /** Warns if the work still runs `abortWarningMs` after its signal aborted. */
  #warnIfStillRunning(): void {
    const reason = (
      this.#controller.signal.reason as AttemptAbortedError | undefined
    )?.reason;
    const warningMs = this.#options.abortWarningMs ?? 5000;
    setTimeout(() => {
      if (this.#settled) {
        return;
      }
      this.#options.logger.warn(
        { abortReason: reason, attemptId: this.#claim.attemptId },
        `the job is still running ${warningMs} ms after its signal was aborted (${reason}); it should stop and throw`,
      );
    }, warningMs).unref();
  }
  /**
   * Whether the lease may have lapsed by now: a lease written by a write sent at `#leaseSentAt`
   * lapses no sooner than `leaseMs` later. Another attempt may then hold the run, so a failure
   * report would be false; the missed-run check reports the run once its slot closed (issue 40).
   */
  #mayHaveLapsed(): boolean {
    return performance.now() >= this.#leaseSentAt + this.#claim.leaseMs;
  }
  /** No renewal landed for a whole lease although none failed (`#unbeatenCause` says why). */
  #unbeaten(): boolean {
    return (
      this.#failures === 0 &&
      performance.now() - this.#renewedAt > this.#claim.leaseMs
    );
  }
  /**
   * Why no renewal landed for a whole lease although none failed: one was sent since the last
   * that landed and Firestore had not answered it in time, or none was sent at all (the beat's
   * timer did not run: the instance was paused or starved of CPU). A renewal sent in the same
   * instant the last one landed (a job's first note, sent as it starts) was sent after it.
   */
  #unbeatenCause(): 'extension_unanswered' | 'stalled' {
    const sentSinceLanded = this.#renewalSentAt >= this.#renewedAt;
    const sentInTime =
      this.#renewalSentAt <= this.#renewedAt + this.#claim.leaseMs;
    return sentSinceLanded && sentInTime ? 'extension_unanswered' : 'stalled';
  }
  #causeOfLoss(): LeaseLossCause {
    if (this.#timedOut) {
      return 'job_timeout';
    }
    if (this.#failures > 0) {
      return 'extensions_failed';
    }
    return this.#unbeaten() ? this.#unbeatenCause() : 'unknown';
  }
  /** Stops beating and waits for a beat in flight; returns the claim with the latest fencing token. */
  async #stopBeating(): Promise<Claim> {
    this.#warnIfLapsed();
    clearInterval(this.#beatTimer);
    this.#beatTimer = undefined;
    clearTimeout(this.#lapseTimer);
    if (this.#beat !== undefined) {
      await this.#beat;
    }
    return this.#claim;
  }
  /** A note is a fenced renewal too: it runs between beats, never beside one (`Attempt.note`). */
  async #note(name: string, value: NoteValue): Promise<void> {
    while (this.#beat !== undefined) {
      await this.#beat;
    }
    // Taken over: the note's fenced write could not land, so it is refused without one (a job
    // that goes on past its signal pays no write for it).
    if (this.#takenOver) {
      throw this.#controller.signal.reason;
    }
    const sentAt = performance.now();
    // A note the ledger refuses (its name, its value, the notes' bounds) is never sent: it renews
    // nothing, so a stall after it is still told as one (`#unbeatenCause`).
    const refused =
      noteProblem(name, value) ??
      notesBoundProblem(this.#claim.notes, name, value);
    if (refused === undefined) {
      this.#renewalSentAt = sentAt;
    }
    const run = this.#ledger
      .note(this.#claim, name, value)
      .then((noted) => this.#takeRenewal(noted, sentAt));
    this.#beat = run.catch(() => undefined);
    try {
      if (!(await run)) {
        const { signal } = this.#controller;
        throw (
          signal.reason ??
          new AttemptAbortedError('lease_lost', 'the lease was lost')
        );
      }
    } finally {
      this.#beat = undefined;
    }
  }
  /** One beat: extends the lease; on a transient failure, the next beat tries again before it lapses. */
  async #extend(): Promise<void> {
    this.#warnIfLapsed();
    const sentAt = performance.now();
    this.#renewalSentAt = sentAt;
    try {
      this.#takeRenewal(await this.#ledger.extend(this.#claim), sentAt);
    } catch (err) {
      this.#failures++;
      this.#options.logger.warn(
        {
          err,
          failedExtensions: this.#failures,
          attemptId: this.#claim.attemptId,
          leaseMs: this.#claim.leaseMs,
        },
        'lease extension failed; retrying at the next beat (the lease is lost if none lands before it lapses)',
      );
    }
  }
  /**
   * Arms the lapse for a lease written by a write sent at `sentAt` (`performance.now()`): the lease
   * began when the write landed, after it was sent, so it lapses no sooner than `leaseMs` later.
   */
  #armLapse(sentAt: number): void {
    clearTimeout(this.#lapseTimer);
    const remainingMs = Math.max(
      0,
      sentAt + this.#claim.leaseMs - performance.now(),
    );
    this.#lapseTimer = setTimeout(() => this.#lapsed(), remainingMs).unref();
  }
  /**
   * The lease lapsed with no renewal confirmed: another attempt may take the run over from now
   * on, so the job is told to stop. The heartbeat goes on: an extension that still lands keeps the
   * run held while the job stops, and one that finds it taken over reports the lease lost.
   */
  #lapsed(): void {
    if (this.#settled || this.#beatTimer === undefined) {
      return;
    }
    this.#lapseWarned = true;
    const fields = {
      failedExtensions: this.#failures,
      attemptId: this.#claim.attemptId,
    };
    this.#options.logger.warn(fields, LEASE_LAPSED_MESSAGE);
    this.#controller.abort(
      new AttemptAbortedError('lease_lost', 'the lease lapsed unrenewed'),
    );
  }
  /** Why the lease was lost, as `lease lost: another attempt took this run over …` says it. */
  #lossExplained(): string {
    if (this.#failures > 0) {
      return `after ${this.#failures} failed extension(s) let the lease lapse`;
    }
    if (!this.#unbeaten()) {
      return 'although no extension had failed (the record was changed by someone else)';
    }
    return this.#unbeatenCause() === 'stalled'
      ? 'after no extension ran for a whole lease (the instance was paused or starved of CPU)'
      : 'after a lease extension had no answer from Firestore within the lease (Firestore slow)';
  }
  /** Warns once, before any round trip, that the lease lapsed unrenewed (`#unbeaten`). */
  #warnIfLapsed(): void {
    if (this.#lapseWarned || !this.#unbeaten()) {
      return;
    }
    this.#lapseWarned = true;
    // A timed-out job's heartbeat was stopped on purpose: the gap is the job's, not the instance's.
    const cause = this.#timedOut ? 'job_timeout' : this.#unbeatenCause();
    this.#options.logger.warn(
      { attemptId: this.#claim.attemptId, lapseCause: cause },
      LEASE_LAPSED_UNBEATEN_MESSAGES[cause],
    );
  }
  /**
   * Takes a renewal's result (sent at `sentAt`, `performance.now()`): true for the new claim; false
   * for a lost lease, which aborts the job.
   */
  #takeRenewal(renewed: Claim | 'lease_lost', sentAt: number): boolean {
    if (renewed !== 'lease_lost') {
      const widened = renewed.leaseMs !== this.#claim.leaseMs;
      this.#claim = renewed;
      this.#failures = 0;
      this.#renewedAt = performance.now();
      this.#leaseSentAt = sentAt;
      if (this.#beatTimer !== undefined) {
        this.#armLapse(sentAt);
      }
      if (widened && this.#beatTimer !== undefined) {
        clearInterval(this.#beatTimer);
        this.#startBeating();
      }
      return true;
    }
    this.#takenOver = true;
    // When stopping, the fenced write that follows reports the lost lease itself.
    if (this.#beatTimer === undefined) {
      return false;
    }
    clearInterval(this.#beatTimer);
    this.#beatTimer = undefined;
    const why = this.#lossExplained();
    const lost = `another attempt took this run over ${why}`;
    this.#options.logger.warn(
      { failedExtensions: this.#failures, attemptId: this.#claim.attemptId },
      `lease lost: ${lost}; aborting the job`,
    );
    this.#controller.abort(new AttemptAbortedError('lease_lost', lost));
    return false;
  }
  /** A completion or release; a lost lease's cause is warned about, a Firestore failure logged. */
  async #fenced(
    what: 'completion' | 'release',
    write: () => Promise<FenceResult>,
  ): Promise<[FenceResult | 'unrecorded', { leaseLoss?: LeaseLossCause }]> {
    const { logger } = this.#options;
    const { attemptId } = this.#claim;
    // The final write fences on the lease as a renewal does: if the lease lapses before Firestore
    // answers it, Firestore was slow (`extension_unanswered`), not this instance stalled. A
    // renewal still unanswered was sent first, and stays the one that tells (`#unbeatenCause`).
    if (this.#renewalSentAt < this.#renewedAt) {
      this.#renewalSentAt = performance.now();
    }
    try {
      const result = await write();
      if (result !== 'lease_lost') {
        return [result, {}];
      }
      const leaseLoss = this.#causeOfLoss();
      logger.warn(
        { fence: what, leaseLoss, attemptId },
        LEASE_LOSS_MESSAGES[leaseLoss],
      );
      return [result, { leaseLoss }];
    } catch (err) {
      if (!(err instanceof LedgerUnavailableError)) {
        throw err;
      }
      logger.error(
        { err, fence: what, attemptId },
        what === 'completion'
          ? 'the job succeeded but its completion could not be recorded; a later delivery of this run may run it again'
          : 'the claim could not be released; a retry on this instance takes it over at once, on another it gets 409 until the lease lapses',
      );
      return ['unrecorded', {}];
    }
  }
}
