/**
 * The overlap policy's question: is another run of this job still running? Answered by a per-job
 * lock document, never by which slots have records, so `wait` and `skip` hold across gaps (a slot
 * that waited, one Scheduler delayed, one missed). Only jobs with `wait` or `skip` pay for it, and
 * it holds for every kind of run (slot, forced, manual, re-run) unless a manual run or re-run asks
 * to overlap (`npm run trigger -- JOB --allow-overlap`).
 *
 * The lock is the document `{jobId}~overlap` in the per-job collection (`job-state.ts`), with
 * `~{scopeId}` appended in a key scope (`lockId`): a job's lock is per job *and* key scope, as its
 * runs are. It names the run holding it (`holder_run_id`), and carries `expire_at` for the TTL.
 * Its liveness is the holder's *run record* lease, judged on Firestore's clock (the read's time),
 * so the lease heartbeat that keeps the run alive keeps the lock too, with no second write per beat.
 *
 * Timeline of one job's lock. Every lock write is committed **in one atomic batch with the run's
 * claim** (the record's `create()` or fenced takeover), fenced on the lock's update time as read
 * (`GuardedWrite` of the core): the lock changes only together with a claim, and of two runs that
 * judged it free from one read, one batch lands and the other changes nothing.
 *
 *   (absent) ──claim A + create(holder = A)──► held by A ──A's record completed, failed, lapsed──► free
 *                                                   │                                              │
 *                                                   │ B reads it: A's lease live → B waits / skips │
 *                                                   │                                              ▼
 *                                                   └──────── claim B + update(holder = B), fenced on its read
 *
 * A retry of the holder (A's record lapsed after a crash) also claims with a lock write fenced on
 * its read, so it and a next slot B that found A lapsed cannot both land: the one that lands holds
 * the lock, the other re-reads and finds it held.
 *
 * Named conditions, checked in order at a delivery (`ownLock`, `holderUnreadable`, `holderLive`,
 * `holderComing`):
 * - the lock is absent, or names this very run (a retry of the holder): free, claim with the lock.
 * - the holder's record cannot be read (`judgedAt`: an unknown status, a lease from the future):
 *   `unreadable`; the delivery answers 500 naming the holder's record, nothing runs or is recorded
 *   (a record we cannot read may be a run in progress; a later slot never vanishes silently: it
 *   fails loudly and stays missed until the record is repaired).
 * - the holder's record is `in_progress` with a live lease: held, the run waits or is skipped.
 * - the holder's record is absent and the lock was written less than a lease ago: held (an older
 *   revision takes the lock *before* it claims its run, so for that moment its record does not
 *   exist yet).
 * - otherwise (completed, failed, skipped, lapsed, or never claimed within a lease): free.
 *
 * During a rolling deploy an older revision, which judges overlap by the previous slot's record,
 * serves beside this one and takes no lock: so this check also reads the previous slot's record in
 * the same batched read, and a live lease there blocks as before.
 */

import type { DocumentData, Timestamp } from '@google-cloud/firestore';
import { LedgerUnavailableError } from '../core/errors.ts';
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import { isLeaseLive, judgedAt, type UnreadableRecord } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, slotRunId } from './run-history.ts';
import { previousSlot } from './schedule.ts';

/**
 * The lock document's id for `jobId` in key scope `scope`, in the per-job collection:
 * `{jobId}~overlap`, with `~{scopeId}` appended in a scope (each scope has runs of its own).
 *
 * @example overlapLockId('nightly', []) // 'nightly~overlap'
 */
export function overlapLockId(jobId: string, scope: Scope): string {
  const id = scopeId(scope);
  return id === '' ? `${jobId}~overlap` : `${jobId}~overlap~${id}`;
}

/** Field names of a lock document. */
export const LockField = {
  holder: 'holder_run_id',
  jobName: 'job_name',
  expireAt: 'expire_at',
} as const;

/**
 * Rounds of check → guarded claim before a contended lock is reported as held: each lost round
 * means another run's claim with the lock landed first.
 */
export const MAX_OVERLAP_ROUNDS = 4;

/** What the overlap check needs. */
export interface OverlapStores {
  /** The runs: the holder's record (and the previous slot's) in one batched read. */
  readonly history: Pick<RunHistory, 'getMany'>;
  /** The per-job documents, where the lock lives (on the runs' Firestore client: one batch). */
  readonly jobDocuments: RunDocuments;
  /**
   * How long a lock whose holder has no record yet counts as held, ms: the lease length, so a
   * holder that crashed between taking the lock and claiming its run frees it after one lease.
   */
  readonly leaseMs: number;
}

/**
 * What the overlap check found:
 * - `free`: no other run holds the lock; claim the run with `guard` (the lock write, fenced on the
 *   read), which lands only with the claim.
 * - `held`: run `by` holds it (or, after lost rounds, may): the run waits or is skipped.
 * - `unreadable`: the holder's record `by` cannot be read: neither run nor skip.
 */
export type OverlapCheck =
  | { readonly state: 'free'; readonly guard: GuardedWrite }
  | { readonly state: 'held'; readonly by: string }
  | { readonly state: 'unreadable'; readonly by: string; readonly record: UnreadableRecord };

/**
 * Judges whether run `runId` (of `job`, at schedule time `slot`, in key scope `scope`) may take
 * the job's overlap lock. Writes nothing: the lock write goes into the claim (`free.guard`).
 *
 * @throws {LedgerUnavailableError} if Firestore fails, or the lock document is one this version
 *   would never write (delete it to repair).
 * @example const checked = await checkOverlap(stores, job, runId, slot, scope);
 */
export async function checkOverlap(
  stores: OverlapStores,
  job: DeclaredJob,
  runId: string,
  slot: Date,
  scope: Scope,
): Promise<OverlapCheck> {
  const { history, jobDocuments, leaseMs } = stores;
  const lockId = overlapLockId(job.id, scope);
  const previous = previousSlot(job, slot);
  const previousRunId = previous === undefined ? undefined : slotRunId(job.id, previous, scope);
  const lock = await jobDocuments.readData(lockId);
  const holder = holderOf(lock.data, lockId);
  const ownLock = holder === undefined || holder === runId;
  const ids = [
    ...new Set([holder, previousRunId].filter((id) => id !== undefined && id !== runId)),
  ] as string[];
  const { records, readTime } =
    ids.length === 0 ? { records: new Map(), readTime: lock.readTime } : await history.getMany(ids);
  // An older revision's run of the previous slot holds no lock: its lease still blocks.
  const previousRecord = previousRunId === undefined ? undefined : records.get(previousRunId);
  if (previousRunId !== undefined && previousRunId !== runId && previousRecord !== undefined) {
    if (isLeaseLive(previousRecord, readTime)) return { state: 'held', by: previousRunId };
  }
  if (!ownLock) {
    const stored = records.get(holder);
    const record = stored === undefined ? undefined : judgedAt(stored, readTime);
    if (record?.status === 'unreadable') return { state: 'unreadable', by: holder, record };
    const holderLive = record !== undefined && isLeaseLive(record, readTime);
    const holderComing =
      record === undefined &&
      lock.updateTime !== undefined &&
      lock.readTime.getTime() < lock.updateTime.toMillis() + leaseMs;
    if (holderLive || holderComing) return { state: 'held', by: holder };
  }
  const data: DocumentData = {
    [LockField.holder]: runId,
    [LockField.jobName]: job.id,
    [LockField.expireAt]: jobDocuments.expireAt(),
  };
  const guard: GuardedWrite = {
    documents: jobDocuments,
    id: lockId,
    what: 'overlap lock',
    data,
    token: lock.updateTime as Timestamp | undefined,
  };
  return { state: 'free', guard };
}

/** The run id a lock names, `undefined` when there is no lock. */
function holderOf(data: Record<string, unknown> | undefined, lockId: string): string | undefined {
  if (data === undefined) return undefined;
  const holder = data[LockField.holder];
  if (typeof holder === 'string' && /^[0-9a-f]{64}$/.test(holder)) return holder;
  throw new LedgerUnavailableError(
    `the overlap lock ${lockId} is unreadable (field ${LockField.holder} is ${JSON.stringify(holder)}); ` +
      'delete the document: the next delivery takes the lock afresh',
  );
}
