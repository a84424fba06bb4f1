/**
 * Invariant 33: the final missed-run check leaves each job's cursor no further back than the first
 * slot it could not settle. A check moves its cursor past every closed slot that is settled (its
 * run completed or skipped, or its report written and logged) up to the first one it must judge
 * again (still open, running, an unlogged report, a raced write), or to the closed boundary. A
 * cursor left behind settled slots re-reads them at every check (docs/how-it-works.md, "Missed
 * runs": a processed run costs the claim and the completion; the check reads only what closed since
 * its cursor), and once their records expire (the TTL) it would judge them again as missed: a
 * report for a slot that ran.
 *
 * Judged against the records the history left, not the check's own verdicts: a slot counts as
 * settled only when its record says so for certain, so every doubt (no record, a paused slot, a
 * forced run in its place, a record this version cannot read) lowers the bound, never raises it.
 * The boundary is the Scheduler model's (a longest execution and an attempt deadline after the
 * slot, `reportDueMs` less one execution), never later than the product's.
 */

import {
  CURSOR_OF_SHORTER_WINDOW,
  UNREADABLE_CURSOR,
} from '../../src/policy/missed-runs.ts';
import { slotRunId, unloggedReportBy } from '../../src/policy/run-history.ts';
import { slotsBetween } from '../../src/policy/schedule.ts';
import { schedulerExecutionMs } from './cloud-scheduler.ts';
import { brokenCursorField, isReadableCursorKind } from './model.ts';
import { millisOf } from './record-invariants.ts';
import { v1CheckDocumentId } from './run-id-invariants.ts';
import { isSlotOf, scheduleSegments, segmentAt } from './schedule-segments.ts';
import {
  deploymentOf,
  type ForeignCursor,
  hasLaterCheck,
  type LogLine,
  type SimOutcome,
  standingUnreadableCursor,
} from './simulator.ts';

type Deployment = SimOutcome['deployments'][number];
type Job = Deployment['revisions'][number]['jobs'][number];

/** The statuses whose run is over for good: nothing reports or runs the slot again. */
const FINAL_STATUSES = new Set(['completed', 'skipped']);

/** How long the operator's check after a death comes after the final check (simulator.ts). */
const LATER_CHECK_MS = 5 * 60_000;

/** Whether `record` settles its slot for certain: a final run, or a report written and logged. */
function isSettled(record: Readonly<Record<string, unknown>> | undefined) {
  if (record === undefined) {
    return false;
  }
  if (FINAL_STATUSES.has(String(record.status))) {
    return true;
  }
  const reportedBy =
    typeof record.reported_by === 'string' ? record.reported_by : undefined;
  return (
    record.reported_at !== undefined &&
    reportedBy !== undefined &&
    unloggedReportBy(reportedBy) === undefined
  );
}

/**
 * The job of `dep` to judge: declared by its last revision with one schedule throughout (a
 * schedule change leaves the cursor on the old rule's slots, which this invariant does not
 * enumerate).
 */
function steadyJobs(dep: Deployment): Job[] {
  const last = dep.revisions.at(-1)?.jobs ?? [];
  return last.filter((job) =>
    dep.revisions.every((revision) =>
      revision.jobs.every(
        (other) => other.id !== job.id || other.schedule === job.schedule,
      ),
    ),
  );
}

/** The cursor's `checked_before`, ms, or `undefined` without a readable one. */
function cursorAt(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
): number | undefined {
  const document = outcome.jobDocuments?.get(
    v1CheckDocumentId(job.id, dep.keyScope),
  );
  const at = document?.checked_before as
    | { toMillis?: () => number }
    | undefined;
  return typeof at?.toMillis === 'function' ? at.toMillis() : undefined;
}

/**
 * When the last final check began: the operator's after a death, twin checks (which leave a
 * cursor at a slot they raced for) or a faulty check, else the auditor's.
 */
function lastCheckMs(outcome: SimOutcome): number {
  const died = (outcome.deaths ?? []).some(
    (death) => death.at >= outcome.finalMs,
  );
  return hasLaterCheck(outcome.history, died)
    ? outcome.finalMs + LATER_CHECK_MS
    : outcome.finalMs;
}

/**
 * The slots of `job` in `dep` the records settle, from its first record on (the check never judges
 * a slot before the job's first record: the job may not have existed) up to the first they do not
 * settle or `boundary` (ms), and that first slot (`due`, `boundary` if none).
 */
function settledSlots(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
  boundary: number,
): { readonly settled: readonly number[]; readonly due: number } {
  const { slots } = slotsBetween(
    job,
    new Date(outcome.startMs - 1),
    new Date(boundary - 1),
    10_000,
  );
  const records = slots.map((slot) =>
    outcome.records.get(slotRunId(job.id, slot, dep.keyScope)),
  );
  const first = records.findIndex((record) => record !== undefined);
  if (first < 0) {
    return { settled: [], due: boundary };
  }
  const open = records.findIndex(
    (record, i) => i >= first && !isSettled(record),
  );
  const end = open < 0 ? slots.length : open;
  return {
    settled: slots.slice(first, end).map((slot) => slot.getTime()),
    due: open < 0 ? boundary : (slots[open] as Date).getTime(),
  };
}

/** Invariant 33 (see the file's comment). */
export function cursorsKeptUp(outcome: SimOutcome): string[] {
  if (outcome.emulator || outcome.jobDocuments === undefined) {
    return [];
  }
  // A final check that died mid-way leaves its cursor where it died: the next check moves it.
  const checkedAt = lastCheckMs(outcome);
  const deathsAfter = (outcome.deaths ?? []).filter(
    (death) => death.at >= checkedAt,
  );
  if (deathsAfter.length > 0) {
    return [];
  }
  const found: string[] = [];
  for (const [d, dep] of outcome.deployments.entries()) {
    for (const job of steadyJobs(dep)) {
      const problem = cursorProblem(outcome, job, dep, d);
      if (problem !== undefined) {
        found.push(problem);
      }
    }
  }
  return found;
}

/** What is wrong with `job`'s cursor in `dep` after the final check, if anything. */
function cursorProblem(
  outcome: SimOutcome,
  job: Job,
  dep: Deployment,
  d: number,
): string | undefined {
  const closedMs =
    schedulerExecutionMs(job) + job.attemptDeadlineSeconds * 1000;
  const { settled, due } = settledSlots(
    outcome,
    job,
    dep,
    outcome.finalMs - closedMs,
  );
  if (standingUnreadableCursor(outcome.foreignCursors ?? [], d, job.id)) {
    return undefined; // another version's, said at each check (invariant 54)
  }
  const cursor = cursorAt(outcome, job, dep);
  // The first settled slot the cursor has not passed.
  const behind = settled.find((slot) => cursor === undefined || slot >= cursor);
  if (behind === undefined) {
    return undefined;
  }
  const where = `${job.id}'s cursor (scope ${JSON.stringify(dep.scope)})`;
  const what = `settled slot ${new Date(behind).toISOString()} is not behind it (the first slot to judge again is ${new Date(due).toISOString()})`;
  return cursor === undefined
    ? `the final check left no ${where}: ${what}`
    : `the final check left ${where} at ${new Date(cursor).toISOString()}: ${what}`;
}

/**
 * Whether an unreadable cursor of another version stood on `jobId`'s check document in deployment
 * `d` at some time from `fromMs` to `toMs`: no check judged the job's slots then (invariant 54).
 */
export function unreadableCursorWithin(
  outcome: SimOutcome,
  d: number,
  jobId: string,
  fromMs: number,
  toMs: number,
): boolean {
  return (outcome.foreignCursors ?? []).some(
    (c, i, all) =>
      c.deployment === d &&
      c.jobId === jobId &&
      !isReadableCursorKind(c.kind) &&
      c.at <= toMs &&
      (c.repairedAt ?? nextWriteAt(all, i)) >= fromMs,
  );
}

/** When another version next wrote the cursor of `all[i]`'s document, ms (infinite if never). */
function nextWriteAt(all: readonly ForeignCursor[], i: number): number {
  const { document } = all[i] as ForeignCursor;
  return (
    all.slice(i + 1).find((c) => c.document === document)?.at ??
    Number.POSITIVE_INFINITY
  );
}

/**
 * Whether the missed-run check of `jobId` in deployment `d` is off at the end: another version's
 * unreadable cursor stands on its check document (invariant 54 requires the ERROR that says so),
 * so the final check judges, reports and logs again nothing of the job.
 */
export function checkOffAtEnd(
  outcome: SimOutcome,
  d: number,
  jobId: string,
): boolean {
  return (
    standingUnreadableCursor(outcome.foreignCursors ?? [], d, jobId) !==
    undefined
  );
}

/** How a check that starts afresh begins its WARN (`startAfresh` in missed-run-cursor.ts). */
const STARTED_AFRESH = 'missed-run check: nothing checked job ';

/**
 * Whether a check started `jobId`'s cursor afresh past the slot at `slotMs`, saying so: its WARN
 * names the range it leaves unjudged, `from` (inclusive) to `to`, and the slots after it before
 * the job's next record are not judged either (the job may be declared again only now). Only a
 * cursor nobody wrote for days starts afresh (`readable_stale`); the WARN does not name the key
 * scope.
 */
export function skippedAfresh(
  outcome: SimOutcome,
  jobId: string,
  slotMs: number,
): boolean {
  return outcome.logs.some((l) => {
    if (!l.message.startsWith(STARTED_AFRESH) || l.fields.jobName !== jobId) {
      return false;
    }
    const from = Date.parse(String(l.fields.from));
    const to = Date.parse(String(l.fields.to));
    return (
      from <= slotMs &&
      (slotMs < to || !recordedBetween(outcome, jobId, to, slotMs))
    );
  });
}

/**
 * The run id of `jobId`'s first slot record at or after the end of a fresh start (the `to` of a
 * WARN that started its cursor afresh) and up to `slotMs`, the latest such start before the slot;
 * `undefined` if none. After a fresh start the check has seen no run: that record is the job's
 * first as far as the check knows, and one that lands late leaves the slots before it taken for
 * slots before the job's first record (`KNOWN_GAPS.auditBeforeFirstRecord`, stop 74: fault-biased
 * seed 17, the 7th).
 */
export function firstRecordAfterAfresh(
  outcome: SimOutcome,
  jobId: string,
  slotMs: number,
): string | undefined {
  const starts = outcome.logs
    .filter(
      (l) => l.message.startsWith(STARTED_AFRESH) && l.fields.jobName === jobId,
    )
    .map((l) => Date.parse(String(l.fields.to)))
    .filter((to) => to <= slotMs);
  if (starts.length === 0) {
    return undefined;
  }
  const from = Math.max(...starts);
  let first: { runId: string; at: number } | undefined;
  for (const [runId, record] of outcome.records) {
    const at = millisOf(record.schedule_time);
    const inRange =
      record.job_name === jobId &&
      at !== undefined &&
      at >= from &&
      at <= slotMs;
    if (inRange && (first === undefined || at < first.at)) {
      first = { runId, at };
    }
  }
  return first?.runId;
}

/** Whether a slot of `jobId` from `fromMs` up to `slotMs` (inclusive) has a record. */
function recordedBetween(
  outcome: SimOutcome,
  jobId: string,
  fromMs: number,
  slotMs: number,
): boolean {
  return [...outcome.records.values()].some((record) => {
    const time = record.schedule_time as
      | { toMillis?: () => number }
      | undefined;
    const at = time?.toMillis?.();
    return (
      record.job_name === jobId &&
      at !== undefined &&
      at >= fromMs &&
      at <= slotMs
    );
  });
}

/**
 * Whether no check judges `jobId`'s slot at `slotMs` in deployment `d`, said: the check is off at
 * the end ({@link checkOffAtEnd}), or started afresh past the slot ({@link skippedAfresh}).
 */
export function unjudgedBySaidCheck(
  outcome: SimOutcome,
  d: number,
  jobId: string,
  slotMs: number,
): boolean {
  return (
    checkOffAtEnd(outcome, d, jobId) || skippedAfresh(outcome, jobId, slotMs)
  );
}

/** Whether no check judges the slot whose run `record` is (`runId`), said ({@link unjudgedBySaidCheck}). */
export function checkOffForRun(
  outcome: SimOutcome,
  runId: string,
  record: Readonly<Record<string, unknown>>,
): boolean {
  const time = record.schedule_time as { toMillis?: () => number } | undefined;
  const slotMs = time?.toMillis?.();
  if (slotMs === undefined) {
    return false;
  }
  const jobId = String(record.job_name);
  return outcome.deployments.some(
    (dep, d) =>
      unjudgedBySaidCheck(outcome, d, jobId, slotMs) &&
      slotRunId(jobId, new Date(slotMs), dep.keyScope) === runId,
  );
}

/**
 * Whether the slot at `slotMs` of `jobId` in deployment `d` is one the operator's repair of an
 * unreadable cursor made the check forget: the repair deletes the rules the cursor knew, and the
 * check after it starts with the rule declared then, learning older ones only from the claims at
 * the slots it reads. A slot before the repair, of a schedule replaced before it, that the
 * schedule in force at the repair lacks, is never read again (docs/limits.md, "Missed runs").
 */
export function forgottenByRepair(
  outcome: SimOutcome,
  d: number,
  jobId: string,
  slotMs: number,
): boolean {
  const dep = outcome.deployments[d];
  if (dep === undefined) {
    return false;
  }
  const segments = scheduleSegments(dep, jobId);
  return (outcome.foreignCursors ?? []).some((c) => {
    if (c.deployment !== d || c.jobId !== jobId || c.repairedAt === undefined) {
      return false;
    }
    const then = segmentAt(segments, c.repairedAt);
    const own = segmentAt(segments, slotMs);
    return (
      c.repairedAt > slotMs &&
      then !== undefined &&
      own !== then &&
      !isSlotOf(then.job.schedule, slotMs)
    );
  });
}

/**
 * Whether one of `lines` names `write`'s job and document, logged from its landing up to `until`
 * (ms): a check said what another version wrote there (its pauses or its cursor).
 */
export function saidOf(
  lines: readonly LogLine[],
  write: {
    readonly document: string;
    readonly jobId: string;
    readonly at: number;
  },
  until = Number.POSITIVE_INFINITY,
): boolean {
  return lines.some(
    (l) =>
      l.fields.document === write.document &&
      l.fields.jobName === write.jobId &&
      l.at >= write.at &&
      l.at < until,
  );
}

/**
 * Invariant 54: the cursors another version wrote on a job's check document (`foreign_cursor`).
 * One this version never writes is said: the final check at the latest logs
 * {@link UNREADABLE_CURSOR} (ERROR), naming the job and the document, after the write, while the
 * operator has not repaired it; it is never read as a cursor, so no check judges from it or writes
 * over it. One it reads as its own (an earlier version's fields, fields it never writes, exactly
 * eight rules) is read without that ERROR, while it is the document's first foreign cursor; one
 * nobody wrote for days is started afresh by a later check, with a WARN naming what it skips.
 */
export function foreignCursorsSaid(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const writes = outcome.foreignCursors ?? [];
  const errors = outcome.logs.filter((l) => l.message === UNREADABLE_CURSOR);
  const saidAfter = (w: ForeignCursor, until = Number.POSITIVE_INFINITY) =>
    saidOf(errors, w, until);
  for (const [i, w] of writes.entries()) {
    const first = writes.find((o) => o.document === w.document) === w;
    const next = writes.slice(i + 1).find((o) => o.document === w.document);
    if (w.kind === 'readable_stale' && next === undefined) {
      found.push(...staleCursorWarned(outcome, w));
    }
    const said = `another version's cursor (${w.kind}) on ${w.document} at ${new Date(w.at).toISOString()}`;
    if (isReadableCursorKind(w.kind)) {
      if (first && saidAfter(w, next?.at) && !aheadOfLongerWindow(outcome, w)) {
        found.push(`${said} is readable, but a check said it unreadable`);
      }
    } else if (standingUnreadableCursor(writes, w.deployment, w.jobId) === w) {
      found.push(...unreadableCursorSaid(errors, w, first, said));
    }
  }
  return found;
}

/**
 * Whether `w` is an earlier version's cursor without `closed_after_ms` on a job a deploy gave a
 * longer retry window: ahead of the new boundary, it is the documented ERROR, not the WARNING
 * that a cursor naming its writer's window gets (docs/limits.md, "Unreadable records"; stop 74,
 * seed 33, the 90th).
 */
function aheadOfLongerWindow(outcome: SimOutcome, w: ForeignCursor): boolean {
  if (w.kind !== 'readable_no_closed_after') {
    return false;
  }
  // `retry_longer` lengthens the first job's retries (model.ts, `longerRetries`).
  const first = outcome.deployments?.[w.deployment]?.revisions[0]?.jobs[0]?.id;
  return (
    w.jobId === first &&
    (outcome.history?.events ?? []).some(
      (e) =>
        e.type === 'redeploy' &&
        e.change === 'retry_longer' &&
        e.deployment === w.deployment,
    )
  );
}

/**
 * The unreadable cursor `w`, standing at the end, was said by an ERROR after it was written, whose
 * `reason` names the field of the cursor that is wrong: `w`'s own when it is the document's first
 * foreign cursor (`first`; after others, a field one of them broke may be named first).
 */
function unreadableCursorSaid(
  errors: readonly LogLine[],
  w: ForeignCursor,
  first: boolean,
  said: string,
): string[] {
  const lines = errors.filter((l) => saidOf([l], w));
  if (lines.length === 0) {
    return [`${said} is unreadable, and no check said "${UNREADABLE_CURSOR}"`];
  }
  const field = first ? brokenCursorField(w.kind) : '';
  const unnamed = lines.find((l) => {
    const reason = l.fields.reason;
    return (
      typeof reason !== 'string' || !reason.startsWith(field) || reason === ''
    );
  });
  return unnamed === undefined
    ? []
    : [
        `${said} is unreadable, and a check's "${UNREADABLE_CURSOR}" gave the reason ${JSON.stringify(unnamed.fields.reason)}, not one naming ${field || 'a field'}`,
      ];
}

/** A stale cursor another version left (`readable_stale`): a later check warns it starts afresh. */
function staleCursorWarned(outcome: SimOutcome, w: ForeignCursor): string[] {
  const warned = outcome.logs.some(
    (l) =>
      l.message.startsWith(STARTED_AFRESH) &&
      l.fields.jobName === w.jobId &&
      l.at >= w.at,
  );
  return warned
    ? []
    : [
        `another version's cursor on ${w.document}, unwritten for days (written at ${new Date(w.at).toISOString()}), was never started afresh with a WARN "${STARTED_AFRESH}…"`,
      ];
}

/**
 * How long after its check took its clock a check's line may be logged, ms: its read of the cursor
 * may wait on a hung connection or a paused instance (the model's longest: 200 s).
 */
const CHECK_LINE_LAG_MS = 5 * 60_000;

/**
 * Whether a revision of `dep` deployed at or before `atMs` gave `jobId` more retries or a longer
 * `maxRetryDuration` than the revision before it (a `retry_longer` redeploy).
 */
function retriesLengthenedBy(
  dep: Deployment | undefined,
  jobId: string,
  atMs: number,
): boolean {
  const revisions = dep?.revisions ?? [];
  return revisions.some((revision, r) => {
    const before = revisions[r - 1]?.jobs.find((j) => j.id === jobId);
    const after = revision.jobs.find((j) => j.id === jobId);
    return (
      r > 0 &&
      revision.at <= atMs &&
      before !== undefined &&
      after !== undefined &&
      (after.retryCount > before.retryCount ||
        after.maxRetryDurationSeconds > before.maxRetryDurationSeconds)
    );
  });
}

/**
 * Invariant 55: what a check says of a cursor this version wrote. It never calls it unreadable:
 * an {@link UNREADABLE_CURSOR} ERROR names a document another version wrote a cursor on before the
 * line. It says a cursor stands ahead of the job's closed boundary and reads again by itself
 * ({@link CURSOR_OF_SHORTER_WINDOW}, a WARNING) only after a deploy that lengthened the job's retry
 * settings (docs/limits.md, "A cursor written before a change of the job's retry settings"), with
 * the reason that says so and a `readsAgainAt` still to come when its check took its clock.
 */
export function ownCursorsSaid(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const foreign = outcome.foreignCursors ?? [];
  for (const line of outcome.logs) {
    const document = String(line.fields.document);
    const jobId = String(line.fields.jobName);
    const at = new Date(line.at).toISOString();
    if (line.message === UNREADABLE_CURSOR) {
      const written = foreign.some(
        (c) => c.document === document && c.at <= line.at,
      );
      if (!written) {
        found.push(
          `a check at ${at} said ${jobId}'s cursor ${document} unreadable (${String(line.fields.reason)}), and only this version wrote it`,
        );
      }
    }
    if (line.message === CURSOR_OF_SHORTER_WINDOW) {
      found.push(...shorterWindowSaid(outcome, line, jobId, at));
    }
  }
  return found;
}

/** What is wrong with `line`, a {@link CURSOR_OF_SHORTER_WINDOW} WARNING logged at `at`. */
function shorterWindowSaid(
  outcome: SimOutcome,
  line: LogLine,
  jobId: string,
  at: string,
): string[] {
  const said = `a check at ${at} said ${jobId}'s cursor stands ahead of a longer retry window's boundary`;
  const d = deploymentOf(line);
  const dep = d === undefined ? undefined : outcome.deployments[d];
  if (!retriesLengthenedBy(dep, jobId, line.at)) {
    return [`${said}, and no deploy had lengthened its retry settings`];
  }
  const reason = line.fields.reason;
  if (typeof reason !== 'string' || !reason.startsWith('checked_before')) {
    return [
      `${said} with the reason ${JSON.stringify(reason)}, not one naming checked_before`,
    ];
  }
  const readsAgainAt = Date.parse(String(line.fields.readsAgainAt));
  if (!(readsAgainAt > line.at - CHECK_LINE_LAG_MS)) {
    return [
      `${said}, reading again at ${String(line.fields.readsAgainAt)}: a time its check had passed`,
    ];
  }
  return [];
}

/**
 * How long another version's stale cursor (`readable_stale`) stood unwritten at least, ms
 * (foreign-cursors.ts writes it three days old).
 */
const STALE_FOR_MS = 2 * 86_400_000;

/** The `--since Nh` a started-afresh WARN tells the operator to look back with. */
const SINCE_HOURS = /--since (\d+)h/;

/**
 * Invariant 56: a check starts a job's cursor afresh (its WARN {@link STARTED_AFRESH}, whose range
 * {@link skippedAfresh} then leaves unjudged) only from a cursor nobody wrote for days: one another
 * version left on the job's document in its deployment before the line (`readable_stale`), this
 * version's own being written at every check that moves it and at least hourly. The WARN names
 * the range it leaves: from that cursor's `checked_before`, days back, to a boundary before the
 * line and within a day of it; and its `npm run runs -- --since Nh` reaches back to the range's
 * start.
 */
export function startedAfreshOnlyWhenStale(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const stale = (outcome.foreignCursors ?? []).filter(
    (c) => c.kind === 'readable_stale',
  );
  for (const line of outcome.logs) {
    if (!line.message.startsWith(STARTED_AFRESH)) {
      continue;
    }
    const jobId = String(line.fields.jobName);
    const d = deploymentOf(line);
    const said = `a check at ${new Date(line.at).toISOString()} started ${jobId}'s cursor afresh`;
    const from = Date.parse(String(line.fields.from));
    const to = Date.parse(String(line.fields.to));
    const left = stale.find(
      (c) =>
        c.jobId === jobId &&
        c.deployment === d &&
        c.at <= line.at &&
        from <= c.at - STALE_FOR_MS,
    );
    if (left === undefined) {
      found.push(
        `${said} from ${String(line.fields.from)}, and no cursor days old stood there`,
      );
      continue;
    }
    if (!(to > line.at - 86_400_000 && to <= line.at)) {
      found.push(
        `${said} up to ${String(line.fields.to)}: not a boundary before the line and within a day of it`,
      );
    }
    const hours = Number(SINCE_HOURS.exec(line.message)?.[1]);
    if (!(line.at - hours * 3_600_000 <= from)) {
      found.push(
        `${said} from ${String(line.fields.from)}, and told to look back only ${hours} h`,
      );
    }
  }
  return found;
}

/**
 * How long after a cursor's `seen_at` a check writes it again though nothing changed, ms: its
 * heartbeat, an hour (`CURSOR_HEARTBEAT_MS` in src/policy/missed-run-cursor.ts), so that a
 * cursor in use never looks stale.
 */
const HEARTBEAT_MS = 3_600_000;

/** The fields of a stored cursor but its `seen_at`: what a check's write exists to change. */
const CURSOR_STATE = [
  'checked_before',
  'run_seen',
  'closed_after_ms',
  'rules',
] as const;

/** A stored timestamp (`{ _seconds, _nanoseconds }` in the memory store, or a `Timestamp`), ms. */
function storedMs(value: unknown): number | undefined {
  const time = value as { toMillis?: () => number } | undefined;
  return typeof time?.toMillis === 'function' ? time.toMillis() : undefined;
}

/**
 * Invariant 57: a check writes a job's cursor only to change it. A write that leaves
 * `checked_before`, `run_seen`, `closed_after_ms` and `rules` as stored and only moves `seen_at`
 * on, by less than the heartbeat's hour, is a write a check did for nothing: on every check it
 * would add a write to each audit and each checking delivery (the mission's "cost per run is a
 * product feature"; docs/operations.md counts a check's writes). Judged against the document's
 * fields before and after each landed write, whoever wrote it (another version's forms all change
 * a field, or drop `seen_at`).
 */
export function cursorWrittenOnlyToChange(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const w of outcome.checkDocumentWrites ?? []) {
    const { before, after } = w;
    const seenBefore = storedMs(before?.seen_at);
    const seenAfter = storedMs(after?.seen_at);
    if (
      before?.checked_before === undefined ||
      seenBefore === undefined ||
      seenAfter === undefined ||
      seenAfter <= seenBefore
    ) {
      continue; // a first cursor, pauses only, a delete, or seen_at unmoved
    }
    const same = CURSOR_STATE.every(
      (field) =>
        JSON.stringify(before[field]) === JSON.stringify(after?.[field]),
    );
    if (same && seenAfter - seenBefore < HEARTBEAT_MS) {
      found.push(
        `${w.machine} wrote the cursor ${w.document} at ${new Date(w.at).toISOString()} as it stood (checked_before, run_seen, closed_after_ms and rules unchanged), its seen_at ${Math.round((seenAfter - seenBefore) / 1000)} s on: a write for nothing, before its hourly heartbeat was due`,
      );
    }
  }
  return found;
}
