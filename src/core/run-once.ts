/**
 * The run lifecycle: claim → run (the heartbeat extends the lease) → complete, or release on
 * failure. Independent of HTTP and of Cloud Scheduler, so a downstream service can apply the same
 * claim to any idempotency key it receives.
 */

import {
  AttemptAbortedError,
  describeThrown,
  LedgerUnavailableError,
  RunOnceError,
} from './errors.ts';
import { LeaseHeartbeat } from './lease-heartbeat.ts';
import type { ClaimResult, FenceResult, Holder, Ledger } from './ledger.ts';
import type { Logger } from './logger.ts';
import type { NoteValue } from './notes.ts';
import type { GuardedWrite } from './run-documents.ts';
import type { RunDetails, RunRecord, UnreadableRecord } from './run-record.ts';

/** The attempt that won the claim, as the work sees it. */
export interface Attempt {
  /** The idempotency key: pass it to downstream services as their idempotency token. */
  readonly runId: string;
  /** This attempt's id (a UUID), stored as the record's `attempt_id`. */
  readonly attemptId: string;
  /**
   * When this attempt's lease lapses, by Firestore's clock: current, moved on by every heartbeat.
   * Work past it may be repeated by another attempt only if the heartbeat stopped (job timeout)
   * or failed for about two thirds of a lease.
   */
  readonly leaseExpires: Date;
  /** True when this attempt took over an earlier attempt's record (a lapsed lease, a failure). */
  readonly takeover: boolean;
  /** When the run's first attempt claimed it, by Firestore's clock (`first_claimed_at`). */
  readonly firstClaimedAt: Date;
  /** How many attempts claimed the run, this one included. */
  readonly attempts: number;
  /**
   * Aborted, with an {@link AttemptAbortedError} as its reason, when the lease is lost to another
   * attempt, the instance shuts down, or the work runs past `maxRunMs`: stop and throw.
   */
  readonly signal: AbortSignal;
  /**
   * Notes `value` under `name` in the run's record (`notes.NAME`) now, before the run completes:
   * e.g. the execution a proxy launched, so a crash before the completion still leaves it on record.
   * One fenced write (it also extends the lease).
   *
   * @throws {AttemptAbortedError} if the lease was lost; {@link RunOnceError} for a note the
   *   record cannot hold (see `noteProblem`) or a ledger that keeps no notes;
   *   {@link LedgerUnavailableError} if Firestore fails.
   */
  note(name: string, value: NoteValue): Promise<void>;
}

/** Why a fenced write found the lease lost, as far as this attempt can tell. */
export type LeaseLossCause = 'job_timeout' | 'extensions_failed' | 'stalled' | 'unknown';

/**
 * What happened to one delivery. `unrecorded` means Firestore failed the fenced write after every
 * retry: for a completion the work is done but not recorded; for a release the claim stays until
 * its lease lapses.
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
       * True when the release also marked the failure reported (`finalFailure` said so), or may
       * have (`unrecorded`): the caller logs the report.
       */
      readonly reported: boolean;
      readonly leaseLoss?: LeaseLossCause;
    }
  | { readonly outcome: 'unavailable'; readonly error: LedgerUnavailableError }
  /** The claim's guarded write (`RunOnceOptions.guard`) found its document changed: nothing ran or was written. */
  | { readonly outcome: 'guard_changed' };

/** The name of every run outcome. */
export type OutcomeName = RunOutcome['outcome'];

/** Options of {@link runOnce}. */
export interface RunOnceOptions {
  /** Descriptive fields stored with the run record. */
  readonly details?: RunDetails;
  /**
   * A write committed atomically with the claim, on its own precondition (`Ledger.claim`): the work
   * runs only if both landed; `guard_changed` if the guarded document changed first.
   */
  readonly guard?: GuardedWrite;
  /**
   * Run it even if it was reported missed or failed after retries (a backfill's delivery); else
   * such a run is a `duplicate`, so a late delivery cannot make the report untrue.
   */
  readonly reopenReported?: boolean;
  /** Where lost leases, unrecorded writes and jobs that ignore their abort are reported. */
  readonly logger: Logger;
  /** Aborted when the instance shuts down: the work's signal is aborted with reason `shutdown`. */
  readonly shutdown?: AbortSignal;
  /**
   * Longest the work may run, ms: then its signal is aborted (`job_timeout`) and the heartbeat
   * stops, so a hung job gives the run up within one lease.
   */
  readonly maxRunMs?: number;
  /** How long after its signal aborted a still-running job is reported with a warning, ms (5000). */
  readonly abortWarningMs?: number;
  /**
   * Asked after the work failed: an id to store as `reported_by` when this failure is final (no
   * retry can follow, by the caller's retry policy), so the release write reports it; `undefined`
   * otherwise. A throw counts as `undefined`: the failure is then reported later by whoever checks.
   */
  readonly finalFailure?: (attempt: Attempt) => Promise<string | undefined>;
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
 * Runs `work` at most once per `runId` across every instance sharing the ledger. The work runs only
 * after the claim is written; a heartbeat extends the lease while it runs; its throw (sync or
 * async) releases the claim so a retry can run at once, keeping the failure in the record.
 *
 * @param ledger - the run ledger.
 * @param runId - the idempotency key.
 * @param work - the work; throwing means "failed, retry me".
 * @returns the outcome. Firestore failures are outcomes, not throws: `unavailable` (before the
 *   work ran) or `unrecorded` (after it); the work's own throw is the `failed` outcome.
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
  const { logger } = options;
  let claimed: ClaimResult;
  try {
    claimed = await ledger.claim(runId, options.details, options.guard, {
      reopenReported: options.reopenReported === true,
    });
  } catch (error) {
    if (error instanceof LedgerUnavailableError) return { outcome: 'unavailable', error };
    throw error;
  }
  switch (claimed.state) {
    case 'completed':
      return { outcome: 'duplicate', record: claimed.record };
    case 'in_progress':
      return { outcome: 'in_progress', holder: claimed.holder };
    case 'unreadable':
      return { outcome: 'unreadable_record', record: claimed.record };
    case 'guard_changed':
      return { outcome: 'guard_changed' };
    case 'claimed':
      break;
  }

  const controller = new AbortController();
  const heartbeat = new LeaseHeartbeat(ledger, claimed.claim, controller, logger);
  const attempt: Attempt = {
    runId,
    attemptId: claimed.claim.attemptId,
    get leaseExpires() {
      return heartbeat.claim.leaseExpires;
    },
    takeover: claimed.claim.takeover,
    firstClaimedAt: claimed.claim.firstClaimedAt,
    attempts: claimed.claim.attempts,
    signal: controller.signal,
    note: async (name, value) => {
      if (!(await heartbeat.renewWith((claim) => ledger.note(claim, name, value)))) {
        throw (
          controller.signal.reason ?? new AttemptAbortedError('lease_lost', 'the lease was lost')
        );
      }
    },
  };
  let timedOut = false;
  let settled = false;
  const warnIfStillRunning = () => {
    const reason = (controller.signal.reason as AttemptAbortedError | undefined)?.reason;
    const timer = setTimeout(() => {
      if (settled) return;
      logger.warn(
        { abortReason: reason },
        `the job is still running ${options.abortWarningMs ?? DEFAULT_ABORT_WARNING_MS} ms after its signal was aborted (${reason}); it should stop and throw`,
      );
    }, options.abortWarningMs ?? DEFAULT_ABORT_WARNING_MS);
    timer.unref();
  };
  controller.signal.addEventListener('abort', warnIfStillRunning, { once: true });
  const onShutdown = () =>
    controller.abort(new AttemptAbortedError('shutdown', 'the instance is shutting down'));
  if (options.shutdown?.aborted) onShutdown();
  options.shutdown?.addEventListener('abort', onShutdown, { once: true });
  const timer =
    options.maxRunMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          void heartbeat.stop();
          controller.abort(
            new AttemptAbortedError(
              'job_timeout',
              `the job ran longer than ${options.maxRunMs} ms`,
            ),
          );
        }, options.maxRunMs);
  const causeOfLoss = (): LeaseLossCause => {
    if (timedOut) return 'job_timeout';
    if (heartbeat.failuresInARow > 0) return 'extensions_failed';
    return heartbeat.stalled ? 'stalled' : 'unknown';
  };
  try {
    await work(attempt);
  } catch (thrown) {
    settled = true;
    // A job that stops on its signal usually throws a bare AbortError: report why it was aborted.
    const error = controller.signal.aborted ? controller.signal.reason : thrown;
    const claim = await heartbeat.stop();
    const failure = describeThrown(error);
    const reporter = await options.finalFailure?.(attempt).catch(() => undefined);
    const release = await fenced(
      () => ledger.release(claim, failure, reporter),
      logger,
      'release',
      causeOfLoss,
    );
    // An unrecorded release may have landed with its report, which no later check then makes:
    // the failure is logged now (at worst twice, never not at all).
    const reported = reporter !== undefined && release !== 'lease_lost';
    return release === 'lease_lost'
      ? { outcome: 'failed', attempt, error, release, reported, leaseLoss: causeOfLoss() }
      : { outcome: 'failed', attempt, error, release, reported };
  } finally {
    settled = true;
    clearTimeout(timer);
    options.shutdown?.removeEventListener('abort', onShutdown);
  }
  const claim = await heartbeat.stop();
  const completion = await fenced(() => ledger.complete(claim), logger, 'completion', causeOfLoss);
  return completion === 'lease_lost'
    ? { outcome: 'processed', attempt, completion, leaseLoss: causeOfLoss() }
    : { outcome: 'processed', attempt, completion };
}

/** The warning for a lost lease, saying which cause this attempt can see. */
export function leaseLossMessage(cause: LeaseLossCause): string {
  return LEASE_LOSS_MESSAGES[cause];
}

async function fenced(
  write: () => Promise<FenceResult>,
  logger: Logger,
  what: 'completion' | 'release',
  cause: () => LeaseLossCause,
): Promise<FenceResult | 'unrecorded'> {
  try {
    const result = await write();
    if (result === 'lease_lost') {
      logger.warn({ fence: what, leaseLoss: cause() }, leaseLossMessage(cause()));
    }
    return result;
  } catch (err) {
    if (!(err instanceof LedgerUnavailableError)) throw err;
    logger.error(
      { err, fence: what },
      what === 'completion'
        ? 'the job succeeded but its completion could not be recorded; a later delivery of this run may run it again'
        : 'the claim could not be released; retries get 409 until its lease lapses',
    );
    return 'unrecorded';
  }
}
