/**
 * The run lifecycle: claim → run (the heartbeat extends the lease) → complete, or release on
 * failure. Independent of HTTP and of Cloud Scheduler: any idempotency key will do.
 */

import { AttemptAbortedError, describeThrown, LedgerUnavailableError } from './errors.ts';
import { LeaseHeartbeat } from './lease-heartbeat.ts';
import type { Claim, ClaimResult, FenceResult, Holder, Ledger } from './ledger.ts';
import type { Logger } from './logger.ts';
import type { NoteValue } from './notes.ts';
import type { GuardedWrite } from './run-documents.ts';
import type { RunDetails, RunRecord, UnreadableRecord } from './run-record.ts';

/** The attempt that won the claim, as the work sees it: its claim's fields, the lease current. */
export interface Attempt extends Omit<Claim, 'fencingToken' | 'leaseMs' | 'notes'> {
  /** Aborted (reason: an {@link AttemptAbortedError}) when the attempt must stop: stop and throw. */
  readonly signal: AbortSignal;
  /**
   * Notes `value` under `name` in the run's record now (`Ledger.note`), so a crash keeps it.
   *
   * @throws {AttemptAbortedError} if the lease was lost; `RunOnceError` for a note the record cannot
   *   hold (`noteProblem`); {@link LedgerUnavailableError} if Firestore fails.
   */
  note(name: string, value: NoteValue): Promise<void>;
}

/** Why a fenced write found the lease lost, as far as this attempt can tell. */
export type LeaseLossCause = 'job_timeout' | 'extensions_failed' | 'stalled' | 'unknown';

/**
 * What happened to one delivery. `unrecorded`: Firestore failed the fenced write after every retry
 * (a completion's work is done but not recorded; a released claim stays until its lease lapses).
 */
export type RunOutcome =
  | {
      readonly outcome: 'processed';
      readonly attempt: Attempt;
      readonly completion: FenceResult | 'unrecorded';
      readonly leaseLoss?: LeaseLossCause;
    }
  | { readonly outcome: 'duplicate'; readonly record: RunRecord }
  | { readonly outcome: 'in_progress'; readonly holder: Holder | undefined }
  | { readonly outcome: 'unreadable_record'; readonly record: UnreadableRecord }
  | {
      readonly outcome: 'failed';
      readonly attempt: Attempt;
      readonly error: unknown;
      readonly release: FenceResult | 'unrecorded';
      /**
       * `finalFailure` gave a reporter id, so the release carried the report; with `release:
       * 'lease_lost'` it did not land (another attempt or a check holds the run).
       */
      readonly reported: boolean;
      readonly leaseLoss?: LeaseLossCause;
    }
  | { readonly outcome: 'unavailable'; readonly error: LedgerUnavailableError }
  /** The claim's guarded write found its document changed: nothing ran or was written. */
  | { readonly outcome: 'guard_changed' };

/** The name of every run outcome. */
export type OutcomeName = RunOutcome['outcome'];

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
   * no retry can follow, so the release reports it; `undefined` (or a throw) otherwise. It logs the
   * report itself before the release is written, so a process killed meanwhile has logged it.
   */
  readonly finalFailure?: (attempt: Attempt, failure: string) => Promise<string | undefined>;
}

const DEFAULT_ABORT_WARNING_MS = 5000;

const LEASE_LOSS_MESSAGES = {
  job_timeout:
    'lease lost: the job ran past JOB_TIMEOUT_SECONDS and ignored its aborted signal, the heartbeat had stopped, and another attempt took the run over, so the job may have run twice — make the job stop and throw when ctx.signal aborts',
  extensions_failed:
    'lease lost: lease extensions failed (Firestore unreachable) for about two thirds of a lease and another attempt took the run over, so the job may have run twice',
  stalled:
    'lease lost: no lease extension ran for a whole lease because this instance was paused or starved of CPU, and another attempt took the run over, so the job may have run twice',
  unknown:
    'lease lost: another attempt took this run over (its record changed under this attempt), so the job may have run twice',
} as const satisfies Record<LeaseLossCause, string>;

/**
 * Runs `work` at most once per `runId` across every instance sharing the ledger, once the claim is
 * written; its throw releases the claim, keeping the failure, so a retry can run at once.
 *
 * @returns the outcome: Firestore failures are `unavailable` (before the work ran) or `unrecorded`.
 * @example
 * // In a downstream service: apply the run id it received as its idempotency key.
 * const result = await runOnce(ledger, req.get('Idempotency-Key'), async ({ signal }) => {
 *   await chargeTheCustomer({ signal });
 * }, { logger });
 * if (result.outcome === 'duplicate') return res.status(200).end();
 */
export async function runOnce(
  ledger: Ledger,
  runId: string,
  work: (attempt: Attempt) => Promise<void> | void,
  options: RunOnceOptions,
): Promise<RunOutcome> {
  let claimed: ClaimResult;
  try {
    claimed = await ledger.claim(runId, options.details, options.guard, {
      reopenReported: options.reopenReported === true,
    });
  } catch (error) {
    if (error instanceof LedgerUnavailableError) return { outcome: 'unavailable', error };
    throw error;
  }
  if (claimed.state !== 'claimed') return notClaimed(claimed);
  const scope = new AttemptScope(ledger, runId, claimed.claim, options);
  try {
    await work(scope.attempt);
  } catch (thrown) {
    return await scope.failed(thrown);
  } finally {
    scope.settle();
  }
  return scope.completed();
}

function notClaimed(claimed: Exclude<ClaimResult, { state: 'claimed' }>): RunOutcome {
  switch (claimed.state) {
    case 'completed':
      return { outcome: 'duplicate', record: claimed.record };
    case 'in_progress':
      return { outcome: 'in_progress', holder: claimed.holder };
    case 'unreadable':
      return { outcome: 'unreadable_record', record: claimed.record };
    case 'guard_changed':
      return { outcome: 'guard_changed' };
  }
}

/** One claimed attempt: its abort signal, its heartbeat and the fenced write that ends it. */
class AttemptScope {
  readonly attempt: Attempt;
  readonly #ledger: Ledger;
  readonly #options: RunOnceOptions;
  readonly #controller = new AbortController();
  readonly #heartbeat: LeaseHeartbeat;
  readonly #timer: NodeJS.Timeout | undefined;
  #timedOut = false;
  #settled = false;
  readonly #onShutdown = () =>
    this.#controller.abort(new AttemptAbortedError('shutdown', 'the instance is shutting down'));

  constructor(ledger: Ledger, runId: string, claim: Claim, options: RunOnceOptions) {
    this.#ledger = ledger;
    this.#options = options;
    const controller = this.#controller;
    const heartbeat = new LeaseHeartbeat(ledger, claim, controller, options.logger);
    this.#heartbeat = heartbeat;
    this.attempt = {
      runId,
      attemptId: claim.attemptId,
      get leaseExpires() {
        return heartbeat.claim.leaseExpires;
      },
      takeover: claim.takeover,
      firstClaimedAt: claim.firstClaimedAt,
      attempts: claim.attempts,
      signal: controller.signal,
      note: async (name, value) => {
        if (!(await heartbeat.renewWith((held) => ledger.note(held, name, value)))) {
          throw (
            controller.signal.reason ?? new AttemptAbortedError('lease_lost', 'the lease was lost')
          );
        }
      },
    };
    controller.signal.addEventListener('abort', () => this.#warnIfStillRunning(), { once: true });
    if (options.shutdown?.aborted) this.#onShutdown();
    options.shutdown?.addEventListener('abort', this.#onShutdown, { once: true });
    const { maxRunMs } = options;
    this.#timer =
      maxRunMs === undefined ? undefined : setTimeout(() => this.#timeOut(maxRunMs), maxRunMs);
  }

  /** The work returned or threw: no more warnings, timeout or shutdown abort. */
  settle(): void {
    this.#settled = true;
    clearTimeout(this.#timer);
    this.#options.shutdown?.removeEventListener('abort', this.#onShutdown);
  }

  /** The work threw: release the claim with the failure (reported, if `finalFailure` says so). */
  async failed(thrown: unknown): Promise<RunOutcome> {
    this.#settled = true;
    const { signal } = this.#controller;
    // A job that stops on its signal usually throws a bare AbortError: report why it was aborted.
    const error = signal.aborted ? signal.reason : thrown;
    const claim = await this.#heartbeat.stop();
    const failure = describeThrown(error);
    const reporter = await this.#options
      .finalFailure?.(this.attempt, failure)
      .catch(() => undefined);
    const [release, loss] = await this.#fenced('release', () =>
      this.#ledger.release(claim, failure, reporter),
    );
    const reported = reporter !== undefined;
    return { outcome: 'failed', attempt: this.attempt, error, release, reported, ...loss };
  }

  /** The work returned: mark the run completed. */
  async completed(): Promise<RunOutcome> {
    const claim = await this.#heartbeat.stop();
    const [completion, loss] = await this.#fenced('completion', () => this.#ledger.complete(claim));
    return { outcome: 'processed', attempt: this.attempt, completion, ...loss };
  }

  #timeOut(maxRunMs: number): void {
    this.#timedOut = true;
    void this.#heartbeat.stop();
    const message = `the job ran longer than ${maxRunMs} ms`;
    this.#controller.abort(new AttemptAbortedError('job_timeout', message));
  }

  #warnIfStillRunning(): void {
    const reason = (this.#controller.signal.reason as AttemptAbortedError | undefined)?.reason;
    const warningMs = this.#options.abortWarningMs ?? DEFAULT_ABORT_WARNING_MS;
    const timer = setTimeout(() => {
      if (this.#settled) return;
      this.#options.logger.warn(
        { abortReason: reason },
        `the job is still running ${warningMs} ms after its signal was aborted (${reason}); it should stop and throw`,
      );
    }, warningMs);
    timer.unref();
  }

  #causeOfLoss(): LeaseLossCause {
    if (this.#timedOut) return 'job_timeout';
    if (this.#heartbeat.failuresInARow > 0) return 'extensions_failed';
    return this.#heartbeat.stalled ? 'stalled' : 'unknown';
  }

  /** A completion or release; a lost lease's cause is warned about, a Firestore failure logged. */
  async #fenced(
    what: 'completion' | 'release',
    write: () => Promise<FenceResult>,
  ): Promise<[FenceResult | 'unrecorded', { leaseLoss?: LeaseLossCause }]> {
    const { logger } = this.#options;
    try {
      const result = await write();
      if (result !== 'lease_lost') return [result, {}];
      const leaseLoss = this.#causeOfLoss();
      logger.warn({ fence: what, leaseLoss }, leaseLossMessage(leaseLoss));
      return [result, { leaseLoss }];
    } catch (err) {
      if (!(err instanceof LedgerUnavailableError)) throw err;
      logger.error(
        { err, fence: what },
        what === 'completion'
          ? 'the job succeeded but its completion could not be recorded; a later delivery of this run may run it again'
          : 'the claim could not be released; retries get 409 until its lease lapses',
      );
      return ['unrecorded', {}];
    }
  }
}

/** The warning for a lost lease, saying which cause this attempt can see. */
export function leaseLossMessage(cause: LeaseLossCause): string {
  return LEASE_LOSS_MESSAGES[cause];
}
