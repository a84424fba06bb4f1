/** Is another run of this job still running? The per-job overlap lock (docs/how-it-works.md). */
import { LedgerUnavailableError } from '../core/errors.ts';
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { scopeId } from '../core/run-key.ts';
import { isCompleted, isLeaseLive, judgedAt, type UnreadableRecord } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, slotRunId } from './run-history.ts';
import type { RunPlan, ScheduledRun } from './run-plan.ts';
import { previousSlot } from './schedule.ts';

/** The lock document's field naming its holder's run id. */
const HOLDER = 'holder_run_id';

/** Rounds of decision → guarded claim before a contended lock is answered as held. */
export const MAX_OVERLAP_ROUNDS = 4;

/** What the overlap check needs: the runs, the per-job documents (the lock), the lease in ms. */
export interface OverlapStores {
  readonly history: Pick<RunHistory, 'getMany' | 'recordSkipped'>;
  readonly jobDocuments: RunDocuments;
  readonly leaseMs: number;
}

/**
 * Whether run `runId` of `job` (`run`: its slot and scope) may take the lock: `run` with the lock
 * write (`guard`, for the claim's batch); `held` by a live previous slot's run, a live holder or one
 * with no record yet whose lock is younger than a lease; or the holder's record `unreadable`.
 * @throws {LedgerUnavailableError} if Firestore fails, or the lock is one this version never writes.
 */
export async function checkOverlap(
  stores: OverlapStores,
  job: DeclaredJob,
  runId: string,
  run: Pick<ScheduledRun, 'scheduleTime' | 'scope'>,
): Promise<Extract<OverlapDecision, { action: 'run' | 'unreadable' }> | Held> {
  const { history, jobDocuments, leaseMs } = stores;
  const keyScope = scopeId(run.scope);
  const lockId = keyScope === '' ? `${job.id}~overlap` : `${job.id}~overlap~${keyScope}`;
  const previous = previousSlot(job, new Date(run.scheduleTime));
  const previousRunId = previous === undefined ? undefined : slotRunId(job.id, previous, run.scope);
  const lock = await jobDocuments.readData(lockId);
  const named = holderOf(lock.data, lockId);
  const holder = named === runId ? undefined : named; // its own lock: this run took it before
  const ids = [...new Set([holder, previousRunId])].filter((id) => id !== undefined);
  const { records, readTime } =
    ids.length === 0 ? { records: new Map(), readTime: lock.readTime } : await history.getMany(ids);
  const previousRecord = previousRunId === undefined ? undefined : records.get(previousRunId);
  const previousLive = previousRecord !== undefined && isLeaseLive(previousRecord, readTime);
  if (previousRunId !== undefined && previousLive) return { action: 'held', by: previousRunId };
  if (holder !== undefined) {
    const stored = records.get(holder);
    const record = stored === undefined ? undefined : judgedAt(stored, readTime);
    if (record?.status === 'unreadable') return { action: 'unreadable', by: holder, record };
    const holderLive = record !== undefined && isLeaseLive(record, readTime);
    const lockedAt = lock.updateTime?.toMillis() ?? 0; // a lock naming a holder exists: it has one
    const holderComing = record === undefined && lock.readTime.getTime() < lockedAt + leaseMs;
    if (holderLive || holderComing) return { action: 'held', by: holder };
  }
  const data = { [HOLDER]: runId, job_name: job.id, expire_at: jobDocuments.expireAt() };
  const token = lock.updateTime;
  const guard = { documents: jobDocuments, id: lockId, what: 'overlap lock', data, token };
  return { action: 'run', guard };
}

/** The run id a lock names, `undefined` when there is no lock. */
function holderOf(data: Record<string, unknown> | undefined, lockId: string): string | undefined {
  if (data === undefined) return undefined;
  const holder = data[HOLDER];
  if (typeof holder === 'string' && /^[0-9a-f]{64}$/.test(holder)) return holder;
  throw new LedgerUnavailableError(
    `the overlap lock ${lockId} is unreadable (field ${HOLDER} is ${JSON.stringify(holder)}); ` +
      'delete the document: the next delivery takes the lock afresh',
  );
}

/**
 * What the overlap policy decides for one run: `run` (with the lock write `guard`, none for
 * `allow`); `wait`, nothing written (`has_record`: under `skip`, an unfinished record a claim
 * would run beside the holder); `skipped`, recorded; `unreadable`: the holder's record.
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

type Held = { readonly action: 'held'; readonly by: string };

/**
 * Whether `job`'s planned run may claim now: reads the lock unless `allow`; under `skip` writes
 * the `skipped` record of a run the holder blocks. Throws `LedgerUnavailableError`.
 */
export async function decideOverlap(
  stores: OverlapStores,
  job: DeclaredJob,
  run: Pick<ScheduledRun, 'scheduleTime' | 'scope' | 'backfill'>,
  plan: RunPlan,
): Promise<OverlapDecision> {
  if (plan.overlap === 'allow') return { action: 'run' };
  const checked = await checkOverlap(stores, job, plan.runId, run);
  if (checked.action !== 'held') return checked;
  const { by } = checked;
  if (plan.kind === 'manual' || plan.kind === 'rerun')
    return { action: 'wait', by, why: 'by_hand' };
  if (run.backfill === true) return { action: 'wait', by, why: 'backfill' };
  if (plan.overlap === 'wait') return { action: 'wait', by, why: 'policy' };
  const recorded = await stores.history.recordSkipped(plan.runId, plan.details, by);
  if (recorded === 'recorded') return { action: 'skipped', by };
  // A finished record: the claim finds it and answers a duplicate.
  const record = (await stores.history.getMany([plan.runId])).records.get(plan.runId);
  const finished = record !== undefined && record.status !== 'unreadable' && isCompleted(record);
  return finished ? { action: 'run' } : { action: 'wait', by, why: 'has_record' };
}
