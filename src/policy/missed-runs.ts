/**
 * Missed-run detection without a new service: each slot judged missed, or failed after every retry
 * (`slot-verdict.ts`), is reported once across instances as an ERROR line that a log-based metric
 * counts. A check runs at a processed delivery of a job's first slot in a {@link CHECK_PERIOD_MS}
 * period and at each run audit, from the job's cursor (`missed-run-cursor.ts`); a failed attempt
 * no retry can follow reports itself (`final-failure.ts`). Why: docs/how-it-works.md "Missed runs".
 */
import { randomUUID } from 'node:crypto';
import type { Timestamp } from '@google-cloud/firestore';
import type { Logger } from '../core/logger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import type { StoredRecord } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import {
  type Cursor,
  checkDocumentId,
  cursorDocument,
  pausesOf,
  readCursor,
  type Window,
  windowOf,
} from './missed-run-cursor.ts';
import { judgedSlots } from './missed-run-rules.ts';
import { PAUSED_SLOT, pausedRow, reportOverduePause } from './pauses.ts';
import { retryWindowMs } from './retry-policy.ts';
import {
  hasRecord,
  type RunHistory,
  readSlotRecords,
  type SlotRow,
  slotRow,
} from './run-history.ts';
import { previousSlot, slotsBetween } from './schedule.ts';
import { forcedRunToleranceMs } from './schedule-time.ts';
import { closedAfterMs, slotVerdict } from './slot-verdict.ts';

/** The log messages, for log-based metrics (`deploy.sh` creates them). */
export const MISSED_RUN = 'missed run';
export const FAILED_AFTER_RETRIES = 'run failed after retries';

/** How often a job's closed slots are checked by its own deliveries at most, in ms: hourly. */
export const CHECK_PERIOD_MS = 3_600_000;
/** The most slots one check reads (two batched reads); the next checks go on from the cursor. */
export const MAX_CHECK_SLOTS = 1000;

/**
 * Whether `slot` is the job's first slot in its {@link CHECK_PERIOD_MS} period (from the Unix
 * epoch): a delivery of it runs the check. Pure, so every instance agrees.
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

/** The fields of a report's log line. */
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
  /** `FORCED_RUN_TOLERANCE_SECONDS` in ms (each job's: `forcedRunToleranceMs`); 0 by default. */
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

/** What the check learnt of a range: its findings, where the cursor goes, the records' tokens. */
interface Judged {
  readonly findings: readonly Finding[];
  readonly next: Date;
  readonly runSeen: boolean;
  readonly stopped: boolean;
  /** The update times of the records read, by run id: the fencing tokens of their reports. */
  readonly tokens: ReadonlyMap<string, Timestamp>;
}

/**
 * The findings of `slots` in order (`previousEnd`: the end of the execution before them, ms); stops
 * at the first slot still open, where the cursor stops.
 */
function judge(
  job: DeclaredJob,
  slots: readonly { readonly row: SlotRow; readonly record: StoredRecord | undefined }[],
  previousEnd: number,
  window: Pick<Window, 'now' | 'pauses' | 'runSeen'>,
): Omit<Judged, 'next' | 'tokens'> & { readonly openAt?: Date } {
  let end = previousEnd;
  let runSeen = window.runSeen;
  const findings: Finding[] = [];
  for (const { row, record } of slots) {
    const verdict = slotVerdict(job, row.slot, record, row, end, window.now);
    end = verdict.end;
    // A slot with no record inside a pause (`pauses.ts`) is not missed: logged as paused, once.
    const paused = pausedRow(row, window.pauses);
    if (paused.state === 'paused') {
      findings.push({ row: paused, message: PAUSED_SLOT });
      continue;
    }
    if (!runSeen && !hasRecord(row)) continue; // before the job's first record: it did not exist yet
    runSeen = true;
    if (verdict.verdict === 'open') return { findings, runSeen, stopped: true, openAt: row.slot };
    if (verdict.verdict === 'missed') findings.push({ row, message: MISSED_RUN });
    if (verdict.verdict === 'failed') {
      const lapsed = record?.status === 'in_progress';
      findings.push({ row: { ...row, state: 'failed' }, message: FAILED_AFTER_RETRIES, lapsed });
    }
  }
  return { findings, runSeen, stopped: false };
}

/**
 * Missed-run detection for one instance's jobs: {@link isDue} says whether a processed delivery
 * checks, {@link check} judges the slots closed since the last check. Safe across concurrent
 * requests; it remembers only where its own last check left each cursor.
 *
 * @example
 * const missedRuns = new MissedRunCheck({ history, jobDocuments, clock: () => ledger.serverTime() });
 * if (await missedRuns.isDue(job, slot, scope)) await missedRuns.check(job, scope, logger);
 */
export class MissedRunCheck {
  readonly #deps: MissedRunCheckDeps;
  /** Each cursor as this instance's last check left it, ms, by document id. */
  readonly #known = new Map<string, number>();

  constructor(deps: MissedRunCheckDeps) {
    this.#deps = deps;
  }

  /**
   * Whether a processed delivery of `slot` should check: it is due ({@link isDueSlot}), or this
   * instance's last check left the cursor two periods or more behind the closed boundary. Reads the
   * clock only when a cursor is known.
   *
   * @throws {LedgerUnavailableError} if the clock must be learnt and Firestore fails.
   */
  async isDue(job: DeclaredJob, slot: Date, scope: Scope): Promise<boolean> {
    if (isDueSlot(job, slot)) return true;
    const known = this.#known.get(checkDocumentId(job.id, scope));
    if (known === undefined) return false;
    const boundary = (await this.#deps.clock()).getTime() - closedAfterMs(job);
    return boundary - known >= 2 * CHECK_PERIOD_MS;
  }

  /**
   * Judges the job's slots since its cursor, reports each missed or finally failed one nobody
   * reported (ERROR {@link MISSED_RUN} / {@link FAILED_AFTER_RETRIES}), then moves the cursor. One
   * read of the cursor; when slots closed, one batched read per 500 slots, a write per report, the
   * fenced cursor write.
   *
   * @param scope - the key scope of the runs to check (the delivery's).
   * @throws {LedgerUnavailableError} if a read or a write fails: the cursor has not moved, so the
   *   next check covers the range; the caller logs it (a failed check must never fail a run).
   */
  async check(job: DeclaredJob, scope: Scope, logger: Logger): Promise<CheckResult> {
    const window = await this.#window(job, scope, logger);
    if (window === undefined) return NOTHING;
    const { slots, truncated } =
      window.boundary <= window.from.getTime()
        ? { slots: [], truncated: false }
        : judgedSlots(window.rules, window.from, new Date(window.boundary), MAX_CHECK_SLOTS);
    if (slots.length === 0) return this.#moveIdle(job, window);
    const judged = await this.#scan(job, scope, window, slots, truncated);
    const { reported, raced } = await this.#report(job, scope, judged, logger);
    return this.#moveCursor(job, window, judged, raced, { checked: slots.length, reported });
  }

  /**
   * Reads the cursor document: its pauses (reporting one past its bound: the cursor write is then
   * fenced on that report's), its cursor, the window they give; `undefined` if the check must stop.
   */
  async #window(job: DeclaredJob, scope: Scope, logger: Logger): Promise<Window | undefined> {
    const { jobDocuments, clock } = this.#deps;
    const id = checkDocumentId(job.id, scope);
    const now = await clock();
    const read = await jobDocuments.readData(id);
    const pauses = pausesOf(job, id, read.data, now, logger);
    const updateTime =
      read.updateTime === undefined
        ? undefined
        : await reportOverduePause(jobDocuments, id, job.id, pauses, read.updateTime, now, logger);
    if (updateTime === 'changed') {
      this.#known.delete(id);
      return undefined;
    }
    const cursor = readCursor(read.data, read.updateTime, job, now);
    if (cursor === 'unreadable') {
      logger.error(
        { jobName: job.id, document: id },
        'missed-run check: the cursor document holds values this version never writes (a cursor ahead of the closed boundary, malformed rules); no slot of this job is judged until it is deleted (the next check then starts over, a day back)',
      );
      return undefined;
    }
    const range = windowOf(job, cursor, now, jobDocuments.retentionMs, logger);
    return { ...range, id, updateTime, pauses };
  }

  /** Nothing closed: writes only a first cursor, changed rules, a fresh start or a heartbeat. */
  async #moveIdle(job: DeclaredJob, window: Window): Promise<CheckResult> {
    const { cursor, boundary, from } = window;
    const at = cursor === undefined ? new Date(Math.max(boundary, from.getTime())) : from;
    if (cursor === undefined || !window.unchangedRules || window.heartbeat || window.afresh) {
      const moved = { checkedBefore: at, runSeen: window.runSeen, rules: window.rules };
      const written = await this.#writeCursor(job, window, moved);
      if (written === 'lost') return NOTHING;
    }
    this.#known.set(window.id, at.getTime());
    return { ...NOTHING, checkedBefore: at };
  }

  /** Reads the records of `slots` (and of the slot before them, for the wait behind it) and judges them. */
  async #scan(
    job: DeclaredJob,
    scope: Scope,
    window: Window,
    slots: readonly Date[],
    truncated: boolean,
  ): Promise<Judged> {
    const before = previousSlot(job, slots[0] as Date);
    const all = before === undefined ? slots : [before, ...slots];
    // A forced run that was a slot's own delivery (a misjudged clock) is that slot's run.
    const tolerance = () => forcedRunToleranceMs(job, this.#deps.forcedRunToleranceMs ?? 0);
    const read = await readSlotRecords(this.#deps.history, job, all, scope, tolerance);
    const rows = all.map((slot, i) => {
      const runId = read.runIds[i] as string;
      const record = read.records.get(runId);
      return { row: slotRow(job, slot, runId, record, window.now), record };
    });
    let previousEnd = Number.NEGATIVE_INFINITY;
    if (before !== undefined) {
      const { row, record } = rows.shift() as (typeof rows)[number];
      const windowEnd = before.getTime() + retryWindowMs(job);
      previousEnd = slotVerdict(job, before, record, row, windowEnd, window.now).end;
    }
    const { openAt, ...judged } = judge(job, rows, previousEnd, window);
    const last = slots.at(-1) as Date;
    const next = openAt ?? (truncated ? new Date(last.getTime() + 1) : new Date(window.boundary));
    return { ...judged, next, tokens: read.updateTimes };
  }

  /** Reports each finding once (its own conditional write), logging those this call wrote. */
  async #report(
    job: DeclaredJob,
    scope: Scope,
    judged: Pick<Judged, 'findings' | 'tokens'>,
    logger: Logger,
  ): Promise<{ readonly reported: number; readonly raced: Date | undefined }> {
    // This check's id, written with each report: a report whose answer was lost but whose write
    // landed is recognised as ours by a read, and logged, instead of never.
    const reporter = randomUUID();
    let reported = 0;
    let raced: Date | undefined;
    for (const { row, message, lapsed } of judged.findings) {
      if (message === PAUSED_SLOT) {
        logger.info({ ...fields(row), note: row.pauseNote }, message);
        continue;
      }
      const token = judged.tokens.get(row.runId);
      if ((await this.#reportOne(job, scope, row, token, reporter, lapsed)) !== 'reported') {
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

  /**
   * Reports one slot: creates its `missed` record, or marks its run reported (fenced on `token`).
   * After a failed write, a read that finds this check's `reporter` on the record says it landed.
   */
  async #reportOne(
    job: DeclaredJob,
    scope: Scope,
    row: SlotRow,
    token: Timestamp | undefined,
    reporter: string,
    lapsed = false,
  ): Promise<'reported' | 'exists'> {
    const { history } = this.#deps;
    try {
      if (token !== undefined)
        return await history.markReported(row.runId, token, reporter, lapsed);
      const details = {
        jobName: job.id,
        scheduleTime: row.slot.toISOString(),
        keyScope: scopeId(scope),
      };
      return await history.reportMissed(row.runId, details, reporter);
    } catch (err) {
      const { records } = await history.getMany([row.runId]);
      const stored = records.get(row.runId);
      if (
        stored !== undefined &&
        stored.status !== 'unreadable' &&
        stored.reportedBy === reporter
      ) {
        return 'reported';
      }
      throw err;
    }
  }

  /** Moves the cursor past what was judged (to the earliest raced slot, if any), fenced. */
  async #moveCursor(
    job: DeclaredJob,
    window: Window,
    judged: Judged,
    raced: Date | undefined,
    counts: Pick<CheckResult, 'checked' | 'reported'>,
  ): Promise<CheckResult> {
    const next = raced !== undefined && raced < judged.next ? raced : judged.next;
    const stopped = judged.stopped || next !== judged.next;
    const { cursor } = window;
    const unchanged =
      cursor !== undefined &&
      !window.afresh &&
      window.unchangedRules &&
      !window.heartbeat &&
      next.getTime() === window.from.getTime() &&
      judged.runSeen === cursor.runSeen;
    const moved = { checkedBefore: next, runSeen: judged.runSeen, rules: window.rules };
    if (!unchanged && (await this.#writeCursor(job, window, moved)) === 'lost') {
      // Another instance moved the cursor first: the range was its to judge too; our reports
      // were each once by their own writes.
      this.#known.delete(window.id);
      return { ...counts, checkedBefore: undefined };
    }
    // Stopped at a run still in flight: the next due delivery re-checks from it; this instance's
    // memory does not ask for one at every delivery meanwhile.
    this.#known.set(window.id, stopped ? window.boundary : next.getTime());
    return { ...counts, checkedBefore: next };
  }

  /** Writes the cursor, fenced on the update time read; `lost` if another instance wrote first. */
  async #writeCursor(
    job: DeclaredJob,
    window: Window,
    moved: Omit<Cursor, 'seenAt'>,
  ): Promise<'written' | 'lost'> {
    const { jobDocuments } = this.#deps;
    const cursor = { ...moved, seenAt: window.now.getTime() };
    const document = cursorDocument(job, cursor, jobDocuments.expireAt());
    const written =
      window.updateTime === undefined
        ? await jobDocuments.create(window.id, 'missed-run check', document)
        : await jobDocuments.update(window.id, 'missed-run check', document, window.updateTime);
    return written === 'exists' || written === 'changed' ? 'lost' : 'written';
  }
}
