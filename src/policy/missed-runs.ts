/**
 * Missed-run detection without a new service: a job's slots are checked once their retry window has
 * closed, and each that was missed, or failed after every retry, is reported once across all
 * instances, as an ERROR line that a log-based metric counts (`deploy.sh` creates it).
 *
 * Timeline of one slot `s` of a job (durations from `retry-policy.ts`):
 *
 *     s ───── retry window ─────┤── margin ──┤ closed: checked by the next due check
 *     deliveries, retries,          one attempt deadline: a first attempt Scheduler started late
 *     leases                        is still answered before anything is reported
 *
 * - **Closed.** A slot is judged only at `s + retryWindow + attemptDeadline` or later (Firestore's
 *   time, as leases are judged): no attempt can arrive after that, so a report never races a
 *   delivery. A slot whose attempt still holds a live lease then (a job running past its window)
 *   stops the check there; the next check starts from it.
 * - **A cursor per job.** The per-job document `{jobId}~check` (`job-state.ts`) says before which
 *   instant every slot was checked (`checked_before`), and whether a slot with a record was seen
 *   yet (`run_seen`): slots before the job's first record are not missed (the job did not exist),
 *   the first record itself counts (a first-ever run that failed finally is reported). A check
 *   covers the slots from the cursor to the closed boundary (at most {@link MAX_CHECK_SLOTS}; the
 *   next check goes on from there), and moves the cursor with a write fenced on the document's
 *   update time: of two instances that read the same cursor, only one moves it, and only that one
 *   reports. The document carries `expire_at`, so the TTL removes the cursor of a deleted job.
 * - **Due deliveries only.** A processed delivery checks only when its slot is the first of a new
 *   {@link CHECK_PERIOD_MS} period (deterministic, so every instance, warm or cold, agrees), or when
 *   this instance's last check left the cursor two periods or more behind (a due delivery was
 *   missed, or a check was truncated). Every other processed run costs the claim and the
 *   completion and nothing else. A due delivery that never comes delays the check to the next one;
 *   the cursor loses nothing.
 * - **Once.** A missed slot's report `create()`s its record as `missed` (it fails if a claim wrote
 *   first); a failed run's report sets `reported_at` fenced on the update time just read (it fails
 *   if a retry claimed it since). Only the instance whose write lands logs.
 */
import { createHash, randomUUID } from 'node:crypto';
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import type { Logger } from '../core/logger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import type { Scope } from '../core/run-key.ts';
import { isLeaseLive } from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { PAUSED_SLOT, pausedRow, readPauses, reportOverduePause } from './pauses.ts';
import { retryWindowMs } from './retry-policy.ts';
import { hasRecord, type RunHistory, type SlotRow, slotRow, slotRunId } from './run-history.ts';
import { slotsBetween } from './schedule.ts';

/** The log messages, for log-based metrics (`deploy.sh` creates them). */
export const MISSED_RUN = 'missed run';
export const FAILED_AFTER_RETRIES = 'run failed after retries';

/** How often a job's closed slots are checked at most, in ms: one due delivery per hour. */
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

/**
 * How long after its schedule time a slot is judged, in ms: its retry window plus one attempt
 * deadline, so that an attempt Scheduler started late still lands first.
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

/** A job's check cursor as stored. */
interface Cursor {
  /** Every slot before it was checked. */
  readonly checkedBefore: Date;
  /** Whether a slot with a record was seen: slots before the first record are never missed. */
  readonly runSeen: boolean;
}

/** The cursor in a document, `unreadable` for one this code would never write. */
function readCursor(data: DocumentData | undefined, now: Date): Cursor | 'unreadable' | undefined {
  // A document with only pauses on it (`pauses.ts`) has no cursor yet.
  if (data === undefined || (data.checked_before === undefined && data.run_seen === undefined)) {
    return undefined;
  }
  const at = data.checked_before;
  const seen = data.run_seen;
  if (!(at instanceof Timestamp) || typeof seen !== 'boolean') return 'unreadable';
  // A check never moves its cursor past the closed boundary, which is before now: a later one is a
  // value this version never writes, not a range already checked.
  if (at.toMillis() > now.getTime()) return 'unreadable';
  return { checkedBefore: at.toDate(), runSeen: seen };
}

function cursorDocument(jobId: string, cursor: Cursor, expireAt: Timestamp): DocumentData {
  return {
    job_name: jobId,
    checked_before: Timestamp.fromDate(cursor.checkedBefore),
    run_seen: cursor.runSeen,
    expire_at: expireAt,
  };
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
   * Checks the job's slots whose windows closed since its cursor, and reports each missed or
   * finally failed one that nobody reported: ERROR `missed run` / `run failed after retries` with
   * job, slot, run id and state. Costs one read of the cursor; when slots closed since, one batched
   * read per 500 slots, the fenced cursor write, and one write per report.
   *
   * @param scope - the key scope of the runs to check (the delivery's).
   * @returns what it checked and reported.
   * @throws {LedgerUnavailableError} if a read or a write fails (the cursor is put back first, if
   *   it can be, so the next check covers the range); the caller logs it: a failed check must never
   *   fail a run.
   * @example const { reported } = await missedRuns.check(job, [], logger);
   */
  async check(job: DeclaredJob, scope: Scope, logger: Logger): Promise<CheckResult> {
    const { history, jobDocuments, clock } = this.#deps;
    const id = checkDocumentId(job.id, scope);
    const now = await clock();
    const boundary = now.getTime() - closedAfterMs(job);
    const read = await jobDocuments.readData(id);
    const { data } = read;
    // Pauses (`pauses.ts`) live on this document: a slot inside one is not missed, and a pause
    // past its bound is reported here, once; the cursor write is then fenced on that report's.
    const stored = readPauses(data);
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
    const cursor = readCursor(data, now);
    if (cursor === 'unreadable') {
      logger.warn(
        { jobName: job.id, document: id },
        'missed-run check: the cursor document holds fields this version never writes; the check is off for this job until it is deleted (the next check then starts over, a day back)',
      );
      return NOTHING;
    }
    // Never before the retention: an older slot's record may be gone (TTL), and its absence
    // proves nothing, so it is never reported as missed. A cursor older than that (the TTL removes
    // one unwritten for a retention) starts over from the retained range, its first record unseen.
    const retained = now.getTime() - jobDocuments.retentionMs;
    const stale = cursor !== undefined && cursor.checkedBefore.getTime() < retained;
    const from = new Date(
      Math.max(cursor?.checkedBefore.getTime() ?? boundary - FIRST_LOOK_BACK_MS, retained),
    );
    if (boundary <= from.getTime()) {
      this.#known.set(id, from.getTime());
      return { ...NOTHING, checkedBefore: from };
    }
    const { slots, truncated } = slotsBetween(job, from, new Date(boundary), MAX_CHECK_SLOTS);
    if (slots.length === 0) {
      // No slot closed since the cursor: nothing to read. A job's first check still writes its
      // cursor, so a job whose slots are further apart than the first look-back (weekly) has one
      // from then on.
      if (cursor === undefined) {
        const start: Cursor = { checkedBefore: new Date(boundary), runSeen: false };
        const document = cursorDocument(job.id, start, jobDocuments.expireAt());
        await (updateTime === undefined
          ? jobDocuments.create(id, 'missed-run check', document)
          : jobDocuments.update(id, 'missed-run check', document, updateTime));
        this.#known.set(id, boundary);
        return { ...NOTHING, checkedBefore: start.checkedBefore };
      }
      this.#known.set(id, from.getTime());
      return { ...NOTHING, checkedBefore: from };
    }
    const runIds = slots.map((slot) => slotRunId(job.id, slot, scope));
    const { records, updateTimes } = await history.getMany(runIds);

    let runSeen = !stale && (cursor?.runSeen ?? false);
    let stoppedAt: Date | undefined;
    const findings: Finding[] = [];
    for (const [i, slot] of slots.entries()) {
      const runId = runIds[i] as string;
      const record = records.get(runId);
      const row = pausedRow(slotRow(job, slot, runId, record, now), pauses);
      if (row.state === 'paused') {
        findings.push({ row, message: PAUSED_SLOT });
        continue;
      }
      if (!runSeen) {
        if (!hasRecord(row)) continue; // before the job's first record: it did not exist yet
        runSeen = true;
      }
      if (row.state === 'in_progress') {
        // Its attempt still runs past the window: judge it at the next check.
        if (record !== undefined && isLeaseLive(record, now)) {
          stoppedAt = slot;
          break;
        }
        // Its lease lapsed and no retry can come: the run ended without completing.
        if (!row.reported) findings.push({ row, message: FAILED_AFTER_RETRIES });
        continue;
      }
      if (row.reported) continue;
      if (row.state === 'missed') findings.push({ row, message: MISSED_RUN });
      else if (row.state === 'failed') findings.push({ row, message: FAILED_AFTER_RETRIES });
    }
    const last = slots.at(-1);
    const next =
      stoppedAt ??
      (truncated && last !== undefined ? new Date(last.getTime() + 1) : new Date(boundary));
    const moved: Cursor = { checkedBefore: next, runSeen };
    if (cursor !== undefined && next.getTime() === from.getTime() && runSeen === cursor.runSeen) {
      this.#known.set(id, from.getTime());
      return { checked: slots.length, reported: 0, checkedBefore: from };
    }
    const document = cursorDocument(job.id, moved, jobDocuments.expireAt());
    const written =
      updateTime === undefined
        ? await jobDocuments.create(id, 'missed-run check', document)
        : await jobDocuments.update(id, 'missed-run check', document, updateTime);
    if (written === 'exists' || written === 'changed') {
      // Another instance moved the cursor first: the range is its to report.
      this.#known.delete(id);
      return NOTHING;
    }
    // Stopped at a run still in flight: the next due delivery re-checks from it; this instance's
    // memory does not ask for one at every delivery meanwhile.
    this.#known.set(id, stoppedAt === undefined ? next.getTime() : boundary);
    let reported = 0;
    // This check's id, written with each report: a report whose answer was lost but whose write
    // landed is recognised as ours by a read, and logged, instead of never.
    const reporter = randomUUID();
    const report = async (row: SlotRow): Promise<'reported' | 'exists'> => {
      const token = updateTimes.get(row.runId);
      try {
        if (row.state === 'missed') {
          const details = { jobName: job.id, scheduleTime: row.slot.toISOString() };
          return await history.reportMissed(row.runId, details, reporter);
        }
        return token === undefined
          ? 'exists'
          : await history.markReported(row.runId, token, reporter);
      } catch (err) {
        const { records } = await history.getMany([row.runId]);
        const now = records.get(row.runId);
        if (now !== undefined && now.status !== 'unreadable' && now.reportedBy === reporter) {
          return 'reported';
        }
        throw err;
      }
    };
    try {
      for (const { row, message } of findings) {
        // 'exists': a claim, a retry or another report came first.
        if (message === PAUSED_SLOT) {
          logger.info({ ...fields(row), note: row.pauseNote }, message);
          continue;
        }
        if ((await report(row)) !== 'reported') continue;
        logger.error(fields(row), message);
        reported++;
      }
    } catch (err) {
      await this.#putBack(
        id,
        job.id,
        cursor ?? { checkedBefore: from, runSeen: false },
        written,
        logger,
      );
      throw err;
    }
    return { checked: slots.length, reported, checkedBefore: next };
  }

  /**
   * Puts the cursor back where it was after a report failed, fenced on this check's own write, so
   * the next check covers the range again (reports are once by their own writes). If that fails
   * too, the range stays unchecked: the warning names it for `npm run runs -- --check`.
   */
  async #putBack(
    id: string,
    jobId: string,
    before: Cursor,
    token: Timestamp,
    logger: Logger,
  ): Promise<void> {
    const { jobDocuments } = this.#deps;
    this.#known.delete(id);
    try {
      const back = cursorDocument(jobId, before, jobDocuments.expireAt());
      await jobDocuments.update(id, 'missed-run check (put back)', back, token);
    } catch {
      logger.warn(
        { jobName: jobId, from: before.checkedBefore.toISOString() },
        'missed-run check: a report failed and the cursor could not be put back; check the slots after "from" with npm run runs -- --check',
      );
    }
  }
}
