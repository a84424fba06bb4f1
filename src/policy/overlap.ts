/**
 * The overlap policy's question, is another run of this job still running?, answered by a per-job
 * lock document, never by which slots have records (docs/how-it-works.md, "Overlap"). The lock
 * (`overlapLockId`) names its holder's run and is held while the holder's *run record* holds a
 * live lease, judged on Firestore's clock; every lock write is committed in one atomic batch with
 * the run's claim, fenced on the lock's update time as read (`GuardedWrite` of the core):
 *
 *   (absent) ──claim A + create(holder = A)──► held by A ──A's record completed, failed, lapsed──► free
 *                                                   │                                              │
 *                                                   │ B reads it: A's lease live → B waits / skips │
 *                                                   │                                              ▼
 *                                                   └──────── claim B + update(holder = B), fenced on its read
 *
 * Named conditions, checked in order (`checkOverlap`): the lock absent or naming this very run
 * (`ownLock`): free; the holder's record unreadable (`holderUnreadable`); its lease live
 * (`holderLive`); no record yet but the lock written less than a lease ago (`holderComing`: an
 * older revision locks before it claims): held; otherwise free. The previous slot's record is read
 * in the same batch, so a run of a revision that takes no lock still blocks (a rolling deploy).
 */

import type { DocumentData } from '@google-cloud/firestore';
import { LedgerUnavailableError } from '../core/errors.ts';
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import { isCompleted, isLeaseLive, judgedAt, type UnreadableRecord } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, slotRunId } from './run-history.ts';
import type { RunPlan, ScheduledRun } from './run-plan.ts';
import { previousSlot } from './schedule.ts';

/** The lock document's id: `{jobId}~overlap`, with `~{scopeId}` appended in a key scope. */
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

/** Rounds of decision → guarded claim before a contended lock is answered as held. */
export const MAX_OVERLAP_ROUNDS = 4;

/** What the overlap check needs. */
export interface OverlapStores {
  /** The runs: the holder's record and the previous slot's in one batched read; `skipped` records. */
  readonly history: Pick<RunHistory, 'getMany' | 'recordSkipped'>;
  /** The per-job documents, where the lock lives (on the runs' Firestore client: one batch). */
  readonly jobDocuments: RunDocuments;
  /** How long a lock whose holder has no record yet counts as held, ms: the lease length. */
  readonly leaseMs: number;
}

/**
 * What the overlap check found: `free` (claim with `guard`, the lock write fenced on the read,
 * which lands only with the claim), `held` by run `by`, or `unreadable` (neither run nor skip).
 */
export type OverlapCheck =
  | { readonly state: 'free'; readonly guard: GuardedWrite }
  | { readonly state: 'held'; readonly by: string }
  | { readonly state: 'unreadable'; readonly by: string; readonly record: UnreadableRecord };

/**
 * Judges whether run `runId` of `job` (slot `slot`, key scope `scope`) may take the job's overlap
 * lock. Writes nothing: the lock write goes into the claim (`free.guard`).
 *
 * @throws {LedgerUnavailableError} if Firestore fails, or the lock is one this version never writes.
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
  const others = [holder, previousRunId].flatMap((id) =>
    id === undefined || id === runId ? [] : [id],
  );
  const ids = [...new Set(others)];
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
    token: lock.updateTime,
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

/**
 * What the overlap policy decides for one run: `run` (with the lock write `guard`, none for
 * `allow`); `wait`, nothing written (409), `why` in docs/how-it-works.md, "Overlap" (`has_record`:
 * under `skip`, an unfinished record a claim would take over and run beside the holder);
 * `skipped`, recorded (200); `unreadable`: the holder's record, neither run nor skip (500).
 */
export type OverlapDecision =
  | { readonly action: 'run'; readonly guard?: GuardedWrite }
  | {
      readonly action: 'wait';
      readonly by: string;
      readonly why: 'policy' | 'by_hand' | 'backfill' | 'has_record';
    }
  | { readonly action: 'skipped'; readonly by: string }
  | { readonly action: 'unreadable'; readonly by: string; readonly record: UnreadableRecord };

/**
 * Decides whether the planned run `plan` of `job` may claim now, by its policy: reads the lock
 * unless `allow`; under `skip` writes the `skipped` record of a run the holder blocks.
 *
 * @throws {LedgerUnavailableError} if the lock, the reads or the `skipped` record fail.
 */
export async function decideOverlap(
  stores: OverlapStores,
  job: DeclaredJob,
  run: Pick<ScheduledRun, 'scheduleTime' | 'scope' | 'backfill'>,
  plan: RunPlan,
): Promise<OverlapDecision> {
  if (plan.overlap === 'allow') return { action: 'run' };
  const slot = new Date(run.scheduleTime);
  const checked = await checkOverlap(stores, job, plan.runId, slot, run.scope);
  if (checked.state !== 'held') {
    return checked.state === 'free'
      ? { action: 'run', guard: checked.guard }
      : { action: 'unreadable', by: checked.by, record: checked.record };
  }
  const { by } = checked;
  const byHand = plan.kind === 'manual' || plan.kind === 'rerun';
  if (byHand) return { action: 'wait', by, why: 'by_hand' };
  if (run.backfill === true) return { action: 'wait', by, why: 'backfill' };
  if (plan.overlap === 'wait') return { action: 'wait', by, why: 'policy' };
  const recorded = await stores.history.recordSkipped(plan.runId, plan.details, by);
  if (recorded === 'recorded') return { action: 'skipped', by };
  // A finished record answers as a duplicate: the claim finds it and writes nothing.
  const record = (await stores.history.getMany([plan.runId])).records.get(plan.runId);
  const finished = record !== undefined && record.status !== 'unreadable' && isCompleted(record);
  return finished ? { action: 'run' } : { action: 'wait', by, why: 'has_record' };
}
