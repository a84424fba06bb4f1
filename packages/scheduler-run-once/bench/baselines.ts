/**
 * The two baselines the project's `RunLedger` is measured against, behind its interface (`claim`,
 * then `complete` or `release`), so the same `runOnce` and HTTP handler drive all three. Both write
 * the same fields as `RunLedger`; only the protocol differs.
 *
 * - (a) {@link LiteralPortLedger}: the Cloud Scheduler guide's Python sample ("Deduplicate job
 *   requests") ported line for line: one transaction to claim, one to finish.
 * - (b) {@link FloorLedger}: one plain `create()` and one plain `update()` per run, the fewest
 *   writes a run can cost. It cannot tell a completed run from a running one and fences nothing.
 *
 * The sample has no lease heartbeat; each baseline's `extend` is the plainest write of a new lease
 * in its own style. `runOnce` calls it a third of the way into the lease, 100 s with the bench's
 * 300 s leases, which no bench run reaches.
 */
import { randomUUID } from 'node:crypto';
import {
  type DocumentReference,
  FieldValue,
  type Firestore,
  Timestamp,
  type Transaction,
} from '@google-cloud/firestore';
import { LedgerUnavailableError } from '../src/core/errors.ts';
import type {
  Claim,
  ClaimResult,
  FenceResult,
  Ledger,
  LedgerOptions,
} from '../src/core/ledger.ts';
import type { NoteValue } from '../src/core/notes.ts';
import type {
  GuardedWrite,
  RunDocumentsOptions,
} from '../src/core/run-documents.ts';
import {
  type RunDetails,
  RunStatus,
  runRecordConverter,
} from '../src/core/run-record.ts';

type BaselineOptions = LedgerOptions & Omit<RunDocumentsOptions, 'timeoutMs'>;

/** Firestore errors become `LedgerUnavailableError`, which `runOnce` answers `unavailable`. */
async function unavailableOnError<T>(
  what: string,
  operation: () => Promise<T>,
): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw new LedgerUnavailableError(
      `Firestore ${what} failed: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
}

/** What both baselines share: the client, the settings and the fields they write. */
abstract class Baseline {
  protected readonly db: Firestore;
  protected readonly options: BaselineOptions;

  constructor(db: Firestore, options: BaselineOptions) {
    this.db = db;
    this.options = options;
  }

  protected ref(runId: string): DocumentReference {
    return this.db.collection(this.options.collection).doc(runId);
  }

  protected claimFields(attemptId: string, now: number) {
    return {
      status: 'in_progress',
      attempt_id: attemptId,
      lease_expires: Timestamp.fromMillis(now + this.options.leaseMs),
      expire_at: Timestamp.fromMillis(now + this.options.retentionMs),
      claimed_at: FieldValue.serverTimestamp(),
    };
  }

  /**
   * `ctx.note` in the baselines' style: a plain update of `notes.NAME` (the project's ledger fences
   * it and extends the lease in the same write). No bench job notes anything.
   */
  async note(claim: Claim, name: string, value: NoteValue): Promise<Claim> {
    await unavailableOnError('note', () =>
      this.ref(claim.runId).update({ [`notes.${name}`]: value }),
    );
    return claim;
  }

  protected completionFields() {
    return {
      status: 'completed',
      completed_at: FieldValue.serverTimestamp(),
      expire_at: Timestamp.fromMillis(Date.now() + this.options.retentionMs),
    };
  }
}

/** The baselines claim without a guarded write (no overlap policy is benched): refuse one. */
function refuseGuard(guard: GuardedWrite | undefined): void {
  if (guard !== undefined) {
    throw new Error('the bench baselines cannot commit a guarded write');
  }
}

/**
 * (a) The guide's sample: `@firestore.transactional` becomes `runTransaction` (both retry a contended
 * transaction, 5 attempts by default); the lease is judged by the instance clock, as there.
 */
export class LiteralPortLedger extends Baseline implements Ledger {
  /** Claim transaction: read; completed → duplicate; live lease → busy; else write the claim. */
  claim(
    runId: string,
    details: RunDetails = {},
    guard?: GuardedWrite,
  ): Promise<ClaimResult> {
    refuseGuard(guard);
    const ref = this.ref(runId);
    return unavailableOnError('claim transaction', () =>
      this.db.runTransaction(async (tx): Promise<ClaimResult> => {
        const snap = await tx.get(ref.withConverter(runRecordConverter));
        const now = Date.now();
        const record = snap.data();
        if (record?.status === RunStatus.Completed) {
          return { state: 'completed', record };
        }
        if (
          record?.status === RunStatus.InProgress &&
          (record.leaseExpires?.getTime() ?? 0) > now
        ) {
          return { state: 'in_progress', holder: undefined }; // the sample answers 409, no more
        }
        const attemptId = randomUUID();
        tx.set(ref, {
          job_name: details.jobName ?? '',
          ...this.claimFields(attemptId, now),
        });
        const { leaseMs } = this.options;
        const leaseExpires = new Date(now + leaseMs);
        // The sample fences on attempt_id; fencingToken is unused.
        const claim = {
          runId,
          attemptId,
          fencingToken: Timestamp.now(),
          leaseExpires,
          leaseMs,
        };
        return {
          state: 'claimed',
          claim: {
            ...claim,
            takeover: snap.exists,
            notes: {},
            firstClaimedAt: new Date(now),
            attempts: 1,
          },
        };
      }),
    );
  }

  /** Lease transaction: if `attempt_id` is still ours, write a new lease from the instance clock. */
  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    const leaseExpires = new Date(Date.now() + this.options.leaseMs);
    const result = await this.#ifStillOurs(
      'lease transaction',
      claim,
      (tx, ref) =>
        tx.update(ref, { lease_expires: Timestamp.fromDate(leaseExpires) }),
    );
    return result === 'recorded' ? { ...claim, leaseExpires } : result;
  }

  /** Finish transaction: if `attempt_id` is still ours, mark the run completed. */
  complete(claim: Claim): Promise<FenceResult> {
    return this.#ifStillOurs('finish transaction', claim, (tx, ref) =>
      tx.update(ref, this.completionFields()),
    );
  }

  /** On a retryable failure: if `attempt_id` is still ours, delete the claim. */
  release(claim: Claim): Promise<FenceResult> {
    return this.#ifStillOurs('release transaction', claim, (tx, ref) =>
      tx.delete(ref),
    );
  }

  #ifStillOurs(
    what: string,
    claim: Claim,
    write: (tx: Transaction, ref: DocumentReference) => void,
  ): Promise<FenceResult> {
    const ref = this.ref(claim.runId);
    return unavailableOnError(what, () =>
      this.db.runTransaction(async (tx): Promise<FenceResult> => {
        if ((await tx.get(ref)).get('attempt_id') !== claim.attemptId) {
          return 'lease_lost';
        }
        write(tx, ref);
        return 'recorded';
      }),
    );
  }
}

/** (b) The floor: `create()` to claim (any existing record answers "in progress"), `update()` to complete. */
export class FloorLedger extends Baseline implements Ledger {
  async claim(
    runId: string,
    details: RunDetails = {},
    guard?: GuardedWrite,
  ): Promise<ClaimResult> {
    refuseGuard(guard);
    const now = Date.now();
    const attemptId = randomUUID();
    const ALREADY_EXISTS = 6;
    const written = await this.ref(runId)
      .create({
        job_name: details.jobName ?? '',
        ...this.claimFields(attemptId, now),
      })
      .catch((err: { code?: number }) => {
        if (err.code === ALREADY_EXISTS) {
          return undefined;
        }
        throw new LedgerUnavailableError(`Firestore claim failed: ${err}`, {
          cause: err,
        });
      });
    if (written === undefined) {
      return { state: 'in_progress', holder: undefined };
    }
    const { leaseMs } = this.options;
    const leaseExpires = new Date(now + leaseMs);
    const claim = {
      runId,
      attemptId,
      fencingToken: written.writeTime,
      leaseExpires,
      leaseMs,
    };
    return {
      state: 'claimed',
      claim: {
        ...claim,
        takeover: false,
        notes: {},
        firstClaimedAt: written.writeTime.toDate(),
        attempts: 1,
      },
    };
  }

  /** A plain, unfenced `update()` of the lease. */
  async extend(claim: Claim): Promise<Claim> {
    const leaseExpires = new Date(Date.now() + this.options.leaseMs);
    await unavailableOnError('lease extension', () =>
      this.ref(claim.runId).update({
        lease_expires: Timestamp.fromDate(leaseExpires),
      }),
    );
    return { ...claim, leaseExpires };
  }

  async complete(claim: Claim): Promise<FenceResult> {
    const fields = this.completionFields();
    await unavailableOnError('completion', () =>
      this.ref(claim.runId).update(fields),
    );
    return 'recorded';
  }

  async release(claim: Claim): Promise<FenceResult> {
    await unavailableOnError('release', () => this.ref(claim.runId).delete());
    return 'recorded';
  }
}
