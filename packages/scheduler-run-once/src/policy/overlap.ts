/** Is another run of this job still running? The per-job overlap lock (docs/how-it-works.md). */
import type { GuardedWrite, RunDocuments } from '../core/run-documents.ts';
import { scopeId } from '../core/run-key.ts';
import {
  claimDecision,
  isLeaseLive,
  judgedAt,
  type StoredRecord,
  type UnreadableRecord,
} from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { type RunHistory, slotRunId } from './run-history.ts';
import type { RunPlan, ScheduledRun } from './run-plan.ts';
import { previousSlot } from './schedule.ts';

/** The lock document's field naming its holder's run id. */
const HOLDER = 'holder_run_id';

/**
 * Firestore operations (each at most `FIRESTORE_TIMEOUT_SECONDS`) within which a holder named by a
 * lock without its record may still claim: the lock write, the claim, one retry.
 */
export const CLAIM_WINDOW_OPERATIONS = 3;

/** Rounds of decision → guarded claim before a contended lock is answered as held. */
export const MAX_OVERLAP_ROUNDS = 4;

/**
 * What the overlap check needs: the runs, the per-job documents (the lock), the lease in ms, and
 * `claimWindowMs`: how long after a lock's write its holder's claim may still come, ms (an older
 * revision writes its lock, then claims, each one Firestore operation: a few
 * `FIRESTORE_TIMEOUT_SECONDS`).
 */
export interface OverlapStores {
  readonly history: Pick<RunHistory, 'getMany' | 'recordSkipped'>;
  readonly jobDocuments: RunDocuments;
  readonly leaseMs: number;
  readonly claimWindowMs: number;
  /**
   * Whether this instance holds run `runId` now (its work still running here): such a holder is
   * live whatever its record's lease says, since its lease may have lapsed while extensions failed.
   */
  readonly heldHere?: (runId: string) => boolean;
}

/**
 * Whether run `runId` of `job` (`run`: its slot and scope) may take the lock: `run` with the lock
 * write (`guard`, for the claim's batch); `held` by a live previous slot's run, a live holder or one
 * with no record yet whose lock is younger than the claim window (nor than a lease); or
 * `unreadable`: the holder's record, or the lock itself (a holder id this version never writes).
 * @throws {LedgerUnavailableError} if Firestore fails.
 */
export async function checkOverlap(
  stores: OverlapStores,
  job: DeclaredJob,
  runId: string,
  run: Pick<ScheduledRun, 'scheduledAt' | 'scope'>,
): Promise<Extract<OverlapDecision, { action: 'run' | 'unreadable' }> | Held> {
  const { history, jobDocuments } = stores;
  const lockId = lockIdOf(job, run);
  const previous = previousSlot(job, run.scheduledAt);
  const previousRunId =
    previous === undefined ? undefined : slotRunId(job.id, previous, run.scope);
  const lock = await jobDocuments.readData(lockId);
  const named = holderOf(lock.data);
  if (typeof named === 'object') {
    return { action: 'unreadable', by: lockId, record: named, lock: true };
  }
  const holder = named === runId ? undefined : named; // its own lock: this run took it before
  const ids = [...new Set([holder, previousRunId])].filter(
    (id) => id !== undefined,
  );
  const { records, readTime } =
    ids.length === 0
      ? { records: new Map(), readTime: lock.readTime }
      : await history.getMany(ids);
  const previousRecord =
    previousRunId === undefined ? undefined : records.get(previousRunId);
  const heldHere = (id: string) => stores.heldHere?.(id) === true;
  const previousLive =
    (previousRecord !== undefined && isLeaseLive(previousRecord, readTime)) ||
    (previousRunId !== undefined && heldHere(previousRunId));
  if (previousRunId !== undefined && previousLive) {
    return { action: 'held', by: previousRunId };
  }
  if (holder !== undefined) {
    const stored = records.get(holder);
    const held = holderHolds(stores, holder, stored, readTime, lock);
    if (held !== undefined) {
      return held;
    }
  }
  return { action: 'run', guard: lockGuard(stores, job, runId, lockId, lock) };
}

/** The id of the overlap lock of `job` in `run`'s scope. */
function lockIdOf(job: DeclaredJob, run: Pick<ScheduledRun, 'scope'>): string {
  const keyScope = scopeId(run.scope);
  return keyScope === ''
    ? `${job.id}~overlap`
    : `${job.id}~overlap~${keyScope}`;
}

/**
 * Whether the lock's `holder` (its record `stored`, read at `readTime`) holds it: `held` if live or
 * its claim may still come, `unreadable` for its record, `undefined` if the lock is free.
 */
function holderHolds(
  stores: OverlapStores,
  holder: string,
  stored: StoredRecord | undefined,
  readTime: Date,
  lock: LockRead,
): Held | Extract<OverlapDecision, { action: 'unreadable' }> | undefined {
  const heldHere = (id: string) => stores.heldHere?.(id) === true;
  const record = stored === undefined ? undefined : judgedAt(stored, readTime);
  if (record?.status === 'unreadable') {
    return { action: 'unreadable', by: holder, record };
  }
  const holderLive =
    (record !== undefined && isLeaseLive(record, readTime)) || heldHere(holder);
  const lockedAt = lock.updateTime?.toMillis() ?? 0; // a lock naming a holder exists: it has one
  // No record: an older revision's claim still to come after its lock, or a record deleted (a
  // repair, the TTL) that holds nothing; past the claim window it is free, never a silent skip.
  const claimWindowMs = Math.min(stores.claimWindowMs, stores.leaseMs);
  const holderComing =
    record === undefined && lock.readTime.getTime() < lockedAt + claimWindowMs;
  if (holderLive || holderComing) {
    return { action: 'held', by: holder };
  }
  return undefined;
}

/** The lock write naming run `runId` its holder, fenced on the lock as read: the claim's guard. */
function lockGuard(
  stores: OverlapStores,
  job: DeclaredJob,
  runId: string,
  lockId: string,
  lock: LockRead,
): GuardedWrite {
  const { jobDocuments } = stores;
  const data = {
    [HOLDER]: runId,
    job_name: job.id,
    expire_at: jobDocuments.expireAt(),
  };
  const token = lock.updateTime;
  return {
    documents: jobDocuments,
    id: lockId,
    what: 'overlap lock',
    data,
    token,
  };
}

/** The overlap lock as read. */
type LockRead = Awaited<ReturnType<RunDocuments['readData']>>;

/** The run id a lock names, `undefined` when there is no lock, or what is wrong with its field. */
function holderOf(
  data: Record<string, unknown> | undefined,
): string | UnreadableRecord | undefined {
  if (data === undefined) {
    return undefined;
  }
  const holder = data[HOLDER];
  if (typeof holder === 'string' && /^[0-9a-f]{64}$/.test(holder)) {
    return holder;
  }
  const shown = JSON.stringify(holder) ?? 'missing';
  return {
    status: 'unreadable',
    field: HOLDER,
    problem: `is ${shown}, not a run id`,
  };
}

/**
 * What the overlap policy decides for one run: `run` (with the lock write `guard`, none for
 * `allow`); `wait`, nothing written (`has_record`: under `skip`, an unfinished record a claim
 * would run beside the holder); `skipped`, recorded; `unreadable`: the holder's record or the lock.
 */
export type OverlapDecision =
  | { readonly action: 'run'; readonly guard?: GuardedWrite }
  | {
      readonly action: 'wait';
      readonly by: string;
      readonly why: 'policy' | 'by_hand' | 'backfill' | 'has_record';
    }
  | { readonly action: 'skipped'; readonly by: string }
  | {
      readonly action: 'unreadable';
      readonly by: string;
      readonly record: UnreadableRecord;
      /** The lock document `by` is what cannot be read, not a holder's record. */
      readonly lock?: true;
    };

type Held = { readonly action: 'held'; readonly by: string };

/**
 * Whether `job`'s planned run may claim now: reads the lock unless `allow`; under `skip` writes
 * the `skipped` record of a run the holder blocks. Throws `LedgerUnavailableError`.
 */
export async function decideOverlap(
  stores: OverlapStores,
  job: DeclaredJob,
  run: Pick<ScheduledRun, 'scheduledAt' | 'scope' | 'backfill'>,
  plan: RunPlan,
): Promise<OverlapDecision> {
  if (plan.overlap === 'allow') {
    return { action: 'run' };
  }
  const checked = await checkOverlap(stores, job, plan.runId, run);
  if (checked.action !== 'held') {
    return checked;
  }
  const { by } = checked;
  if (plan.kind === 'manual' || plan.kind === 'rerun') {
    return { action: 'wait', by, why: 'by_hand' };
  }
  if (run.backfill === true) {
    return { action: 'wait', by, why: 'backfill' };
  }
  if (plan.overlap === 'wait') {
    return { action: 'wait', by, why: 'policy' };
  }
  const recorded = await stores.history.recordSkipped(
    plan.runId,
    plan.details,
    by,
  );
  if (recorded === 'recorded') {
    return { action: 'skipped', by };
  }
  // A finished or reported record: the claim finds it and answers a duplicate (a reported run
  // waits for nothing; only a backfill reopens it, and a backfill waited above).
  const { records, readTime } = await stores.history.getMany([plan.runId]);
  const finished =
    claimDecision(records.get(plan.runId), readTime).decision === 'completed';
  return finished
    ? { action: 'run' }
    : { action: 'wait', by, why: 'has_record' };
}
