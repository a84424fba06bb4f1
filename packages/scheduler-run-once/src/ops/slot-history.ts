/**
 * A job's history at given slots, for `npm run runs`, the bench and the tests: each slot's row
 * (what became of it, as the tables show it) from batched reads of its run id
 * (`src/policy/run-history.ts`). The function never loads it: its missed-run check judges the
 * records themselves (`slotVerdict`).
 */
import type { BatchRead } from '../core/run-documents.ts';
import type { Scope } from '../core/run-key.ts';
import {
  type ClaimedRule,
  judgedAt,
  type RunRecord,
  RunStatus,
  type StoredRecord,
} from '../core/run-record.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { type Pause, pauseAt } from '../policy/pauses.ts';
import { type RunHistory, readSlotRecords } from '../policy/run-history.ts';
import { executionClosedMs, executionStartMs } from '../policy/slot-verdict.ts';

/**
 * What became of one slot (docs/operations.md); a lease lapsed past the time the missed-run
 * check takes it as closed: `failed`.
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

/**
 * One slot of one job (`slot`: its schedule time; a re-run's, the slot it re-ran) and what became
 * of it. `final`: the state cannot change by itself; `startedLateMs`: first claim − slot;
 * `durationMs`: completion − the completing claim; `attemptId`: the attempt that holds, completed
 * or last failed it; `reported`: by missed-run detection; `rerunOf`: the run id a re-run re-ran;
 * `notes`: `ctx.note`'s; `pauseNote`: a `paused` slot's pause note (`''` if none).
 */
export interface SlotRow {
  readonly job: string;
  readonly slot: Date;
  readonly runId: string;
  readonly state: SlotState;
  readonly final: boolean;
  readonly attempts: number;
  readonly startedLateMs: number | undefined;
  readonly durationMs: number | undefined;
  readonly attemptId: string | undefined;
  readonly lastError: string | undefined;
  readonly reported: boolean;
  readonly rerunOf: string | undefined;
  readonly notes: Readonly<Record<string, unknown>>;
  readonly kind: 'slot' | 'manual' | 'forced' | 'rerun';
  readonly pauseNote?: string | undefined;
  /** When the run audit last delivered the slot itself, Scheduler having not (catch-up). */
  readonly caughtUpAt?: Date | undefined;
  /** The rule its job was declared with in the revision that first claimed the slot. */
  readonly claimedUnder?: ClaimedRule | undefined;
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

function msBetween(
  from: Date | undefined,
  to: Date | undefined,
): number | undefined {
  return from === undefined || to === undefined
    ? undefined
    : to.getTime() - from.getTime();
}

/** The row of one slot from its record (or its absence), judged at `now` (Firestore's time). */
export function slotRow(
  job: DeclaredJob,
  slot: Date,
  runId: string,
  stored: StoredRecord | undefined,
  now: Date,
): SlotRow {
  const record = stored === undefined ? undefined : judgedAt(stored, now);
  const closed = now.getTime() >= closedAtMs(job, slot, record);
  const kind =
    record?.status === 'unreadable' ? 'slot' : (record?.kind ?? 'slot');
  const base = { job: job.id, slot, runId, kind, ...NO_RUN } as const;
  if (record === undefined) {
    return {
      ...base,
      state: closed ? 'missed' : 'pending',
      final: closed,
    };
  }
  if (record.status === 'unreadable') {
    const lastError = `${record.field} ${record.problem}`;
    return { ...base, state: 'unreadable', final: false, lastError };
  }
  const run: RunRecord = record;
  const state: SlotState =
    closed && leaseLapsed(run, now) ? RunStatus.Failed : run.status;
  return {
    ...base,
    state,
    final:
      state === RunStatus.Completed ||
      state === RunStatus.Skipped ||
      (state !== RunStatus.InProgress &&
        (run.reportedAt !== undefined || retriesOver(run, closed))),
    attempts: run.attempts,
    startedLateMs: msBetween(slot, run.firstClaimedAt),
    durationMs:
      state === RunStatus.Completed
        ? msBetween(run.claimedAt, run.completedAt)
        : undefined,
    attemptId: run.attemptId === '' ? undefined : run.attemptId,
    lastError: run.lastError,
    reported: run.reportedAt !== undefined,
    rerunOf: run.rerunOf,
    notes: run.notes,
    ...(run.caughtUpAt === undefined ? {} : { caughtUpAt: run.caughtUpAt }),
    ...(run.claimedUnder === undefined
      ? {}
      : { claimedUnder: run.claimedUnder }),
  };
}

/**
 * When the slot is closed, ms: no attempt of it can come or still run, and the missed-run check
 * takes it as closed (`slotVerdict`). A slot's execution began at its first claim, or at the slot
 * without one ({@link executionStartMs}; a late dispatch behind the job's previous execution that
 * no claim shows is the check's to see, from the slot before); a forced run's, Scheduler's "Force
 * run", at its first claim (it carries a later slot's time). Each is closed
 * {@link executionClosedMs} after its start.
 */
function closedAtMs(
  job: DeclaredJob,
  slot: Date,
  record: ReturnType<typeof judgedAt> | undefined,
): number {
  const run = record?.status === 'unreadable' ? undefined : record;
  const start =
    run?.kind === 'forced'
      ? forcedFirstClaim(run, slot).getTime()
      : executionStartMs(
          job,
          slot,
          run?.firstClaimedAt,
          Number.NEGATIVE_INFINITY,
        );
  return start + executionClosedMs(job);
}

/**
 * Whether no retry of the run can come any more: a slot's or a forced run's once it is closed
 * ({@link closedAtMs}; the local Scheduler retries a forced run too); a manual run or re-run (`npm
 * run trigger`) is not retried, so its failure is final at once.
 */
function retriesOver(run: RunRecord, closed: boolean): boolean {
  return run.kind === 'slot' || run.kind === 'forced' ? closed : true;
}

/** Whether the run is held by a lease that ended by `now`: its attempt died (finally, once closed). */
function leaseLapsed(run: RunRecord, now: Date): boolean {
  return (
    run.status === RunStatus.InProgress &&
    run.leaseExpires !== undefined &&
    run.leaseExpires.getTime() <= now.getTime()
  );
}

/**
 * When a forced run's retry window opened: its first claim; without one recorded, its failure
 * (no earlier than the first claim), else its slot (a forced run is claimed before the slot it
 * carries), so a window of unknown start is never taken to have closed early.
 */
function forcedFirstClaim(run: RunRecord, slot: Date): Date {
  return run.firstClaimedAt ?? run.claimedAt ?? run.failedAt ?? slot;
}

/** Whether the slot has a record at all (a run, a report, a skip), not just an absence. */
export function hasRecord(row: SlotRow): boolean {
  return !(
    row.attempts === 0 &&
    !row.reported &&
    (row.state === 'missed' ||
      row.state === 'pending' ||
      row.state === 'paused')
  );
}

/** The row, `paused` if it has no record and falls in a pause. */
export function pausedRow(row: SlotRow, pauses: readonly Pause[]): SlotRow {
  if (row.kind !== 'slot' || row.attempts > 0 || row.reported) {
    return row;
  }
  if (row.state !== 'missed' && row.state !== 'pending') {
    return row;
  }
  const pause = pauseAt(pauses, row.slot);
  if (pause === undefined) {
    return row;
  }
  return {
    ...row,
    state: 'paused',
    final: true,
    lastError: undefined,
    pauseNote: pause.note,
  };
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
 * Reads the history of `job` at `slots`: batched reads of their run ids (`readSlotRecords`: a
 * slot whose delivery was misjudged a forced run shows that run as the slot's, `kind: slot`).
 *
 * @param now - judge windows at this time instead of the read's (for "as of" views and tests).
 * @param toleranceMs - the job's forced-run tolerance, ms (`forcedRunToleranceMs`), or a function
 *   giving it (called only when a forced run's record is found); by default 0: only a forced run
 *   first claimed at or after its slot counts as the slot's.
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const { rows } = await readHistory(history, job, slotsBetween(job, from, to).slots, scope);
 */
export async function readHistory(
  store: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slots: readonly Date[],
  scope: Scope,
  now?: Date,
  toleranceMs: number | (() => number) = 0,
): Promise<History> {
  const tolerance =
    typeof toleranceMs === 'number' ? () => toleranceMs : toleranceMs;
  const read = await readSlotRecords(store, job, slots, scope, tolerance);
  const { runIds, records, updateTimes, readTime } = read;
  const at = now ?? readTime;
  const rows = slots.map((slot, i) => {
    const runId = runIds[i] as string;
    return slotRow(job, slot, runId, records.get(runId), at);
  });
  return { rows, updateTimes, readTime };
}
