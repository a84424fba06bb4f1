/**
 * A job's history at given slots, for `npm run runs`, the bench and the tests: each slot's row
 * (what became of it, as the tables show it) from batched reads of its run id
 * (`src/policy/run-history.ts`). The function never loads it: its missed-run check judges the
 * records themselves (`slotVerdict`).
 */
import type { BatchRead } from '../core/run-documents.ts';
import type { Scope } from '../core/run-key.ts';
import {
  judgedAt,
  type RunRecord,
  RunStatus,
  type StoredRecord,
} from '../core/run-record.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { type Pause, pauseAt } from '../policy/pauses.ts';
import { type RunHistory, readSlotRecords } from '../policy/run-history.ts';
import { executionClosedMs } from '../policy/slot-verdict.ts';

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
  // The moment the missed-run check takes the slot as closed (`slotVerdict`), from the slot's time.
  const pastWindow = now.getTime() >= slot.getTime() + executionClosedMs(job);
  const kind =
    record?.status === 'unreadable' ? 'slot' : (record?.kind ?? 'slot');
  const base = { job: job.id, slot, runId, kind, ...NO_RUN } as const;
  if (record === undefined) {
    return {
      ...base,
      state: pastWindow ? 'missed' : 'pending',
      final: pastWindow,
    };
  }
  if (record.status === 'unreadable') {
    const lastError = `${record.field} ${record.problem}`;
    return { ...base, state: 'unreadable', final: false, lastError };
  }
  const run: RunRecord = record;
  const state: SlotState = lapsedPastWindow(job, slot, run, now)
    ? RunStatus.Failed
    : run.status;
  return {
    ...base,
    state,
    final:
      state === RunStatus.Completed ||
      state === RunStatus.Skipped ||
      (state !== RunStatus.InProgress &&
        retriesOver(job, slot, run, pastWindow, now)),
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
  };
}

/**
 * Whether no retry of the run can come any more. A slot's is retried within its window, and so is
 * a forced run, Scheduler's "Force run", from its first claim (the local Scheduler retries it
 * too); a manual run or re-run (`npm run trigger`) is not retried, so its failure is final at once.
 */
function retriesOver(
  job: DeclaredJob,
  slot: Date,
  run: RunRecord,
  pastWindow: boolean,
  now: Date,
): boolean {
  if (run.kind === 'slot') {
    return pastWindow;
  }
  if (run.kind !== 'forced') {
    return true;
  }
  return (
    now.getTime() >=
    forcedFirstClaim(run, slot).getTime() + executionClosedMs(job)
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

/**
 * Whether the lease lapsed past the retry window from the first claim (a forced run's, from its
 * first claim only: it carries a later slot's time): the attempt died, finally.
 */
function lapsedPastWindow(
  job: DeclaredJob,
  slot: Date,
  run: RunRecord,
  now: Date,
): boolean {
  if (run.status !== RunStatus.InProgress || run.leaseExpires === undefined) {
    return false;
  }
  const started =
    run.kind === 'forced'
      ? forcedFirstClaim(run, slot).getTime()
      : Math.max(
          slot.getTime(),
          run.firstClaimedAt?.getTime() ?? slot.getTime(),
        );
  return (
    run.leaseExpires.getTime() <= now.getTime() &&
    now.getTime() >= started + executionClosedMs(job)
  );
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
