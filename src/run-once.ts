/**
 * The run lifecycle: claim → run → complete, or release on failure. Independent of HTTP and of Cloud
 * Scheduler, so a downstream service can apply the same claim to any idempotency key it receives.
 */
import type { DocumentData } from '@google-cloud/firestore';
import type { Logger } from 'pino';
import { AttemptAbortedError, LedgerUnavailableError } from './errors.ts';
import { LeaseHeartbeat } from './lease-heartbeat.ts';
import type { FenceResult, Holder, RunLedger, RunRecord } from './ledger.ts';

/** The attempt that won the claim, as the work sees it. */
export interface Attempt {
  /** The idempotency key: pass it to downstream services as their idempotency token. */
  readonly runId: string;
  /** This attempt's id (a UUID), stored as the record's `attempt_id`. */
  readonly attemptId: string;
  /** When this attempt's lease lapses; work past it may be repeated by another attempt. */
  readonly leaseExpires: Date;
  /** True when this attempt took over the expired lease of an earlier, unfinished attempt. */
  readonly takeover: boolean;
  /**
   * Aborted, with an {@link AttemptAbortedError} as its reason, when the lease is lost to another
   * attempt, the instance shuts down, or the work runs past `maxRunMs`: stop and throw.
   */
  readonly signal: AbortSignal;
}

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
    }
  | { readonly outcome: 'duplicate'; readonly record: RunRecord }
  | { readonly outcome: 'in_progress'; readonly holder: Holder | undefined }
  | {
      readonly outcome: 'failed';
      readonly attempt: Attempt;
      readonly error: unknown;
      readonly release: FenceResult | 'unrecorded';
    }
  | { readonly outcome: 'unavailable'; readonly error: LedgerUnavailableError };

/** The name of every outcome, for tables keyed by outcome. */
export type OutcomeName = RunOutcome['outcome'];

/** Options of {@link runOnce}. */
export interface RunOnceOptions {
  /** Descriptive fields stored with the run record (e.g. `job_name`). */
  readonly details?: DocumentData;
  /** Where lost leases and unrecorded writes are reported. */
  readonly logger: Logger;
  /** Aborted when the instance shuts down: the work's signal is aborted with reason `shutdown`. */
  readonly shutdown?: AbortSignal;
  /**
   * Longest the work may run, ms: then its signal is aborted (`job_timeout`) and the heartbeat
   * stops, so a hung job gives the run up within one lease.
   */
  readonly maxRunMs?: number;
}

const LEASE_LOST =
  'lease lost: another attempt took this run over after our lease expired, so the job may have run twice — raise LEASE_SECONDS above the job duration';

/**
 * Runs `work` at most once per `runId` across every instance sharing the ledger (once per run while
 * each attempt finishes within its lease). The work runs only after the claim is written; its
 * throw (sync or async) releases the claim so a retry can run at once.
 *
 * @param ledger - the run ledger.
 * @param runId - the idempotency key.
 * @param work - the work; throwing means "failed, retry me".
 * @returns the outcome. Firestore failures are outcomes, not throws: `unavailable` (before the
 *   work ran) or `unrecorded` (after it); the work's own throw is the `failed` outcome.
 */
export async function runOnce(
  ledger: RunLedger,
  runId: string,
  work: (attempt: Attempt) => Promise<void> | void,
  options: RunOnceOptions,
): Promise<RunOutcome> {
  const { logger } = options;
  let claimed: Awaited<ReturnType<RunLedger['claim']>>;
  try {
    claimed = await ledger.claim(runId, options.details);
  } catch (error) {
    if (error instanceof LedgerUnavailableError) return { outcome: 'unavailable', error };
    throw error;
  }
  if (claimed.state === 'completed') return { outcome: 'duplicate', record: claimed.record };
  if (claimed.state === 'in_progress') return { outcome: 'in_progress', holder: claimed.holder };

  const controller = new AbortController();
  const attempt: Attempt = {
    runId,
    attemptId: claimed.claim.attemptId,
    leaseExpires: claimed.claim.leaseExpires,
    takeover: claimed.claim.takeover,
    signal: controller.signal,
  };
  const heartbeat = new LeaseHeartbeat(ledger, claimed.claim, controller, logger);
  const onShutdown = () =>
    controller.abort(new AttemptAbortedError('shutdown', 'the instance is shutting down'));
  if (options.shutdown?.aborted) onShutdown();
  options.shutdown?.addEventListener('abort', onShutdown, { once: true });
  const timer =
    options.maxRunMs === undefined
      ? undefined
      : setTimeout(() => {
          void heartbeat.stop();
          controller.abort(
            new AttemptAbortedError(
              'job_timeout',
              `the job ran longer than ${options.maxRunMs} ms`,
            ),
          );
        }, options.maxRunMs);
  try {
    await work(attempt);
  } catch (thrown) {
    // A job that stops on its signal usually throws a bare AbortError: report why it was aborted.
    const error = controller.signal.aborted ? controller.signal.reason : thrown;
    const claim = await heartbeat.stop();
    const release = await fenced(() => ledger.release(claim), logger, 'release');
    return { outcome: 'failed', attempt, error, release };
  } finally {
    clearTimeout(timer);
    options.shutdown?.removeEventListener('abort', onShutdown);
  }
  const claim = await heartbeat.stop();
  const completion = await fenced(() => ledger.complete(claim), logger, 'completion');
  return { outcome: 'processed', attempt, completion };
}

async function fenced(
  write: () => Promise<FenceResult>,
  logger: Logger,
  what: 'completion' | 'release',
): Promise<FenceResult | 'unrecorded'> {
  try {
    const result = await write();
    if (result === 'lease_lost') logger.warn({ fence: what }, LEASE_LOST);
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
