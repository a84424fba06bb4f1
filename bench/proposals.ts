/**
 * A change to `src/` proposed by the bench, prototyped here as a wrapper so its effect can be
 * measured next to the shipped ledger; it is not used by the project.
 *
 * Single flight per instance: a storm of duplicates costs Firestore one `create()` and one read per
 * delivery, and the emulator (like Firestore) serialises conflicting writes to one document, so 200
 * concurrent duplicates queue behind each other. Inside one instance none of that is needed:
 *
 * - while a claim of run R is in flight, later claims of R wait for it instead of sending their own:
 *   if it claimed the run they answer `in_progress` (this instance holds the lease), otherwise they
 *   share its answer;
 * - while this instance holds R (claimed, not yet completed or released) and the lease is live by
 *   the instance clock, claims of R answer `in_progress` at once. Firestore would give the same
 *   answer; past the lease they go to Firestore as before, so takeovers still work.
 *
 * Deliveries that reach other instances are unchanged, and so is every write, so exactly-once does
 * not depend on this cache: it only answers duplicates that Firestore would refuse anyway.
 */
import type { DocumentData } from '@google-cloud/firestore';
import type { Claim, ClaimResult, FenceResult } from '../build/ledger.js';
import type { LedgerLike } from './baselines.ts';

export class SingleFlightLedger implements LedgerLike {
  readonly #inner: LedgerLike;
  readonly #inflight = new Map<string, Promise<ClaimResult>>();
  /** Runs this instance holds, with their lease expiry (ms since epoch). */
  readonly #held = new Map<string, number>();

  constructor(inner: LedgerLike) {
    this.#inner = inner;
  }

  claim(runId: string, details?: DocumentData): Promise<ClaimResult> {
    const leaseExpires = this.#held.get(runId);
    if (leaseExpires !== undefined && leaseExpires > Date.now()) {
      return Promise.resolve({ state: 'in_progress', record: undefined });
    }
    const pending = this.#inflight.get(runId);
    if (pending !== undefined) {
      return pending.then(
        (result): ClaimResult =>
          result.state === 'claimed' ? { state: 'in_progress', record: undefined } : result,
      );
    }
    const claim = this.#inner.claim(runId, details).then((result) => {
      if (result.state === 'claimed') {
        this.#held.set(runId, result.claim.leaseExpires.getTime());
      }
      return result;
    });
    this.#inflight.set(runId, claim);
    const forget = () => this.#inflight.delete(runId);
    claim.then(forget, forget);
    return claim;
  }

  async complete(claim: Claim): Promise<FenceResult> {
    try {
      return await this.#inner.complete(claim);
    } finally {
      this.#held.delete(claim.runId);
    }
  }

  async release(claim: Claim): Promise<FenceResult> {
    try {
      return await this.#inner.release(claim);
    } finally {
      this.#held.delete(claim.runId);
    }
  }

  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    const extended = await this.#inner.extend(claim);
    if (extended === 'lease_lost') this.#held.delete(claim.runId);
    else this.#held.set(claim.runId, extended.leaseExpires.getTime());
    return extended;
  }
}
