/**
 * The run ledger: one Firestore document per run, the only module that touches Firestore. What a
 * record is (fields, statuses, the claim decision and the timeline) lives in `run-record.ts`.
 *
 * Every write is one atomic operation with a precondition, never a transaction: a claim is a
 * `create()` (fails if the document exists); a takeover, extension, completion or release is a
 * write with a `lastUpdateTime` precondition, so it lands only if nobody wrote the document since
 * we last did. The update time of our own last write is the fencing token: a zombie attempt whose
 * lease was taken over holds an old token and every one of its writes fails.
 */

import { randomUUID } from 'node:crypto';
import { type DocumentReference, type Firestore, Timestamp } from '@google-cloud/firestore';
import { DatabaseNotFoundError, LedgerUnavailableError, RunOnceError } from './errors.ts';
import {
  claimDecision,
  claimDocument,
  completionUpdate,
  extensionUpdate,
  Field,
  failureUpdate,
  type MAX_ERROR_LENGTH,
  missedDocument,
  type NoteValue,
  noteProblem,
  type RunDetails,
  RunKind,
  type RunRecord,
  RunStatus,
  reportedUpdate,
  runRecordConverter,
  type StoredRecord,
  skippedDocument,
  takeoverUpdate,
  type UnreadableRecord,
} from './run-record.ts';

/** A claim held by this attempt: what the lease heartbeat, completion and release need. */
export interface Claim {
  readonly runId: string;
  readonly attemptId: string;
  /** Update time of our last write to the run document: the fencing token of every later write. */
  readonly fencingToken: Timestamp;
  /**
   * When the lease lapses, by Firestore's clock: our last write's commit time plus `leaseMs`. The
   * stored lease (`leased_at` + `lease_ms`) may end up to that write's latency earlier (the emulator
   * stamps `leased_at` on receipt); every decision reads the stored one.
   */
  readonly leaseExpires: Date;
  /** The lease length, ms: the heartbeat beats at a third of it. */
  readonly leaseMs: number;
  /** True when this claim took over an earlier attempt's record (a lapsed lease, a failure). */
  readonly takeover: boolean;
  /** The re-run's number (1, 2, …) when this claim re-runs a finished run on purpose; else 0. */
  readonly rerun: number;
  /**
   * When the run's first attempt claimed it, by Firestore's clock (`first_claimed_at`): the stored
   * value after a takeover; for a fresh record this claim's commit time, which the stored value
   * may precede by the write's latency (the emulator stamps it on receipt).
   */
  readonly firstClaimedAt: Date;
}

/** The attempt holding a run, as far as a claim could tell. */
export interface Holder {
  readonly attemptId: string;
  /** When its lease lapses, by Firestore's clock. */
  readonly leaseExpires: Date;
}

/**
 * What a claim found. `holder` is unknown when lost races left no record to read; `unreadable`
 * is a document this version cannot read, which is never overwritten.
 */
export type ClaimResult =
  | { readonly state: 'claimed'; readonly claim: Claim }
  | { readonly state: 'completed'; readonly record: RunRecord }
  | { readonly state: 'in_progress'; readonly holder: Holder | undefined }
  | { readonly state: 'unreadable'; readonly record: UnreadableRecord };

/**
 * What a fenced write did: `recorded` if it took effect (or an earlier try of ours already had),
 * `lease_lost` if another attempt holds or finished the run, so ours changed nothing.
 */
export type FenceResult = 'recorded' | 'lease_lost';

/**
 * What `runOnce` needs of a ledger: claim a run, keep the lease, then complete or release it. The
 * project's {@link RunLedger} implements it; the bench's baselines implement it too.
 */
export interface Ledger {
  /** Claims `runId` for a fresh attempt, or says why not. @throws {LedgerUnavailableError} */
  claim(runId: string, details?: RunDetails): Promise<ClaimResult>;
  /** Extends a held lease; returns the renewed claim. @throws {LedgerUnavailableError} */
  extend(claim: Claim): Promise<Claim | 'lease_lost'>;
  /** Marks the run completed, fenced. @throws {LedgerUnavailableError} */
  complete(claim: Claim): Promise<FenceResult>;
  /**
   * Releases the claim after a failed attempt so a retry can claim at once, fenced; `failure` is
   * the error's message. @throws {LedgerUnavailableError}
   */
  release(claim: Claim, failure?: string): Promise<FenceResult>;
  /**
   * Notes a value in the run's record while the claim holds, fenced, extending the lease
   * (`ctx.note`); a ledger without it keeps no notes. @throws {LedgerUnavailableError}
   */
  note?(claim: Claim, name: string, value: NoteValue): Promise<Claim | 'lease_lost'>;
}

/** What a batched read of run records found. */
export interface BatchRead {
  /** Each run id's record, `undefined` when absent. */
  readonly records: ReadonlyMap<string, StoredRecord | undefined>;
  /**
   * Each present record's update time, as Firestore's own Timestamp (µs: a `Date` would lose the
   * precision a `lastUpdateTime` precondition compares): the fencing token of a report after the read.
   */
  readonly updateTimes: ReadonlyMap<string, Timestamp>;
  /** Firestore's time of the (last) read. */
  readonly readTime: Date;
}

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
/** A document id no run has (run ids are hex): read once to learn Firestore's time. */
const CLOCK_DOC = '~clock';
/** Documents per batched read (`getAll`); Firestore takes far more, this bounds one call's wait. */
const BATCH_SIZE = 500;
/** Tries of a fenced write whose failure looks transient, and the first back-off. */
const FENCED_WRITE_TRIES = 3;
const FENCED_WRITE_BACKOFF_MS = 200;

/** gRPC status codes (the client's `GrpcStatus` enum is types-only). */
const Code = { NOT_FOUND: 5, ALREADY_EXISTS: 6, FAILED_PRECONDITION: 9 } as const;

/**
 * The codes that mean "someone else wrote first", per operation: only the conditional write that
 * can cause them. The same codes elsewhere mean something else (NOT_FOUND from `create()` or a
 * read is a missing database, not a lost race).
 */
const CONFLICT_CODES = {
  create: [Code.ALREADY_EXISTS],
  read: [],
  fencedWrite: [Code.FAILED_PRECONDITION, Code.NOT_FOUND],
} as const satisfies Record<string, readonly number[]>;
type Operation = keyof typeof CONFLICT_CODES;

/** Another writer won: the conditional write did not apply. Never leaves this module. */
class WriteConflict {}

function codeOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * Claims, extends, completes and releases runs in Firestore. Safe to share across concurrent
 * requests.
 *
 * @example
 * const ledger = new RunLedger(new Firestore(), {
 *   collection: 'scheduler_runs', leaseMs: 300_000, retentionMs: 86_400_000, timeoutMs: 10_000,
 * });
 * const result = await ledger.claim(runId, { jobName: 'nightly-report' });
 * if (result.state === 'claimed') {
 *   await doTheWork();
 *   await ledger.complete(result.claim);
 * }
 */
export class RunLedger implements Ledger {
  readonly #db: Firestore;
  readonly #options: LedgerOptions;
  /** Firestore's clock minus ours, learnt from answers; never for a lease. */
  #skewMs = 0;
  #skewLearnt = false;
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
   * even if `expire_at` passed and TTL has not yet deleted it), held by a live lease, or unreadable.
   *
   * One `create()` in the common case; on a conflict, a read and, if the lease expired by the
   * read's server time, one takeover `update()` fenced on the update time just read. Lost races
   * re-read, up to {@link MAX_CLAIM_ROUNDS} rounds, then report `in_progress`.
   *
   * Single flight per instance: while a claim of `runId` is in flight, later claims of it wait for
   * that one (and answer `in_progress` if it won); while this instance holds the run, claims answer
   * `in_progress` without a Firestore call, whatever the lease says: an instance never takes over
   * a run it still holds itself. Deliveries on other instances go to Firestore as before.
   *
   * @param runId - the idempotency key; the document id (≤ 1500 bytes, no '/').
   * @param details - descriptive fields stored with the record.
   * @throws {LedgerUnavailableError} if Firestore fails, does not answer in `timeoutMs`, or the
   *   database does not exist.
   * @example
   * const result = await ledger.claim(runId, { jobName: 'nightly-report', scheduleTime: '2026-10-16T12:00:00Z' });
   */
  async claim(runId: string, details: RunDetails = {}): Promise<ClaimResult> {
    const held = this.#held.get(runId);
    if (held !== undefined) return { state: 'in_progress', holder: held };
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

  async #claimInFirestore(runId: string, details: RunDetails): Promise<ClaimResult> {
    const ref = this.#ref(runId);
    const { leaseMs } = this.#options;
    let holder: Holder | undefined;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const attemptId = randomUUID();
      const created = await this.#call('claim', 'create', () =>
        ref.create(claimDocument(attemptId, leaseMs, this.#expireAt(), details)),
      );
      if (!(created instanceof WriteConflict)) {
        return this.#claimed(runId, attemptId, created.writeTime, false, 0, undefined);
      }
      const read = await this.#read(ref);
      const { record } = read;
      const decision = claimDecision(record, read.time.toDate(), details.rerunId);
      switch (decision) {
        case 'absent':
          continue; // released between our create and our read: create again
        case 'completed':
          return { state: 'completed', record: record as RunRecord };
        case 'unreadable':
          return { state: 'unreadable', record: record as UnreadableRecord };
        case 'lease_live':
          return { state: 'in_progress', holder: holderOf(record as RunRecord) };
        case 'rerun':
        case 'retryable':
        case 'lease_expired': {
          const previous = record as RunRecord;
          holder = holderOf(previous);
          // Take over, but only if nobody wrote since our read.
          const update = takeoverUpdate(attemptId, leaseMs, this.#expireAt(), details, previous);
          const taken = await this.#call('takeover', 'fencedWrite', () =>
            ref.update(update, { lastUpdateTime: read.updateTime as Timestamp }),
          );
          if (!(taken instanceof WriteConflict)) {
            const rerun = decision === 'rerun' ? previous.reruns + 1 : 0;
            return this.#claimed(
              runId,
              attemptId,
              taken.writeTime,
              true,
              rerun,
              previous.firstClaimedAt,
            );
          }
        }
      }
    }
    return { state: 'in_progress', holder };
  }

  /**
   * Extends the lease of a claim this attempt still holds (the heartbeat), fenced like every write:
   * the new lease runs `leaseMs` from the write's own server time. The write changes the document's
   * update time, so it returns the claim with its new fencing token: use it from then on.
   *
   * @returns the renewed claim, or `lease_lost` when another attempt took the run over.
   * @throws {LedgerUnavailableError} if every try failed transiently; the lease is unchanged.
   * @example
   * const renewed = await ledger.extend(claim);
   * if (renewed === 'lease_lost') controller.abort();
   */
  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    return this.#renew(claim, 'lease extension');
  }

  /**
   * Notes `value` under `name` in the run's record (`notes.NAME`), e.g. the execution a proxy
   * launched, while this attempt holds the run: one fenced write that also extends the lease, so
   * it returns the claim with its new fencing token, like {@link extend}.
   *
   * @returns the renewed claim, or `lease_lost` when another attempt took the run over.
   * @throws {RunOnceError} for a note {@link noteProblem} refuses; {@link LedgerUnavailableError}
   *   if every try failed transiently.
   * @example const renewed = await ledger.note(claim, 'launch', { name: execution.name });
   */
  async note(claim: Claim, name: string, value: NoteValue): Promise<Claim | 'lease_lost'> {
    const problem = noteProblem(name, value);
    if (problem !== undefined) throw new RunOnceError(`ctx.note: ${problem}`);
    return this.#renew(claim, 'note', { name, value });
  }

  async #renew(
    claim: Claim,
    what: string,
    note?: { name: string; value: NoteValue },
  ): Promise<Claim | 'lease_lost'> {
    let writeTime: Timestamp | undefined;
    const result = await this.#fencedWrite(claim, what, async (ref, token) => {
      const update = extensionUpdate(this.#options.leaseMs, this.#expireAt(), note);
      writeTime = (await ref.update(update, { lastUpdateTime: token })).writeTime;
    });
    if (result === 'lease_lost' || writeTime === undefined) {
      this.#held.delete(claim.runId);
      return 'lease_lost';
    }
    this.#learnSkew(writeTime);
    const renewed: Claim = {
      ...claim,
      fencingToken: writeTime,
      leaseExpires: new Date(writeTime.toMillis() + this.#options.leaseMs),
    };
    this.#held.set(claim.runId, renewed);
    return renewed;
  }

  /**
   * Marks the claimed run completed, if this attempt still holds it. Retries a transient failure;
   * if an earlier try landed, recognises our own `attempt_id` instead of reporting a lost lease.
   *
   * @returns `recorded`, or `lease_lost` when another attempt took the run over (the job may then
   *   have run twice).
   * @throws {LedgerUnavailableError} if every try failed transiently; the job's work is done, so
   *   the caller should still answer 2xx.
   * @example
   * if ((await ledger.complete(claim)) === 'lease_lost') logger.warn('lease lost');
   */
  async complete(claim: Claim): Promise<FenceResult> {
    this.#held.delete(claim.runId);
    return this.#fencedWrite(
      claim,
      'completion',
      (ref, token) => ref.update(completionUpdate(this.#expireAt()), { lastUpdateTime: token }),
      (record) => record?.status === RunStatus.Completed,
    );
  }

  /**
   * Releases the claim after a failed attempt, if this attempt still holds it: the record becomes
   * `failed`, with the error's message, so the next delivery claims it at once (the purpose of the
   * guide's delete) and the run's history keeps the failure.
   *
   * @param failure - the error's message only (cut to {@link MAX_ERROR_LENGTH}); never request data.
   * @returns `recorded`, or `lease_lost` when another attempt holds the run.
   * @throws {LedgerUnavailableError} if every try failed transiently; the claim then stays until
   *   its lease lapses, and retries get 409 until then.
   * @example
   * await ledger.release(claim, 'billing answered 503');
   */
  async release(claim: Claim, failure = ''): Promise<FenceResult> {
    this.#held.delete(claim.runId);
    return this.#fencedWrite(
      claim,
      'release',
      (ref, token) =>
        ref.update(failureUpdate(failure, this.#expireAt()), { lastUpdateTime: token }),
      (record) => record?.status === RunStatus.Failed,
    );
  }

  /**
   * Reads many run records in batched reads (`getAll`, at most {@link BATCH_SIZE} documents a call):
   * no query, so no index. For run history and missed-run detection.
   *
   * @param runIds - the run ids to read.
   * @returns each run id's record (`undefined` when absent), and Firestore's time of the reads.
   * @throws {LedgerUnavailableError} if Firestore fails or a batch does not answer in `timeoutMs`.
   * @example
   * const { records, readTime } = await ledger.getMany(slots.map((s) => s.runId));
   */
  async getMany(runIds: readonly string[]): Promise<BatchRead> {
    const records = new Map<string, StoredRecord | undefined>();
    const updateTimes = new Map<string, Timestamp>();
    let readTime = new Date(Date.now() + this.#skewMs);
    for (let i = 0; i < runIds.length; i += BATCH_SIZE) {
      const refs = runIds
        .slice(i, i + BATCH_SIZE)
        .map((id) => this.#ref(id).withConverter(runRecordConverter));
      if (refs.length === 0) continue;
      const snaps = await this.#call('batched read', 'read', () => this.#db.getAll(...refs));
      if (snaps instanceof WriteConflict) throw new Error('unreachable: a read has no conflict');
      for (const snap of snaps) {
        // The refs carry the run-record converter: the snapshots' data is a StoredRecord.
        records.set(snap.id, snap.data() as StoredRecord | undefined);
        if (snap.updateTime !== undefined) updateTimes.set(snap.id, snap.updateTime);
        readTime = snap.readTime.toDate();
      }
      if (snaps[0] !== undefined) this.#learnSkew(snaps[0].readTime);
    }
    return { records, updateTimes, readTime };
  }

  /**
   * The records of runs that are not a slot's (manual and forced runs), newest first, at most
   * `limit`: one query on the single field `run_kind` (Firestore's automatic single-field index;
   * no composite index), for run history. Slots are read by run id, never queried.
   *
   * @throws {LedgerUnavailableError} if Firestore fails.
   * @example const runs = await ledger.runsOutsideSlots(200);
   */
  async runsOutsideSlots(limit = 500): Promise<{ runId: string; record: StoredRecord }[]> {
    const query = this.#db
      .collection(this.#options.collection)
      .where(Field.kind, 'in', [RunKind.Manual, RunKind.Forced])
      .limit(limit)
      .withConverter(runRecordConverter);
    const snap = await this.#call('query', 'read', () => query.get());
    if (snap instanceof WriteConflict) throw new Error('unreachable: a read has no conflict');
    return snap.docs.map((doc) => ({ runId: doc.id, record: doc.data() }));
  }

  /**
   * Reports a slot that no attempt came for, once across instances: creates its record as `missed`.
   *
   * @returns `reported` if this call created it, `exists` if a record appeared first (an attempt,
   *   or another instance's report).
   * @throws {LedgerUnavailableError} if Firestore fails.
   */
  async reportMissed(runId: string, details: RunDetails): Promise<'reported' | 'exists'> {
    const created = await this.#call('missed-run report', 'create', () =>
      this.#ref(runId).create(missedDocument(this.#expireAt(), details)),
    );
    return created instanceof WriteConflict ? 'exists' : 'reported';
  }

  /**
   * Records a slot skipped by the overlap policy `skip` while `blockedBy` still ran: creates its
   * record as `skipped` (final: later deliveries are duplicates).
   *
   * @returns `recorded`, or `exists` if a record appeared first (the caller claims as usual).
   * @throws {LedgerUnavailableError} if Firestore fails.
   */
  async recordSkipped(
    runId: string,
    details: RunDetails,
    blockedBy: string,
  ): Promise<'recorded' | 'exists'> {
    const created = await this.#call('skip', 'create', () =>
      this.#ref(runId).create(skippedDocument(this.#expireAt(), details, blockedBy)),
    );
    return created instanceof WriteConflict ? 'exists' : 'recorded';
  }

  /**
   * Firestore's time now, as best this instance knows it: its clock corrected by the skew learnt
   * from Firestore's answers. Before the first answer, one read learns it (of a document that never
   * exists; one read, once per instance).
   *
   * @throws {LedgerUnavailableError} if that read fails.
   * @example const early = Date.parse(scheduleTime) - (await ledger.serverTime()).getTime();
   */
  async serverTime(): Promise<Date> {
    if (!this.#skewLearnt)
      await this.#read(this.#db.collection(this.#options.collection).doc(CLOCK_DOC));
    return new Date(Date.now() + this.#skewMs);
  }

  /**
   * Marks a finally failed run reported, once across instances: fenced on the update time read.
   *
   * @param updateTime - the record's update time from the read that found it unreported.
   * @returns `reported` if this call marked it, `exists` if the record changed first.
   * @throws {LedgerUnavailableError} if Firestore fails.
   */
  async markReported(runId: string, updateTime: Timestamp): Promise<'reported' | 'exists'> {
    const marked = await this.#call('failed-run report', 'fencedWrite', () =>
      this.#ref(runId).update(reportedUpdate(), { lastUpdateTime: updateTime }),
    );
    return marked instanceof WriteConflict ? 'exists' : 'reported';
  }

  /**
   * Reads a run record, for people, tests and tools.
   *
   * @throws {LedgerUnavailableError} if Firestore fails or does not answer in `timeoutMs`.
   * @example
   * const record = await ledger.get(runId); // undefined when absent
   */
  async get(runId: string): Promise<StoredRecord | undefined> {
    return (await this.#read(this.#ref(runId))).record;
  }

  /** The run's document, untyped for writes (server timestamps); reads go through the converter. */
  #ref(runId: string): DocumentReference {
    return this.#db.collection(this.#options.collection).doc(runId);
  }

  async #read(ref: DocumentReference) {
    const snap = await this.#call('read', 'read', () =>
      ref.withConverter(runRecordConverter).get(),
    );
    if (snap instanceof WriteConflict) throw new Error('unreachable: a read has no conflict');
    this.#learnSkew(snap.readTime);
    return { record: snap.data(), time: snap.readTime, updateTime: snap.updateTime };
  }

  /** `expire_at` for a write now: retention from Firestore's time as best known (skew learnt). */
  #expireAt(): Timestamp {
    return Timestamp.fromMillis(Date.now() + this.#skewMs + this.#options.retentionMs);
  }

  #learnSkew(serverTime: Timestamp): void {
    this.#skewMs = serverTime.toMillis() - Date.now();
    this.#skewLearnt = true;
  }

  #claimed(
    runId: string,
    attemptId: string,
    writeTime: Timestamp,
    takeover: boolean,
    rerun: number,
    storedFirstClaimedAt: Date | undefined,
  ): ClaimResult {
    this.#learnSkew(writeTime);
    const { leaseMs } = this.#options;
    const leaseExpires = new Date(writeTime.toMillis() + leaseMs);
    // A takeover keeps a stored first claim (takeoverUpdate); otherwise this write stamped it.
    const firstClaimedAt = storedFirstClaimedAt ?? writeTime.toDate();
    return {
      state: 'claimed',
      claim: {
        runId,
        attemptId,
        fencingToken: writeTime,
        leaseExpires,
        leaseMs,
        takeover,
        rerun,
        firstClaimedAt,
      },
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
    alreadyDone: (record: StoredRecord | undefined) => boolean = () => false,
  ): Promise<FenceResult> {
    const ref = this.#ref(claim.runId);
    let token = claim.fencingToken;
    for (let attempt = 1; ; attempt++) {
      let conflict: boolean;
      try {
        conflict =
          (await this.#call(what, 'fencedWrite', () => write(ref, token))) instanceof WriteConflict;
      } catch (err) {
        if (attempt >= FENCED_WRITE_TRIES) throw err;
        await new Promise((r) => setTimeout(r, FENCED_WRITE_BACKOFF_MS * 2 ** (attempt - 1)));
        continue;
      }
      if (!conflict) return 'recorded';
      const { record, updateTime } = await this.#read(ref);
      const ours =
        record !== undefined && 'attemptId' in record && record.attemptId === claim.attemptId;
      if (alreadyDone(record) && (record === undefined || ours)) return 'recorded';
      if (!ours || record.status !== RunStatus.InProgress) return 'lease_lost';
      if (attempt >= FENCED_WRITE_TRIES) return 'lease_lost';
      token = updateTime as Timestamp;
    }
  }

  /**
   * Runs one Firestore operation with the configured timeout, classifying its errors for that
   * operation: a conflict code of `operation` ({@link CONFLICT_CODES}) returns a
   * {@link WriteConflict}; NOT_FOUND elsewhere means the database is missing; anything else,
   * including the timeout, throws a {@link LedgerUnavailableError}.
   */
  async #call<T>(
    what: string,
    operation: Operation,
    run: () => Promise<T>,
  ): Promise<T | WriteConflict> {
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
      return await Promise.race([run(), timeout]);
    } catch (err) {
      if (err instanceof LedgerUnavailableError) throw err;
      const code = codeOf(err);
      if ((CONFLICT_CODES[operation] as readonly number[]).includes(code ?? -1)) {
        return new WriteConflict();
      }
      if (code === Code.NOT_FOUND) {
        const database = this.#db.databaseId ?? '(default)';
        throw new DatabaseNotFoundError(
          `Firestore database "${database}" was not found (the ${what} answered NOT_FOUND): ` +
            'check FIRESTORE_DATABASE and the project, and that the database exists ' +
            '(gcloud firestore databases list)',
          { cause: err },
        );
      }
      throw new LedgerUnavailableError(`Firestore ${what} failed: ${(err as Error).message}`, {
        cause: err,
      });
    } finally {
      clearTimeout(timer);
    }
  }
}

function holderOf(record: RunRecord): Holder | undefined {
  return record.leaseExpires === undefined
    ? undefined
    : { attemptId: record.attemptId, leaseExpires: record.leaseExpires };
}
