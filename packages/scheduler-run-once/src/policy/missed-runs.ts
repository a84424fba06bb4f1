/** Missed-run detection, each report an ERROR once across instances (docs/how-it-works.md). */
import { randomUUID } from 'node:crypto';
import type { Timestamp } from '@google-cloud/firestore';
import { loggableError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import {
  judgedAt,
  type RunRecord,
  type StoredRecord,
  type UnreadableRecord,
} from '../core/run-record.ts';
import { errorEventFields } from './error-report.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { FAILED_AFTER_RETRIES, MISSED_RUN } from './log-messages.ts';
import {
  checkDocumentId,
  cursorDocument,
  OVERTAKEN,
  type Window,
  windowOf,
} from './missed-run-cursor.ts';
import {
  isSighted,
  isUnreadable,
  judgedSlots,
  previousJudgedSlot,
  type RuleSighting,
  rulesFromClaims,
  type Unreadable,
} from './missed-run-rules.ts';
import {
  PAUSED_SLOT,
  type PausesRead,
  pauseAt,
  readPauses,
  reportOverduePause,
} from './pauses.ts';
import { longestExecutionMs } from './retry-policy.ts';
import {
  REPORT_LOG_GRACE_MS,
  type RunHistory,
  readSlotRecords,
  unloggedReportBy,
  unloggedReporter,
} from './run-history.ts';
import { type SlotRange, slotsBetween } from './schedule.ts';
import { forcedRunToleranceMs } from './schedule-time.ts';
import { closedAfterMs, slotVerdict } from './slot-verdict.ts';

/** The log messages, for log-based metrics (`deploy.sh` creates them): `log-messages.ts`. */
export { FAILED_AFTER_RETRIES, MISSED_RUN };
/** Logged (ERROR) for a closed slot whose record this version cannot read: never passed silently. */
export const UNREADABLE_SLOT =
  'missed-run check: a closed slot\'s record cannot be read, so this check cannot tell whether it ran; repair it: if no attempt of this run is running, delete the document (the next check reports the slot missed, and npm run runs -- --backfill delivers it), or set status to "completed" if the run is done';

/**
 * Logged (WARNING) by each check that finds the pauses on a job's check document unreadable (a form
 * `npm run pause` never writes: `readPauses` in pauses.ts): then no slot counts as paused.
 */
export const UNREADABLE_PAUSES =
  'missed-run check: the pauses on the cursor document hold fields this version never writes; no slot counts as paused until they are repaired';

/**
 * Logged (ERROR) by each check that finds a job's cursor unreadable (a form this version never
 * writes: `readCursor` in missed-run-cursor.ts): no slot of the job and scope is judged until the
 * cursor is deleted. Its field `reason` names what in the cursor is wrong (`Unreadable`).
 */
export const UNREADABLE_CURSOR =
  'missed-run check: the cursor document holds values this version never writes (its reason field says which); no slot of this job is judged until it is deleted (the next check then starts over, a day back). Right after a change to a longer retry window, a cursor ahead of the new boundary reads again by itself once the boundary passes it';

/**
 * Logged (WARNING) by each check that finds a job's cursor ahead of its closed boundary because it
 * was written under a shorter retry window (a deploy lengthened the job's window): no slot of the
 * job is judged until `readsAgainAt`, when the boundary passes it; nothing is lost or to repair.
 */
export const CURSOR_OF_SHORTER_WINDOW =
  'missed-run check: the cursor was written under a shorter retry window than the job has now; no slot of this job is judged until readsAgainAt, when the cursor reads again by itself (nothing to repair)';

/**
 * Logged (WARNING) when a report this check logged could not be marked logged: the next check finds
 * it unlogged and logs it again (each such failure costs one more log line, never a lost report).
 */
export const REPORT_NOT_ACKNOWLEDGED =
  'missed-run check: the report logged above could not be marked logged; a check after it may log it again';

/** How often a job's closed slots are checked by its own deliveries at most, in ms: hourly. */
export const CHECK_PERIOD_MS = 3_600_000;
/** The most slots one check reads (two batched reads); the next checks go on from the cursor. */
export const MAX_CHECK_SLOTS = 1000;

/** Whether `slot` is the job's first in its {@link CHECK_PERIOD_MS} period (from the epoch): pure. */
export function isDueSlot(
  job: Pick<DeclaredJob, 'schedule' | 'timeZone'>,
  slot: Date,
): boolean {
  const t = slot.getTime();
  const start =
    t - (((t % CHECK_PERIOD_MS) + CHECK_PERIOD_MS) % CHECK_PERIOD_MS);
  const end = new Date(start + CHECK_PERIOD_MS);
  return slotsBetween(job, new Date(start), end, 1).slots[0]?.getTime() === t;
}

/** What {@link MissedRunCheck} needs. */
export interface MissedRunCheckDeps {
  readonly history: Pick<
    RunHistory,
    | 'getMany'
    | 'reportMissed'
    | 'markReported'
    | 'claimRelog'
    | 'acknowledgeReport'
  >;
  /** The per-job documents (`job-state.ts`), where each job's cursor lives. */
  readonly jobDocuments: RunDocuments;
  /** Firestore's time now. */
  readonly clock: () => Promise<Date>;
  /** `FORCED_RUN_TOLERANCE_SECONDS` in ms (each job's: `forcedRunToleranceMs`); 0 by default. */
  readonly forcedRunToleranceMs?: number;
}

/**
 * What one check did: how many slots it read, and how many it reported; `pauses`: the job's
 * pauses as the check read them, for the late-run scan that follows (absent when the check stopped
 * before judging: a pause it reported changed the document, or the cursor is unreadable).
 */
export type CheckResult = {
  readonly checked: number;
  readonly reported: number;
  readonly pauses?: PausesRead;
};

/** The window a check judges, with the pauses as read from its document. */
type CheckWindow = Window & { readonly pausesRead: PausesRead };

const NOTHING: CheckResult = { checked: 0, reported: 0 };

type SlotRead = {
  readonly slot: Date;
  readonly runId: string;
  readonly record?: StoredRecord;
  /** The record's update time as read, ms. */
  readonly updatedAt?: number;
};

/** A closed slot whose record cannot be read: an ERROR by the check that judges it. */
interface UnreadableSlot {
  readonly slot: Date;
  readonly runId: string;
  readonly record: UnreadableRecord;
}

/**
 * A slot to report, its log line; `lapsed`: still `in_progress`, the report ends it `failed`;
 * `unloggedBy`: already reported by that check, which never acknowledged logging it.
 */
interface Finding extends Omit<SlotRead, 'record'> {
  readonly fields: object;
  readonly message:
    | typeof MISSED_RUN
    | typeof FAILED_AFTER_RETRIES
    | typeof PAUSED_SLOT;
  readonly lapsed: boolean;
  readonly unloggedBy?: string;
  /** For a report to log again: the check that had claimed doing so when it was read, if any. */
  readonly claimedBy?: string;
}

/**
 * A check's claim of logging a report again: `log`, whether this check logs it; `token`, the
 * update time to mark it logged on (none: no read gave one).
 */
interface RelogClaim {
  readonly log: boolean;
  readonly token?: Timestamp;
}

/** What a check learnt of a range; `tokens`: the records' update times, fencing their reports. */
interface Judged {
  readonly findings: readonly Finding[];
  readonly unreadable: readonly UnreadableSlot[];
  readonly next: Date;
  readonly runSeen: boolean;
  readonly stopped: boolean;
  readonly tokens: ReadonlyMap<string, Timestamp>;
  /** The slots' claims read, each a sighting of the rule its revision declared. */
  readonly claims: readonly RuleSighting[];
}

/** The slots of `window` to judge, oldest first, at most {@link MAX_CHECK_SLOTS}. */
function slotsToJudge(window: Window): SlotRange {
  const { rules, from, boundary } = window;
  return judgedSlots(rules, from, new Date(boundary), MAX_CHECK_SLOTS);
}

/** The records among `records` whose first claim stamped its revision's rule, at their slots. */
function claimSightings(
  records: Iterable<StoredRecord | undefined>,
): RuleSighting[] {
  const claims: RuleSighting[] = [];
  for (const record of records) {
    if (record === undefined || record.status === 'unreadable') {
      continue;
    }
    const { claimedUnder, scheduleTime } = record;
    if (claimedUnder !== undefined && scheduleTime !== undefined) {
      claims.push({ ...claimedUnder, at: scheduleTime.getTime() });
    }
  }
  return claims;
}

/**
 * The finding that logs a report written by a check not known to have logged it (`unloggedBy`):
 * reported `failed` (a final failure) or `missed`; a backfill may have re-opened it since.
 */
function reloggedFinding(
  job: DeclaredJob,
  { slot, runId }: { slot: Date; runId: string },
  run: Exclude<StoredRecord, UnreadableRecord>,
  unloggedBy: NonNullable<ReturnType<typeof unloggedReportBy>>,
): Finding {
  const missed = reportedState(run) === 'missed';
  const line = { jobName: job.id, slot: slot.toISOString(), runId };
  const fields = {
    ...line,
    state: missed ? 'missed' : 'failed',
    attempts: run.attempts,
    lastError: run.lastError,
    reporter: unloggedBy,
    relogged: true,
    ...errorEventFields(missed ? 'missed' : 'failed', job.id, line.slot),
  };
  const message = missed ? MISSED_RUN : FAILED_AFTER_RETRIES;
  const claimedBy = run.relogBy;
  return { slot, runId, fields, message, lapsed: false, unloggedBy, claimedBy };
}

/**
 * What a report said when it was written, for a check that logs it again: `failed` if an attempt
 * had claimed the run before it (its first claim no later than the report), else `missed`. A
 * backfill or re-run that re-opened the run since changes its status (`in_progress`, then `failed`
 * or `completed`), not what was reported. A record of an earlier version, which wrote no first
 * claim, is taken at its status.
 */
export function reportedState(
  run: Pick<RunRecord, 'status' | 'firstClaimedAt' | 'reportedAt'>,
): 'missed' | 'failed' {
  const { firstClaimedAt, reportedAt } = run;
  if (firstClaimedAt === undefined || reportedAt === undefined) {
    return run.status === 'failed' ? 'failed' : 'missed';
  }
  return firstClaimedAt.getTime() <= reportedAt.getTime() ? 'failed' : 'missed';
}

/** What judging a range has learnt so far, slot by slot. */
interface Judging {
  readonly job: DeclaredJob;
  readonly window: Pick<Window, 'now' | 'pauses' | 'runSeen'>;
  readonly findings: Finding[];
  readonly unreadable: UnreadableSlot[];
  /** When the last execution judged ended, ms. */
  end: number;
  /** Whether a record of the job's was seen: slots before its first are not judged. */
  runSeen: boolean;
}

/**
 * The findings of `slots` after an execution ending at `previousEnd` (ms), up to the first open
 * one. A slot whose report another check wrote and may still log, or whose run still executes
 * (`held`), is passed over, not stopped at: the slots after it are reported now, and `openAt`
 * keeps the cursor at it, so a later check decides it.
 */
function judge(
  job: DeclaredJob,
  slots: readonly SlotRead[],
  previousEnd: number,
  window: Pick<Window, 'now' | 'pauses' | 'runSeen'>,
): Omit<Judged, 'next' | 'tokens' | 'claims'> & { readonly openAt?: Date } {
  const judging: Judging = {
    job,
    window,
    findings: [],
    unreadable: [],
    end: previousEnd,
    runSeen: window.runSeen,
  };
  let heldAt: Date | undefined;
  for (const read of slots) {
    const verdict = judgeSlot(judging, read);
    if (verdict === 'held') {
      heldAt ??= read.slot;
    }
    if (verdict === 'open') {
      return judgedUpTo(judging, heldAt ?? read.slot);
    }
  }
  return judgedUpTo(judging, heldAt);
}

/** What `judging` found, stopped at `openAt` (the cursor goes no further) or at none. */
function judgedUpTo(
  { findings, unreadable, runSeen }: Judging,
  openAt: Date | undefined,
): Omit<Judged, 'next' | 'tokens' | 'claims'> & { readonly openAt?: Date } {
  return openAt === undefined
    ? { findings, unreadable, runSeen, stopped: false }
    : { findings, unreadable, runSeen, stopped: true, openAt };
}

/**
 * Judges one slot into `judging`: `open` where the check stops at it (the slot still open),
 * `held` for a report whose log its writer may yet write or a run that still executes (the check
 * goes on past it), else `judged`.
 */
function judgeSlot(
  judging: Judging,
  { slot, runId, record, updatedAt }: SlotRead,
): 'open' | 'held' | 'judged' {
  const { job, window } = judging;
  const verdict = slotVerdict(job, slot, record, judging.end, window.now);
  judging.end = verdict.end;
  const judged =
    record === undefined ? undefined : judgedAt(record, window.now);
  const run = judged?.status === 'unreadable' ? undefined : judged;
  const report = (
    message: Finding['message'],
    state: string,
    more: object = {},
  ) => {
    const lapsed = record?.status === 'in_progress';
    const at = { slot, runId, lapsed };
    judging.findings.push(slotFinding(job, at, run, message, state, more));
  };
  const absent = isAbsent(judged, run);
  const pause =
    absent && (run?.kind ?? 'slot') === 'slot'
      ? pauseAt(window.pauses, slot)
      : undefined;
  if (pause !== undefined) {
    report(PAUSED_SLOT, 'paused', { lastError: undefined, note: pause.note });
    return 'judged';
  }
  if (!judging.runSeen && absent) {
    return 'judged'; // before the job's first record: it did not exist yet
  }
  judging.runSeen = true;
  if (verdict.verdict === 'open') {
    return 'open';
  }
  // Its run still executes: whether it completes is known later, but Scheduler's execution of
  // the slot is over, so the slots after it are judged now (`--faults --seed=14`, history 38).
  if (verdict.verdict === 'running') {
    return 'held';
  }
  const unloggedBy = unloggedReportBy(run?.reportedBy);
  if (unloggedBy !== undefined && run?.reportedAt !== undefined) {
    // Written by a check not yet known to have logged it, or claimed by one to log it again:
    // wait for it, or log it for it.
    if (isYoungReport(run, updatedAt, window.now)) {
      return 'held';
    }
    judging.findings.push(
      reloggedFinding(job, { slot, runId }, run, unloggedBy),
    );
    return 'judged';
  }
  // Written by another version or by hand: it is no proof the slot ran, so it is said loudly.
  if (judged?.status === 'unreadable') {
    judging.unreadable.push({ slot, runId, record: judged });
  }
  if (verdict.verdict === 'missed') {
    report(MISSED_RUN, 'missed');
  }
  if (verdict.verdict === 'failed') {
    report(FAILED_AFTER_RETRIES, 'failed');
  }
  return 'judged';
}

/**
 * Whether an unlogged report is younger than {@link REPORT_LOG_GRACE_MS}: since it was written,
 * or since a check claimed logging it again (`relog_by`; the record's update time `updatedAt`, ms).
 */
function isYoungReport(
  run: { readonly reportedAt?: Date; readonly relogBy?: string },
  updatedAt: number | undefined,
  now: Date,
): boolean {
  const claimedAt = run.relogBy === undefined ? undefined : updatedAt;
  const since = Math.max(run.reportedAt?.getTime() ?? 0, claimedAt ?? 0);
  return now.getTime() - since < REPORT_LOG_GRACE_MS;
}

/** The earlier of a slot the cursor must stop at so far (if any) and `slot`. */
function earliest(stopAt: Date | undefined, slot: Date): Date {
  return stopAt === undefined || slot < stopAt ? slot : stopAt;
}

/** Whether a slot has no record, or a bare `missed` one: neither a run nor a report. */
function isAbsent(
  judged: StoredRecord | undefined,
  run: Exclude<StoredRecord, UnreadableRecord> | undefined,
): boolean {
  return (
    judged === undefined ||
    (run?.status === 'missed' &&
      run.attempts === 0 &&
      run.reportedAt === undefined)
  );
}

/** The finding of a slot judged `state`: its run's attempts and last error, and `more` fields. */
function slotFinding(
  job: DeclaredJob,
  { slot, runId, lapsed }: { slot: Date; runId: string; lapsed: boolean },
  run: Exclude<StoredRecord, UnreadableRecord> | undefined,
  message: Finding['message'],
  state: string,
  more: object,
): Finding {
  const line = { jobName: job.id, slot: slot.toISOString(), runId, state };
  const reported = reportKindOf(message);
  const fields = {
    ...line,
    attempts: run?.attempts ?? 0,
    lastError: run?.lastError,
    ...more,
    ...(reported === undefined
      ? {}
      : errorEventFields(reported, job.id, line.slot)),
  };
  return { slot, runId, fields, message, lapsed };
}

/** The Error Reporting kind of a finding's message; a paused slot is no error. */
function reportKindOf(
  message: Finding['message'],
): 'missed' | 'failed' | undefined {
  if (message === MISSED_RUN) {
    return 'missed';
  }
  return message === FAILED_AFTER_RETRIES ? 'failed' : undefined;
}

/**
 * One run's record read back after a write of the check: `undefined` if the read failed; `record`
 * undefined when there is none, or one this version cannot read.
 */
async function readBack(
  history: Pick<RunHistory, 'getMany'>,
  runId: string,
): Promise<
  | {
      readonly record: Exclude<StoredRecord, UnreadableRecord> | undefined;
      readonly updateTime: Timestamp | undefined;
    }
  | undefined
> {
  const read = await history.getMany([runId]).catch(() => undefined);
  if (read === undefined) {
    return undefined;
  }
  const stored = read.records.get(runId);
  return {
    record: stored?.status === 'unreadable' ? undefined : stored,
    updateTime: read.updateTimes.get(runId),
  };
}

/**
 * Says that `job`'s check cursor (document `id`) is unreadable, with the reason: a WARNING
 * {@link CURSOR_OF_SHORTER_WINDOW} where it reads again by itself (`readsAgainAt`, RFC 3339), an
 * ERROR {@link UNREADABLE_CURSOR} where only a repair brings the check back.
 */
function logUnreadableCursor(
  job: DeclaredJob,
  id: string,
  cursor: Unreadable,
  logger: Logger,
): void {
  const fields = { jobName: job.id, document: id, reason: cursor.unreadable };
  if (cursor.readsAgainAt === undefined) {
    logger.error(fields, UNREADABLE_CURSOR);
    return;
  }
  const readsAgainAt = new Date(cursor.readsAgainAt).toISOString();
  logger.warn({ ...fields, readsAgainAt }, CURSOR_OF_SHORTER_WINDOW);
}

/** Missed-run detection for one instance's jobs, safe across concurrent requests. */
export class MissedRunCheck {
  readonly #deps: MissedRunCheckDeps;
  /** Each cursor as this instance's last check left it, ms, by document id. */
  readonly #known = new Map<string, number>();
  /** Reporters whose reports this instance logged unconfirmed: found written, they need no log. */
  readonly #loggedUnconfirmed = new Set<string>();

  constructor(deps: MissedRunCheckDeps) {
    this.#deps = deps;
  }
  /**
   * Whether a processed delivery of `slot` checks: it is due ({@link isDueSlot}), or this instance's
   * last check left the cursor two periods behind the closed boundary at `now` (Firestore's).
   */
  isDue(job: DeclaredJob, slot: Date, scope: Scope, now: Date): boolean {
    if (isDueSlot(job, slot)) {
      return true;
    }
    const known = this.#known.get(checkDocumentId(job.id, scope));
    return (
      known !== undefined &&
      now.getTime() - closedAfterMs(job) - known >= 2 * CHECK_PERIOD_MS
    );
  }
  /**
   * Judges the job's slots in `scope` since its cursor, reports each missed or finally failed one
   * nobody reported (ERROR {@link MISSED_RUN} / {@link FAILED_AFTER_RETRIES}), then moves the cursor.
   * @throws {LedgerUnavailableError} if a read or write fails (the cursor has not moved); the
   *   caller logs it: a failed check must never fail a run.
   */
  async check(
    job: DeclaredJob,
    scope: Scope,
    logger: Logger,
  ): Promise<CheckResult> {
    const read = await this.#window(job, scope, logger);
    if (read === undefined) {
      return NOTHING;
    }
    let window = read;
    let range = slotsToJudge(window);
    if (range.slots.length === 0) {
      const idle = await this.#moveIdle(job, window);
      return { ...idle, pauses: window.pausesRead };
    }
    let judged = await this.#scan(job, scope, window, range);
    // Until a run is seen, or while no check's sighting of a rule is recorded (an earlier
    // version's cursor), the claims read may show a rule no check saw (missed-run-rules.ts).
    const learned =
      window.runSeen && isSighted(window.rules)
        ? undefined
        : rulesFromClaims(
            window.rules,
            job,
            judged.claims,
            window.now.getTime(),
          );
    if (learned !== undefined) {
      // Claims read show a rule deployed before any check saw one: judged again by what they show.
      window = { ...window, rules: learned, current: false };
      range = slotsToJudge(window);
      if (range.slots.length === 0) {
        const idle = await this.#moveIdle(job, window);
        return { ...idle, pauses: window.pausesRead };
      }
      judged = await this.#scan(job, scope, window, range);
    }
    for (const { slot, runId, record } of judged.unreadable) {
      const fields = {
        jobName: job.id,
        slot: slot.toISOString(),
        runId,
        state: 'unreadable',
      };
      logger.error(
        { ...fields, field: record.field, problem: record.problem },
        UNREADABLE_SLOT,
      );
    }
    const { reported, raced } = await this.#report(job, scope, judged, logger);
    await this.#moveCursor(job, window, judged, raced);
    return { checked: range.slots.length, reported, pauses: window.pausesRead };
  }
  /** The window from the cursor document (an overdue pause reported first); `undefined`: stop. */
  async #window(
    job: DeclaredJob,
    scope: Scope,
    logger: Logger,
  ): Promise<CheckWindow | undefined> {
    const { jobDocuments, clock } = this.#deps;
    const id = checkDocumentId(job.id, scope);
    const now = await clock();
    const first = await jobDocuments.readData(id);
    const firstPauses = readPauses(first.data, now);
    if (firstPauses === 'unreadable') {
      logger.warn({ jobName: job.id, document: id }, UNREADABLE_PAUSES);
    }
    const overdue = await reportOverduePause(
      jobDocuments,
      id,
      job,
      firstPauses === 'unreadable' ? [] : firstPauses,
      first,
      now,
      logger,
    );
    // Its acknowledgement did not land (another check wrote first, or Firestore failed): the
    // slots are judged all the same, from the document as it is now, not left to the next check
    // (`--faults --seed=12`, history 1741); a later check logs the pause again if still unlogged.
    const read =
      overdue === 'changed' ? await jobDocuments.readData(id) : first;
    const stored = read === first ? firstPauses : readPauses(read.data, now);
    const pauses = stored === 'unreadable' ? [] : stored;
    const updateTime = overdue === 'changed' ? read.updateTime : overdue;
    const range = windowOf(job, read, now, jobDocuments.retentionMs, logger);
    if (range === OVERTAKEN) {
      return undefined;
    }
    if (isUnreadable(range)) {
      logUnreadableCursor(job, id, range, logger);
      return undefined;
    }
    return { ...range, id, updateTime, pauses, pausesRead: stored };
  }
  /** Nothing closed: writes only a first cursor, changed rules, a fresh start or a heartbeat. */
  async #moveIdle(job: DeclaredJob, window: Window): Promise<CheckResult> {
    const { cursor, boundary, from } = window;
    const at =
      cursor === undefined
        ? new Date(Math.max(boundary, from.getTime()))
        : from;
    const lost =
      !window.current &&
      !(await this.#writeCursor(job, window, at, window.runSeen));
    if (!lost) {
      this.#known.set(window.id, at.getTime());
    }
    return NOTHING;
  }
  /** Reads and judges the records of `slots` and of the slot before them (the wait behind it). */
  async #scan(
    job: DeclaredJob,
    scope: Scope,
    window: Window,
    range: SlotRange,
  ): Promise<Judged> {
    const { slots, truncated } = range;
    // The slot before, by the rules in force then: after a schedule change, not the new rule's.
    const before = previousJudgedSlot(window.rules, slots[0] as Date);
    const all = before === undefined ? slots : [before, ...slots];
    const tolerance = () =>
      forcedRunToleranceMs(job, this.#deps.forcedRunToleranceMs ?? 0);
    const read = await readSlotRecords(
      this.#deps.history,
      job,
      all,
      scope,
      tolerance,
    );
    const rows = read.runIds.map(
      (runId, i): SlotRead => ({
        slot: all[i] as Date,
        runId,
        record: read.records.get(runId),
        updatedAt: read.updateTimes.get(runId)?.toMillis(),
      }),
    );
    let previousEnd = Number.NEGATIVE_INFINITY;
    if (before !== undefined) {
      const { record } = rows.shift() as SlotRead;
      const windowEnd = before.getTime() + longestExecutionMs(job);
      previousEnd = slotVerdict(job, before, record, windowEnd, window.now).end;
    }
    const { openAt, ...judged } = judge(job, rows, previousEnd, window);
    const last = slots.at(-1) as Date;
    const next =
      openAt ??
      (truncated ? new Date(last.getTime() + 1) : new Date(window.boundary));
    const claims = claimSightings(read.records.values());
    return { ...judged, next, tokens: read.updateTimes, claims };
  }
  /** Reports each finding once, logging those it wrote; `raced`: the first not landed as ours. */
  async #report(
    job: DeclaredJob,
    scope: Scope,
    judged: Judged,
    logger: Logger,
  ) {
    // Written with each report: one whose answer was lost is recognised as ours by a read.
    const reporter = randomUUID();
    let reported = 0;
    let raced: Date | undefined;
    for (const finding of judged.findings) {
      const { slot, runId, fields, message } = finding;
      if (message === PAUSED_SLOT) {
        logger.info(fields, message);
        continue;
      }
      const token = judged.tokens.get(runId);
      const { unloggedBy } = finding;
      if (unloggedBy !== undefined) {
        const relog = { ...finding, unloggedBy };
        const done = await this.#relog(relog, token, reporter, logger);
        if (done === 'logged') {
          reported++;
        }
        // Another check claimed it: the cursor stays, so a later check finds it logged, or
        // claims it if that check died before its line (never passed unlogged).
        if (done === 'claimed elsewhere') {
          raced = earliest(raced, slot);
        }
        continue;
      }
      const result = await this.#reportOne(
        job,
        scope,
        finding,
        token,
        reporter,
      );
      // A claim or report came first, or the write may not have landed: the cursor stops there.
      if (result === 'exists' || result === 'unconfirmed') {
        raced = earliest(raced, slot);
      }
      if (result === 'exists') {
        continue;
      }
      // Unconfirmed, it is logged all the same: at worst twice, never not at all.
      // `reporter` names the report: a later check that logs it again names the same one.
      const line =
        result === 'unconfirmed'
          ? { ...fields, unconfirmed: true, reporter }
          : { ...fields, reporter };
      logger.error(line, message);
      reported++;
      if (result === 'unconfirmed') {
        this.#loggedUnconfirmed.add(reporter);
      } else {
        const { writtenAt } = result;
        await this.#acknowledge(runId, reporter, writtenAt, logger, reporter);
      }
    }
    return { reported, raced };
  }
  /**
   * Logs again a report another check wrote and never marked logged (`finding.unloggedBy`), once
   * this check claimed it, then marks it logged: `logged` if this call logged it, `claimed
   * elsewhere` if another check's claim came first, `marked` if this instance had logged it
   * unconfirmed. One read without an update time is logged all the same (at worst twice).
   */
  async #relog(
    finding: Finding & { readonly unloggedBy: string },
    token: Timestamp | undefined,
    claimant: string,
    logger: Logger,
  ): Promise<'logged' | 'claimed elsewhere' | 'marked'> {
    const { runId, fields, message, unloggedBy } = finding;
    const loggedHere = this.#loggedUnconfirmed.delete(unloggedBy);
    const claim =
      loggedHere || token === undefined
        ? { log: !loggedHere, token }
        : await this.#claimRelog(finding, claimant, token);
    if (claim.log) {
      logger.error(fields, message);
    } else if (!loggedHere) {
      return 'claimed elsewhere'; // that check logs it
    }
    await this.#acknowledge(runId, unloggedBy, claim.token, logger, claimant);
    return claim.log ? 'logged' : 'marked';
  }
  /**
   * Claims logging again a report its writer never marked logged (fenced on `token`, the read that
   * found it): of two checks that found it, one logs it (`--seed=11`, history 2308: two checks at
   * once each logged it). `log`: whether this check logs it; `token`: the update time to mark it
   * logged on. A claim refused or failed is read back: logged if the claim is this check's, or if
   * no read could tell; not if another check claimed or acknowledged it. Where the report is still
   * there unlogged and unclaimed (the record changed under the claim, as a backfill's takeover
   * changes it, or the claim failed), it is claimed once more on the read: two checks that met the
   * same change would otherwise both log it (stop 74, seed 12, the 195th). After that, logged all
   * the same: at worst twice, never not at all.
   */
  async #claimRelog(
    finding: Finding & { readonly unloggedBy: string },
    claimant: string,
    token: Timestamp,
  ): Promise<RelogClaim> {
    const first = await this.#tryClaimRelog(finding, claimant, token);
    if (first.claimAgainOn === undefined) {
      return first;
    }
    const again = await this.#tryClaimRelog(
      finding,
      claimant,
      first.claimAgainOn,
    );
    return { log: again.log, token: again.token };
  }
  /**
   * One claim of {@link #claimRelog} on `token`, read back if refused or failed; `claimAgainOn`: the
   * update time of a read that found the report still unlogged and unclaimed.
   */
  async #tryClaimRelog(
    finding: Finding & { readonly unloggedBy: string },
    claimant: string,
    token: Timestamp,
  ): Promise<RelogClaim & { readonly claimAgainOn?: Timestamp }> {
    const { history } = this.#deps;
    const { runId, unloggedBy, claimedBy } = finding;
    const written = await history
      .claimRelog(runId, claimant, token)
      .catch(() => 'conflict' as const);
    if (written !== 'conflict') {
      return { log: true, token: written };
    }
    const read = await readBack(history, runId);
    const record = read?.record;
    const fresh = read?.updateTime;
    if (read === undefined || record?.relogBy === claimant) {
      return { log: true, token: fresh };
    }
    // Still the same report, unlogged and unclaimed (a backfill that re-opened the run keeps it):
    // not acknowledged or claimed by another check.
    const unchanged =
      record !== undefined &&
      unloggedReportBy(record.reportedBy) === unloggedBy &&
      record.relogBy === claimedBy;
    if (!unchanged) {
      return { log: false };
    }
    return fresh === undefined
      ? { log: true }
      : { log: true, token: fresh, claimAgainOn: fresh };
  }
  /**
   * Acknowledges a report as logged (`self`: this check's claimant id); a failure is a warning (a
   * later check logs it again), and so are a report no read gave an update time to acknowledge on
   * (`token` undefined) and a mark refused because the record changed first, when a read back shows
   * the report may be logged again: still unlogged, or claimed by another check, which logs it too.
   * A refused mark that landed all the same (the client's retry of a commit that had landed) is no
   * warning. A second line of a report is never unexplained (`--faults --seed=123`, histories 85
   * and 258).
   */
  async #acknowledge(
    runId: string,
    reporter: string,
    token: Timestamp | undefined,
    logger: Logger,
    self: string,
  ) {
    if (token === undefined) {
      logger.warn({ runId }, REPORT_NOT_ACKNOWLEDGED);
      return;
    }
    try {
      const marked = await this.#deps.history.acknowledgeReport(
        runId,
        reporter,
        token,
      );
      if (!marked && (await this.#mayBeLoggedAgain(runId, self))) {
        logger.warn({ runId }, REPORT_NOT_ACKNOWLEDGED);
      }
    } catch (error) {
      logger.warn(
        { runId, err: loggableError(error) },
        REPORT_NOT_ACKNOWLEDGED,
      );
    }
  }
  /**
   * After a refused mark: whether a later check may log the report again, by one read of its
   * record: still marked unlogged, claimed by a check other than `self`, or no read could tell.
   */
  async #mayBeLoggedAgain(runId: string, self: string): Promise<boolean> {
    const read = await readBack(this.#deps.history, runId);
    if (read === undefined) {
      return true;
    }
    const { record } = read;
    if (record === undefined) {
      return false;
    }
    const unlogged = unloggedReportBy(record.reportedBy) !== undefined;
    const claimedElsewhere =
      record.relogBy !== undefined && record.relogBy !== self;
    return unlogged || claimedElsewhere;
  }
  /**
   * Reports one slot: its `missed` record, or its run marked reported (fenced on `token`); a refused
   * or failed write is ours if `reporter` reads back, `unconfirmed` if no read could tell.
   */
  async #reportOne(
    job: DeclaredJob,
    scope: Scope,
    { slot, runId, lapsed }: Finding,
    token: Timestamp | undefined,
    reporter: string,
  ): Promise<{ readonly writtenAt: Timestamp } | 'exists' | 'unconfirmed'> {
    const { history } = this.#deps;
    let failure: { readonly error: unknown } | undefined;
    try {
      const keyScope = scopeId(scope);
      const details = {
        jobName: job.id,
        scheduleTime: slot.toISOString(),
        keyScope,
      };
      const written =
        token === undefined
          ? await history.reportMissed(runId, details, reporter)
          : await history.markReported(runId, token, reporter, lapsed);
      if (written !== 'exists') {
        return written;
      }
    } catch (error) {
      failure = { error };
    }
    for (let reads = 0; reads < 2; reads++) {
      const read = await readBack(history, runId);
      if (read === undefined) {
        continue;
      }
      const ours = read.record?.reportedBy === unloggedReporter(reporter);
      const writtenAt = read.updateTime;
      if (ours && writtenAt !== undefined) {
        return { writtenAt };
      }
      if (failure !== undefined) {
        throw failure.error;
      }
      return 'exists';
    }
    return 'unconfirmed'; // a refused write may be this check's own, landed: never silent
  }
  /** Moves the cursor past what was judged (to the earliest raced slot, if any), fenced. */
  async #moveCursor(
    job: DeclaredJob,
    window: Window,
    judged: Judged,
    raced?: Date,
  ): Promise<void> {
    const next =
      raced !== undefined && raced < judged.next ? raced : judged.next;
    const unchanged =
      window.current &&
      next.getTime() === window.from.getTime() &&
      judged.runSeen === window.cursor?.runSeen;
    if (
      !unchanged &&
      !(await this.#writeCursor(job, window, next, judged.runSeen))
    ) {
      this.#known.delete(window.id); // another instance moved it: our reports were each once
      return;
    }
    // Stopped at a run in flight: the next due delivery re-checks, not every delivery meanwhile.
    const stopped = judged.stopped || next !== judged.next;
    this.#known.set(window.id, stopped ? window.boundary : next.getTime());
  }
  /** Writes the cursor with the window's rules, fenced; false if another instance wrote first. */
  async #writeCursor(
    job: DeclaredJob,
    window: Window,
    checkedBefore: Date,
    runSeen: boolean,
  ) {
    const { jobDocuments } = this.#deps;
    const cursor = {
      checkedBefore,
      runSeen,
      rules: window.rules,
      seenAt: window.now.getTime(),
    };
    const document = cursorDocument(job, cursor, jobDocuments.expireAt());
    const { id, updateTime } = window;
    return (
      (await jobDocuments.write(
        id,
        'missed-run check',
        document,
        updateTime,
      )) !== 'conflict'
    );
  }
}
