/**
 * The overlap policy's question: is another run of this job still running? Answered by a per-job
 * lock document, never by which slots have records, so `wait` and `skip` hold across gaps (a slot
 * that waited, one Scheduler delayed, one missed). Only jobs with `wait` or `skip` pay for it.
 *
 * The lock is the document `{jobId}~overlap` in the per-job collection (`job-state.ts`): it names
 * the run holding it (`holder_run_id`), and carries `expire_at` for the TTL. Its liveness is the
 * holder's *run record* lease, judged on Firestore's clock (the read's time), so the lease
 * heartbeat that keeps the run alive keeps the lock too, with no second write per beat.
 *
 * Timeline of one job's lock (every write fenced like the run record's: `create()` if absent, else
 * `update()` on the update time just read):
 *
 *   (absent) ──create(holder = A)──► held by A ──A's record completed, failed, lapsed──► free
 *                                         │                                              │
 *                                         │ B reads it: A's lease live → B waits / skips │
 *                                         │                                              ▼
 *                                         └───────────────────── B: update(holder = B), fenced on its read
 *
 * Named conditions, checked in order at a slot's delivery (`ownLock`, `holderLive`, `holderComing`):
 * - the lock is absent, or names this very run (a retry of the holder): take it, run.
 * - the holder's record is `in_progress` with a live lease: held, the slot waits or is skipped.
 * - the holder's record is absent and the lock was taken less than a lease ago: held (the holder
 *   takes the lock *before* it claims its run, so for that moment its record does not exist yet).
 * - otherwise (completed, failed, skipped, lapsed, or never claimed within a lease): free; take it
 *   with a fenced write. Of two slots taking it at once, one write lands; the other re-reads and
 *   finds it held.
 *
 * During a rolling deploy an older revision, which judges overlap by the previous slot's record,
 * serves beside this one and takes no lock: so this check also reads the previous slot's record in
 * the same batched read, and a live lease there blocks as before.
 */

import type { Timestamp } from '@google-cloud/firestore';
import { LedgerUnavailableError } from '../core/errors.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import type { Scope } from '../core/run-key.ts';
import { isLeaseLive } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, slotRunId } from './run-history.ts';
import { previousSlot } from './schedule.ts';

/** The lock document's id for `jobId` in the per-job collection. */
export function overlapLockId(jobId: string): string {
  return `${jobId}~overlap`;
}

/** Field names of a lock document. */
export const LockField = {
  holder: 'holder_run_id',
  jobName: 'job_name',
  expireAt: 'expire_at',
} as const;

/** Rounds of read → fenced write before a contended lock is reported as held. */
const MAX_ROUNDS = 4;

/** What the overlap check needs. */
export interface OverlapStores {
  /** The runs: the holder's record (and the previous slot's) in one batched read. */
  readonly history: Pick<RunHistory, 'getMany'>;
  /** The per-job documents, where the lock lives. */
  readonly jobDocuments: Pick<RunDocuments, 'readData' | 'create' | 'update' | 'expireAt'>;
  /**
   * How long a lock whose holder has no record yet counts as held, ms: the lease length, so a
   * holder that crashed between taking the lock and claiming its run frees it after one lease.
   */
  readonly leaseMs: number;
}

/**
 * Takes the job's overlap lock for run `runId` (the slot `slot` of `job`), unless another run of
 * the job holds it.
 *
 * @returns `undefined` when the lock is now this run's (it runs), or the run id of the run that
 *   holds it (the slot waits or is skipped).
 * @throws {LedgerUnavailableError} if Firestore fails, or the lock document is one this version
 *   would never write (delete it to repair).
 * @example const heldBy = await takeOverlapLock(stores, job, runId, slot, scope);
 */
export async function takeOverlapLock(
  stores: OverlapStores,
  job: DeclaredJob,
  runId: string,
  slot: Date,
  scope: Scope,
): Promise<string | undefined> {
  const { history, jobDocuments, leaseMs } = stores;
  const lockId = overlapLockId(job.id);
  const previous = previousSlot(job, slot);
  const previousRunId = previous === undefined ? undefined : slotRunId(job.id, previous, scope);
  let heldBy: string | undefined;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const lock = await jobDocuments.readData(lockId);
    const holder = holderOf(lock.data, lockId);
    const ownLock = holder === undefined || holder === runId;
    const ids = [
      ...new Set([holder, previousRunId].filter((id) => id !== undefined && id !== runId)),
    ] as string[];
    const { records, readTime } =
      ids.length === 0
        ? { records: new Map(), readTime: lock.readTime }
        : await history.getMany(ids);
    // An older revision's run of the previous slot holds no lock: its lease still blocks.
    const previousRecord = previousRunId === undefined ? undefined : records.get(previousRunId);
    if (previousRunId !== undefined && previousRunId !== runId && previousRecord !== undefined) {
      if (isLeaseLive(previousRecord, readTime)) return previousRunId;
    }
    if (!ownLock) {
      const record = records.get(holder);
      const holderLive = record !== undefined && isLeaseLive(record, readTime);
      const holderComing =
        record === undefined &&
        lock.updateTime !== undefined &&
        lock.readTime.getTime() < lock.updateTime.toMillis() + leaseMs;
      if (holderLive || holderComing) return holder;
    }
    if (holder === runId) return undefined; // already ours: a retry of the holder
    heldBy = holder;
    const data = {
      [LockField.holder]: runId,
      [LockField.jobName]: job.id,
      [LockField.expireAt]: jobDocuments.expireAt(),
    };
    const written =
      lock.updateTime === undefined
        ? await jobDocuments.create(lockId, 'overlap lock', data)
        : await jobDocuments.update(lockId, 'overlap lock', data, lock.updateTime as Timestamp);
    if (written !== 'exists' && written !== 'changed') return undefined;
    // Another slot wrote first: read again and judge its holder.
  }
  return heldBy ?? lockId;
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
