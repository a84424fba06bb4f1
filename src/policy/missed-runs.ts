/**
 * Missed-run detection without a new service: a job's slots are judged once no attempt can come
 * any more, and each that was missed, or failed after every retry, is reported once across all
 * instances, as an ERROR line that a log-based metric counts (`deploy.sh` creates it). The
 * argument for each rule is in docs/how-it-works.md ("Missed runs").
 *
 * Timeline of one slot `s` (W: the retry window of `retry-policy.ts`; D: one attempt deadline):
 *
 *     s ── waits behind the previous execution ──┤ start ── W ──┤ end ── D ──┤ closed
 *          (at most W; none when it had ended)                               judged by the next check
 *
 * - **Closed** ({@link slotVerdict}, the one place a slot's verdict is decided): a slot's execution
 *   starts at its first claim, or, without one, when the previous slot's execution could have
 *   ended (Scheduler never has two outstanding executions of a job), never later than `s + W`.
 * - **Final at once**: a failed attempt that no Scheduler retry can follow reports itself, in its
 *   release write ({@link finalFailureReporter}); the check skips what is reported.
 * - **A cursor per job** (`{jobId}~check`, `job-state.ts`): every slot before `checked_before` was
 *   judged, against the rules (schedule, zone) it records. Reports are written first, each once
 *   by its own conditional write; the cursor moves after them, fenced, so a crash loses nothing.
 * - **Due checks**: the run audit (`run-audit.ts`, declared in `src/jobs.ts`), and a processed
 *   delivery of the first slot of a {@link CHECK_PERIOD_MS} period.
 */
import { createHash, randomUUID } from 'node:crypto';
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import { describeThrown } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import type { Attempt } from '../core/run-once.ts';
import { isLeaseLive, MAX_ERROR_LENGTH, type StoredRecord } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { PAUSED_SLOT, type Pause, pausedRow, readPauses, reportOverduePause } from './pauses.ts';
import { noRetryFollows, retryWindowMs } from './retry-policy.ts';

export { judgingDelayMs } from './retry-policy.ts';

import {
  hasRecord,
  type RunHistory,
  readSlotRecords,
  type SlotRow,
  slotRow,
} from './run-history.ts';
import {
  longestGapMs,
  previousSlot,
  type ScheduleSpec,
  scheduleProblem,
  slotsBetween,
  timeZoneProblem,
} from './schedule.ts';
import { forcedRunToleranceMs } from './schedule-time.ts';

/** The log messages, for log-based metrics (`deploy.sh` creates them). */
export const MISSED_RUN = 'missed run';
export const FAILED_AFTER_RETRIES = 'run failed after retries';

/** How often a job's closed slots are checked by its own deliveries at most, in ms: hourly. */
export const CHECK_PERIOD_MS = 3_600_000;
/**
 * The most slots one check reads (two batched reads); a longer closed range is checked over the
 * next deliveries, each going on from the cursor.
 */
export const MAX_CHECK_SLOTS = 1000;
/**
 * How far back the first check of a job (no cursor yet, or one the TTL removed) looks for its first
 * record, in ms: a day.
 */
export const FIRST_LOOK_BACK_MS = 86_400_000;
/** A cursor unwritten this long is written again though nothing closed, ms: its last check shows. */
export const CURSOR_HEARTBEAT_MS = 3_600_000;
/**
 * A cursor unwritten for this long (or four of the job's longest gaps, if longer), ms, means nothing
 * checked the job meanwhile (it was not declared): the check starts afresh, in one line.
 */
export const STALE_CURSOR_MS = 2 * 86_400_000;
/** The schedule rules a cursor remembers at most (each schedule change adds one until passed). */
export const MAX_RULES = 8;
/** Clock difference between instances a cursor may show, ms (two skew estimates of Firestore's time). */
const CURSOR_CLOCK_SLACK_MS = 10_000;

/**
 * How long after its schedule time a slot is judged at the earliest, in ms: its retry window plus
 * one attempt deadline (a first attempt Scheduler started late still lands first). A slot whose
 * execution waited behind the previous one closes later ({@link slotVerdict}).
 *
 * @example closedAfterMs(job) // defaults: 3570 s + 180 s = 3 750 000
 */
export function closedAfterMs(job: DeclaredJob): number {
  return retryWindowMs(job) + job.attemptDeadlineSeconds * 1000;
}

/**
 * Whether `slot` is the job's first slot in its {@link CHECK_PERIOD_MS} period (periods count from
 * the Unix epoch): a delivery of it runs the check. Pure, so every instance agrees.
 *
 * @example isDueSlot({ schedule: '*\/5 * * * *', timeZone: 'Etc/UTC' }, new Date('2026-10-16T12:00:00Z')) // true
 */
export function isDueSlot(job: Pick<DeclaredJob, 'schedule' | 'timeZone'>, slot: Date): boolean {
  return firstSlotOfPeriod(job, periodOf(slot.getTime())) === slot.getTime();
}

/** The start of the {@link CHECK_PERIOD_MS} period that holds `t`, ms. */
function periodOf(t: number): number {
  return t - (((t % CHECK_PERIOD_MS) + CHECK_PERIOD_MS) % CHECK_PERIOD_MS);
}

/** The job's first slot at or after `periodStart` and inside that period, ms, if it has one. */
function firstSlotOfPeriod(
  job: Pick<DeclaredJob, 'schedule' | 'timeZone'>,
  periodStart: number,
): number | undefined {
  const end = new Date(periodStart + CHECK_PERIOD_MS);
  return slotsBetween(job, new Date(periodStart), end, 1).slots[0]?.getTime();
}

/**
 * The id of a job's check cursor in the per-job documents: `{jobId}~check`, with a hash of the
 * delivery's key scope when it has one (each scope has runs of its own).
 */
export function checkDocumentId(jobId: string, scope: Scope): string {
  if (scope.length === 0) return `${jobId}~check`;
  const hash = createHash('sha256').update(JSON.stringify(scope)).digest('hex').slice(0, 16);
  return `${jobId}~check~${hash}`;
}

/**
 * A schedule rule a job was judged against: its cron and zone, the first check that saw it
 * (`since`, ms; absent only on an oldest rule in force over the whole retained range) and the last
 * one (`until`, ms, absent for the newest: it is the rule in force now). Between one rule's `until`
 * and the next one's `since` either was in force; before the oldest rule's `since` a rule no longer
 * kept may have been, so no slot there is judged.
 */
export interface JudgedRule extends ScheduleSpec {
  readonly since?: number;
  readonly until?: number;
}

/** A job's check cursor as stored. */
interface Cursor {
  /** Every slot before it was judged. */
  readonly checkedBefore: Date;
  /** Whether a slot with a record was seen: slots before the first record are never missed. */
  readonly runSeen: boolean;
  /** The rules slots were judged against, oldest first; the last one is the newest. */
  readonly rules: readonly JudgedRule[];
  /** Firestore's time of the check that wrote it, ms. */
  readonly seenAt: number;
}

function ruleOf(job: ScheduleSpec): JudgedRule {
  return { schedule: job.schedule, timeZone: job.timeZone };
}

function sameRule(a: ScheduleSpec, b: ScheduleSpec): boolean {
  return a.schedule === b.schedule && a.timeZone === b.timeZone;
}

function readRules(value: unknown, job: ScheduleSpec): JudgedRule[] | 'unreadable' {
  if (value === undefined) return [ruleOf(job)]; // a cursor of an earlier version
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_RULES) return 'unreadable';
  const rules: JudgedRule[] = [];
  for (const [i, entry] of value.entries()) {
    const { schedule, time_zone: timeZone, since, until } = (entry ?? {}) as DocumentData;
    if (typeof schedule !== 'string' || typeof timeZone !== 'string') return 'unreadable';
    // A rule this code wrote was a declared job's: a schedule and zone declarations accept.
    if (scheduleProblem(schedule) !== undefined || timeZoneProblem(timeZone) !== undefined) {
      return 'unreadable';
    }
    const first = i === 0;
    const last = i === value.length - 1;
    if ((!first && since === undefined) || last !== (until === undefined)) return 'unreadable';
    if (since !== undefined && !(since instanceof Timestamp)) return 'unreadable';
    if (until !== undefined && !(until instanceof Timestamp)) return 'unreadable';
    rules.push({
      schedule,
      timeZone,
      ...(since === undefined ? {} : { since: since.toMillis() }),
      ...(until === undefined ? {} : { until: until.toMillis() }),
    });
  }
  return rules;
}

/**
 * The cursor in a document, `unreadable` for one this code would never write: a `closed_after_ms`
 * that is no positive whole number of ms, a cursor ahead of the job's own closed boundary
 * (`now − closedAfterMs(job)`: a hand-edited `closed_after_ms` cannot move it), malformed rules (a
 * schedule or zone a declaration refuses). A changed retry policy keeps an earlier cursor readable.
 */
function readCursor(
  data: DocumentData | undefined,
  updateTime: Timestamp | undefined,
  job: DeclaredJob,
  now: Date,
): Cursor | 'unreadable' | undefined {
  // A document with only pauses on it (`pauses.ts`) has no cursor yet.
  if (data === undefined || (data.checked_before === undefined && data.run_seen === undefined)) {
    return undefined;
  }
  const seenAt = data.seen_at ?? updateTime; // a cursor of an earlier version: its write
  if (!(seenAt instanceof Timestamp)) return 'unreadable';
  const at = data.checked_before;
  const seen = data.run_seen;
  const closedAfter = data.closed_after_ms ?? closedAfterMs(job);
  if (!(at instanceof Timestamp) || typeof seen !== 'boolean') return 'unreadable';
  const own = closedAfterMs(job);
  // The stored value is its writer's (an earlier revision's retry settings may differ), so it is
  // only checked for shape; the cursor is judged against this job's own boundary below.
  if (!Number.isSafeInteger(closedAfter) || closedAfter <= 0) return 'unreadable';
  // A check never moves its cursor past its closed boundary: a later one was not written here.
  if (at.toMillis() > now.getTime() - own + CURSOR_CLOCK_SLACK_MS) return 'unreadable';
  const rules = readRules(data.rules, job);
  if (rules === 'unreadable') return 'unreadable';
  return { checkedBefore: at.toDate(), runSeen: seen, rules, seenAt: seenAt.toMillis() };
}

function cursorDocument(job: DeclaredJob, cursor: Cursor, expireAt: Timestamp): DocumentData {
  return {
    job_name: job.id,
    checked_before: Timestamp.fromDate(cursor.checkedBefore),
    run_seen: cursor.runSeen,
    closed_after_ms: closedAfterMs(job),
    seen_at: Timestamp.fromMillis(cursor.seenAt),
    rules: cursor.rules.map((r) => ({
      schedule: r.schedule,
      time_zone: r.timeZone,
      ...(r.since === undefined ? {} : { since: Timestamp.fromMillis(r.since) }),
      ...(r.until === undefined ? {} : { until: Timestamp.fromMillis(r.until) }),
    })),
    expire_at: expireAt,
  };
}

/**
 * The rules after a check at `now` judged with the declared `job`: the newest one kept, or the
 * declared one appended (first seen now; the one before it last seen at `lastSeen`, the cursor's
 * last write), and those no slot at or after `from` (the retained range) can be judged by dropped.
 * Of at most {@link MAX_RULES}, the oldest keeps its `since` unless it was in force from `from` on:
 * a rule dropped for room was in force before it, so no time before it is judged by the rules.
 */
export function nextRules(
  rules: readonly JudgedRule[],
  job: ScheduleSpec,
  now: number,
  lastSeen: number,
  from: number,
): JudgedRule[] {
  const newest = rules.at(-1);
  // A job's first rule was in force before any check saw it.
  if (newest === undefined) return [ruleOf(job)];
  let out: JudgedRule[] = [...rules];
  if (!sameRule(newest, job)) {
    out = out.map((rule, i) => (i === out.length - 1 ? { ...rule, until: lastSeen } : rule));
    out.push({ ...ruleOf(job), since: now });
  }
  // A rule that was replaced before `from` judges nothing any more.
  while (out.length > 1 && (out[1]?.since ?? 0) <= from) out = out.slice(1);
  const [oldest, ...rest] = out.slice(-MAX_RULES);
  if (oldest === undefined) return [ruleOf(job)];
  if (oldest.since !== undefined && oldest.since > from) return [oldest, ...rest];
  const { since: _since, ...first } = oldest;
  return [first, ...rest];
}

/** Whether `t` lies before the oldest rule's first sighting: a rule no longer kept may have ruled it. */
function beforeRules(rules: readonly JudgedRule[], t: number): boolean {
  return t < (rules[0]?.since ?? Number.NEGATIVE_INFINITY);
}

/** The rules that may have been in force at `t`: each from the last sighting of the one before it. */
function possibleRules(rules: readonly JudgedRule[], t: number): JudgedRule[] {
  return rules.filter(
    (_rule, i) =>
      (i === 0 || t >= (rules[i - 1]?.until ?? 0)) &&
      (i === rules.length - 1 || t < (rules[i + 1]?.since ?? Number.POSITIVE_INFINITY)),
  );
}

function isSlotOf(rule: ScheduleSpec, t: number): boolean {
  return slotsBetween(rule, new Date(t), new Date(t + 1), 1).slots.length === 1;
}

/**
 * Whether detection judges a slot at `slot` under `rules`: it is not before the oldest rule's
 * `since`, and every rule possibly in force then schedules it (`npm run runs -- --check` asks this
 * of each missed row).
 */
export function isJudgedSlot(rules: readonly JudgedRule[], slot: Date): boolean {
  if (beforeRules(rules, slot.getTime())) return false;
  return possibleRules(rules, slot.getTime()).every((rule) => isSlotOf(rule, slot.getTime()));
}

/**
 * The rules a job's slots are judged by at `now`: those its check cursor recorded (the document
 * `{jobId}~check` as read, and its update time), with `job`'s declared rule as the newest (a
 * change seen now, if it differs). Only the declared rule for a job without a readable cursor.
 */
export function rulesInForce(
  data: DocumentData | undefined,
  updateTime: Timestamp | undefined,
  job: DeclaredJob,
  now: Date,
): readonly JudgedRule[] {
  const cursor = readCursor(data, updateTime, job, now);
  if (cursor === undefined || cursor === 'unreadable') return [ruleOf(job)];
  return nextRules(cursor.rules, job, now.getTime(), cursor.seenAt, Number.NEGATIVE_INFINITY);
}

/**
 * The slots of [from, to) to judge under `rules`: a time that every rule possibly in force then
 * schedules (after a change, old slots by the old rule, new ones by the new, and in between only
 * those both schedule; none before the oldest rule's `since`), at most `max`, oldest first.
 *
 * @example judgedSlots([{ schedule: '* * * * *', timeZone: 'Etc/UTC', until }, { schedule: '*\/2 * * * *', timeZone: 'Etc/UTC', since }], from, to, 1000)
 */
export function judgedSlots(
  rules: readonly JudgedRule[],
  from: Date,
  to: Date,
  max: number,
): { slots: readonly Date[]; truncated: boolean } {
  const start = rules[0]?.since;
  if (start !== undefined && start > from.getTime()) {
    if (start >= to.getTime()) return { slots: [], truncated: false };
    return judgedSlots(rules, new Date(start), to, max);
  }
  if (rules.length === 1) return slotsBetween(rules[0] as JudgedRule, from, to, max);
  const candidates = new Set<number>();
  let truncated = false;
  for (const [i, rule] of rules.entries()) {
    const lo = Math.max(from.getTime(), i === 0 ? 0 : (rules[i - 1]?.until ?? 0));
    const hi = Math.min(to.getTime(), rules[i + 1]?.since ?? Number.POSITIVE_INFINITY);
    if (lo >= hi) continue;
    const got = slotsBetween(rule, new Date(lo), new Date(hi), max);
    truncated ||= got.truncated;
    for (const slot of got.slots) candidates.add(slot.getTime());
  }
  const slots = [...candidates]
    .sort((a, b) => a - b)
    .filter((t) => possibleRules(rules, t).every((rule) => isSlotOf(rule, t)));
  return {
    slots: slots.slice(0, max).map((t) => new Date(t)),
    truncated: truncated || slots.length > max,
  };
}

/**
 * The verdict on one slot at `now`, the one place it is decided:
 * - `final`: nothing to report (completed, skipped, reported already, before the job's first record);
 * - `open`: an attempt may still come or still runs: judge it at a later check;
 * - `missed` / `failed`: report it.
 * With `end`, the latest time its execution can have ended, ms: the next slot waits for it.
 */
export type SlotVerdict = {
  readonly verdict: 'final' | 'open' | 'missed' | 'failed';
  readonly end: number;
};

/**
 * Decides a slot's {@link SlotVerdict} from its record and the latest end of the previous slot's
 * execution (`previousEnd`, ms). Its execution started at its first claim or, with none, when the
 * previous one could have ended, never after `slot + W` (the execution outstanding at its time
 * started before it, and lasts at most W): it closes one attempt deadline after that start + W.
 */
export function slotVerdict(
  job: DeclaredJob,
  slot: Date,
  record: StoredRecord | undefined,
  row: SlotRow,
  previousEnd: number,
  now: Date,
): SlotVerdict {
  const s = slot.getTime();
  const windowMs = retryWindowMs(job);
  const clamp = (t: number) => Math.min(s + windowMs, Math.max(s, t));
  const run = record === undefined || record.status === 'unreadable' ? undefined : record;
  const start = clamp(run?.firstClaimedAt?.getTime() ?? previousEnd);
  const latestEnd = start + windowMs;
  if (run?.status === 'completed') {
    return { verdict: 'final', end: Math.min(run.completedAt?.getTime() ?? latestEnd, latestEnd) };
  }
  if (run?.status === 'skipped') return { verdict: 'final', end: latestEnd };
  if (row.reported) {
    const at = run?.failedAt?.getTime() ?? latestEnd;
    return {
      verdict: 'final',
      end: run?.status === 'failed' ? Math.min(at, latestEnd) : latestEnd,
    };
  }
  const closesAt = latestEnd + job.attemptDeadlineSeconds * 1000;
  if (now.getTime() < closesAt) return { verdict: 'open', end: latestEnd };
  if (record !== undefined && isLeaseLive(record, now)) return { verdict: 'open', end: latestEnd };
  if (row.state === 'missed') return { verdict: 'missed', end: latestEnd };
  if (row.state === 'failed' || row.state === 'in_progress') {
    return { verdict: 'failed', end: latestEnd };
  }
  return { verdict: 'final', end: latestEnd };
}

function fields(row: SlotRow) {
  return {
    jobName: row.job,
    slot: row.slot.toISOString(),
    runId: row.runId,
    state: row.state,
    attempts: row.attempts,
    lastError: row.lastError,
  };
}

/** How long before it reached the function an attempt's request may have begun, ms. */
const REQUEST_SLACK_MS = 10_000;

/**
 * The `finalFailure` of `runOnce` for the run of `job`'s `slot`: a fresh reporter id when the job's
 * retry policy proves no Scheduler retry can follow the failed attempt ({@link noRetryFollows},
 * judged on Firestore's time), so the release reports it in the same write.
 *
 * @param deliveredAt - Firestore's time when the failing attempt's delivery reached this instance:
 *   Scheduler gives an attempt up at its deadline, and may decide on a retry then.
 *
 * @throws {LedgerUnavailableError} if the clock cannot be read (runOnce then releases unreported).
 */
export function finalFailureReporter(
  job: DeclaredJob,
  slot: Date,
  deliveredAt: Date,
  clock: () => Promise<Date>,
): (attempt: Attempt) => Promise<string | undefined> {
  return async (attempt) => {
    // Scheduler's first attempt came at or after the slot, and at or before the first claim.
    const firstAttempt = Math.max(slot.getTime(), attempt.firstClaimedAt.getTime());
    // Scheduler decides on a retry when it sees the failure or when the attempt deadline passes,
    // whichever comes first: a job running past its deadline was given up on earlier than now.
    // The attempt began at most REQUEST_SLACK_MS before its delivery reached this instance.
    const deadline = deliveredAt.getTime() - REQUEST_SLACK_MS + job.attemptDeadlineSeconds * 1000;
    const decidedAt = Math.min((await clock()).getTime(), deadline);
    const elapsedMs = decidedAt - firstAttempt;
    return noRetryFollows(job, attempt.attempts, elapsedMs) ? randomUUID() : undefined;
  };
}

/**
 * Logs the report of a slot's run that failed finally and reported itself (its release wrote
 * `reported_at`): the same ERROR line a check writes, once, by the failing attempt.
 */
export function reportFinalFailure(
  logger: Logger,
  job: DeclaredJob,
  scheduleTime: string,
  failed: { readonly attempt: Attempt; readonly error: unknown },
): void {
  logger.error(
    {
      jobName: job.id,
      slot: new Date(scheduleTime).toISOString(),
      runId: failed.attempt.runId,
      state: 'failed',
      attempts: failed.attempt.attempts,
      lastError: describeThrown(failed.error).slice(0, MAX_ERROR_LENGTH),
      reportedBy: 'attempt',
    },
    FAILED_AFTER_RETRIES,
  );
}

/** What {@link MissedRunCheck} needs. */
export interface MissedRunCheckDeps {
  /** The run records: the batched read of slots, and the two reports. */
  readonly history: Pick<RunHistory, 'getMany' | 'reportMissed' | 'markReported'>;
  /** The per-job documents (`job-state.ts`), where each job's cursor lives. */
  readonly jobDocuments: Pick<
    RunDocuments,
    'readData' | 'create' | 'update' | 'expireAt' | 'retentionMs'
  >;
  /** Firestore's time now: the one clock windows and leases are judged by. */
  readonly clock: () => Promise<Date>;
  /**
   * `FORCED_RUN_TOLERANCE_SECONDS` in ms (each job's through `forcedRunToleranceMs`): a forced
   * run first claimed within it before its slot, or later, is that slot's run. 0 by default.
   */
  readonly forcedRunToleranceMs?: number;
}

/** What one check did. */
export interface CheckResult {
  /** Slots read (0 when nothing new had closed, or another instance moved the cursor first). */
  readonly checked: number;
  /** Slots this call reported. */
  readonly reported: number;
  /** Where the cursor stands after the check, if this call knows. */
  readonly checkedBefore: Date | undefined;
}

const NOTHING: CheckResult = { checked: 0, reported: 0, checkedBefore: undefined };

/** A slot to report, and the message its report logs. */
interface Finding {
  readonly row: SlotRow;
  readonly message: typeof MISSED_RUN | typeof FAILED_AFTER_RETRIES | typeof PAUSED_SLOT;
  /** Still `in_progress`, its lease lapsed: the report also ends the attempt (`failed`). */
  readonly lapsed?: boolean;
}

/** What the check learnt of a range: its findings and where the cursor goes. */
interface Judged {
  readonly findings: readonly Finding[];
  readonly next: Date;
  readonly runSeen: boolean;
  readonly stopped: boolean;
}

/**
 * Missed-run detection for the jobs of one function instance: {@link isDue} says whether a
 * processed delivery checks, {@link check} checks a job's slots whose windows closed since the last
 * check. Safe to share across concurrent requests; it remembers only where its own last check left
 * each cursor.
 *
 * @example
 * const missedRuns = new MissedRunCheck({ history, jobDocuments, clock: () => ledger.serverTime() });
 * if (await missedRuns.isDue(job, slot, scope)) await missedRuns.check(job, scope, logger);
 */
export class MissedRunCheck {
  readonly #deps: MissedRunCheckDeps;
  /** Each cursor as this instance's last check left it, ms, by document id. */
  readonly #known = new Map<string, number>();
  /**
   * Each job's first slot of the period its last delivery fell in: slot arithmetic costs a fraction
   * of a millisecond, which a processed run would otherwise pay at every delivery.
   */
  readonly #firstSlots = new Map<string, { readonly period: number; readonly first?: number }>();

  constructor(deps: MissedRunCheckDeps) {
    this.#deps = deps;
  }

  /**
   * Whether a processed delivery of `slot` should check: its slot is due ({@link isDueSlot}; the
   * period's first slot is computed once per period and job), or
   * this instance's last check left the cursor two periods or more behind the closed boundary. No
   * I/O: the clock is read only when a cursor is known, and `ledger.serverTime()` reads nothing
   * once the instance learnt Firestore's time.
   *
   * @throws {LedgerUnavailableError} if the clock must be learnt and Firestore fails.
   */
  async isDue(job: DeclaredJob, slot: Date, scope: Scope): Promise<boolean> {
    const period = periodOf(slot.getTime());
    let memo = this.#firstSlots.get(job.id);
    if (memo?.period !== period) {
      const first = firstSlotOfPeriod(job, period);
      memo = first === undefined ? { period } : { period, first };
      this.#firstSlots.set(job.id, memo);
    }
    if (memo.first === slot.getTime()) return true;
    const known = this.#known.get(checkDocumentId(job.id, scope));
    if (known === undefined) return false;
    const boundary = (await this.#deps.clock()).getTime() - closedAfterMs(job);
    return boundary - known >= 2 * CHECK_PERIOD_MS;
  }

  /**
   * Judges the job's slots since its cursor ({@link slotVerdict}), reports each missed or finally
   * failed one that nobody reported (ERROR `missed run` / `run failed after retries` with job, slot,
   * run id and state), then moves the cursor. Costs one read of the cursor; when slots closed
   * since, one batched read per 500 slots (the slot before the range included), one write per
   * report, and the fenced cursor write.
   *
   * @param scope - the key scope of the runs to check (the delivery's).
   * @returns what it checked and reported.
   * @throws {LedgerUnavailableError} if a read or a write fails (the cursor has not moved, so the
   *   next check covers the range; reports are once by their own writes); the caller logs it: a
   *   failed check must never fail a run.
   * @example const { reported } = await missedRuns.check(job, [], logger);
   */
  async check(job: DeclaredJob, scope: Scope, logger: Logger): Promise<CheckResult> {
    const { jobDocuments, clock } = this.#deps;
    const id = checkDocumentId(job.id, scope);
    const now = await clock();
    const boundary = now.getTime() - closedAfterMs(job);
    const read = await jobDocuments.readData(id);
    const { data } = read;
    // Pauses (`pauses.ts`) live on this document: a slot inside one is not missed, and a pause
    // past its bound is reported here, once; the cursor write is then fenced on that report's.
    const stored = readPauses(data, now);
    const pauses = stored === 'unreadable' ? [] : stored;
    if (stored === 'unreadable') {
      logger.warn(
        { jobName: job.id, document: id },
        'missed-run check: the pauses on the cursor document hold fields this version never writes; no slot counts as paused until they are repaired',
      );
    }
    const updateTime =
      read.updateTime === undefined
        ? undefined
        : await reportOverduePause(jobDocuments, id, job.id, pauses, read.updateTime, now, logger);
    if (updateTime === 'changed') {
      this.#known.delete(id);
      return NOTHING;
    }
    let cursor = readCursor(data, read.updateTime, job, now);
    if (cursor === 'unreadable') {
      logger.error(
        { jobName: job.id, document: id },
        'missed-run check: the cursor document holds values this version never writes (a cursor ahead of the closed boundary, malformed rules); no slot of this job is judged until it is deleted (the next check then starts over, a day back)',
      );
      return NOTHING;
    }
    const lastWrite = cursor?.seenAt ?? now.getTime();
    const afresh = cursor !== undefined && this.#isStale(job, cursor, lastWrite, now);
    if (cursor !== undefined && afresh) {
      cursor = this.#startAfresh(job, cursor, boundary, now, logger);
    }
    // Never before the retention: an older slot's record may be gone (TTL), and its absence
    // proves nothing, so it is never reported as missed. A cursor older than that (the TTL removes
    // one unwritten for a retention) starts over from the retained range, its first record unseen.
    const retained = now.getTime() - jobDocuments.retentionMs;
    const stale = cursor !== undefined && cursor.checkedBefore.getTime() < retained;
    const from = new Date(
      Math.max(cursor?.checkedBefore.getTime() ?? boundary - FIRST_LOOK_BACK_MS, retained),
    );
    // Rules are kept for the retention, so `runs --check` judges older windows by them too.
    const rules = nextRules(cursor?.rules ?? [], job, now.getTime(), lastWrite, retained);
    const { slots, truncated } =
      boundary <= from.getTime()
        ? { slots: [], truncated: false }
        : judgedSlots(rules, from, new Date(boundary), MAX_CHECK_SLOTS);
    const runSeenBefore = !stale && (cursor?.runSeen ?? false);
    // Compared whole: at MAX_RULES a change drops the oldest rule and keeps the count.
    const unchangedRules =
      cursor !== undefined && JSON.stringify(cursor.rules) === JSON.stringify(rules);
    const heartbeat = now.getTime() - lastWrite >= CURSOR_HEARTBEAT_MS;
    if (slots.length === 0) {
      // Nothing closed: write only a job's first cursor (a weekly job has one from then on), a
      // changed rule, a fresh start, or a heartbeat that shows the job is still checked.
      const at = cursor === undefined ? new Date(Math.max(boundary, from.getTime())) : from;
      const moved: Cursor = {
        checkedBefore: at,
        runSeen: runSeenBefore,
        rules,
        seenAt: now.getTime(),
      };
      if (cursor === undefined || !unchangedRules || heartbeat || afresh) {
        const written = await this.#writeCursor(id, job, moved, updateTime);
        if (written === 'lost') return NOTHING;
      }
      this.#known.set(id, at.getTime());
      return { ...NOTHING, checkedBefore: at };
    }
    const judged = await this.#judge(
      job,
      scope,
      slots,
      truncated,
      boundary,
      runSeenBefore,
      now,
      pauses,
    );
    const { reported, raced } = await this.#report(job, scope, judged, logger);
    const next = raced !== undefined && raced < judged.next ? raced : judged.next;
    const stopped = judged.stopped || next !== judged.next;
    const moved: Cursor = {
      checkedBefore: next,
      runSeen: judged.runSeen,
      rules,
      seenAt: now.getTime(),
    };
    const unchanged =
      cursor !== undefined &&
      !afresh &&
      unchangedRules &&
      !heartbeat &&
      next.getTime() === from.getTime() &&
      judged.runSeen === cursor.runSeen;
    if (!unchanged && (await this.#writeCursor(id, job, moved, updateTime)) === 'lost') {
      // Another instance moved the cursor first: the range was its to judge too; our reports
      // were each once by their own writes.
      this.#known.delete(id);
      return { checked: slots.length, reported, checkedBefore: undefined };
    }
    // Stopped at a run still in flight: the next due delivery re-checks from it; this instance's
    // memory does not ask for one at every delivery meanwhile.
    this.#known.set(id, stopped ? boundary : next.getTime());
    return { checked: slots.length, reported, checkedBefore: next };
  }

  /** Whether nothing wrote the cursor for {@link STALE_CURSOR_MS} (or four of the job's gaps). */
  #isStale(job: DeclaredJob, cursor: Cursor, lastWrite: number, now: Date): boolean {
    const gap = longestGapMs(job, cursor.checkedBefore, 3) ?? 0;
    return now.getTime() - lastWrite > Math.max(STALE_CURSOR_MS, 4 * gap);
  }

  /** A cursor nobody wrote for days starts at the boundary, its range said in one line. */
  #startAfresh(
    job: DeclaredJob,
    cursor: Cursor,
    boundary: number,
    now: Date,
    logger: Logger,
  ): Cursor {
    const from = cursor.checkedBefore.toISOString();
    const to = new Date(Math.max(boundary, cursor.checkedBefore.getTime())).toISOString();
    logger.warn(
      { jobName: job.id, from, to },
      `missed-run check: nothing checked job ${job.id} from ${from} to ${to} (it was not declared, or no check ran), so it starts afresh from its declaration now and the slots in that range are not judged; see them with npm run runs -- --job ${job.id} --since ${sinceArg(Date.parse(from), boundary)}`,
    );
    const checkedBefore = new Date(Math.max(boundary, cursor.checkedBefore.getTime()));
    return { checkedBefore, runSeen: false, rules: [ruleOf(job)], seenAt: now.getTime() };
  }

  /** The verdicts of `slots` (with the slot before them, for the wait behind it). */
  async #judge(
    job: DeclaredJob,
    scope: Scope,
    slots: readonly Date[],
    truncated: boolean,
    boundary: number,
    runSeenBefore: boolean,
    now: Date,
    pauses: readonly Pause[],
  ): Promise<Judged & { readonly tokens: ReadonlyMap<string, Timestamp> }> {
    const first = slots[0] as Date;
    const before = previousSlot(job, first);
    const all = before === undefined ? slots : [before, ...slots];
    // A forced run that was a slot's own delivery (a misjudged clock) is that slot's run.
    const tolerance = () => forcedRunToleranceMs(job, this.#deps.forcedRunToleranceMs ?? 0);
    const { runIds, records, updateTimes } = await readSlotRecords(
      this.#deps.history,
      job,
      all,
      scope,
      tolerance,
    );
    let previousEnd = Number.NEGATIVE_INFINITY;
    if (before !== undefined) {
      const runId = runIds[0] as string;
      const record = records.get(runId);
      const row = slotRow(job, before, runId, record, now);
      previousEnd = slotVerdict(
        job,
        before,
        record,
        row,
        before.getTime() + retryWindowMs(job),
        now,
      ).end;
    }
    let runSeen = runSeenBefore;
    const findings: Finding[] = [];
    const offset = all.length - slots.length;
    for (const [i, slot] of slots.entries()) {
      const runId = runIds[i + offset] as string;
      const record = records.get(runId);
      const row = slotRow(job, slot, runId, record, now);
      const { verdict, end } = slotVerdict(job, slot, record, row, previousEnd, now);
      previousEnd = end;
      // A slot with no record inside a pause (`pauses.ts`) is not missed: logged as paused, once.
      const paused = pausedRow(row, pauses);
      if (paused.state === 'paused') {
        findings.push({ row: paused, message: PAUSED_SLOT });
        continue;
      }
      if (!runSeen && !hasRecord(row)) continue; // before the job's first record: it did not exist yet
      runSeen = true;
      if (verdict === 'open') {
        return { findings, next: slot, runSeen, stopped: true, tokens: updateTimes };
      }
      if (verdict === 'missed') findings.push({ row, message: MISSED_RUN });
      if (verdict === 'failed')
        findings.push({
          row: { ...row, state: 'failed' },
          message: FAILED_AFTER_RETRIES,
          lapsed: record?.status === 'in_progress',
        });
    }
    const last = slots.at(-1) as Date;
    const next = truncated ? new Date(last.getTime() + 1) : new Date(boundary);
    return { findings, next, runSeen, stopped: false, tokens: updateTimes };
  }

  /** Reports each finding once (its own conditional write), logging those this call wrote. */
  async #report(
    job: DeclaredJob,
    scope: Scope,
    judged: Pick<Judged, 'findings'> & { readonly tokens: ReadonlyMap<string, Timestamp> },
    logger: Logger,
  ): Promise<{ readonly reported: number; readonly raced: Date | undefined }> {
    const { history } = this.#deps;
    const { findings, tokens } = judged;
    // This check's id, written with each report: a report whose answer was lost but whose write
    // landed is recognised as ours by a read, and logged, instead of never.
    const reporter = randomUUID();
    const report = async (row: SlotRow, lapsed: boolean): Promise<'reported' | 'exists'> => {
      const token = tokens.get(row.runId);
      try {
        if (token === undefined) {
          const details = {
            jobName: job.id,
            scheduleTime: row.slot.toISOString(),
            keyScope: scopeId(scope),
          };
          return await history.reportMissed(row.runId, details, reporter);
        }
        return await history.markReported(row.runId, token, reporter, lapsed);
      } catch (err) {
        const { records } = await history.getMany([row.runId]);
        const now = records.get(row.runId);
        if (now !== undefined && now.status !== 'unreadable' && now.reportedBy === reporter) {
          return 'reported';
        }
        throw err;
      }
    };
    let reported = 0;
    let raced: Date | undefined;
    for (const { row, message, lapsed } of findings) {
      if (message === PAUSED_SLOT) {
        logger.info({ ...fields(row), note: row.pauseNote }, message);
        continue;
      }
      if ((await report(row, lapsed === true)) !== 'reported') {
        // A claim, a retry or another report came first: the cursor stops at the earliest such
        // slot, so the next check judges it again (a claim whose attempt then dies is reported).
        if (raced === undefined || row.slot < raced) raced = row.slot;
        continue;
      }
      logger.error(fields(row), message);
      reported++;
    }
    return { reported, raced };
  }

  /** Writes the cursor, fenced on the update time read; `lost` if another instance wrote first. */
  async #writeCursor(
    id: string,
    job: DeclaredJob,
    cursor: Cursor,
    updateTime: Timestamp | undefined,
  ): Promise<'written' | 'lost'> {
    const { jobDocuments } = this.#deps;
    const document = cursorDocument(job, cursor, jobDocuments.expireAt());
    const written =
      updateTime === undefined
        ? await jobDocuments.create(id, 'missed-run check', document)
        : await jobDocuments.update(id, 'missed-run check', document, updateTime);
    return written === 'exists' || written === 'changed' ? 'lost' : 'written';
  }
}

/** A `--since` argument that reaches back from `now` to `from`, in whole hours. */
function sinceArg(from: number, now: number): string {
  return `${Math.max(1, Math.ceil((now - from) / 3_600_000) + 1)}h`;
}
