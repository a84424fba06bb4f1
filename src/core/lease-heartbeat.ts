/**
 * The lease heartbeat: while a job runs, extend its claim before the lease lapses, so a short
 * `LEASE_SECONDS` coexists with long jobs (docs/how-it-works.md, "Long jobs: the lease heartbeat").
 * The beat interval is a duration, never a difference of clocks, so a skewed clock cannot change it.
 */

import { AttemptAbortedError } from './errors.ts';
import type { Claim, Ledger } from './ledger.ts';
import type { Logger } from './logger.ts';

/** Beats per lease: at a third, two beats in a row can fail before the lease lapses. */
const BEATS_PER_LEASE = 3;
const MIN_INTERVAL_MS = 100;

/**
 * Keeps one claim's lease alive, beating every third of `claim.leaseMs`, and aborts `controller`
 * (reason `lease_lost`) when a fenced extension finds another attempt holding the run.
 */
export class LeaseHeartbeat {
  readonly #ledger: Ledger;
  readonly #logger: Logger;
  readonly #controller: AbortController;
  #claim: Claim;
  #timer: NodeJS.Timeout | undefined;
  #beat: Promise<void> | undefined;
  #failures = 0;
  #lapseWarned = false;
  /** `performance.now()` of the claim or the last extension that landed (monotonic, ms). */
  #lastExtendedAt = performance.now();

  constructor(ledger: Ledger, claim: Claim, controller: AbortController, logger: Logger) {
    this.#ledger = ledger;
    this.#claim = claim;
    this.#controller = controller;
    this.#logger = logger;
    const intervalMs = Math.max(MIN_INTERVAL_MS, claim.leaseMs / BEATS_PER_LEASE);
    this.#timer = setInterval(() => {
      this.#beat ??= this.#extend().finally(() => {
        this.#beat = undefined;
      });
    }, intervalMs);
    this.#timer.unref();
  }

  /** The claim with the latest fencing token and lease end. */
  get claim(): Claim {
    return this.#claim;
  }

  /** Extensions that failed transiently since the last one that landed. */
  get failuresInARow(): number {
    return this.#failures;
  }

  /** No extension landed for a whole lease although none failed: the instance was paused or starved. */
  get stalled(): boolean {
    return this.#failures === 0 && performance.now() - this.#lastExtendedAt > this.#claim.leaseMs;
  }

  /** Stops beating and waits for a beat in flight; returns the claim with the latest fencing token. */
  async stop(): Promise<Claim> {
    this.#warnIfLapsed();
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#beat;
    return this.#claim;
  }

  /**
   * Runs `write`, a fenced write that renews the claim (`ledger.note`), between beats, never beside
   * one: both move the fencing token, and each must use the latest.
   *
   * @returns true if it landed; false if the lease was lost (the job's signal is then aborted).
   * @throws whatever `write` throws (a transient failure: the lease still runs).
   */
  async renewWith(write: (claim: Claim) => Promise<Claim | 'lease_lost'>): Promise<boolean> {
    while (this.#beat !== undefined) await this.#beat;
    const run = write(this.#claim).then((renewed) => this.#apply(renewed));
    this.#beat = run.then(
      () => undefined,
      () => undefined,
    );
    try {
      return await run;
    } finally {
      this.#beat = undefined;
    }
  }

  async #extend(): Promise<void> {
    this.#warnIfLapsed();
    try {
      this.#apply(await this.#ledger.extend(this.#claim));
    } catch (err) {
      // Transient: the lease still runs; the next beat tries again before it lapses.
      this.#failures++;
      this.#logger.warn(
        { err, failedExtensions: this.#failures },
        'lease extension failed; retrying at the next beat (two more failures in a row lose the lease)',
      );
    }
  }

  /** Warns once, before any round trip, that the lease lapsed unrenewed ({@link stalled}). */
  #warnIfLapsed(): void {
    if (this.#lapseWarned || !this.stalled) return;
    this.#lapseWarned = true;
    this.#logger.warn(
      'lease lapsed: no extension ran for a whole lease (this instance was paused or starved of CPU), so another attempt may have taken the run over and run the job beside this one',
    );
  }

  /** Takes a renewal's result: true for the new claim; false for a lost lease, which aborts the job. */
  #apply(renewed: Claim | 'lease_lost'): boolean {
    if (renewed !== 'lease_lost') {
      this.#claim = renewed;
      this.#failures = 0;
      this.#lastExtendedAt = performance.now();
      return true;
    }
    // When stopping, the fenced write that follows reports the lost lease itself.
    if (this.#timer === undefined) return false;
    clearInterval(this.#timer);
    this.#timer = undefined;
    const why =
      this.#failures > 0
        ? `after ${this.#failures} failed extension(s) let the lease lapse`
        : this.stalled
          ? 'after no extension ran for a whole lease (the instance was paused or starved of CPU)'
          : 'although no extension had failed (the record was changed by someone else)';
    this.#logger.warn(
      { failedExtensions: this.#failures },
      `lease lost: another attempt took this run over ${why}; aborting the job`,
    );
    this.#controller.abort(
      new AttemptAbortedError('lease_lost', `another attempt took this run over ${why}`),
    );
    return false;
  }
}
