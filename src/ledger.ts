/**
 * The run ledger: one Firestore document per run, the only module that touches Firestore.
 *
 * Timeline of one run document (the Scheduler guide's state machine):
 *
 *   (absent) ──create──► in_progress, lease L ──complete──► completed     (fenced on our write)
 *                           │      └──────────release──► (absent)         (fenced on our write)
 *                           └── now ≥ L: another attempt takes over       (fenced on what it read)
 *
 * Every write is one atomic operation with a precondition, never a transaction: a claim is a
 * `create()` (fails if the document exists); a takeover, completion or release is a write with a
 * `lastUpdateTime` precondition, so it lands only if nobody wrote the document since we last did.
 * The update time of our own last write is the fencing token: a zombie attempt whose lease was taken
 * over holds an old token and every one of its writes fails.
 */

import { randomUUID } from 'node:crypto';
import {
  type DocumentData,
  type DocumentReference,
  FieldValue,
  type Firestore,
  Timestamp,
} from '@google-cloud/firestore';
import { LedgerUnavailableError } from './errors.ts';

/** Run statuses, as the guide's sample writes them. */
export const RunStatus = { InProgress: 'in_progress', Completed: 'completed' } as const;
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus];

/** A run document. Field names follow the guide's sample so its TTL policy and queries carry over. */
export interface RunRecord {
  readonly status: RunStatus;
  /** The attempt that holds (or completed) the run; for people and logs, not for fencing. */
  readonly attempt_id: string;
  /** When the holder's claim lapses and another attempt may take over. */
  readonly lease_expires: Timestamp;
  /** When a Firestore TTL policy may delete the document (TTL deletion lags up to days). */
  readonly expire_at: Timestamp;
  /** Server time of the claim. */
  readonly claimed_at?: Timestamp;
  /** Server time of the completion. */
  readonly completed_at?: Timestamp;
  /** Descriptive fields given to {@link RunLedger.claim}, e.g. `job_name`, `schedule_time`. */
  readonly [field: string]: unknown;
}

/** A claim held by this attempt: what {@link RunLedger.complete} and {@link RunLedger.release} need. */
export interface Claim {
  readonly runId: string;
  readonly attemptId: string;
  /** Update time of our last write to the run document: the fencing token of every later write. */
  readonly fencingToken: Timestamp;
  /** When the lease lapses, by Firestore's clock. */
  readonly leaseExpires: Date;
  /** True when this claim took over an expired lease of an earlier attempt. */
  readonly takeover: boolean;
}

/** The attempt holding a run, as far as a claim could tell. */
export interface Holder {
  readonly attemptId: string;
  /** When its lease lapses. */
  readonly leaseExpires: Date;
}

/** What a claim found. `holder` is unknown when lost races left no record to read. */
export type ClaimResult =
  | { readonly state: 'claimed'; readonly claim: Claim }
  | { readonly state: 'completed'; readonly record: RunRecord }
  | { readonly state: 'in_progress'; readonly holder: Holder | undefined };

function holderOf(record: RunRecord | undefined): Holder | undefined {
  if (record === undefined || !(record.lease_expires instanceof Timestamp)) return undefined;
  return { attemptId: record.attempt_id, leaseExpires: record.lease_expires.toDate() };
}

/**
 * What a fenced write did: `recorded` if it took effect (or an earlier try of ours already had),
 * `lease_lost` if another attempt holds or finished the run, so ours changed nothing.
 */
export type FenceResult = 'recorded' | 'lease_lost';

/** Ledger settings, all durations in ms. */
export interface LedgerOptions {
  /** Collection holding the run documents. */
  readonly collection: string;
  /** Lease length of a claim, ms. */
  readonly leaseMs: number;
  /** How long a record is kept after its last write, ms; written to `expire_at`. */
  readonly retentionMs: number;
  /** Longest wait for one Firestore operation, ms; then {@link LedgerUnavailableError}. */
  readonly timeoutMs: number;
}

/** How often a claim re-reads after losing a race before reporting the run as in progress. */
const MAX_CLAIM_ROUNDS = 4;
/** Tries of a completion or release whose failure looks transient, and the first back-off. */
const FENCED_WRITE_TRIES = 3;
const FENCED_WRITE_BACKOFF_MS = 200;

/**
 * gRPC status codes (the client's `GrpcStatus` enum is types-only) that mean "someone else wrote
 * first", not "Firestore is unwell": NOT_FOUND 5, ALREADY_EXISTS 6, FAILED_PRECONDITION 9.
 */
const RACE_CODES: ReadonlySet<number> = new Set([5, 6, 9]);

function isRace(err: unknown): boolean {
  return RACE_CODES.has((err as { code?: number } | null)?.code ?? -1);
}

/** The lease of `record` is still live at server time `now`. */
function leaseLive(record: RunRecord, now: Timestamp): boolean {
  return (
    record.status === RunStatus.InProgress &&
    record.lease_expires instanceof Timestamp &&
    record.lease_expires.toMillis() > now.toMillis()
  );
}

/**
 * Claims, completes and releases runs in Firestore. Safe to share across concurrent requests.
 */
export class RunLedger {
  readonly #db: Firestore;
  readonly #options: LedgerOptions;
  /** Firestore's clock minus ours, learnt from every answer, so leases are set in server time. */
  #skewMs = 0;
  /** Claims sent to Firestore and not yet answered, by run id (single flight per instance). */
  readonly #claiming = new Map<string, Promise<ClaimResult>>();
  /** Runs this instance holds (claimed, not completed or released). */
  readonly #held = new Map<string, Holder>();

  /**
   * @param db - the Firestore client (its database id selects the database).
   * @param options - collection and durations; see {@link LedgerOptions}.
   */
  constructor(db: Firestore, options: LedgerOptions) {
    this.#db = db;
    this.#options = options;
  }

  /**
   * Claims run `runId` for a fresh attempt, or reports why it cannot: already completed (a duplicate,
   * even if `expire_at` passed and TTL has not yet deleted it), or held by a live lease.
   *
   * One `create()` in the common case; on a conflict, a read and, if the lease expired, one
   * takeover `update()` fenced on the update time just read. Lost races re-read, up to
   * {@link MAX_CLAIM_ROUNDS} rounds, then report `in_progress`.
   *
   * Single flight per instance: while a claim of `runId` is in flight, later claims of it wait for
   * that one (and answer `in_progress` if it won); while this instance holds the run with a live
   * lease, claims answer `in_progress` without a Firestore call. Both only answer what Firestore
   * would answer anyway: a storm of duplicates on one instance costs one claim, not one per delivery
   * queued on the same document. Deliveries on other instances go to Firestore as before.
   *
   * @param runId - the idempotency key; the document id (≤ 1500 bytes, no '/').
   * @param details - descriptive fields stored with the record, e.g. `{ job_name }`.
   * @throws {LedgerUnavailableError} if Firestore fails or does not answer in `timeoutMs`.
   */
  async claim(runId: string, details: DocumentData = {}): Promise<ClaimResult> {
    const held = this.#held.get(runId);
    if (held !== undefined && held.leaseExpires.getTime() > this.#serverNow()) {
      return { state: 'in_progress', holder: held };
    }
    const pending = this.#claiming.get(runId);
    if (pending !== undefined) {
      const result = await pending;
      return result.state === 'claimed' ? { state: 'in_progress', holder: result.claim } : result;
    }
    const claiming = this.#claimInFirestore(runId, details);
    this.#claiming.set(runId, claiming);
    try {
      const result = await claiming;
      if (result.state === 'claimed') this.#held.set(runId, result.claim);
      return result;
    } finally {
      this.#claiming.delete(runId);
    }
  }

  async #claimInFirestore(runId: string, details: DocumentData): Promise<ClaimResult> {
    const ref = this.#ref(runId);
    let record: RunRecord | undefined;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const attemptId = randomUUID();
      const fresh = this.#claimFields(attemptId, this.#serverNow());
      try {
        const written = await this.#call('claim', () =>
          ref.create({ ...details, ...fresh.fields }),
        );
        return this.#claimed(runId, attemptId, written.writeTime, fresh.leaseExpires, false);
      } catch (err) {
        if (!isRace(err)) throw err;
      }
      const snap = await this.#call('read', () => ref.get());
      this.#learnSkew(snap.readTime);
      if (!snap.exists) continue; // released between our create and our read: create again
      record = snap.data() as RunRecord;
      if (record.status === RunStatus.Completed) return { state: 'completed', record };
      if (leaseLive(record, snap.readTime))
        return { state: 'in_progress', holder: holderOf(record) };
      // The lease expired by Firestore's clock: take over, but only if nobody wrote since our read.
      const takeover = this.#claimFields(attemptId, snap.readTime.toMillis());
      try {
        const written = await this.#call('takeover', () =>
          ref.update(
            { ...details, ...takeover.fields, completed_at: FieldValue.delete() },
            { lastUpdateTime: snap.updateTime as Timestamp },
          ),
        );
        return this.#claimed(runId, attemptId, written.writeTime, takeover.leaseExpires, true);
      } catch (err) {
        if (!isRace(err)) throw err; // another attempt took over, completed or released first
      }
    }
    return { state: 'in_progress', holder: holderOf(record) };
  }

  /**
   * Extends the lease of a claim this attempt still holds (the heartbeat), fenced like every write.
   * The write changes the document's update time, so it returns the claim with its new fencing token:
   * use the returned claim from then on.
   *
   * @returns the renewed claim, or `lease_lost` when another attempt took the run over.
   * @throws {LedgerUnavailableError} if every try failed transiently; the lease is unchanged.
   */
  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    const nowMs = this.#serverNow();
    const leaseExpires = new Date(nowMs + this.#options.leaseMs);
    const fields = {
      lease_expires: Timestamp.fromDate(leaseExpires),
      expire_at: Timestamp.fromMillis(nowMs + this.#options.retentionMs),
    };
    let writeTime: Timestamp | undefined;
    const result = await this.#fencedWrite(claim, 'lease extension', async (ref, token) => {
      writeTime = (await ref.update(fields, { lastUpdateTime: token })).writeTime;
    });
    if (result === 'lease_lost' || writeTime === undefined) {
      this.#held.delete(claim.runId);
      return 'lease_lost';
    }
    this.#learnSkew(writeTime);
    const renewed = { ...claim, fencingToken: writeTime, leaseExpires };
    this.#held.set(claim.runId, renewed);
    return renewed;
  }

  /**
   * Marks the claimed run completed, if this attempt still holds it. Retries a transient failure;
   * if an earlier try landed, recognises our own `attempt_id` instead of reporting a lost lease.
   *
   * @returns `recorded`, or `lease_lost` when another attempt took the run over (the job may then
   *   have run twice: the lease was shorter than the job).
   * @throws {LedgerUnavailableError} if every try failed transiently; the job's work is done, so
   *   the caller should still answer 2xx.
   */
  async complete(claim: Claim): Promise<FenceResult> {
    const fields = {
      status: RunStatus.Completed,
      completed_at: FieldValue.serverTimestamp(),
      expire_at: Timestamp.fromMillis(this.#serverNow() + this.#options.retentionMs),
    };
    this.#held.delete(claim.runId);
    return this.#fencedWrite(
      claim,
      'completion',
      (ref, token) => ref.update(fields, { lastUpdateTime: token }),
      (record) => record?.status === RunStatus.Completed,
    );
  }

  /**
   * Deletes the claim after a retryable failure so the next delivery can run at once, if this
   * attempt still holds it.
   *
   * @returns `recorded` (the claim is gone), or `lease_lost` when another attempt holds the run.
   * @throws {LedgerUnavailableError} if every try failed transiently; the claim then stays until
   *   its lease lapses, and retries get 409 until then.
   */
  async release(claim: Claim): Promise<FenceResult> {
    this.#held.delete(claim.runId);
    return this.#fencedWrite(
      claim,
      'release',
      (ref, token) => ref.delete({ lastUpdateTime: token }),
      (record) => record === undefined,
    );
  }

  /**
   * Reads a run record, for people, tests and tools.
   *
   * @throws {LedgerUnavailableError} if Firestore fails or does not answer in `timeoutMs`.
   */
  async get(runId: string): Promise<RunRecord | undefined> {
    const snap = await this.#call('read', () => this.#ref(runId).get());
    return snap.exists ? (snap.data() as RunRecord) : undefined;
  }

  #ref(runId: string) {
    return this.#db.collection(this.#options.collection).doc(runId);
  }

  #serverNow(): number {
    return Date.now() + this.#skewMs;
  }

  #learnSkew(serverTime: Timestamp): void {
    this.#skewMs = serverTime.toMillis() - Date.now();
  }

  #claimFields(attemptId: string, nowMs: number) {
    const leaseExpires = new Date(nowMs + this.#options.leaseMs);
    return {
      leaseExpires,
      fields: {
        status: RunStatus.InProgress,
        attempt_id: attemptId,
        lease_expires: Timestamp.fromDate(leaseExpires),
        expire_at: Timestamp.fromMillis(nowMs + this.#options.retentionMs),
        claimed_at: FieldValue.serverTimestamp(),
      },
    };
  }

  #claimed(
    runId: string,
    attemptId: string,
    writeTime: Timestamp,
    leaseExpires: Date,
    takeover: boolean,
  ): ClaimResult {
    this.#learnSkew(writeTime);
    return {
      state: 'claimed',
      claim: { runId, attemptId, fencingToken: writeTime, leaseExpires, takeover },
    };
  }

  /**
   * One fenced write with bounded retries. `write` gets the fencing token to use as its
   * `lastUpdateTime` precondition. When the precondition fails, the current record tells why:
   * - not ours (absent for an update, or another `attempt_id`) → `lease_lost`;
   * - `alreadyDone` → an earlier try of ours landed but its answer was lost → `recorded`;
   * - ours and still in progress → an earlier write of ours (a heartbeat or a try of this write)
   *   landed unseen and moved the update time: adopt the update time just read and try again. Safe:
   *   only this attempt writes a record with its `attempt_id`, and the retry is fenced on that read.
   */
  async #fencedWrite(
    claim: Claim,
    what: string,
    write: (ref: DocumentReference, token: Timestamp) => Promise<unknown>,
    alreadyDone: (record: RunRecord | undefined) => boolean = () => false,
  ): Promise<FenceResult> {
    const ref = this.#ref(claim.runId);
    let token = claim.fencingToken;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#call(what, () => write(ref, token));
        return 'recorded';
      } catch (err) {
        if (!isRace(err)) {
          if (attempt >= FENCED_WRITE_TRIES) throw err;
          await new Promise((r) => setTimeout(r, FENCED_WRITE_BACKOFF_MS * 2 ** (attempt - 1)));
          continue;
        }
        const snap = await this.#call('read', () => ref.get());
        const record = snap.exists ? (snap.data() as RunRecord) : undefined;
        if (
          alreadyDone(record) &&
          (record === undefined || record.attempt_id === claim.attemptId)
        ) {
          return 'recorded';
        }
        if (record?.attempt_id !== claim.attemptId || record.status !== RunStatus.InProgress) {
          return 'lease_lost';
        }
        if (attempt >= FENCED_WRITE_TRIES) return 'lease_lost';
        token = snap.updateTime as Timestamp;
      }
    }
  }

  /**
   * Runs one Firestore operation with the configured timeout. Race errors (exists, precondition,
   * not found) pass through for the caller to interpret; anything else, including the timeout,
   * becomes a {@link LedgerUnavailableError}.
   */
  async #call<T>(what: string, operation: () => Promise<T>): Promise<T> {
    const { timeoutMs } = this.#options;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new LedgerUnavailableError(
              `Firestore did not answer the ${what} within ${timeoutMs} ms`,
            ),
          ),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([operation(), timeout]);
    } catch (err) {
      if (isRace(err) || err instanceof LedgerUnavailableError) throw err;
      throw new LedgerUnavailableError(`Firestore ${what} failed: ${(err as Error).message}`, {
        cause: err,
      });
    } finally {
      clearTimeout(timer);
    }
  }
}
