/**
 * The lease heartbeat: while a job runs, extend its claim before the lease lapses, so a short
 * `LEASE_SECONDS` (fast recovery after a crash) coexists with long jobs. Retries keep getting 409
 * while the heartbeat holds the lease.
 */
import type { Logger } from 'pino';
import { AttemptAbortedError } from './errors.ts';
import type { Claim, RunLedger } from './ledger.ts';

/** Beats per lease: at a third, two beats can fail transiently before the lease lapses. */
const BEATS_PER_LEASE = 3;
const MIN_INTERVAL_MS = 100;

/**
 * Keeps one claim's lease alive and aborts `signal` when it cannot: a fenced extension that finds
 * another attempt holding the run aborts with reason `lease_lost`.
 */
export class LeaseHeartbeat {
  readonly #ledger: RunLedger;
  readonly #logger: Logger;
  readonly #controller: AbortController;
  #claim: Claim;
  #timer: NodeJS.Timeout | undefined;
  #beat: Promise<void> | undefined;

  /**
   * Starts beating at a third of the claim's remaining lease.
   *
   * @param controller - aborted with an {@link AttemptAbortedError} when the lease is lost.
   */
  constructor(ledger: RunLedger, claim: Claim, controller: AbortController, logger: Logger) {
    this.#ledger = ledger;
    this.#claim = claim;
    this.#controller = controller;
    this.#logger = logger;
    const intervalMs = Math.max(
      MIN_INTERVAL_MS,
      (claim.leaseExpires.getTime() - Date.now()) / BEATS_PER_LEASE,
    );
    this.#timer = setInterval(() => {
      this.#beat ??= this.#extend().finally(() => {
        this.#beat = undefined;
      });
    }, intervalMs);
    this.#timer.unref();
  }

  /** The claim with the latest fencing token. */
  get claim(): Claim {
    return this.#claim;
  }

  /**
   * Stops beating and waits for a beat in flight, so the next fenced write uses the latest token.
   *
   * @returns the claim with the latest fencing token.
   */
  async stop(): Promise<Claim> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#beat;
    return this.#claim;
  }

  async #extend(): Promise<void> {
    try {
      const renewed = await this.#ledger.extend(this.#claim);
      if (renewed !== 'lease_lost') {
        this.#claim = renewed;
        return;
      }
      // When stopping, the fenced write that follows reports the lost lease itself.
      if (this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
        this.#logger.warn('lease lost: another attempt took this run over; aborting the job');
        this.#controller.abort(
          new AttemptAbortedError('lease_lost', 'another attempt took this run over'),
        );
      }
    } catch (err) {
      // Transient: the lease still runs; the next beat tries again before it lapses.
      this.#logger.warn({ err }, 'lease extension failed; retrying at the next beat');
    }
  }
}
