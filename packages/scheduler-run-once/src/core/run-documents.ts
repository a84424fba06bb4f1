/** The run documents: the one module that calls Firestore. */
import {
  type DocumentData,
  type DocumentReference,
  type DocumentSnapshot,
  type Firestore,
  Timestamp,
  type WriteResult,
} from '@google-cloud/firestore';
import {
  DatabaseNotFoundError,
  describeThrown,
  LedgerUnavailableError,
} from './errors.ts';
import { runRecordConverter, type StoredRecord } from './run-record.ts';

/**
 * One read of one run document: the record (`undefined`: absent), its update time (µs: the fencing
 * token of a write after this read) and Firestore's time of the read ("now" for its decisions).
 */
export interface DocumentRead {
  readonly record: StoredRecord | undefined;
  readonly updateTime: Timestamp | undefined;
  readonly readTime: Date;
}

/** What a batched read of run records found, by run id: as {@link DocumentRead}, of the last read. */
export interface BatchRead {
  readonly records: ReadonlyMap<string, StoredRecord | undefined>;
  /** Present records only. */
  readonly updateTimes: ReadonlyMap<string, Timestamp>;
  readonly readTime: Date;
}

/**
 * A write in one atomic batch with a claim's, on its own precondition: document `id` of `documents`
 * (same Firestore client) is still at `token` (absent if `undefined`). The overlap lock rides on it.
 */
export interface GuardedWrite {
  readonly documents: RunDocuments;
  readonly id: string;
  /** What the write is, for error messages (`overlap lock`). */
  readonly what: string;
  readonly data: DocumentData;
  readonly token: Timestamp | undefined;
}

/** The guard was not at its token; the run document as read with it (our lost batch may show). */
export type GuardChanged = { readonly guardChanged: DocumentRead };

/** Where the run documents live and how long to wait, durations in ms. */
export interface RunDocumentsOptions {
  readonly collection: string;
  /** How long a record is kept after its last write (`expire_at`, for a TTL policy). */
  readonly retentionMs: number;
  /** Longest wait for one Firestore operation; then {@link LedgerUnavailableError}. */
  readonly timeoutMs: number;
}

/** A document id no run has (run ids are hex): read once to learn Firestore's time. */
const CLOCK_DOC = '~clock';
/** Documents per batched read (`getAll`); Firestore takes far more, this bounds one call's wait. */
const BATCH_SIZE = 500;

/** gRPC status codes (the client's `GrpcStatus` enum is types-only). */
const Code = {
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  FAILED_PRECONDITION: 9,
} as const;

/**
 * The runs collection, safe to share across requests. Its calls throw {@link LedgerUnavailableError}
 * if Firestore fails or is late ({@link DatabaseNotFoundError} if the database does not exist),
 * classified where they happen (docs/how-it-works.md, "Writes: one precondition each"); it learns
 * Firestore's clock from every answer (docs/how-it-works.md, "Firestore's clock on an instance").
 */
export class RunDocuments {
  readonly #db: Firestore;
  readonly #options: RunDocumentsOptions;
  /** Firestore's time of an answer minus `performance.now()` on receiving it, ms (monotonic). */
  #serverOffsetMs: number | undefined;
  /** The read learning Firestore's clock, while one is in flight: callers share it. */
  #learning: Promise<unknown> | undefined;

  constructor(db: Firestore, options: RunDocumentsOptions) {
    this.#db = db;
    this.#options = options;
  }
  /** Longest wait for one Firestore operation, ms. */
  get timeoutMs(): number {
    return this.#options.timeoutMs;
  }
  /** How long a record is kept after its last write, ms. */
  get retentionMs(): number {
    return this.#options.retentionMs;
  }
  /** Reads one run document. @throws {LedgerUnavailableError} */
  async read(runId: string): Promise<DocumentRead> {
    const read = await this.#get(
      this.#ref(runId).withConverter(runRecordConverter),
    );
    return {
      record: read.data,
      updateTime: read.updateTime,
      readTime: read.readTime,
    };
  }
  /** Reads one document as plain data (a job's own state). @throws {LedgerUnavailableError} */
  readData(
    id: string,
  ): Promise<
    Omit<DocumentRead, 'record'> & { data: DocumentData | undefined }
  > {
    return this.#get(this.#ref(id));
  }
  /** One document read, Firestore's time learnt from its answer. */
  async #get<T>(ref: DocumentReference<T>) {
    const snap = await this.#call('read', () => ref.get());
    this.#learnTime(snap.readTime);
    return {
      data: snap.data(),
      updateTime: snap.updateTime,
      readTime: snap.readTime.toDate(),
    };
  }
  /** Reads many run documents by `getAll` (no query, no index). @throws {LedgerUnavailableError} */
  async readMany(runIds: readonly string[]): Promise<BatchRead> {
    const records = new Map<string, StoredRecord | undefined>();
    const updateTimes = new Map<string, Timestamp>();
    let readTime: Date | undefined;
    for (let i = 0; i < runIds.length; i += BATCH_SIZE) {
      const refs = runIds
        .slice(i, i + BATCH_SIZE)
        .map((id) => this.#ref(id).withConverter(runRecordConverter));
      const snaps = await this.#call('batched read', () =>
        this.#db.getAll(...refs),
      );
      for (const snap of snaps) {
        // The refs carry the converter, which Firestore.getAll's typings drop (unlike Transaction's).
        records.set(snap.id, snap.data() as StoredRecord | undefined);
        if (snap.updateTime !== undefined) {
          updateTimes.set(snap.id, snap.updateTime);
        }
        readTime = snap.readTime.toDate();
        this.#learnTime(snap.readTime);
      }
    }
    // Nothing to read still has a time: Firestore's, as this instance knows it.
    return {
      records,
      updateTimes,
      readTime: readTime ?? (await this.serverTime()),
    };
  }
  /**
   * Creates a run document (`token` undefined) or updates it if nobody wrote it since `token`: the
   * write's time (the new fencing token), or `conflict` if it exists, or changed or was deleted
   * since. @throws {LedgerUnavailableError}
   */
  write(runId: string, what: string, data: DocumentData, token?: Timestamp) {
    const ref = this.#ref(runId);
    if (token === undefined) {
      return this.#conditional(what, () => ref.create(data), [
        Code.ALREADY_EXISTS,
      ]);
    }
    // NOT_FOUND from a fenced update is the document deleted under us, not a missing database.
    const update = () => ref.update(data, { lastUpdateTime: token });
    return this.#conditional(what, update, [
      Code.FAILED_PRECONDITION,
      Code.NOT_FOUND,
    ]);
  }
  /**
   * {@link write}; with `guard` (a claim's), in one atomic batch with the guarded write, so both
   * land or neither does, {@link GuardChanged} if the guard's precondition failed.
   * @throws {LedgerUnavailableError}
   */
  async writeWith(
    runId: string,
    what: string,
    data: DocumentData,
    token: Timestamp | undefined,
    guard?: GuardedWrite,
  ): Promise<Timestamp | 'conflict' | GuardChanged> {
    if (guard === undefined) {
      return this.write(runId, what, data, token);
    }
    if (guard.documents.#db !== this.#db) {
      throw new Error(
        'a guarded write must use the same Firestore client as the run documents',
      );
    }
    const written = await this.#commitGuarded(runId, what, data, token, guard);
    if (written !== 'conflict') {
      return written;
    }
    return this.#conflictOrGuardChanged(runId, guard);
  }
  /** The run's write and `guard`'s in one atomic batch: its time, or `conflict` if either failed. */
  #commitGuarded(
    runId: string,
    what: string,
    data: DocumentData,
    token: Timestamp | undefined,
    guard: GuardedWrite,
  ): Promise<Timestamp | 'conflict'> {
    const batch = this.#db.batch();
    const add = (
      ref: DocumentReference,
      fields: DocumentData,
      at: Timestamp | undefined,
    ) =>
      at === undefined
        ? batch.create(ref, fields)
        : batch.update(ref, fields, { lastUpdateTime: at });
    add(this.#ref(runId), data, token);
    add(guard.documents.#ref(guard.id), guard.data, guard.token);
    const conflicts = [
      Code.ALREADY_EXISTS,
      Code.FAILED_PRECONDITION,
      Code.NOT_FOUND,
    ];
    const commit = () =>
      batch.commit().then(([written]) => written as WriteResult);
    return this.#conditional(
      `${what} with the ${guard.what}`,
      commit,
      conflicts,
    );
  }
  /**
   * After a guarded batch's conflict, reads both documents: `conflict` if the guard is as it was
   * (the run's write lost), else {@link GuardChanged} with the run's record as read.
   */
  async #conflictOrGuardChanged(
    runId: string,
    guard: GuardedWrite,
  ): Promise<'conflict' | GuardChanged> {
    const runRef = this.#ref(runId).withConverter(runRecordConverter);
    // getAll answers every ref, in order, or throws; its typings drop the run ref's converter.
    const [guarded, run] = (await this.#call(
      `read after the ${guard.what}`,
      () => this.#db.getAll(guard.documents.#ref(guard.id), runRef),
    )) as [DocumentSnapshot, DocumentSnapshot<StoredRecord>];
    this.#learnTime(run.readTime);
    const at = guarded.updateTime;
    if (
      guard.token === undefined ? at === undefined : at?.isEqual(guard.token)
    ) {
      return 'conflict';
    }
    const record = run.data();
    return {
      guardChanged: {
        record,
        updateTime: run.updateTime,
        readTime: run.readTime.toDate(),
      },
    };
  }
  /** A conditional write's time (learnt as Firestore's), or `conflict` for a code in `conflicts`. */
  #conditional(
    what: string,
    write: () => Promise<WriteResult>,
    conflicts: number[],
  ): Promise<Timestamp | 'conflict'> {
    const conflict = (err: { code?: number } | null) => {
      if (conflicts.includes(err?.code as number)) {
        return 'conflict' as const;
      }
      throw err;
    };
    return this.#call(what, () => write().catch(conflict)).then((written) => {
      if (written === 'conflict') {
        return written;
      }
      this.#learnTime(written.writeTime);
      return written.writeTime;
    });
  }
  /** `expire_at` for a write now, from Firestore's time (before its first answer, the wall clock's). */
  expireAt(): Timestamp {
    return Timestamp.fromMillis(
      (this.#knownServerMs() ?? Date.now()) + this.#options.retentionMs,
    );
  }
  /**
   * Firestore's time now, as best this instance knows it; before its first answer, one read learns
   * it (concurrent callers share that read). @throws {LedgerUnavailableError} if that read fails.
   */
  async serverTime(): Promise<Date> {
    if (this.#serverOffsetMs === undefined) {
      this.#learning ??= this.read(CLOCK_DOC).finally(() => {
        this.#learning = undefined;
      });
      await this.#learning;
    }
    return new Date(this.#knownServerMs() ?? Date.now());
  }
  /**
   * Opens the client's channel (credentials, connection) with a read it learns no clock from (why:
   * docs/how-it-works.md, "Firestore's clock on an instance"). @throws {LedgerUnavailableError}
   */
  async connect(): Promise<void> {
    await this.#call('connect', () => this.#ref(CLOCK_DOC).get());
  }
  /** Firestore's time now from the answers so far, ms; `undefined` before the first. */
  #knownServerMs(): number | undefined {
    const offset = this.#serverOffsetMs;
    return offset === undefined ? undefined : offset + performance.now();
  }
  /** Learns Firestore's clock from an answer's time: the largest offset is the closest estimate. */
  #learnTime(serverTime: Timestamp): void {
    const offset = serverTime.toMillis() - performance.now();
    this.#serverOffsetMs = Math.max(offset, this.#serverOffsetMs ?? offset);
  }
  #call<T>(what: string, run: () => Promise<T>): Promise<T> {
    return callFirestore(this.#db, this.#options.timeoutMs, what, run);
  }
  /** Untyped for writes (server timestamps); reads of runs add the converter. */
  #ref(runId: string): DocumentReference {
    return this.#db.collection(this.#options.collection).doc(runId);
  }
}

/**
 * Runs one Firestore operation (also the operations commands' queries), waiting at most `timeoutMs`
 * ms, and classifies its errors (a conditional write answers its own conflicts first).
 * @throws {DatabaseNotFoundError} for NOT_FOUND; {@link LedgerUnavailableError} for any other failure.
 */
export function callFirestore<T>(
  db: Firestore,
  timeoutMs: number,
  what: string,
  run: () => Promise<T>,
): Promise<T> {
  // One promise the answer or the timer settles: each promise costs in a request.
  return new Promise<T>((resolve, reject) => {
    const late = () =>
      `Firestore did not answer the ${what} within ${timeoutMs} ms`;
    const timer = setTimeout(
      () => reject(new LedgerUnavailableError(late())),
      timeoutMs,
    );
    const fail = (err: unknown) => {
      clearTimeout(timer);
      reject(classified(db, what, err));
    };
    try {
      run().then((value) => {
        clearTimeout(timer);
        resolve(value);
      }, fail);
    } catch (err) {
      fail(err);
    }
  });
}

/** NOT_FOUND's {@link DatabaseNotFoundError}, else {@link LedgerUnavailableError}; never throws. */
function classified(
  db: Firestore,
  what: string,
  err: unknown,
): LedgerUnavailableError {
  try {
    if (err instanceof LedgerUnavailableError) {
      return err;
    }
    if ((err as { code?: unknown } | null)?.code === Code.NOT_FOUND) {
      const message = `Firestore database "${db.databaseId ?? '(default)'}" was not found (the ${what} answered NOT_FOUND): check FIRESTORE_DATABASE and the project, and that the database exists (gcloud firestore databases list)`;
      return new DatabaseNotFoundError(message, { cause: err });
    }
  } catch {} // a value that throws when inspected (a revoked proxy) is neither
  const message = `Firestore ${what} failed: ${describeThrown(err)}`;
  return new LedgerUnavailableError(message, { cause: err });
}
