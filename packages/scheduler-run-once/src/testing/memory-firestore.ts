/**
 * An in-memory Firestore: the subset of the `@google-cloud/firestore` client surface the product
 * calls (`collection().doc()` with get/create/update/set/delete and `{ lastUpdateTime }`
 * preconditions, `withConverter`, `getAll`, `batch()`, `FieldValue.serverTimestamp()` /
 * `FieldValue.delete()`, dotted field paths in updates, `databaseId`), with the real client's
 * error codes (ALREADY_EXISTS 6, FAILED_PRECONDITION 9, NOT_FOUND 5) and update times strictly
 * increasing at µs precision. Its server clock is injected (the simulator's virtual time), and
 * every operation passes through an optional hook that may delay it, fail it before it applies, or
 * lose its answer after it applied. `test/sim/memory-firestore.test.ts` proves it against the
 * emulator, operation by operation.
 */
import {
  type DocumentData,
  FieldValue,
  type Firestore,
  type FirestoreDataConverter,
  Timestamp,
} from '@google-cloud/firestore';

/** gRPC status codes the real client answers with. */
export const GrpcCode = {
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  UNAVAILABLE: 14,
  DEADLINE_EXCEEDED: 4,
} as const;

/** An error shaped like the real client's (`code`, `details`, message "CODE NAME: details"). */
export function grpcError(code: number, details: string): Error {
  const name =
    Object.entries(GrpcCode).find(([, c]) => c === code)?.[0] ?? 'UNKNOWN';
  return Object.assign(new Error(`${code} ${name}: ${details}`), {
    code,
    details,
  });
}

/** One operation as the hook sees it. */
export interface OpInfo {
  readonly kind:
    | 'get'
    | 'getAll'
    | 'create'
    | 'update'
    | 'set'
    | 'delete'
    | 'commit'
    | 'query';
  /** `collection/doc` paths the operation touches. */
  readonly paths: readonly string[];
}

/**
 * What the hook decides for one operation: wait `beforeMs` (virtual ms) before it reaches the
 * server, `afterMs` before its answer arrives; `fail` rejects it before it applies, `lose` applies
 * it and rejects the answer (a lost answer); `hang` applies it (or not, with `fail`) and never
 * answers; `retry` applies it, then applies it once more as the client's own retry would, and
 * answers with the second try's result (e.g. a retried create answers ALREADY_EXISTS).
 */
export interface OpPlan {
  readonly beforeMs?: number;
  readonly afterMs?: number;
  readonly fail?: number;
  readonly lose?: number;
  readonly hang?: boolean;
  readonly retry?: boolean;
}

/** How a {@link MemoryFirestore} behaves. */
export interface MemoryFirestoreOptions {
  /** The server's clock, ms since the epoch (fractions kept to the µs). */
  readonly now: () => number;
  /** Decides each operation's latency and fault; none by default. */
  readonly plan?: (op: OpInfo) => OpPlan;
  /** Waits `ms` (virtual); only called with a positive wait. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Drops `lastUpdateTime` preconditions of updates: a broken product's fencing, for tests. */
  readonly dropPreconditions?: boolean;
  readonly databaseId?: string;
  /**
   * Called for each document a commit changes, before it lands: the stored data it replaces and
   * its new data (`undefined`: absent before, or deleted).
   */
  readonly landed?: (
    path: string,
    before: DocumentData | undefined,
    after: DocumentData | undefined,
  ) => void;
  /** Called with each document a commit wrote, as stored (not for deletes). */
  readonly committed?: (path: string, data: DocumentData) => void;
  /**
   * As the Firestore client's setting of that name, which the function's own client sets
   * (`src/function/register.ts`): a property whose value is `undefined` is left out of the write
   * instead of refusing it. Off by default, as in the client.
   */
  readonly ignoreUndefinedProperties?: boolean;
}

interface StoredDoc {
  data: DocumentData;
  createTime: Timestamp;
  updateTime: Timestamp;
}

const SERVER_TIMESTAMP = FieldValue.serverTimestamp();
const DELETE = FieldValue.delete();

function isServerTimestamp(v: unknown): boolean {
  return v instanceof FieldValue && v.isEqual(SERVER_TIMESTAMP);
}
function isDelete(v: unknown): boolean {
  return v instanceof FieldValue && v.isEqual(DELETE);
}

/** Firestore keeps µs: nanoseconds below that are dropped on write. */
function toMicros(t: Timestamp): Timestamp {
  return new Timestamp(t.seconds, Math.floor(t.nanoseconds / 1000) * 1000);
}

/** A stored copy of a written value: Dates become Timestamps, sentinels resolve to `at`. */
function storeValue(value: unknown, at: Timestamp, inUpdate: boolean): unknown {
  if (value === undefined) {
    throw new Error(
      'Cannot use "undefined" as a Firestore value. If you want to ignore undefined values, enable `ignoreUndefinedProperties`.',
    );
  }
  // A stamped field keeps ms, as the emulator stamps it (the write's own time keeps µs).
  if (isServerTimestamp(value)) {
    return Timestamp.fromMillis(Math.floor(at.toMillis()));
  }
  if (isDelete(value)) {
    if (!inUpdate) {
      throw new Error(
        'FieldValue.delete() must appear at the top-level of an update',
      );
    }
    return value;
  }
  if (value instanceof Timestamp) {
    return toMicros(value);
  }
  if (value instanceof Date) {
    return toMicros(Timestamp.fromDate(value));
  }
  if (Array.isArray(value)) {
    return value.map((v) => storeValue(v, at, false));
  }
  if (value !== null && typeof value === 'object') {
    const out: DocumentData = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = storeValue(v, at, false);
    }
    return out;
  }
  return value;
}

/** Whether `value` is a plain object (not a Timestamp, a FieldValue or an array). */
function isPlainObject(value: unknown): value is DocumentData {
  if (value === null || typeof value !== 'object') {
    return false;
  }
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * `data` less every property whose value is `undefined`, in nested plain objects too (the client's
 * `ignoreUndefinedProperties`: array elements are not properties, so an `undefined` one is still
 * refused).
 */
function withoutUndefinedProperties(data: DocumentData): DocumentData {
  const kept: DocumentData = {};
  for (const [key, value] of Object.entries(data)) {
    if (value !== undefined) {
      kept[key] = isPlainObject(value)
        ? withoutUndefinedProperties(value)
        : value;
    }
  }
  return kept;
}

/** A copy for a reader, so nobody mutates the store through a snapshot. */
function copyOut(value: unknown): unknown {
  if (value instanceof Timestamp) {
    return value;
  }
  if (Array.isArray(value)) {
    return value.map(copyOut);
  }
  if (value !== null && typeof value === 'object') {
    const out: DocumentData = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = copyOut(v);
    }
    return out;
  }
  return value;
}

function sameData(a: unknown, b: unknown): boolean {
  if (a instanceof Timestamp || b instanceof Timestamp) {
    return a instanceof Timestamp && b instanceof Timestamp && a.isEqual(b);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((x, i) => sameData(x, b[i]))
    );
  }
  if (
    a !== null &&
    b !== null &&
    typeof a === 'object' &&
    typeof b === 'object'
  ) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return (
      ka.length === kb.length &&
      ka.every(
        (k) =>
          k in b && sameData((a as DocumentData)[k], (b as DocumentData)[k]),
      )
    );
  }
  return a === b;
}

function getPath(data: DocumentData, path: string): unknown {
  let at: unknown = data;
  for (const part of path.split('.')) {
    if (at === null || typeof at !== 'object') {
      return undefined;
    }
    at = (at as DocumentData)[part];
  }
  return at;
}

/** A query row: a document and its path. */
type QueryRow = { path: string; doc: StoredDoc };

/** A query's sort order: its fields, each ascending or descending. */
type QueryOrders = readonly { field: string; dir: 'asc' | 'desc' }[];

/** Compares two field values as Firestore orders them (timestamps to the microsecond). */
function compareValues(a: unknown, b: unknown): number {
  const key = (v: unknown) =>
    v instanceof Timestamp
      ? v.toMillis() * 1000 + (v.nanoseconds % 1e6) / 1000
      : v;
  const [x, y] = [key(a), key(b)] as [never, never];
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Whether `doc` passes one `where` filter: a missing field never does. */
function matchesFilter(doc: StoredDoc, { field, op, value }: Filter): boolean {
  const v = getPath(doc.data, field);
  if (v === undefined) {
    return false;
  }
  if (op === 'in') {
    return (value as unknown[]).some((x) => compareValues(v, x) === 0);
  }
  const c = compareValues(v, value);
  return (
    { '==': c === 0, '<': c < 0, '<=': c <= 0, '>': c > 0, '>=': c >= 0 }[op] ??
    false
  );
}

/** A row's value of `field` for sorting: `__name__` is its path. */
function sortValue(row: QueryRow, field: string): unknown {
  return field === '__name__' ? row.path : getPath(row.doc.data, field);
}

/** Sorts `rows` in place by `orders`, then by document name in the last order's direction. */
function sortRows(rows: QueryRow[], queryOrders: QueryOrders): void {
  const orders = [
    ...queryOrders,
    { field: '__name__', dir: queryOrders.at(-1)?.dir ?? 'asc' },
  ];
  rows.sort((a, b) => {
    for (const { field, dir } of orders) {
      const c = compareValues(sortValue(a, field), sortValue(b, field));
      if (c !== 0) {
        return dir === 'asc' ? c : -c;
      }
    }
    return 0;
  });
}

/** Whether `row` comes after the `startAfter` cursor `after` (one value per order field). */
function isAfterCursor(
  row: QueryRow,
  orders: QueryOrders,
  after: readonly unknown[],
): boolean {
  for (const [i, { field, dir }] of orders.entries()) {
    const c = compareValues(sortValue(row, field), after[i]);
    if (c !== 0) {
      return dir === 'asc' ? c > 0 : c < 0;
    }
  }
  return false;
}

/** Applies an update's field paths (dotted) to `data` in place. */
function applyUpdate(
  data: DocumentData,
  fields: DocumentData,
  at: Timestamp,
): void {
  for (const [path, raw] of Object.entries(fields)) {
    const parts = path.split('.');
    const value = storeValue(raw, at, true);
    let node = data;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      if (
        next === null ||
        typeof next !== 'object' ||
        next instanceof Timestamp
      ) {
        if (isDelete(value)) {
          node = undefined as unknown as DocumentData;
          break;
        }
        node[part] = {};
      }
      node = node[part] as DocumentData;
    }
    if (node === undefined) {
      continue;
    }
    const last = parts.at(-1) as string;
    if (isDelete(value)) {
      delete node[last];
    } else {
      node[last] = value;
    }
  }
}

/** A document snapshot as the client returns it. */
export class MemorySnapshot {
  readonly #data: DocumentData | undefined;
  readonly #converter: FirestoreDataConverter<unknown> | undefined;
  readonly ref: MemoryDocRef;
  readonly readTime: Timestamp;
  readonly createTime: Timestamp | undefined;
  readonly updateTime: Timestamp | undefined;

  constructor(
    ref: MemoryDocRef,
    stored: StoredDoc | undefined,
    readTime: Timestamp,
    converter: FirestoreDataConverter<unknown> | undefined,
  ) {
    this.ref = ref;
    this.#data =
      stored === undefined ? undefined : (copyOut(stored.data) as DocumentData);
    this.createTime = stored?.createTime;
    this.updateTime = stored?.updateTime;
    this.readTime = readTime;
    this.#converter = converter;
  }

  get id(): string {
    return this.ref.id;
  }

  get exists(): boolean {
    return this.#data !== undefined;
  }

  data(): unknown {
    if (this.#data === undefined) {
      return undefined;
    }
    if (this.#converter === undefined) {
      return copyOut(this.#data);
    }
    const raw = this.#data;
    const queryLike = {
      ...this,
      id: this.id,
      exists: true,
      data: () => copyOut(raw),
    };
    return this.#converter.fromFirestore(queryLike as never);
  }

  get(field: string): unknown {
    return this.#data === undefined
      ? undefined
      : copyOut(getPath(this.#data, field));
  }
}

type Write =
  | { kind: 'create'; ref: MemoryDocRef; data: DocumentData }
  | { kind: 'set'; ref: MemoryDocRef; data: DocumentData }
  | {
      kind: 'update';
      ref: MemoryDocRef;
      data: DocumentData;
      lastUpdateTime?: Timestamp;
    }
  | {
      kind: 'delete';
      ref: MemoryDocRef;
      lastUpdateTime?: Timestamp;
      exists?: boolean;
    };

/**
 * A commit being staged: its time, each document it changes (`undefined`: deleted), and the paths
 * it writes without changing them (they keep their update time).
 */
interface StagedCommit {
  readonly at: Timestamp;
  readonly staged: Map<string, StoredDoc | undefined>;
  readonly unchanged: Set<string>;
}

/** A document reference: `get`, `create`, `update`, `set`, `delete`, `withConverter`. */
export class MemoryDocRef {
  readonly firestore: MemoryFirestore;
  readonly path: string;
  readonly id: string;
  readonly converter: FirestoreDataConverter<unknown> | undefined;

  constructor(
    db: MemoryFirestore,
    path: string,
    converter: FirestoreDataConverter<unknown> | undefined,
  ) {
    this.firestore = db;
    this.path = path;
    this.id = path.split('/').at(-1) as string;
    this.converter = converter;
  }

  get parent(): MemoryCollection {
    return new MemoryCollection(
      this.firestore,
      this.path.split('/').slice(0, -1).join('/'),
    );
  }

  withConverter(
    converter: FirestoreDataConverter<unknown> | null,
  ): MemoryDocRef {
    return new MemoryDocRef(this.firestore, this.path, converter ?? undefined);
  }

  get(): Promise<MemorySnapshot> {
    return this.firestore.op({ kind: 'get', paths: [this.path] }, (readTime) =>
      this.firestore.snapshot(this, readTime),
    );
  }

  async create(data: DocumentData): Promise<{ writeTime: Timestamp }> {
    const [result] = await this.firestore.commit(
      [{ kind: 'create', ref: this, data }],
      'create',
    );
    return result as { writeTime: Timestamp };
  }

  async set(data: DocumentData): Promise<{ writeTime: Timestamp }> {
    const [result] = await this.firestore.commit(
      [{ kind: 'set', ref: this, data }],
      'set',
    );
    return result as { writeTime: Timestamp };
  }

  async update(
    data: DocumentData,
    precondition?: { lastUpdateTime?: Timestamp },
  ): Promise<{ writeTime: Timestamp }> {
    const write: Write = { kind: 'update', ref: this, data };
    if (precondition?.lastUpdateTime !== undefined) {
      write.lastUpdateTime = precondition.lastUpdateTime;
    }
    const [result] = await this.firestore.commit([write], 'update');
    return result as { writeTime: Timestamp };
  }

  async delete(precondition?: {
    lastUpdateTime?: Timestamp;
    exists?: boolean;
  }): Promise<{ writeTime: Timestamp }> {
    const write: Write = { kind: 'delete', ref: this, ...precondition };
    const [result] = await this.firestore.commit([write], 'delete');
    return result as { writeTime: Timestamp };
  }
}

type Filter = { field: string; op: string; value: unknown };

/** A query: `where` (==, <, <=, >, >=, in), `orderBy`, `limit`, `startAfter` on the order fields. */
export class MemoryQuery {
  readonly firestore: MemoryFirestore;
  readonly collectionPath: string;
  readonly converter: FirestoreDataConverter<unknown> | undefined;
  readonly filters: readonly Filter[];
  readonly orders: readonly { field: string; dir: 'asc' | 'desc' }[];
  readonly max: number | undefined;
  readonly after: readonly unknown[] | undefined;

  constructor(
    db: MemoryFirestore,
    collectionPath: string,
    converter: FirestoreDataConverter<unknown> | undefined,
    filters: readonly Filter[] = [],
    orders: readonly { field: string; dir: 'asc' | 'desc' }[] = [],
    max?: number,
    after?: readonly unknown[],
  ) {
    this.firestore = db;
    this.collectionPath = collectionPath;
    this.converter = converter;
    this.filters = filters;
    this.orders = orders;
    this.max = max;
    this.after = after;
  }

  #with(
    changes: Partial<
      Pick<MemoryQuery, 'filters' | 'orders' | 'max' | 'after' | 'converter'>
    >,
  ) {
    const next = { ...this, ...changes };
    return new MemoryQuery(
      this.firestore,
      this.collectionPath,
      'converter' in changes ? changes.converter : this.converter,
      next.filters,
      next.orders,
      next.max,
      next.after,
    );
  }

  where(field: string, op: string, value: unknown): MemoryQuery {
    return this.#with({ filters: [...this.filters, { field, op, value }] });
  }

  orderBy(field: string, dir: 'asc' | 'desc' = 'asc'): MemoryQuery {
    return this.#with({ orders: [...this.orders, { field, dir }] });
  }

  limit(n: number): MemoryQuery {
    return this.#with({ max: n });
  }

  startAfter(...values: unknown[]): MemoryQuery {
    const first = values[0];
    if (first instanceof MemorySnapshot) {
      return this.#with({ after: this.orders.map((o) => first.get(o.field)) });
    }
    return this.#with({ after: values });
  }

  withConverter(
    converter: FirestoreDataConverter<unknown> | null,
  ): MemoryQuery {
    return this.#with({ converter: converter ?? undefined });
  }

  get(): Promise<{ docs: MemorySnapshot[]; empty: boolean; size: number }> {
    return this.firestore.op(
      { kind: 'query', paths: [this.collectionPath] },
      (readTime) => {
        const docs = this.firestore.runQuery(this, readTime);
        return { docs, empty: docs.length === 0, size: docs.length };
      },
    );
  }
}

/** A collection: `doc(id)` and the query methods. */
export class MemoryCollection extends MemoryQuery {
  constructor(
    db: MemoryFirestore,
    path: string,
    converter?: FirestoreDataConverter<unknown> | undefined,
  ) {
    super(db, path, converter);
  }

  get id(): string {
    return this.collectionPath.split('/').at(-1) as string;
  }

  doc(id: string): MemoryDocRef {
    if (id === '' || id.includes('/')) {
      throw new Error(`invalid document id ${JSON.stringify(id)}`);
    }
    return new MemoryDocRef(
      this.firestore,
      `${this.collectionPath}/${id}`,
      this.converter,
    );
  }

  override withConverter(
    converter: FirestoreDataConverter<unknown> | null,
  ): MemoryCollection {
    return new MemoryCollection(
      this.firestore,
      this.collectionPath,
      converter ?? undefined,
    );
  }
}

/** A batch of writes committed atomically: all land, or none. */
export class MemoryWriteBatch {
  readonly #db: MemoryFirestore;
  readonly #writes: Write[] = [];

  constructor(db: MemoryFirestore) {
    this.#db = db;
  }

  create(ref: MemoryDocRef, data: DocumentData): this {
    this.#writes.push({ kind: 'create', ref, data });
    return this;
  }

  set(ref: MemoryDocRef, data: DocumentData): this {
    this.#writes.push({ kind: 'set', ref, data });
    return this;
  }

  update(
    ref: MemoryDocRef,
    data: DocumentData,
    precondition?: { lastUpdateTime?: Timestamp },
  ): this {
    const write: Write = { kind: 'update', ref, data };
    if (precondition?.lastUpdateTime !== undefined) {
      write.lastUpdateTime = precondition.lastUpdateTime;
    }
    this.#writes.push(write);
    return this;
  }

  delete(
    ref: MemoryDocRef,
    precondition?: { lastUpdateTime?: Timestamp; exists?: boolean },
  ): this {
    this.#writes.push({ kind: 'delete', ref, ...precondition });
    return this;
  }

  commit(): Promise<{ writeTime: Timestamp }[]> {
    return this.#db.commit([...this.#writes], 'commit');
  }
}

/**
 * The in-memory database. Cast it to `Firestore` where the product wants one ({@link asFirestore}).
 *
 * @example
 * const db = new MemoryFirestore({ now: () => clock.now });
 * const documents = new RunDocuments(asFirestore(db), { collection: 'runs', retentionMs, timeoutMs });
 */
export class MemoryFirestore {
  readonly #options: MemoryFirestoreOptions;
  readonly #docs = new Map<string, StoredDoc>();
  /** The last commit time, µs since the epoch: every commit is strictly later. */
  #lastMicros = 0;
  readonly databaseId: string;

  constructor(options: MemoryFirestoreOptions) {
    this.#options = options;
    this.databaseId = options.databaseId ?? '(default)';
  }

  collection(path: string): MemoryCollection {
    return new MemoryCollection(this, path);
  }

  batch(): MemoryWriteBatch {
    return new MemoryWriteBatch(this);
  }

  getAll(...refs: MemoryDocRef[]): Promise<MemorySnapshot[]> {
    return this.op(
      { kind: 'getAll', paths: refs.map((r) => r.path) },
      (readTime) => refs.map((ref) => this.snapshot(ref, readTime)),
    );
  }

  /** Every stored document by path, raw (for invariants and tests). */
  dump(): ReadonlyMap<string, Readonly<StoredDoc>> {
    return this.#docs;
  }

  /** Server time for a read: now, never before the last commit. */
  #readTime(): Timestamp {
    const micros = Math.max(
      Math.floor(this.#options.now() * 1000),
      this.#lastMicros,
    );
    return new Timestamp(Math.floor(micros / 1e6), (micros % 1e6) * 1000);
  }

  /** Server time for a commit: now, strictly after the last one. */
  #commitTime(): Timestamp {
    const micros = Math.max(
      Math.floor(this.#options.now() * 1000),
      this.#lastMicros + 1,
    );
    this.#lastMicros = micros;
    return new Timestamp(Math.floor(micros / 1e6), (micros % 1e6) * 1000);
  }

  /** @internal */
  snapshot(ref: MemoryDocRef, readTime: Timestamp): MemorySnapshot {
    return new MemorySnapshot(
      ref,
      this.#docs.get(ref.path),
      readTime,
      ref.converter,
    );
  }

  /** @internal */
  runQuery(query: MemoryQuery, readTime: Timestamp): MemorySnapshot[] {
    const prefix = `${query.collectionPath}/`;
    let rows = [...this.#docs.entries()]
      .filter(
        ([path]) =>
          path.startsWith(prefix) && !path.slice(prefix.length).includes('/'),
      )
      .map(([path, doc]) => ({ path, doc }));
    for (const filter of query.filters) {
      rows = rows.filter(({ doc }) => matchesFilter(doc, filter));
    }
    for (const { field } of query.orders) {
      rows = rows.filter(({ doc }) => getPath(doc.data, field) !== undefined);
    }
    sortRows(rows, query.orders);
    if (query.after !== undefined) {
      const after = query.after;
      rows = rows.filter((row) => isAfterCursor(row, query.orders, after));
    }
    if (query.max !== undefined) {
      rows = rows.slice(0, query.max);
    }
    return rows.map(({ path }) =>
      this.snapshot(new MemoryDocRef(this, path, query.converter), readTime),
    );
  }

  /** Runs one operation through the plan: latency, faults, then `apply` at the server. @internal */
  async op<T>(info: OpInfo, apply: (serverTime: Timestamp) => T): Promise<T> {
    const plan = this.#options.plan?.(info) ?? {};
    await this.#wait(plan.beforeMs);
    if (plan.fail !== undefined) {
      if (plan.hang) {
        return new Promise<T>(() => {});
      }
      throw grpcError(
        plan.fail,
        `injected fault before ${info.kind} ${info.paths.join(',')}`,
      );
    }
    let result: { ok: true; value: T } | { ok: false; error: unknown };
    const once = (): typeof result => {
      try {
        return { ok: true, value: apply(this.#readTime()) };
      } catch (error) {
        return { ok: false, error };
      }
    };
    result = once();
    if (plan.retry) {
      result = once();
    }
    if (plan.hang) {
      return new Promise<T>(() => {});
    }
    await this.#wait(plan.afterMs);
    if (plan.lose !== undefined) {
      throw grpcError(
        plan.lose,
        `injected lost answer of ${info.kind} ${info.paths.join(',')}`,
      );
    }
    if (!result.ok) {
      throw result.error;
    }
    return result.value;
  }

  async #wait(ms: number | undefined): Promise<void> {
    if (ms !== undefined && ms > 0 && this.#options.sleep) {
      await this.#options.sleep(ms);
    } else {
      await Promise.resolve();
    }
  }

  /** Applies `writes` atomically at one commit time, or none of them. @internal */
  commit(
    writes: readonly Write[],
    kind: OpInfo['kind'],
  ): Promise<{ writeTime: Timestamp }[]> {
    return this.op({ kind, paths: writes.map((w) => w.ref.path) }, () => {
      const commit: StagedCommit = {
        at: this.#peekCommitTime(),
        staged: new Map(),
        unchanged: new Set(),
      };
      for (const write of writes) {
        this.#stage(write, commit);
      }
      this.#commitTime();
      this.#land(commit.staged);
      return writes.map((w) => ({
        writeTime:
          commit.unchanged.has(w.ref.path) && !commit.staged.has(w.ref.path)
            ? (this.#docs.get(w.ref.path) as StoredDoc).updateTime
            : commit.at,
      }));
    });
  }

  /** The document at `path` as the commit so far leaves it. */
  #current(path: string, commit: StagedCommit): StoredDoc | undefined {
    return commit.staged.has(path)
      ? commit.staged.get(path)
      : this.#docs.get(path);
  }

  /** Stages one write of a commit, or throws the error that fails the whole commit. */
  /** A write's data as the client sends it: see {@link MemoryFirestoreOptions.ignoreUndefinedProperties}. */
  #sent(data: DocumentData): DocumentData {
    return this.#options.ignoreUndefinedProperties === true
      ? withoutUndefinedProperties(data)
      : data;
  }

  #stage(write: Write, commit: StagedCommit): void {
    const { path } = write.ref;
    const doc = this.#current(path, commit);
    const { at, staged, unchanged } = commit;
    switch (write.kind) {
      case 'create': {
        if (doc !== undefined) {
          throw grpcError(
            GrpcCode.ALREADY_EXISTS,
            `Document already exists: ${path}`,
          );
        }
        staged.set(path, {
          data: storeValue(this.#sent(write.data), at, false) as DocumentData,
          createTime: at,
          updateTime: at,
        });
        return;
      }
      case 'set': {
        const data = storeValue(
          this.#sent(write.data),
          at,
          false,
        ) as DocumentData;
        if (doc !== undefined && sameData(data, doc.data)) {
          unchanged.add(path);
          return;
        }
        staged.set(path, {
          data,
          createTime: doc?.createTime ?? at,
          updateTime: at,
        });
        return;
      }
      case 'update': {
        this.#stageUpdate(write, doc, commit);
        return;
      }
      case 'delete': {
        if (write.exists === true && doc === undefined) {
          throw grpcError(GrpcCode.NOT_FOUND, `No document to update: ${path}`);
        }
        if (
          write.lastUpdateTime !== undefined &&
          !doc?.updateTime.isEqual(write.lastUpdateTime)
        ) {
          throw grpcError(
            GrpcCode.FAILED_PRECONDITION,
            'the stored version does not match the required base version',
          );
        }
        staged.set(path, undefined);
        return;
      }
    }
  }

  /** Stages an update: fenced by `lastUpdateTime` unless the store drops preconditions. */
  #stageUpdate(
    write: Extract<Write, { kind: 'update' }>,
    doc: StoredDoc | undefined,
    commit: StagedCommit,
  ): void {
    const { path } = write.ref;
    const fenced =
      write.lastUpdateTime !== undefined && !this.#options.dropPreconditions;
    if (doc === undefined) {
      throw grpcError(
        fenced ? GrpcCode.FAILED_PRECONDITION : GrpcCode.NOT_FOUND,
        fenced
          ? `the stored version does not match the required base version`
          : `No document to update: ${path}`,
      );
    }
    if (fenced && !doc.updateTime.isEqual(write.lastUpdateTime as Timestamp)) {
      throw grpcError(
        GrpcCode.FAILED_PRECONDITION,
        'the stored version does not match the required base version',
      );
    }
    const data = copyOut(doc.data) as DocumentData;
    applyUpdate(data, this.#sent(write.data), commit.at);
    // A write that changes nothing keeps the document's update time (as Firestore does).
    if (sameData(data, doc.data)) {
      commit.unchanged.add(path);
    } else {
      commit.staged.set(path, {
        data,
        createTime: doc.createTime,
        updateTime: commit.at,
      });
    }
  }

  /** Lands a commit's staged documents (`undefined`: deleted), telling the hooks. */
  #land(staged: ReadonlyMap<string, StoredDoc | undefined>): void {
    for (const [path, doc] of staged) {
      this.#options.landed?.(path, this.#docs.get(path)?.data, doc?.data);
      if (doc === undefined) {
        this.#docs.delete(path);
      } else {
        this.#docs.set(path, doc);
        this.#options.committed?.(path, doc.data);
      }
    }
  }

  /** The time the next commit will take, without taking it (a failed commit takes none). */
  #peekCommitTime(): Timestamp {
    const micros = Math.max(
      Math.floor(this.#options.now() * 1000),
      this.#lastMicros + 1,
    );
    return new Timestamp(Math.floor(micros / 1e6), (micros % 1e6) * 1000);
  }
}

/** The store typed as the product's `Firestore` (it implements the subset the product calls). */
export function asFirestore(db: MemoryFirestore): Firestore {
  return db as unknown as Firestore;
}
