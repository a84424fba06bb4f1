/**
 * What `npm run runs` reads and prints, as pure functions: window durations, the table for people,
 * the JSON for programs, and the `--check` verdict.
 */
import { toUtcRfc3339 } from '../policy/schedule.ts';
import { hasRecord, type SlotRow } from './slot-history.ts';
import { formatTable, printable } from './table.ts';

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Parses a window length such as `90m`, `24h` or `30d` (also `s`), in ms.
 *
 * @throws Error saying what to write, for anything else.
 * @example parseDuration('90m') // 5_400_000
 */
export function parseDuration(text: string): number {
  const match = /^(\d{1,6})([smhd])$/.exec(text.trim());
  if (match === null) {
    throw new Error(
      `"${text}" is not a duration: write a whole number and a unit, e.g. 90m, 24h, 30d`,
    );
  }
  if (Number(match[1]) === 0) {
    throw new Error(
      `"${text}" is an empty window: write a duration above zero, e.g. 90m, 24h, 30d`,
    );
  }
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/** An RFC 3339 date-time with its offset (`Z` or `±hh:mm`): an instant, never a wall-clock time. */
const RFC3339_TIME =
  /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * Parses `--since` of `npm run runs`: a window length ({@link parseDuration}), or an RFC 3339 time
 * with its offset where the window starts (a suggested command names its oldest slot so: run
 * later, it covers the same slots). Either way, the window's length in ms up to `now`.
 *
 * @throws Error saying what to write, for anything else, or for a time not before `now`.
 * @example parseSince('2026-12-01T09:40:00Z', new Date('2026-12-01T10:00:00Z')) // 1_200_000
 */
export function parseSince(text: string, now: Date): number {
  if (/^\d{4}-\d{2}-\d{2}T[\d:.]+$/i.test(text.trim())) {
    // A wall-clock time names no instant: which zone's would be a guess.
    throw new Error(
      `"${text}" has no offset: add Z (UTC) or ±hh:mm, e.g. ${text.trim()}Z`,
    );
  }
  if (!RFC3339_TIME.test(text.trim())) {
    try {
      return parseDuration(text);
    } catch (err) {
      throw new Error(
        `${(err as Error).message}, or an RFC 3339 time where the window starts, e.g. 2026-12-01T09:40:00Z`,
      );
    }
  }
  const start = Date.parse(text.trim());
  if (Number.isNaN(start)) {
    throw new Error(
      `"${text}" is not a valid time: write an RFC 3339 time, e.g. 2026-12-01T09:40:00Z`,
    );
  }
  if (start >= now.getTime()) {
    throw new Error(
      `"${text}" is not before now (${toUtcRfc3339(now)}): the window starts at --since and ends now`,
    );
  }
  return now.getTime() - start;
}

/**
 * How late a run's first attempt came after its slot (`startedLateMs`), for the table's STARTED
 * LATE column: a forced run that came before the slot it carries says how early (`6 h 47 min
 * early`), never a negative lateness.
 */
export function startedLateText(ms: number | undefined): string {
  return ms !== undefined && ms < 0
    ? `${humanDuration(-ms)} early`
    : humanDuration(ms);
}

/** A duration for people: `850 ms`, `12.3 s`, `4 min 5 s`, `2 h 3 min`. */
export function humanDuration(ms: number | undefined): string {
  if (ms === undefined) {
    return '';
  }
  const abs = Math.abs(ms);
  const sign = ms < 0 ? '-' : '';
  if (abs < 1000) {
    return `${sign}${Math.round(abs)} ms`;
  }
  if (abs < 60_000) {
    return `${sign}${(abs / 1000).toFixed(1)} s`;
  }
  if (abs < 3_600_000) {
    return `${sign}${Math.floor(abs / 60_000)} min ${Math.round((abs % 60_000) / 1000)} s`;
  }
  return `${sign}${Math.floor(abs / 3_600_000)} h ${Math.round((abs % 3_600_000) / 60_000)} min`;
}

/**
 * The rows that count: manual and forced runs, and every slot of a job from its oldest slot with a
 * record in `rows` on (missed-run detection skips slots before a job's first record too). A missed slot
 * before that may predate the job (a new job, a fresh emulator): `--check` does not count it, and
 * the table and the JSON say so.
 */
export function countedRows(
  rows: readonly SlotRow[],
  seenBefore: ReadonlySet<string> = new Set(),
): Set<SlotRow> {
  const slots = rows.filter((row) => row.kind === 'slot');
  const jobs = [...new Set(slots.map((row) => row.job))];
  return new Set([
    ...rows.filter((row) => row.kind !== 'slot'),
    ...jobs.flatMap((job) => {
      const own = slots.filter((row) => row.job === job);
      // A job with a record before the window existed all along: every slot of it counts.
      if (seenBefore.has(job)) {
        return own;
      }
      const first = own.findIndex(hasRecord);
      return first === -1 ? [] : own.slice(first);
    }),
  ]);
}

/**
 * The ids of jobs known to have a record before the window (`ops/runs.ts` asks the ledger), so
 * that their slots in the window count even before the window's first record: one missed slot of
 * a weekly job is then a failure of `--check`, not a slot "before the first record".
 */
export type SeenBefore = ReadonlySet<string>;

/**
 * The slots before their job's first record: slots with no record (`missed` or `pending` alike,
 * a `paused` one keeps its pause) that {@link countedRows} leaves out, so every part of the view
 * (the table, the JSON, the page, `--check`, `--backfill`) shows and counts the same slots. The
 * function's missed-run check never judges such a slot (the job may not have existed yet, or its
 * records are gone), so neither do the commands; one still inside its retry window may yet run,
 * and is then the job's first record. A job with no record in the window has only such slots,
 * unless it has a record before the window (`seenBefore`).
 */
export function noRunRows(
  rows: readonly SlotRow[],
  counted = countedRows(rows),
): Set<SlotRow> {
  return new Set(
    rows.filter(
      (row) =>
        row.kind === 'slot' &&
        (row.state === 'missed' || row.state === 'pending') &&
        !counted.has(row),
    ),
  );
}

/**
 * A forced run ("Force run") taken as its slot: a slot's run whose first attempt came more than a
 * second before the slot's time. Scheduler delivers a scheduled run at or after its time, so only
 * a forced run (within the job's tolerance, `run-plan.ts`) is that early.
 */
export function forcedAsSlot(row: SlotRow): boolean {
  return (
    row.kind === 'slot' &&
    row.startedLateMs !== undefined &&
    row.startedLateMs < -1000
  );
}

/**
 * The slots waiting behind an outstanding execution, with that execution's slot: `pending` slots
 * after a slot of the same job still in progress or retrying (or itself waiting). Scheduler never
 * has two executions of a job outstanding: such a slot fires when the earlier one ends, or is
 * skipped by Scheduler if a further slot is already waiting (`--drop-answers` stretches retries).
 */
export function waitingRows(rows: readonly SlotRow[]): Map<SlotRow, Date> {
  const waiting = new Map<SlotRow, Date>();
  const outstanding = new Map<string, Date>();
  for (const row of [...rows].sort(
    (a, b) => a.slot.getTime() - b.slot.getTime(),
  )) {
    if (row.kind !== 'slot') {
      continue;
    }
    const behind = outstanding.get(row.job);
    if (row.state === 'pending' && behind !== undefined) {
      waiting.set(row, behind);
    } else if (
      row.state === 'in_progress' ||
      (row.state === 'failed' && !row.final)
    ) {
      outstanding.set(row.job, row.slot);
    } else {
      outstanding.delete(row.job);
    }
  }
  return waiting;
}

/** The label of a slot before its job's first record, missed or pending: one situation, one label. */
export const BEFORE_FIRST_RECORD = 'not judged (before first record)';

/**
 * Why a slot before its job's first record is {@link BEFORE_FIRST_RECORD}, for the line under the
 * table and the legend of the page: the rule of the function's missed-run check, which the
 * commands follow.
 */
export const BEFORE_FIRST_RECORD_WHY =
  "the missed-run check never judges a slot before its job's first record (the job may not have existed yet, or its records are gone), so --check does not count it and --backfill leaves it alone (--include-before-first-record delivers those past their retry window); one still inside its retry window may yet run";

/**
 * The line that counts and explains the slots of `rows` before their job's first record
 * ({@link noRunRows}), the same slots the table folds into {@link BEFORE_FIRST_RECORD} lines;
 * `undefined` when there is none.
 *
 * @example beforeFirstRecordLine(rows) // 'runs: 36 slot(s) not judged (before first record): the missed-run check never judges …'
 */
export function beforeFirstRecordLine(
  rows: readonly SlotRow[],
  seenBefore: SeenBefore = new Set(),
): string | undefined {
  const early = viewOf(rows, new Map(), seenBefore).early;
  if (early.size === 0) {
    return undefined;
  }
  return `runs: ${early.size} slot(s) ${BEFORE_FIRST_RECORD}: ${BEFORE_FIRST_RECORD_WHY}`;
}

/**
 * How the rows read, computed once for a table, a JSON or a page: which count, which are before
 * their job's first record (missed or pending alike: {@link BEFORE_FIRST_RECORD}), which wait
 * behind an outstanding execution, and each row's marks.
 */
export interface RowsView {
  readonly counted: ReadonlySet<SlotRow>;
  /** Slots before their job's first record (missed or pending): no run, not counted. */
  readonly early: ReadonlySet<SlotRow>;
  readonly waiting: ReadonlyMap<SlotRow, Date>;
  readonly marks: RowMarks;
}

/** The {@link RowsView} of `rows`. */
export function viewOf(
  rows: readonly SlotRow[],
  marks: RowMarks = new Map(),
  seenBefore: SeenBefore = new Set(),
): RowsView {
  const counted = countedRows(rows, seenBefore);
  const early = noRunRows(rows, counted);
  return { counted, early, waiting: waitingRows(rows), marks };
}

/**
 * A row's state for people: `failed` becomes `failed (final)` past the retry window; a manual or
 * forced run, or a re-run slot, says so; a slot before its job's first record reads
 * {@link BEFORE_FIRST_RECORD}; a paused slot carries its note; a pending slot behind an outstanding
 * execution says which; a forced run taken as its slot says so.
 */
export function stateText(row: SlotRow, view: RowsView): string {
  if (view.early.has(row)) {
    return BEFORE_FIRST_RECORD;
  }
  const state =
    row.state === 'failed'
      ? row.final
        ? 'failed (final)'
        : 'failed (retrying)'
      : row.state;
  const mark = view.marks.get(row);
  const behind = view.waiting.get(row);
  const notes = [
    ...(mark === undefined ? [] : [mark]),
    ...(row.kind === 'slot' ? [] : [row.kind]),
    ...(forcedAsSlot(row) ? ['forced run, taken as its slot'] : []),
    ...(row.caughtUpAt === undefined
      ? []
      : [`caught up at ${toUtcRfc3339(row.caughtUpAt)}`]),
    ...(behind === undefined ? [] : [`waiting behind ${toUtcRfc3339(behind)}`]),
    ...(row.state === 'paused' && row.pauseNote ? [row.pauseNote] : []),
  ];
  return notes.length === 0 ? state : `${state} (${notes.join(', ')})`;
}

/**
 * What marks a row beyond its state, by row: `undeclared` (a record of an id no longer declared),
 * `old schedule` (a record at a time no slot of today's schedule has).
 */
export type RowMarks = ReadonlyMap<SlotRow, string>;

/**
 * The rows as an aligned table, oldest slot first within each job. A run of two or more slots of a
 * job before its first record is one line: the range and how many.
 */
export function runsTable(
  rows: readonly SlotRow[],
  marks: RowMarks = new Map(),
  seenBefore: SeenBefore = new Set(),
): string {
  const view = viewOf(rows, marks, seenBefore);
  const lines: string[][] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as SlotRow;
    let last = i;
    while (
      view.early.has(row) &&
      rows[last + 1]?.job === row.job &&
      view.early.has(rows[last + 1] as SlotRow)
    ) {
      last++;
    }
    if (last > i) {
      const to = rows[last] as SlotRow;
      lines.push([
        row.job,
        `${toUtcRfc3339(row.slot)} → ${toUtcRfc3339(to.slot)}`,
        `${BEFORE_FIRST_RECORD}: ${last - i + 1} slots`,
        '',
        '',
        '',
        '',
        '',
      ]);
      i = last;
      continue;
    }
    lines.push([
      row.job,
      toUtcRfc3339(row.slot),
      stateText(row, view),
      String(row.attempts),
      startedLateText(row.startedLateMs),
      humanDuration(row.durationMs),
      row.attemptId?.slice(0, 8) ?? '',
      (row.lastError ?? '').slice(0, 60),
    ]);
  }
  return formatTable([
    [
      'JOB',
      'SLOT (UTC)',
      'STATE',
      'ATTEMPTS',
      'STARTED LATE',
      'DURATION',
      'ATTEMPT',
      'LAST ERROR',
    ],
    ...lines,
  ]);
}

/**
 * The rows as JSON: `[{ "job", "slot" (RFC 3339), "kind", "runId", "state", "final", "attempts",
 * "startedLateMs", "durationMs", "attemptId", "lastError", "reported", "rerunOf", "notes",
 * "beforeFirstRecord", "mark", "pauseNote", "waitingBehind", "forcedAsSlot", "caughtUpAt", "checkOff" }]`, absent values as
 * `null`; `mark` is `undeclared` or `old schedule` ({@link RowMarks}). `beforeFirstRecord` is true
 * for a slot older than its job's oldest slot with a record in the window (`--check` does not
 * count it); such a slot with no record has `state` `no_run`, never `pending` or `missed`
 * ({@link BEFORE_FIRST_RECORD}). `pauseNote` is a `paused` slot's note; `waitingBehind` the slot
 * of the outstanding execution a `pending` slot waits behind ({@link waitingRows});
 * `forcedAsSlot` is true for a forced run taken as its slot ({@link forcedAsSlot}); `caughtUpAt`
 * when the run audit delivered the slot itself (catch-up), Scheduler having not. `checkOff`: why
 * the function's missed-run check of the row's job is off (its check cursor unreadable: the
 * reason, by job, in `checksOff`), else `null`.
 */
export function runsJson(
  rows: readonly SlotRow[],
  marks: RowMarks = new Map(),
  seenBefore: SeenBefore = new Set(),
  checksOff: ReadonlyMap<string, string> = new Map(),
): string {
  const view = viewOf(rows, marks, seenBefore);
  return JSON.stringify(
    rows.map((row) => {
      const behind = view.waiting.get(row);
      return {
        job: row.job,
        slot: toUtcRfc3339(row.slot),
        kind: row.kind,
        runId: row.runId,
        state: view.early.has(row) ? 'no_run' : row.state,
        final: row.final,
        attempts: row.attempts,
        startedLateMs: row.startedLateMs ?? null,
        durationMs: row.durationMs ?? null,
        attemptId: row.attemptId ?? null,
        lastError: row.lastError ?? null,
        reported: row.reported,
        rerunOf: row.rerunOf,
        notes: row.notes,
        beforeFirstRecord: !view.counted.has(row),
        mark: marks.get(row) ?? null,
        pauseNote: row.pauseNote ?? null,
        waitingBehind: behind === undefined ? null : toUtcRfc3339(behind),
        forcedAsSlot: forcedAsSlot(row),
        caughtUpAt:
          row.caughtUpAt === undefined ? null : toUtcRfc3339(row.caughtUpAt),
        checkOff: checksOff.get(row.job) ?? null,
      };
    }),
    null,
    2,
  );
}

/** Where a command's delivery goes: the local function unless `url` names a deployed one. */
export interface Target {
  /** `--url` as the user gave it; left out of the commands when undefined. */
  readonly url?: string | undefined;
}

/** `' --url URL'`, shell-quoted, or nothing. */
function urlFlag({ url }: Target): string {
  if (url === undefined) {
    return '';
  }
  return ` --url ${/^[\w@%+=:,./-]+$/.test(url) ? url : `'${url.replaceAll("'", "'\\''")}'`}`;
}

/**
 * The command that does what a failure needs next, as `ops/trigger.ts` takes it: a missed or
 * finally failed slot is delivered again as Scheduler would (`--slot T`: it runs, since no attempt
 * completed it); a failed manual or forced run is run again by hand (a new manual run); a failed
 * re-run is re-run (`--rerun --slot T`). Undefined for a row with nothing to do (completed,
 * skipped, paused, in progress, pending, an unreadable record): a completed slot runs again only
 * on purpose, which is no next step. Job ids need no quoting: the job-id rule allows letters,
 * digits, `-` and `_` only.
 *
 * @example nextStep(row) // 'npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z'
 */
export function nextStep(
  row: SlotRow,
  target: Target = {},
): string | undefined {
  const slot = toUtcRfc3339(row.slot);
  const base = `npm run trigger -- ${row.job}`;
  const failedFinally = row.state === 'failed' && row.final;
  if (row.kind === 'slot' && (row.state === 'missed' || failedFinally)) {
    return `${base} --slot ${slot}${urlFlag(target)}`;
  }
  if (!failedFinally) {
    return undefined;
  }
  if (row.kind === 'rerun') {
    return `${base} --rerun --slot ${slot}${urlFlag(target)}`;
  }
  return `${base}${urlFlag(target)}`;
}

/** `row` with its stored text (job id, last error) made {@link printable} for a terminal. */
function printableRow(row: SlotRow): SlotRow {
  const lastError =
    row.lastError === undefined ? {} : { lastError: printable(row.lastError) };
  return { ...row, job: printable(row.job), ...lastError };
}

/**
 * The lines `--check` prints to stderr for its `failures` ({@link checkFailures}), each ending with
 * the command that fixes it ({@link nextStep}); then, for a job with more than one missed slot,
 * the `runs --backfill` command that delivers them all, oldest first, over a window from its
 * oldest missed slot (`--since` that slot's RFC 3339 time, not a length: run minutes later, the
 * command still covers every slot the line counts).
 *
 * @example checkLines([failedRow])
 * // ['runs --check: charge-customers 2026-12-01T09:42:00Z failed: npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z']
 */
export function checkLines(
  failures: readonly SlotRow[],
  target: Target = {},
): string[] {
  const lines = failures
    .map(printableRow)
    .map((row) =>
      row.state === 'unreadable'
        ? `runs --check: ${row.job} ${toUtcRfc3339(row.slot)} unreadable (${row.lastError ?? 'unknown field'}): repair or delete the document ${row.runId} (docs/operations.md, "An unreadable record")`
        : `runs --check: ${row.job} ${toUtcRfc3339(row.slot)}${row.kind === 'slot' ? '' : ` ${row.kind} run`} ${row.state}${row.lastError === undefined || row.kind === 'slot' ? '' : ` (${row.lastError.slice(0, 80)})`}: ${nextStep(row, target)}`,
    );
  const jobs = [...new Set(failures.map((row) => row.job))];
  for (const job of jobs) {
    const missed = failures.filter(
      (row) => row.job === job && row.state === 'missed',
    );
    const oldest = missed[0];
    if (missed.length < 2 || oldest === undefined) {
      continue;
    }
    lines.push(
      `runs --check: ${job}: ${missed.length} slots missed; to deliver them all, oldest first: npm run runs -- --job ${job} --since ${toUtcRfc3339(oldest.slot)} --backfill${urlFlag(target)}`,
    );
  }
  return lines;
}

/**
 * The rows that fail `--check`: slots missed, failed past the job's retry window, or unreadable (a
 * record this version would never write: nobody can tell whether it ran); and manual and forced
 * runs and re-runs that failed for good (a forced run once Scheduler's retries of it are over)
 * unless a later one of the same job and kind (of the same slot, for a re-run; a forced run's, a
 * forced or manual run: its line advises a manual run) completed. A job's missed slots before its oldest slot with a record in
 * the window do not count: the job may not have existed. A `paused` slot never fails it.
 */
export function checkFailures(
  rows: readonly SlotRow[],
  seenBefore: SeenBefore = new Set(),
): SlotRow[] {
  const counted = countedRows(rows, seenBefore);
  const ranAt = (row: SlotRow) => row.slot.getTime() + (row.startedLateMs ?? 0);
  const superseded = (row: SlotRow) =>
    rows.some(
      (later) =>
        // A failed forced run's line advises a manual run ({@link nextStep}): one that completed.
        (later.kind === row.kind ||
          (row.kind === 'forced' && later.kind === 'manual')) &&
        later.job === row.job &&
        later.state === 'completed' &&
        ranAt(later) > ranAt(row) &&
        (row.kind !== 'rerun' || later.slot.getTime() === row.slot.getTime()),
    );
  return rows.filter((row) =>
    row.kind === 'slot'
      ? row.state === 'unreadable' ||
        (row.final &&
          (row.state === 'failed' ||
            (row.state === 'missed' && counted.has(row))))
      : row.state === 'failed' && row.final && !superseded(row),
  );
}
