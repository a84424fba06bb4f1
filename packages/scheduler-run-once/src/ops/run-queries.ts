/**
 * Queries of the runs collection that only the operations commands make, each built from its
 * declared spec in `ops/indexes.ts` (which `deploy.sh` creates the composite index of). The function
 * reads slots by run id and queries nothing.
 */
import {
  Firestore,
  type Query,
  type Settings,
  Timestamp,
} from '@google-cloud/firestore';
import { callFirestore } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import { runRecordConverter, type StoredRecord } from '../core/run-record.ts';
import {
  buildQuery,
  type Equalities,
  KINDS_OUTSIDE_SLOTS,
  type PageCursor,
} from './build-query.ts';
import { credentialsProblem } from './command.ts';
import { QUERIES, type QuerySpec } from './indexes.ts';

/** The client's rejection of a call on a terminated client (its `pool.js`). */
const CLIENT_TERMINATED_MESSAGE = 'The client has already been terminated';

let rejectionsIgnored = false;

/**
 * Keeps the client's own unhandled rejections from crashing a command that reports them itself:
 * - the retry of a call the command gave up on (`callFirestore`'s timeout), once its client is
 *   terminated: the client goes on retrying a call nobody awaits; its next try after
 *   `terminate()` rejects with {@link CLIENT_TERMINATED_MESSAGE} in a promise the client itself
 *   never handles;
 * - google-auth-library's credentials errors (none found, a key file it cannot use), which the
 *   client's connection set-up rejects with beside the command's own call: that call fails with
 *   it too, and the command names it (`commandStatus`).
 * Node would print either with a stack, before or after the command's own clear error, and exit 1
 * whatever the command's status. Any other unhandled rejection is thrown, as Node would, so a bug
 * still shows its stack.
 */
function ignoreRejectionsCommandsReport(): void {
  if (rejectionsIgnored) {
    return;
  }
  rejectionsIgnored = true;
  process.on('unhandledRejection', (reason: unknown) => {
    const isTerminatedClientRetry =
      reason instanceof Error && reason.message === CLIENT_TERMINATED_MESSAGE;
    if (!isTerminatedClientRetry && credentialsProblem(reason) === undefined) {
      throw reason;
    }
  });
}

/**
 * Runs `command` with an `open` that makes the command's Firestore client, and closes that client
 * once the command ends, however it ends: tests run the commands in their own process. A call the
 * client still retries then fails quietly, and so does the client's own rejection for missing or
 * unusable credentials ({@link ignoreRejectionsCommandsReport}).
 */
export async function withFirestore<T>(
  command: (open: (settings: Settings) => Firestore) => Promise<T>,
): Promise<T> {
  let db: Firestore | undefined;
  ignoreRejectionsCommandsReport();
  try {
    return await command((settings) => {
      db = new Firestore(settings);
      return db;
    });
  } finally {
    if (db !== undefined) {
      await db.terminate();
    }
  }
}

/** The runs collection the queries read, and the longest wait for one page, ms. */
export interface RunsCollection {
  readonly db: Firestore;
  readonly collection: string;
  readonly timeoutMs: number;
}

/**
 * Runs a query of the runs collection built by `build`, through the record converter, with the
 * ledger's timeout and error classification.
 *
 * @throws {LedgerUnavailableError} if Firestore fails (e.g. `FAILED_PRECONDITION` for a query
 *   whose composite index does not exist).
 */
async function query(
  runs: RunsCollection,
  build: (collection: Query<StoredRecord>) => Query<StoredRecord>,
): Promise<{ runId: string; record: StoredRecord; updateTime: Timestamp }[]> {
  const collection = runs.db
    .collection(runs.collection)
    .withConverter(runRecordConverter);
  const snap = await callFirestore(runs.db, runs.timeoutMs, 'query', () =>
    build(collection).get(),
  );
  return snap.docs.map((doc) => ({
    runId: doc.id,
    record: doc.data(),
    updateTime: doc.updateTime,
  }));
}

/** Documents per page of a query: bounds one call's wait, never what is listed. */
export const PAGE_SIZE = 300;
/** The most records one listing returns: a bound on memory, said when reached. */
export const MAX_LISTED = 10_000;

/** A listing: the records found, newest first, and whether {@link MAX_LISTED} cut it short. */
export interface Listing {
  readonly records: { runId: string; record: StoredRecord }[];
  /** True if more records matched than were returned (the oldest were left out). */
  readonly truncated: boolean;
}

/**
 * Whether a record belongs to the key scope `scope` (a `scopeId`): its `key_scope` says so, or it
 * has none (a record of a version before the field, or one we cannot read: kept, as before).
 */
export function inScope(record: StoredRecord, scope: string): boolean {
  return (
    record.status === 'unreadable' ||
    record.keyScope === undefined ||
    record.keyScope === scope
  );
}

async function pages(
  runs: RunsCollection,
  spec: QuerySpec,
  values: Equalities,
  window: { from?: Date; to?: Date },
  pageSize: number,
  max: number,
  scope: string,
): Promise<Listing> {
  const records: { runId: string; record: StoredRecord }[] = [];
  const from =
    window.from === undefined ? undefined : Timestamp.fromDate(window.from);
  const to =
    window.to === undefined ? undefined : Timestamp.fromDate(window.to);
  let cursor: PageCursor | undefined;
  for (;;) {
    const page = await query(runs, (collection) =>
      buildQuery(collection, spec, values, {
        ...(from === undefined ? {} : { from }),
        ...(to === undefined ? {} : { to }),
        ...(cursor === undefined ? {} : { cursor }),
        limit: pageSize,
      }),
    );
    for (const { runId, record } of page) {
      // Another scope's records share the job's name: filtered here, so the query and its index
      // stay as they are and records of earlier versions (no key_scope) are still listed.
      if (!inScope(record, scope)) {
        continue;
      }
      if (records.length === max) {
        return { records, truncated: true };
      }
      records.push({ runId, record });
    }
    const last = page.at(-1);
    if (page.length < pageSize || last === undefined) {
      return { records, truncated: false };
    }
    const value =
      last.record.status === 'unreadable'
        ? undefined
        : last.record.scheduleTime;
    // A record without a readable schedule time cannot be ordered by it; the query never returns one.
    if (value === undefined) {
      return { records, truncated: false };
    }
    cursor = { value: Timestamp.fromDate(value), runId: last.runId };
  }
}

/**
 * The manual and forced runs of job `jobId` (re-runs of them included) whose schedule time lies in
 * [`from`, `to`] in key scope `scope` ({@link inScope}), newest first, every page followed: one
 * query per page on `job_name`, `run_kind` and `schedule_time` (composite index
 * `QUERIES.runsOutsideSlots`), so other jobs' runs never crowd a job's out; another scope's are
 * skipped page by page, never counted.
 *
 * @throws {LedgerUnavailableError} if Firestore fails (`FAILED_PRECONDITION` if the index is missing:
 *   `./deploy.sh` creates it).
 * @example const { records } = await runsOutsideSlots(runs, 'nightly-report', from, now);
 */
export function runsOutsideSlots(
  runs: RunsCollection,
  jobId: string,
  scope: Scope,
  from: Date,
  to: Date,
  options: { pageSize?: number; max?: number } = {},
): Promise<Listing> {
  return pages(
    runs,
    QUERIES.runsOutsideSlots,
    [jobId, KINDS_OUTSIDE_SLOTS],
    { from, to },
    options.pageSize ?? PAGE_SIZE,
    options.max ?? MAX_LISTED,
    scopeId(scope),
  );
}

/**
 * Every record whose `job_name` is `jobId`, in key scope `scope` ({@link inScope}), and whose
 * schedule time lies in [`from`, `to`], newest first: the history of a job id that is no longer declared (renamed or removed), from the records'
 * own fields (composite index `QUERIES.recordsOfJob`).
 *
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const { records } = await recordsOfJob(runs, 'old-name', from, now);
 */
export function recordsOfJob(
  runs: RunsCollection,
  jobId: string,
  scope: Scope,
  from: Date | undefined,
  to: Date,
  options: { pageSize?: number; max?: number } = {},
): Promise<Listing> {
  return pages(
    runs,
    QUERIES.recordsOfJob,
    [jobId],
    { ...(from === undefined ? {} : { from }), to },
    options.pageSize ?? PAGE_SIZE,
    options.max ?? MAX_LISTED,
    scopeId(scope),
  );
}
