/**
 * Run history: which runs *should* exist (a job's slots, from its declared schedule), and what
 * happened to each (its record, read by run id in batches). Shared by `npm run runs` and by the
 * missed-run detection of each processed delivery. No query and no index: every slot's run id is
 * computed, exactly as the handler computes it for a delivery of that slot.
 */

import type { Timestamp } from '@google-cloud/firestore';
import type { BatchRead, RunDocuments } from '../core/run-documents.ts';
import { computeRunId, type Scope } from '../core/run-key.ts';
import {
  failureUpdate,
  judgedAt,
  missedDocument,
  type RunDetails,
  RunKind,
  type RunRecord,
  RunStatus,
  reportedUpdate,
  type StoredRecord,
  skippedDocument,
} from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { retryWindowMs } from './retry-policy.ts';
import { toCanonicalRfc3339 } from './rfc3339.ts';

/** The `last_error` of an attempt ended by a failed-run report: its lease lapsed unanswered. */
const LAPSED_ERROR =
  'its lease lapsed past the retry window without an answer (the instance crashed or stalled): reported failed after retries';
/**
 * What became of one slot:
 * - `completed`: a run completed.
 * - `failed`: its last attempt failed; final once past the job's retry window. An attempt whose
 *   lease lapsed past the window (it crashed, no retry can come) is `failed` too.
 * - `in_progress`: an attempt holds it now.
 * - `missed`: no attempt came, and its retry window has passed (or detection reported it).
 * - `pending`: no attempt yet, still inside its retry window.
 * - `skipped`: not run, because an earlier slot of the job still ran (overlap policy `skip`).
 * - `paused`: no record, and the slot fell inside a pause of the job (`pauses.ts`): not missed.
 * - `unreadable`: its record cannot be read by this version (see the README).
 */
export type SlotState =
  | 'completed'
  | 'failed'
  | 'in_progress'
  | 'missed'
  | 'pending'
  | 'skipped'
  | 'paused'
  | 'unreadable';

/** One slot of one job, and what became of it. Durations in ms. */
export interface SlotRow {
  /** The job id. */
  readonly job: string;
  /** The schedule time. */
  readonly slot: Date;
  readonly runId: string;
  readonly state: SlotState;
  /** True once the state cannot change by itself: completed, or past the retry window. */
  readonly final: boolean;
  /** How many attempts claimed it. */
  readonly attempts: number;
  /** First claim − schedule time, ms. */
  readonly startedLateMs: number | undefined;
  /** Completion − the completing attempt's claim, ms. */
  readonly durationMs: number | undefined;
  /** The attempt that holds, completed or last failed it. */
  readonly attemptId: string | undefined;
  /** The last failure's message. */
  readonly lastError: string | undefined;
  /** Whether missed-run detection already reported it (missed, or failed after retries). */
  readonly reported: boolean;
  /** For a re-run (`npm run trigger -- JOB --rerun --slot T`): the run id of the slot it re-ran. */
  readonly rerunOf: string | undefined;
  /** What the job noted about the run (`ctx.note`), e.g. the execution a proxy launched. */
  readonly notes: Readonly<Record<string, unknown>>;
  /**
   * `slot`, or `manual` / `forced` / `rerun` for a run that is not a slot's (`slot` is then its
   * schedule time: for a re-run, the slot it re-ran).
   */
  readonly kind: 'slot' | 'manual' | 'forced' | 'rerun';
  /** For a `paused` slot: the pause's note (`''` if none). */
  readonly pauseNote?: string | undefined;
}

/**
 * The run id of `job`'s slot at `slot`: the id a delivery of that slot gets (short job id,
 * canonical schedule time, the same scope).
 *
 * @example slotRunId('nightly-report', new Date('2026-10-16T02:00:00Z'), [])
 */
export function slotRunId(jobId: string, slot: Date, scope: Scope): string {
  return computeRunId({ jobName: jobId, scheduleTime: toCanonicalRfc3339(slot), scope });
}

/**
 * The run id of the forced run a delivery of `job`'s slot at `slot` is taken for when it arrives
 * early (`run-plan.ts`): the slot's with the variant `forced`.
 *
 * @example forcedRunId('nightly-report', new Date('2026-10-16T02:00:00Z'), [])
 */
export function forcedRunId(jobId: string, slot: Date, scope: Scope): string {
  return computeRunId({ jobName: jobId, scheduleTime: toCanonicalRfc3339(slot), scope }, [
    'forced',
  ]);
}

/**
 * Whether a forced run's record of slot `slot` was in fact the slot's own delivery: its first claim
 * (Firestore's `first_claimed_at`) came at most `toleranceMs` before the slot, or later. A delivery
 * that early is its slot's by the rule of `run-plan.ts`, so only a misjudged clock (an instance's
 * estimate of Firestore's time off by more than the tolerance) recorded it as forced; the slot's
 * run then exists under this id, and the slot must be neither reported missed nor delivered again.
 */
export function isSlotsOwnDelivery(
  record: StoredRecord | undefined,
  slot: Date,
  toleranceMs: number,
): boolean {
  if (record === undefined || record.status === 'unreadable') return false;
  // A forced run sent without a schedule time never was its slot's delivery, however near.
  if (record.kind !== 'forced' || record.untimed || record.firstClaimedAt === undefined) {
    return false;
  }
  return record.firstClaimedAt.getTime() >= slot.getTime() - toleranceMs;
}

/**
 * Which record stands for each slot's run, read in batches. A forced run's record that was the
 * slot's own delivery is given as the slot's run, with `kind: slot`.
 */
export interface SlotRecords extends BatchRead {
  /** Each slot's run id, by index: the slot's own, or the forced run's that was its delivery. */
  readonly runIds: readonly string[];
}

/**
 * Reads the records of `job`'s `slots`: each slot's own (one batched read), and for a slot without
 * one, its forced run's record if that was the slot's own delivery ({@link isSlotsOwnDelivery};
 * a second batched read, only of the slots without a record).
 *
 * @param toleranceMs - the job's forced-run tolerance, ms (`forcedRunToleranceMs`), or a function
 *   giving it, called only when a forced run's record is found (it costs slot arithmetic).
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const { runIds, records } = await readSlotRecords(history, job, slots, [], 60_000);
 */
export async function readSlotRecords(
  store: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slots: readonly Date[],
  scope: Scope,
  toleranceMs: number | (() => number),
): Promise<SlotRecords> {
  const tolerance = typeof toleranceMs === 'number' ? () => toleranceMs : toleranceMs;
  const runIds = slots.map((slot) => slotRunId(job.id, slot, scope));
  const own = await store.getMany(runIds);
  const absent = runIds.flatMap((id, i) => (own.records.get(id) === undefined ? [i] : []));
  if (absent.length === 0) return { ...own, runIds };
  const forcedIds = absent.map((i) => forcedRunId(job.id, slots[i] as Date, scope));
  const forced = await store.getMany(forcedIds);
  const records = new Map(own.records);
  const updateTimes = new Map(own.updateTimes);
  const chosen = [...runIds];
  for (const [k, i] of absent.entries()) {
    const id = forcedIds[k] as string;
    const record = forced.records.get(id);
    if (record === undefined || !isSlotsOwnDelivery(record, slots[i] as Date, tolerance()))
      continue;
    chosen[i] = id;
    // It is the slot's run: judged as one (its retry window, its overlap), whatever it was taken for.
    records.set(id, { ...(record as RunRecord), kind: RunKind.Slot });
    const updateTime = forced.updateTimes.get(id);
    if (updateTime !== undefined) updateTimes.set(id, updateTime);
  }
  return { records, updateTimes, readTime: forced.readTime, runIds: chosen };
}

/**
 * The forced run that stands for slot `slot` of `job` (its delivery, misjudged a forced run:
 * {@link isSlotsOwnDelivery}) when the slot has no record of its own: one batched read of both ids.
 *
 * @param toleranceMs - the job's forced-run tolerance, ms.
 * @returns that run's id and record, or `undefined` (the slot has its own record, or no forced run
 *   was its delivery).
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const standIn = await slotsForcedRun(history, job, slot, scope, 60_000);
 */
export async function slotsForcedRun(
  store: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slot: Date,
  scope: Scope,
  toleranceMs: number,
): Promise<{ runId: string; record: RunRecord } | undefined> {
  const own = slotRunId(job.id, slot, scope);
  const forced = forcedRunId(job.id, slot, scope);
  const { records } = await store.getMany([own, forced]);
  const record = records.get(forced);
  if (records.get(own) !== undefined || record === undefined || record.status === 'unreadable') {
    return undefined;
  }
  return isSlotsOwnDelivery(record, slot, toleranceMs) ? { runId: forced, record } : undefined;
}

/** The fields of a row without a readable run. */
const NO_RUN = {
  attempts: 0,
  startedLateMs: undefined,
  durationMs: undefined,
  attemptId: undefined,
  lastError: undefined,
  reported: false,
  rerunOf: undefined,
  notes: Object.freeze({}),
} as const;

function msBetween(from: Date | undefined, to: Date | undefined): number | undefined {
  return from === undefined || to === undefined ? undefined : to.getTime() - from.getTime();
}

/**
 * The row of one slot from its record (or its absence), judged at `now` (Firestore's time of the
 * read, for one clock).
 */
export function slotRow(
  job: DeclaredJob,
  slot: Date,
  runId: string,
  stored: StoredRecord | undefined,
  now: Date,
): SlotRow {
  // A lease from the future is unreadable here too (`judgedAt`): one rule everywhere.
  const record = stored === undefined ? undefined : judgedAt(stored, now);
  const pastWindow = now.getTime() >= slot.getTime() + retryWindowMs(job);
  const kind = record?.status === 'unreadable' ? 'slot' : (record?.kind ?? 'slot');
  const base = { job: job.id, slot, runId, kind, ...NO_RUN } as const;
  if (record === undefined) {
    return { ...base, state: pastWindow ? 'missed' : 'pending', final: pastWindow };
  }
  if (record.status === 'unreadable') {
    const lastError = `${record.field} ${record.problem}`;
    return { ...base, state: 'unreadable', final: false, lastError };
  }
  const run: RunRecord = record;
  const state: SlotState = lapsedPastWindow(job, slot, run, now) ? RunStatus.Failed : run.status;
  return {
    ...base,
    state,
    // A manual or forced run has no retries to wait for: its failure is final at once.
    final:
      state === RunStatus.Completed ||
      state === RunStatus.Skipped ||
      (state !== RunStatus.InProgress && (pastWindow || run.kind !== 'slot')),
    attempts: run.attempts,
    startedLateMs: msBetween(slot, run.firstClaimedAt),
    durationMs:
      state === RunStatus.Completed ? msBetween(run.claimedAt, run.completedAt) : undefined,
    attemptId: run.attemptId === '' ? undefined : run.attemptId,
    lastError: run.lastError,
    reported: run.reportedAt !== undefined,
    rerunOf: run.rerunOf,
    notes: run.notes,
  };
}

/**
 * Whether an attempt's lease lapsed and no retry can come any more (past the retry window from the
 * run's first claim, which is at or after Scheduler's first attempt): the attempt crashed or was
 * killed, and the run ended without completing: a final failure, not `in_progress`.
 */
function lapsedPastWindow(job: DeclaredJob, slot: Date, run: RunRecord, now: Date): boolean {
  if (run.status !== RunStatus.InProgress || run.leaseExpires === undefined) return false;
  const started = Math.max(slot.getTime(), run.firstClaimedAt?.getTime() ?? slot.getTime());
  return (
    run.leaseExpires.getTime() <= now.getTime() && now.getTime() >= started + retryWindowMs(job)
  );
}

/** Whether the slot has a record at all (a run, a report, a skip), not just an absence. */
export function hasRecord(row: SlotRow): boolean {
  return !(
    row.attempts === 0 &&
    !row.reported &&
    (row.state === 'missed' || row.state === 'pending' || row.state === 'paused')
  );
}

/**
 * The run records as history: batched reads of slots by run id, and the reports written beside
 * the lease protocol (a missed slot, a finally failed run, a slot skipped by the overlap policy),
 * each once across instances by a conditional write.
 *
 * @example
 * const history = new RunHistory(documents);
 * const { records } = await history.getMany([slotRunId(job.id, slot, [])]);
 */
export class RunHistory {
  readonly #documents: RunDocuments;

  constructor(documents: RunDocuments) {
    this.#documents = documents;
  }

  /**
   * Reads many run records by id (batched, no query, no index).
   *
   * @throws {LedgerUnavailableError} if Firestore fails.
   */
  getMany(runIds: readonly string[]): Promise<BatchRead> {
    return this.#documents.readMany(runIds);
  }

  /**
   * Reports a slot that no attempt came for, once across instances: creates its record as `missed`.
   *
   * @param reporter - the id of the check reporting it, stored as `reported_by`: after a lost
   *   answer, a read that finds it tells the check the report is its own.
   * @returns `reported` if this call created it, `exists` if a record appeared first (an attempt,
   *   or another instance's report).
   * @throws {LedgerUnavailableError} if Firestore fails.
   */
  async reportMissed(
    runId: string,
    details: RunDetails,
    reporter: string,
  ): Promise<'reported' | 'exists'> {
    const documents = this.#documents;
    const created = await documents.create(
      runId,
      'missed-run report',
      missedDocument(documents.expireAt(), details, reporter),
    );
    return created === 'exists' ? 'exists' : 'reported';
  }

  /**
   * Marks a finally failed run reported, once across instances: fenced on the update time read.
   *
   * @param updateTime - the record's update time from the read that found it unreported.
   * @param reporter - the id of the check reporting it, stored as `reported_by`.
   * @param lapsed - the record is `in_progress` with a lapsed lease: the report marks it `failed`.
   * @returns `reported` if this call marked it, `exists` if the record changed first.
   * @throws {LedgerUnavailableError} if Firestore fails.
   */
  async markReported(
    runId: string,
    updateTime: Timestamp,
    reporter: string,
    lapsed = false,
  ): Promise<'reported' | 'exists'> {
    // A lapsed attempt is ended by the report: its zombie's fenced writes then find the run
    // failed, not in progress, and cannot adopt the report's update time as their own.
    const update = lapsed
      ? failureUpdate(LAPSED_ERROR, this.#documents.expireAt(), reporter)
      : reportedUpdate(reporter);
    const marked = await this.#documents.update(runId, 'failed-run report', update, updateTime);
    return marked === 'changed' ? 'exists' : 'reported';
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
    const documents = this.#documents;
    const created = await documents.create(
      runId,
      'skip',
      skippedDocument(documents.expireAt(), details, blockedBy),
    );
    return created === 'exists' ? 'exists' : 'recorded';
  }
}
