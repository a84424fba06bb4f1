/**
 * The run documents in Firestore: the one module that calls Firestore. Every operation has a
 * timeout and classifies its errors where they happen: "someone else wrote first" is an answer only
 * for the conditional write that can cause it; anything else throws. Writes are single atomic
 * operations with a precondition, never transactions (docs/how-it-works.md, "Writes: one
 * precondition each, never a transaction").
 */
import {
  type DocumentData,
  type DocumentReference,
  type Firestore,
  Timestamp,
  type WriteBatch,
  type WriteResult,
} from '@google-cloud/firestore';
import { DatabaseNotFoundError, LedgerUnavailableError } from './errors.ts';
import { runRecordConverter, type StoredRecord } from './run-record.ts';

/** One read of one run document. */
export interface DocumentRead {
  /** The record, `undefined` when the document is absent. */
  readonly record: StoredRecord | undefined;
  /** Its update time (µs precision): the fencing token of a write after this read. */
  readonly updateTime: Timestamp | undefined;
  /** Firestore's time of the read: "now" for every decision on the record. */
  readonly readTime: Date;
}

/** What a batched read of run records found. */
export interface BatchRead {
  /** Each run id's record, `undefined` when absent. */
  readonly records: ReadonlyMap<string, StoredRecord | undefined>;
  /** Each present record's update time (a Timestamp: µs, as a precondition compares it). */
  readonly updateTimes: ReadonlyMap<string, Timestamp>;
  /** Firestore's time of the (last) read. */
  readonly readTime: Date;
}

/**
 * A write committed in the same atomic batch as a run record's claim, on its own precondition:
 * "also write document `id` of `documents`, which must still be at `token` (absent when `token` is
 * undefined)". The core gives it no meaning; the overlap lock (`policy/overlap.ts`) rides on it.
 */
export interface GuardedWrite {
  /** The collection of the guarded document: a `RunDocuments` on the same Firestore client. */
  readonly documents: RunDocuments;
  readonly id: string;
  /** What the write is, for error messages (`overlap lock`). */
  readonly what: string;
  readonly data: DocumentData;
  /** The document's update time as read; `undefined`: it must be absent. */
  readonly token: Timestamp | undefined;
}

/**
 * A guarded write that found the guarded document no longer at its token, with the run document as
 * read in the same batched read: the guard moved under us, or our own batch landed while its answer
 * was lost (the client retried it), which the run document then shows.
 */
export interface GuardChanged {
  readonly guardChanged: DocumentRead;
}

/** Where the run documents live and how long to wait, durations in ms. */
export interface RunDocumentsOptions {
  /** Collection holding the run documents. */
  readonly collection: string;
  /** How long a record is kept after its last write, ms; written to `expire_at` for a TTL policy. */
  readonly retentionMs: number;
  /** Longest wait for one Firestore operation, ms; then {@link LedgerUnavailableError}. */
  readonly timeoutMs: number;
  /**
   * This process's monotonic clock, ms from any origin (default `performance.now()`), never the
   * wall clock: tests and the simulator inject a driven clock.
   */
  readonly monotonicNow?: () => number;
}

/** A document id no run has (run ids are hex): read once to learn Firestore's time. */
const CLOCK_DOC = '~clock';
/** Documents per batched read (`getAll`); Firestore takes far more, this bounds one call's wait. */
const BATCH_SIZE = 500;

/** gRPC status codes (the client's `GrpcStatus` enum is types-only). */
const Code = { NOT_FOUND: 5, ALREADY_EXISTS: 6, FAILED_PRECONDITION: 9 } as const;

/** Another writer won: a conditional write did not apply. Never leaves this module. */
class WriteConflict {}

/**
 * The runs collection, with Firestore's clock as this instance learns it from every answer
 * (docs/how-it-works.md, "Firestore's clock on an instance"). Safe to share across requests.
 *
 * @example
 * const documents = new RunDocuments(new Firestore(), {
 *   collection: 'scheduler_runs', retentionMs: 2_592_000_000, timeoutMs: 10_000,
 * });
 * const { record, readTime } = await documents.read(runId);
 */
export class RunDocuments {
  readonly #db: Firestore;
  readonly #options: RunDocumentsOptions;
  readonly #monotonicNow: () => number;
  /** Firestore's time of an answer minus our monotonic time on receiving it, ms. */
  #serverOffsetMs: number | undefined;

  constructor(db: Firestore, options: RunDocumentsOptions) {
    this.#db = db;
    this.#options = options;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
  }

  /** How long a record is kept after its last write, ms. */
  get retentionMs(): number {
    return this.#options.retentionMs;
  }

  /**
   * Reads one run document.
   *
   * @throws {LedgerUnavailableError} if Firestore fails or does not answer in time;
   *   {@link DatabaseNotFoundError} if the database does not exist.
   */
  async read(runId: string): Promise<DocumentRead> {
    const read = await this.#get(this.#ref(runId).withConverter(runRecordConverter));
    return { record: read.data, updateTime: read.updateTime, readTime: read.readTime };
  }

  /**
   * Reads one document of this collection as plain data, without the run-record converter: for
   * collections of other documents (a job's own state), opened as a `RunDocuments` of their own.
   *
   * @throws {LedgerUnavailableError} if Firestore fails or does not answer in time.
   * @example const { data, updateTime } = await jobDocuments.readData('nightly-report');
   */
  readData(id: string): Promise<{
    data: DocumentData | undefined;
    updateTime: Timestamp | undefined;
    readTime: Date;
  }> {
    return this.#get(this.#ref(id));
  }

  async #get<T>(ref: DocumentReference<T>) {
    const snap = await this.#call('read', () => ref.get());
    this.#learnTime(snap.readTime);
    return { data: snap.data(), updateTime: snap.updateTime, readTime: snap.readTime.toDate() };
  }

  /**
   * Reads many run documents in batched reads (`getAll`, at most {@link BATCH_SIZE} a call): no
   * query, so no index.
   *
   * @throws {LedgerUnavailableError} if Firestore fails or a batch does not answer in time.
   * @example const { records, readTime } = await documents.readMany(runIds);
   */
  async readMany(runIds: readonly string[]): Promise<BatchRead> {
    const records = new Map<string, StoredRecord | undefined>();
    const updateTimes = new Map<string, Timestamp>();
    // Nothing to read still has a time: Firestore's, as this instance knows it.
    if (runIds.length === 0) return { records, updateTimes, readTime: await this.serverTime() };
    let readTime = new Date(0);
    for (let i = 0; i < runIds.length; i += BATCH_SIZE) {
      const refs = runIds
        .slice(i, i + BATCH_SIZE)
        .map((id) => this.#ref(id).withConverter(runRecordConverter));
      const snaps = await this.#call('batched read', () => this.#db.getAll(...refs));
      for (const snap of snaps) {
        // The refs carry the converter, which Firestore.getAll's typings drop (unlike Transaction's).
        records.set(snap.id, snap.data() as StoredRecord | undefined);
        if (snap.updateTime !== undefined) updateTimes.set(snap.id, snap.updateTime);
        readTime = snap.readTime.toDate();
        this.#learnTime(snap.readTime);
      }
    }
    return { records, updateTimes, readTime };
  }

  /**
   * Creates a run document if none exists; with `guard`, in one atomic batch with the guarded
   * write, so both land or neither does.
   *
   * @returns the write's time (Firestore's), `exists` if a document was there first, or (with
   *   `guard`) {@link GuardChanged} if the guarded document was not at its token.
   * @throws {LedgerUnavailableError} for any other failure.
   */
  async create(runId: string, what: string, data: DocumentData): Promise<Timestamp | 'exists'>;
  async create(
    runId: string,
    what: string,
    data: DocumentData,
    guard: GuardedWrite | undefined,
  ): Promise<Timestamp | 'exists' | GuardChanged>;
  async create(
    runId: string,
    what: string,
    data: DocumentData,
    guard?: GuardedWrite,
  ): Promise<Timestamp | 'exists' | GuardChanged> {
    const written = await this.#write(
      runId,
      what,
      guard,
      () => this.#call(what, () => this.#ref(runId).create(data), [Code.ALREADY_EXISTS]),
      (batch) => batch.create(this.#ref(runId), data),
    );
    return written === 'conflict' ? 'exists' : written;
  }

  /**
   * Updates a run document if nobody wrote it since `token` (its update time as last seen); with
   * `guard`, in one atomic batch with the guarded write, so both land or neither does.
   *
   * @returns the write's time (the new fencing token), `changed` if the document changed or was
   *   deleted since `token`, or (with `guard`) {@link GuardChanged} if the guarded document was not
   *   at its token.
   * @throws {LedgerUnavailableError} for any other failure.
   */
  async update(
    runId: string,
    what: string,
    data: DocumentData,
    token: Timestamp,
  ): Promise<Timestamp | 'changed'>;
  async update(
    runId: string,
    what: string,
    data: DocumentData,
    token: Timestamp,
    guard: GuardedWrite | undefined,
  ): Promise<Timestamp | 'changed' | GuardChanged>;
  async update(
    runId: string,
    what: string,
    data: DocumentData,
    token: Timestamp,
    guard?: GuardedWrite,
  ): Promise<Timestamp | 'changed' | GuardChanged> {
    const precondition = { lastUpdateTime: token };
    // NOT_FOUND from a fenced update is the document deleted under us, not a missing database.
    const conflicts = [Code.FAILED_PRECONDITION, Code.NOT_FOUND];
    const written = await this.#write(
      runId,
      what,
      guard,
      () => this.#call(what, () => this.#ref(runId).update(data, precondition), conflicts),
      (batch) => batch.update(this.#ref(runId), data, precondition),
    );
    return written === 'conflict' ? 'changed' : written;
  }

  /**
   * One conditional write of run `runId`: `alone` without a guard, else `add`'s write and the
   * guarded one in one batch. A precondition failure is `conflict`, or {@link GuardChanged} if the
   * guarded document is no longer at its token (then it was the guard that failed, or may have been).
   */
  async #write(
    runId: string,
    what: string,
    guard: GuardedWrite | undefined,
    alone: () => Promise<WriteResult>,
    add: (batch: WriteBatch) => void,
  ): Promise<Timestamp | 'conflict' | GuardChanged> {
    try {
      const result =
        guard === undefined ? await alone() : await this.#commitGuarded(what, guard, add);
      this.#learnTime(result.writeTime);
      return result.writeTime;
    } catch (err) {
      if (!(err instanceof WriteConflict)) throw err;
      return guard === undefined ? 'conflict' : await this.#afterGuardedConflict(runId, guard);
    }
  }

  /** Commits `add`'s write and the guarded write in one batch; returns the former's result. */
  async #commitGuarded(
    what: string,
    guard: GuardedWrite,
    add: (batch: WriteBatch) => void,
  ): Promise<WriteResult> {
    const other = guard.documents;
    if (other.#db !== this.#db) {
      throw new Error('a guarded write must use the same Firestore client as the run documents');
    }
    const conflicts = [Code.ALREADY_EXISTS, Code.FAILED_PRECONDITION, Code.NOT_FOUND];
    const results = await this.#call(
      `${what} with the ${guard.what}`,
      () => {
        const batch = this.#db.batch();
        add(batch);
        const ref = other.#ref(guard.id);
        if (guard.token === undefined) batch.create(ref, guard.data);
        else batch.update(ref, guard.data, { lastUpdateTime: guard.token });
        return batch.commit();
      },
      conflicts,
    );
    return results[0] as WriteResult;
  }

  /**
   * After a guarded batch failed its preconditions: one batched read of the guarded document and
   * the run document. `conflict` if the guarded document is still at its token (the run document's
   * precondition failed), else {@link GuardChanged} with the run document's read.
   */
  async #afterGuardedConflict(
    runId: string,
    guard: GuardedWrite,
  ): Promise<'conflict' | GuardChanged> {
    const runRef = this.#ref(runId).withConverter(runRecordConverter);
    const [guarded, run] = await this.#call(`read after the ${guard.what}`, () =>
      this.#db.getAll(guard.documents.#ref(guard.id), runRef),
    );
    if (guarded === undefined || run === undefined) {
      throw new LedgerUnavailableError(
        `Firestore answered the read after the ${guard.what} without its documents`,
      );
    }
    this.#learnTime(run.readTime);
    const at = guarded.updateTime;
    const moved = guard.token === undefined ? at !== undefined : !at?.isEqual(guard.token);
    if (!moved) return 'conflict';
    // The ref carries the converter, which Firestore.getAll's typings drop.
    const record = run.data() as StoredRecord | undefined;
    return {
      guardChanged: { record, updateTime: run.updateTime, readTime: run.readTime.toDate() },
    };
  }

  /**
   * `expire_at` for a write now: the retention from Firestore's time as best known (this
   * instance's wall clock only before Firestore's first answer: a TTL is not a lease).
   */
  expireAt(): Timestamp {
    return Timestamp.fromMillis((this.#knownServerMs() ?? Date.now()) + this.#options.retentionMs);
  }

  /**
   * Firestore's time now, as best this instance knows it: its latest answer's time plus the
   * monotonic time since. Before the first answer, one read (of a document that never exists) learns it.
   *
   * @throws {LedgerUnavailableError} if that read fails.
   * @example const early = Date.parse(scheduleTime) - (await documents.serverTime()).getTime();
   */
  async serverTime(): Promise<Date> {
    if (this.#serverOffsetMs === undefined) await this.read(CLOCK_DOC);
    return new Date(this.#knownServerMs() ?? Date.now());
  }

  /** Firestore's time now from the answers so far, ms; `undefined` before the first. */
  #knownServerMs(): number | undefined {
    const offset = this.#serverOffsetMs;
    return offset === undefined ? undefined : offset + this.#monotonicNow();
  }

  /** Learns Firestore's clock from an answer's time: the largest offset is the closest estimate. */
  #learnTime(serverTime: Timestamp): void {
    const offset = serverTime.toMillis() - this.#monotonicNow();
    if (this.#serverOffsetMs === undefined || offset > this.#serverOffsetMs) {
      this.#serverOffsetMs = offset;
    }
  }

  /** {@link callFirestore} with this collection's client and timeout. */
  #call<T>(what: string, run: () => Promise<T>, conflicts: readonly number[] = []): Promise<T> {
    return callFirestore(this.#db, this.#options.timeoutMs, what, run, conflicts);
  }

  /** The run's document, untyped for writes (server timestamps); reads go through the converter. */
  #ref(runId: string): DocumentReference {
    return this.#db.collection(this.#options.collection).doc(runId);
  }
}

/**
 * Runs one Firestore operation of `db`, waiting at most `timeoutMs`, and classifies its errors for
 * that operation: a code in `conflicts` (only a conditional write passes any) throws the private
 * {@link WriteConflict}; NOT_FOUND otherwise means the database is missing; anything else,
 * including the timeout, is a {@link LedgerUnavailableError}. Exported for the operations
 * commands' queries (`ops/run-queries.ts`), which the function never makes.
 *
 * @throws {DatabaseNotFoundError} for NOT_FOUND outside `conflicts`; {@link LedgerUnavailableError}.
 * @example const snap = await callFirestore(db, 10_000, 'query', () => query.get());
 */
export async function callFirestore<T>(
  db: Firestore,
  timeoutMs: number,
  what: string,
  run: () => Promise<T>,
  conflicts: readonly number[] = [],
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    const message = `Firestore did not answer the ${what} within ${timeoutMs} ms`;
    timer = setTimeout(() => reject(new LedgerUnavailableError(message)), timeoutMs);
  });
  try {
    return await Promise.race([run(), timeout]);
  } catch (err) {
    if (err instanceof LedgerUnavailableError) throw err;
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === 'number' && conflicts.includes(code)) throw new WriteConflict();
    if (code === Code.NOT_FOUND) {
      throw new DatabaseNotFoundError(
        `Firestore database "${db.databaseId ?? '(default)'}" was not found (the ${what} answered NOT_FOUND): ` +
          'check FIRESTORE_DATABASE and the project, and that the database exists ' +
          '(gcloud firestore databases list)',
        { cause: err },
      );
    }
    const message = err instanceof Error ? err.message : String(err);
    throw new LedgerUnavailableError(`Firestore ${what} failed: ${message}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
