/**
 * The two baselines the project's ledger is measured against, with the ledger's own interface
 * (`claim` → `complete` or `release`), so the same `runOnce` and HTTP handler drive all three:
 *
 * - {@link LiteralPortLedger}: a literal TypeScript port of the Cloud Scheduler guide's Python sample
 *   ("Deduplicate job requests"): one transaction to claim, one to finish.
 * - {@link FloorLedger}: the floor, one plain `create()` and one plain `update()` per run. It cannot
 *   tell a completed run from a running one and fences nothing: the least any ledger could do.
 *
 * Both write the same fields as `RunLedger` (status, attempt_id, lease_expires, expire_at,
 * claimed_at, completed_at and the caller's details), so only the protocol differs. Like the rest of
 * the bench they use the compiled `build/` modules, the code that is deployed.
 *
 * `extend` (the project's lease heartbeat) is not in the guide's sample; it is here only because
 * `runOnce` calls it at a third of the lease, which no bench run reaches (300 s leases).
 */
import { randomUUID } from 'node:crypto';
import { type DocumentData, FieldValue, type Firestore, Timestamp } from '@google-cloud/firestore';
import { LedgerUnavailableError } from '../build/errors.js';
import type {
  Claim,
  ClaimResult,
  FenceResult,
  LedgerOptions,
  RunLedger,
  RunRecord,
} from '../build/ledger.js';

/** What `runOnce` and the handler call on a ledger. */
export type LedgerLike = Pick<RunLedger, 'claim' | 'complete' | 'release' | 'extend'>;

/**
 * The baselines are structurally ledgers; `RunLedger` has private fields, so the handler's type
 * names the class. This is the one cast that lets the same handler drive a baseline.
 */
export function asRunLedger(ledger: LedgerLike): RunLedger {
  return ledger as RunLedger;
}

const ALREADY_EXISTS = 6;

/** Errors of the port surface as `LedgerUnavailableError`, so `runOnce` answers them 500. */
async function unavailableOnError<T>(what: string, operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw new LedgerUnavailableError(`Firestore ${what} failed: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * The guide's Python sample, step for step: a claim transaction (read; `completed` → duplicate;
 * `in_progress` with a live lease → busy; else write status, attempt_id, lease_expires, expire_at)
 * and a finish transaction (if `attempt_id` is still ours, set `completed`). Python's
 * `@firestore.transactional` becomes `runTransaction`; both retry a contended transaction, up to 5
 * attempts by default. The lease is judged by the instance clock.
 */
export class LiteralPortLedger implements LedgerLike {
  readonly #db: Firestore;
  readonly #options: Omit<LedgerOptions, 'timeoutMs'>;

  constructor(db: Firestore, options: Omit<LedgerOptions, 'timeoutMs'>) {
    this.#db = db;
    this.#options = options;
  }

  /** Claim transaction: read; completed → duplicate; live lease → busy; else write the claim. */
  async claim(runId: string, details: DocumentData = {}): Promise<ClaimResult> {
    const ref = this.#db.collection(this.#options.collection).doc(runId);
    return unavailableOnError('claim transaction', () =>
      this.#db.runTransaction(async (tx): Promise<ClaimResult> => {
        const snap = await tx.get(ref);
        const now = Date.now();
        const record = snap.data() as RunRecord | undefined;
        if (record?.status === 'completed') return { state: 'completed', record };
        if (record?.status === 'in_progress' && record.lease_expires.toMillis() > now) {
          return { state: 'in_progress', record };
        }
        const attemptId = randomUUID();
        const leaseExpires = new Date(now + this.#options.leaseMs);
        tx.set(ref, {
          ...details,
          status: 'in_progress',
          attempt_id: attemptId,
          lease_expires: Timestamp.fromDate(leaseExpires),
          expire_at: Timestamp.fromMillis(now + this.#options.retentionMs),
          claimed_at: FieldValue.serverTimestamp(),
        });
        const fencingToken = Timestamp.fromMillis(now); // unused: the sample fences on attempt_id
        const claim = { runId, attemptId, fencingToken, leaseExpires, takeover: snap.exists };
        return { state: 'claimed', claim };
      }),
    );
  }

  /** Finish transaction: if `attempt_id` is still ours, mark the run completed. */
  async complete(claim: Claim): Promise<FenceResult> {
    const ref = this.#db.collection(this.#options.collection).doc(claim.runId);
    return unavailableOnError('finish transaction', () =>
      this.#db.runTransaction(async (tx): Promise<FenceResult> => {
        const snap = await tx.get(ref);
        if (snap.get('attempt_id') !== claim.attemptId) return 'lease_lost';
        tx.update(ref, {
          status: 'completed',
          completed_at: FieldValue.serverTimestamp(),
          expire_at: Timestamp.fromMillis(Date.now() + this.#options.retentionMs),
        });
        return 'recorded';
      }),
    );
  }

  /** On a retryable failure: if `attempt_id` is still ours, delete the claim. */
  async release(claim: Claim): Promise<FenceResult> {
    const ref = this.#db.collection(this.#options.collection).doc(claim.runId);
    return unavailableOnError('release transaction', () =>
      this.#db.runTransaction(async (tx): Promise<FenceResult> => {
        const snap = await tx.get(ref);
        if (snap.get('attempt_id') !== claim.attemptId) return 'lease_lost';
        tx.delete(ref);
        return 'recorded';
      }),
    );
  }

  /** Not in the sample: a transaction like the finish, moving `lease_expires`. */
  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    const ref = this.#db.collection(this.#options.collection).doc(claim.runId);
    const leaseExpires = new Date(Date.now() + this.#options.leaseMs);
    return unavailableOnError('lease extension', () =>
      this.#db.runTransaction(async (tx): Promise<Claim | 'lease_lost'> => {
        const snap = await tx.get(ref);
        if (snap.get('attempt_id') !== claim.attemptId) return 'lease_lost';
        tx.update(ref, { lease_expires: Timestamp.fromDate(leaseExpires) });
        return { ...claim, leaseExpires };
      }),
    );
  }
}

/**
 * The floor: `create()` to claim (an existing document answers "in progress", whatever its state)
 * and `update()` to complete, without preconditions.
 */
export class FloorLedger implements LedgerLike {
  readonly #db: Firestore;
  readonly #options: Omit<LedgerOptions, 'timeoutMs'>;

  constructor(db: Firestore, options: Omit<LedgerOptions, 'timeoutMs'>) {
    this.#db = db;
    this.#options = options;
  }

  async claim(runId: string, details: DocumentData = {}): Promise<ClaimResult> {
    const ref = this.#db.collection(this.#options.collection).doc(runId);
    const now = Date.now();
    const attemptId = randomUUID();
    const leaseExpires = new Date(now + this.#options.leaseMs);
    try {
      const written = await ref.create({
        ...details,
        status: 'in_progress',
        attempt_id: attemptId,
        lease_expires: Timestamp.fromDate(leaseExpires),
        expire_at: Timestamp.fromMillis(now + this.#options.retentionMs),
        claimed_at: FieldValue.serverTimestamp(),
      });
      const claim = { runId, attemptId, fencingToken: written.writeTime, leaseExpires };
      return { state: 'claimed', claim: { ...claim, takeover: false } };
    } catch (err) {
      if ((err as { code?: number }).code === ALREADY_EXISTS) {
        return { state: 'in_progress', record: undefined };
      }
      throw new LedgerUnavailableError(`Firestore claim failed: ${(err as Error).message}`);
    }
  }

  async complete(claim: Claim): Promise<FenceResult> {
    await unavailableOnError('completion', () =>
      this.#db
        .collection(this.#options.collection)
        .doc(claim.runId)
        .update({
          status: 'completed',
          completed_at: FieldValue.serverTimestamp(),
          expire_at: Timestamp.fromMillis(Date.now() + this.#options.retentionMs),
        }),
    );
    return 'recorded';
  }

  async release(claim: Claim): Promise<FenceResult> {
    await unavailableOnError('release', () =>
      this.#db.collection(this.#options.collection).doc(claim.runId).delete(),
    );
    return 'recorded';
  }

  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    const leaseExpires = new Date(Date.now() + this.#options.leaseMs);
    await unavailableOnError('lease extension', () =>
      this.#db
        .collection(this.#options.collection)
        .doc(claim.runId)
        .update({ lease_expires: Timestamp.fromDate(leaseExpires) }),
    );
    return { ...claim, leaseExpires };
  }
}
