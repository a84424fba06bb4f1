/**
 * Run history: which runs *should* exist (a job's slots, from its declared schedule), and what
 * happened to each (its record, read by run id in batches). Shared by `npm run runs` and by the
 * missed-run detection of each processed delivery. No query and no index: every slot's run id is
 * computed, exactly as the handler computes it for a delivery of that slot.
 */

import type { BatchRead, RunLedger } from '../core/ledger.ts';
import { computeRunId } from '../core/run-key.ts';
import { type RunRecord, RunStatus, type StoredRecord } from '../core/run-record.ts';
import { normaliseScheduleTime } from '../function/scheduler-request.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { retryWindowMs } from './retry-policy.ts';

/**
 * What became of one slot:
 * - `completed`: a run completed.
 * - `failed`: its last attempt failed; final once past the job's retry window.
 * - `in_progress`: an attempt holds it now.
 * - `missed`: no attempt came, and its retry window has passed (or detection reported it).
 * - `pending`: no attempt yet, still inside its retry window.
 * - `skipped`: not run, because an earlier slot of the job still ran (overlap policy `skip`).
 * - `unreadable`: its record cannot be read by this version (see the README).
 */
export type SlotState =
  | 'completed'
  | 'failed'
  | 'in_progress'
  | 'missed'
  | 'pending'
  | 'skipped'
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
  /** How many times it was re-run on purpose (`npm run trigger -- JOB --rerun --slot T`). */
  readonly reruns: number;
  /** What the job noted about the run (`ctx.note`), e.g. the execution a proxy launched. */
  readonly notes: Readonly<Record<string, unknown>>;
  /** `slot`, or `manual` / `forced` for a run that is not a slot's (`slot` is then its schedule time). */
  readonly kind: 'slot' | 'manual' | 'forced';
}

type Scope = readonly (readonly [string, string])[];

/**
 * The run id of `job`'s slot at `slot`: the id a delivery of that slot gets (short job id,
 * canonical schedule time, the same scope).
 *
 * @example slotRunId('nightly-report', new Date('2026-10-16T02:00:00Z'), [])
 */
export function slotRunId(jobId: string, slot: Date, scope: Scope): string {
  const scheduleTime = normaliseScheduleTime(slot.toISOString());
  return computeRunId({ jobName: jobId, scheduleTime, scope });
}

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
  record: StoredRecord | undefined,
  now: Date,
): SlotRow {
  const pastWindow = now.getTime() >= slot.getTime() + retryWindowMs(job);
  const base = {
    job: job.id,
    slot,
    runId,
    kind: record?.status === 'unreadable' ? 'slot' : (record?.kind ?? 'slot'),
  } as const;
  if (record === undefined) {
    return {
      ...base,
      state: pastWindow ? 'missed' : 'pending',
      final: pastWindow,
      attempts: 0,
      startedLateMs: undefined,
      durationMs: undefined,
      attemptId: undefined,
      lastError: undefined,
      reported: false,
      reruns: 0,
      notes: {},
    };
  }
  if (record.status === 'unreadable') {
    return {
      ...base,
      state: 'unreadable',
      final: false,
      attempts: 0,
      startedLateMs: undefined,
      durationMs: undefined,
      attemptId: undefined,
      lastError: `${record.field} ${record.problem}`,
      reported: false,
      reruns: 0,
      notes: {},
    };
  }
  const run: RunRecord = record;
  const state: SlotState = run.status;
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
    reruns: run.reruns,
    notes: run.notes,
  };
}

/** Whether the slot has a record at all (a run, a report, a skip), not just an absence. */
export function hasRecord(row: SlotRow): boolean {
  return !(
    row.attempts === 0 &&
    !row.reported &&
    (row.state === 'missed' || row.state === 'pending')
  );
}

/**
 * The slots that may count as missed: those after the oldest slot of the same job that has a
 * record. Before it, the job may not have existed yet (a new job, a fresh emulator).
 */
export function sinceFirstRecord(rows: readonly SlotRow[]): SlotRow[] {
  const first = rows.findIndex(hasRecord);
  return first === -1 ? [] : rows.slice(first + 1);
}

/** A batched history read: the rows, and what a fenced report after the read needs. */
export interface History {
  readonly rows: readonly SlotRow[];
  /** Update times of the records read, by run id: fencing tokens for a report. */
  readonly updateTimes: BatchRead['updateTimes'];
  /** Firestore's time of the read: what the rows were judged at. */
  readonly readTime: Date;
}

/**
 * Reads the history of `job` at `slots`: one batched read of their run ids.
 *
 * @param now - judge windows at this time instead of the read's (for "as of" views and tests).
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const { rows } = await readHistory(ledger, job, slotsBetween(job, from, to).slots, scope);
 */
export async function readHistory(
  ledger: Pick<RunLedger, 'getMany'>,
  job: DeclaredJob,
  slots: readonly Date[],
  scope: Scope,
  now?: Date,
): Promise<History> {
  const runIds = slots.map((slot) => slotRunId(job.id, slot, scope));
  const { records, updateTimes, readTime } = await ledger.getMany(runIds);
  const at = now ?? readTime;
  const rows = slots.map((slot, i) => {
    const runId = runIds[i] as string;
    return slotRow(job, slot, runId, records.get(runId), at);
  });
  return { rows, updateTimes, readTime };
}
