/**
 * Late runs and catch-up (docs/how-it-works.md, "Late runs and catch-up"): a slot with no attempt
 * a grace after it could have started is logged once as {@link LATE_RUN}; a job that declares
 * `catchUp` has the run audit deliver it, under the slot's own run id.
 */
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import type { Logger } from '../core/logger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import {
  isLeaseLive,
  judgedAt,
  RunStatus,
  type StoredRecord,
} from '../core/run-record.ts';
import { lateGraceMs } from './catch-up.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { LATE_RUN } from './log-messages.ts';
import { checkDocumentId } from './missed-run-cursor.ts';
import { isSameRule, ruleOf } from './missed-run-rules.ts';
import { type Pause, type PausesRead, pauseAt, readPauses } from './pauses.ts';
import { backoffMs, makesRetry } from './retry-policy.ts';
import { type RunHistory, readSlotRecords } from './run-history.ts';
import { previousSlot, type ScheduleSpec, slotsBetween } from './schedule.ts';
import { forcedRunToleranceMs } from './schedule-time.ts';
import { closedAfterMs, slotVerdict } from './slot-verdict.ts';

export { LATE_RUN };

/**
 * The log message (WARNING) of a catch-up delivery that did not reach the job's run: unsent, or
 * refused before the run (auth, routing, a Firestore outage). The slot stays pending.
 */
export const CATCH_UP_NOT_DELIVERED = 'catch-up not delivered';

/** The most slots one scan judges past its mark; the next scan goes on from there. */
export const MAX_LATE_SLOTS = 200;
/** The most late slots kept waiting for catch-up (`slots: 'all'`): the oldest go first. */
export const MAX_PENDING_SLOTS = 100;

/**
 * Delivers `slot` of `job` to this function as Scheduler would, marked caught up, and resolves
 * once its claim is seen or the function answered: `claimed`, `answered` (with the answer's
 * outcome), or `unsent` (the request failed; the next check sends it again).
 */
export type CatchUpSender = (
  job: DeclaredJob,
  slot: Date,
  runId: string,
) => Promise<CatchUpSent>;
export type CatchUpSent =
  | { readonly result: 'claimed' }
  | { readonly result: 'answered'; readonly outcome: string }
  | { readonly result: 'unsent'; readonly reason: string };

/** What {@link LateRunScan} needs. */
export interface LateRunScanDeps {
  readonly history: Pick<RunHistory, 'getMany'>;
  /** The per-job documents: the check document (its pauses) and the late-run mark. */
  readonly jobDocuments: RunDocuments;
  /** Firestore's time now. */
  readonly clock: () => Promise<Date>;
  /** `FORCED_RUN_TOLERANCE_SECONDS` in ms; 0 by default. */
  readonly forcedRunToleranceMs?: number;
}

/** What one scan did: the slots it logged late, and the catch-up it sent, if any. */
export interface ScanResult {
  readonly late: number;
  readonly caughtUp?: { readonly slot: Date; readonly sent: CatchUpSent };
}

/**
 * The late-run mark of a job in a key scope, stored in `{jobId}~late[~scope]`: every slot before
 * `judgedBefore` was judged; `runSeen`: a slot of the job had a record (none before it is late);
 * `pending`: late slots still to catch up, oldest first; `rule`: the schedule and time zone the
 * scan judged by (`undefined` on a mark of an earlier version, taken for the declared one).
 */
interface LateMark {
  readonly judgedBefore: Date;
  readonly runSeen: boolean;
  readonly pending: readonly Date[];
  readonly rule: ScheduleSpec | undefined;
}

/** The id of a job's late-run mark: `{jobId}~late`, plus a hash of a non-empty key scope. */
export function lateDocumentId(jobId: string, scope: Scope): string {
  const keyScope = scopeId(scope);
  return keyScope === '' ? `${jobId}~late` : `${jobId}~late~${keyScope}`;
}

/** The mark a document holds; `undefined` for none or one this code never writes (start afresh). */
function readMark(data: DocumentData | undefined): LateMark | undefined {
  const at = data?.late_judged_before;
  const seen = data?.run_seen;
  const pending = data?.pending;
  if (
    !(at instanceof Timestamp) ||
    typeof seen !== 'boolean' ||
    !Array.isArray(pending) ||
    !pending.every((slot) => slot instanceof Timestamp)
  ) {
    return undefined;
  }
  const slots = (pending as Timestamp[]).map((slot) => slot.toDate());
  return {
    judgedBefore: at.toDate(),
    runSeen: seen,
    pending: slots,
    rule: ruleOfMark(data),
  };
}

/** The rule a mark was judged by; `undefined` if it names none (an earlier version's mark). */
function ruleOfMark(data: DocumentData | undefined): ScheduleSpec | undefined {
  const schedule = data?.schedule;
  const timeZone = data?.time_zone;
  return typeof schedule === 'string' && typeof timeZone === 'string'
    ? { schedule, timeZone }
    : undefined;
}

/**
 * The mark to judge `job` from: `stored`, unless it was judged by another rule (the schedule
 * changed since): then none, and the scan starts afresh at its own time, as a first scan does. A
 * mark's slots are its rule's; carried over, the new rule's slots since it (which Scheduler never
 * had) would be named late and caught up. Slots the change leaves unscanned are the missed-run
 * check's, which judges each by the rules in force at its time.
 */
function markOfRule(
  stored: LateMark | undefined,
  job: DeclaredJob,
): LateMark | undefined {
  const rule = stored?.rule;
  const changed = rule !== undefined && !isSameRule(rule, job);
  return changed ? undefined : stored;
}

function markDocument(
  job: DeclaredJob,
  mark: LateMark,
  expires: Timestamp,
): DocumentData {
  return {
    job_name: job.id,
    late_judged_before: Timestamp.fromDate(mark.judgedBefore),
    run_seen: mark.runSeen,
    pending: mark.pending.map((slot) => Timestamp.fromDate(slot)),
    schedule: job.schedule,
    time_zone: job.timeZone,
    expire_at: expires,
  };
}

/** A slot and its record as read (`undefined`: none). */
interface SlotRead {
  readonly slot: Date;
  readonly runId: string;
  readonly record: StoredRecord | undefined;
}

/** Whether a slot has no attempt: no record, or a `missed` one no attempt wrote. */
function hasNoAttempt(record: StoredRecord | undefined): boolean {
  if (record === undefined) {
    return true;
  }
  return record.status === RunStatus.Missed && record.attempts === 0;
}

/**
 * The latest a slot's execution ended, ms, as the next slot's delivery waits behind it:
 * `Infinity` while a lease is live (Scheduler never has two executions of a job outstanding).
 */
function executionEnd(
  job: DeclaredJob,
  { slot, record }: SlotRead,
  previousEnd: number,
  now: Date,
): number {
  if (hasNoAttempt(record)) {
    return slot.getTime();
  }
  const stored = record as StoredRecord;
  if (isLeaseLive(stored, now)) {
    return Number.POSITIVE_INFINITY;
  }
  if (stored.status === RunStatus.Skipped) {
    return slot.getTime(); // answered at once, never executed
  }
  return slotVerdict(job, slot, stored, previousEnd, now).end;
}

/** What judging the slots since the mark found: the late ones, and where the next scan starts. */
interface Judged {
  readonly late: readonly SlotRead[];
  readonly judgedBefore: Date;
  readonly runSeen: boolean;
}

/**
 * Judges `rows` (after the slot `before`, if read) at `now`: a slot with no attempt whose
 * execution could have started (its time, or the end of the one before it) `graceMs` ago is late;
 * a paused one, or one before the job's first record, is not. Stops at the first slot that is
 * not yet decided (the one before it still running, or its grace not over).
 */
export function judgeLateSlots(
  job: DeclaredJob,
  before: SlotRead | undefined,
  rows: readonly SlotRead[],
  mark: Pick<LateMark, 'runSeen'> & { readonly end: Date },
  pauses: readonly Pause[],
  now: Date,
): Judged {
  const graceMs = lateGraceMs(job);
  const late: SlotRead[] = [];
  let runSeen = mark.runSeen;
  let previousEnd =
    before === undefined
      ? Number.NEGATIVE_INFINITY
      : executionEnd(job, before, Number.NEGATIVE_INFINITY, now);
  for (const row of rows) {
    const startsAt = Math.max(row.slot.getTime(), previousEnd);
    if (startsAt + graceMs > now.getTime()) {
      return { late, judgedBefore: row.slot, runSeen };
    }
    if (!hasNoAttempt(row.record)) {
      runSeen = true;
    } else if (runSeen && pauseAt(pauses, row.slot) === undefined) {
      late.push(row);
    }
    previousEnd = executionEnd(job, row, previousEnd, now);
  }
  return { late, judgedBefore: mark.end, runSeen };
}

/** What to do with the oldest pending slot: deliver it, wait for it, or drop it from the list. */
type PendingStep = 'deliver' | 'wait' | 'drop';

/**
 * The step for a pending slot at `now`: a slot with no attempt is delivered while it is within
 * the job's catch-up window (one reported missed meanwhile is dropped); a caught-up run that
 * failed is delivered again after the job's back-off while its retries last; one running is
 * waited for; anything else is dropped (done, reported, or Scheduler's own delivery, which
 * Scheduler retries).
 */
export function pendingStep(
  job: DeclaredJob,
  { slot, record }: SlotRead,
  now: Date,
): PendingStep {
  const windowMs = (job.catchUp?.windowSeconds ?? 0) * 1000;
  if (hasNoAttempt(record)) {
    // A reported `missed` record is the check's report: the ledger runs a reported slot again only
    // for a backfill, so a catch-up would be refused, and the slots behind it would wait for nothing.
    const reported =
      record?.status === RunStatus.Missed && record.reportedAt !== undefined;
    if (reported || !isPastSlotOf(job, slot, now)) {
      return 'drop';
    }
    const young = now.getTime() - slot.getTime() <= windowMs;
    return young ? 'deliver' : 'drop';
  }
  const stored = record as StoredRecord;
  if (isLeaseLive(stored, now)) {
    return 'wait';
  }
  const judged = judgedAt(stored, now);
  if (judged.status === 'unreadable' || judged.reportedAt !== undefined) {
    return 'drop';
  }
  const retryable =
    judged.status === RunStatus.Failed ||
    judged.status === RunStatus.InProgress;
  if (!retryable || judged.caughtUpAt === undefined) {
    return 'drop';
  }
  const retry = judged.attempts - 1;
  const firstAt = judged.firstClaimedAt?.getTime() ?? slot.getTime();
  if (!makesRetry(job, retry, now.getTime() - firstAt)) {
    return 'drop'; // spent: the missed-run check reports it failed when its window closes
  }
  const failedAt =
    judged.failedAt?.getTime() ?? judged.claimedAt?.getTime() ?? firstAt;
  return now.getTime() >= failedAt + backoffMs(job, retry) ? 'deliver' : 'wait';
}

/**
 * Whether `slot` is a slot of the job's schedule no later than `now`. The scan only leaves such
 * slots pending; another time came from a mark written by hand or a schedule changed since, and
 * delivering it would run the job before its time or at a time that is not a slot.
 */
function isPastSlotOf(job: DeclaredJob, slot: Date, now: Date): boolean {
  if (slot.getTime() > now.getTime()) {
    return false;
  }
  const [first] = slotsBetween(
    job,
    slot,
    new Date(slot.getTime() + 1),
    1,
  ).slots;
  return first?.getTime() === slot.getTime();
}

/** The pending slots after this scan's late ones joined them, by the job's `catchUp.slots`. */
function nextPending(
  job: DeclaredJob,
  pending: readonly Date[],
  late: readonly SlotRead[],
): Date[] {
  if (job.catchUp === undefined) {
    return [];
  }
  const newest = late.at(-1);
  if (job.catchUp.slots === 'latest') {
    // A newer late slot replaces the one waiting: only the newest is caught up.
    return newest === undefined ? [...pending].slice(-1) : [newest.slot];
  }
  const all = [...pending, ...late.map((row) => row.slot)];
  return all.slice(-MAX_PENDING_SLOTS);
}

/** The pending slots' steps in order: the first to deliver (if any), and those still pending. */
function catchUpTarget(
  job: DeclaredJob,
  pending: readonly SlotRead[],
  now: Date,
): { readonly target?: SlotRead; readonly kept: readonly Date[] } {
  const kept: Date[] = [];
  let target: SlotRead | undefined;
  for (const [index, row] of pending.entries()) {
    const step = pendingStep(job, row, now);
    if (step === 'drop') {
      continue;
    }
    // One at a time: the rest wait behind the first slot that is delivered or still running.
    kept.push(...pending.slice(index).map((read) => read.slot));
    target = step === 'deliver' ? row : undefined;
    break;
  }
  return target === undefined ? { kept } : { target, kept };
}

/** What follows a late slot, for its log line: its catch-up, or the report that will come. */
function whatFollows(
  job: DeclaredJob,
  slot: Date,
  kept: readonly Date[],
  target: SlotRead | undefined,
): string {
  if (target?.slot.getTime() === slot.getTime()) {
    return 'caught up now';
  }
  if (kept.some((pending) => pending.getTime() === slot.getTime())) {
    return 'caught up by a later check, one slot of the job at a time';
  }
  const reportAt = new Date(slot.getTime() + closedAfterMs(job));
  return `reported missed at about ${reportAt.toISOString()} unless Scheduler delivers it`;
}

/** Logs a late slot (WARNING {@link LATE_RUN}) with what follows it. */
function logLate(
  job: DeclaredJob,
  { slot, runId }: Pick<SlotRead, 'slot' | 'runId'>,
  follows: string,
  logger: Logger,
  more: object,
): void {
  const graceSeconds = lateGraceMs(job) / 1000;
  const fields = { jobName: job.id, slot: slot.toISOString(), runId };
  const line = { ...fields, state: 'late', graceSeconds, follows, ...more };
  logger.warn(line, LATE_RUN);
}

/** What follows a late slot judged while its job is paused: it waits for the resume. */
const PAUSED_FOLLOWS =
  'caught up after the job is resumed, if still within the catch-up window';

/**
 * The outcomes of a delivery that reached the run's claim (it ran, or the ledger or the overlap
 * policy answered for the slot); any other answer was refused before it (`outcomes.ts`).
 */
const REACHED_THE_RUN: ReadonlySet<string> = new Set([
  'processed',
  'duplicate',
  'in_progress',
  'skipped',
  'waiting',
  'failed',
]);

/** Why a catch-up delivery did not reach the slot's run; `undefined` if it did. */
export function notDeliveredReason(sent: CatchUpSent): string | undefined {
  if (sent.result === 'unsent') {
    return sent.reason;
  }
  if (sent.result === 'answered' && !REACHED_THE_RUN.has(sent.outcome)) {
    return `the function answered ${sent.outcome}`;
  }
  return undefined;
}

/**
 * Logs {@link CATCH_UP_NOT_DELIVERED} (WARNING) for a catch-up that did not reach the run, so a
 * catch-up that keeps failing (no ID token, no invoker role, a wrong URL) is seen, not only its
 * `late run` line's "caught up now".
 */
function warnIfNotDelivered(
  job: DeclaredJob,
  { slot, runId }: Pick<SlotRead, 'slot' | 'runId'>,
  sent: CatchUpSent,
  logger: Logger,
): void {
  const reason = notDeliveredReason(sent);
  if (reason === undefined) {
    return;
  }
  const fields = { jobName: job.id, slot: slot.toISOString(), runId, reason };
  logger.warn(
    { ...fields, follows: 'delivered again by the next check' },
    CATCH_UP_NOT_DELIVERED,
  );
}

function sameMark(a: LateMark | undefined, b: LateMark): boolean {
  const times = (mark: LateMark) => mark.pending.map((slot) => slot.getTime());
  return (
    a !== undefined &&
    a.judgedBefore.getTime() === b.judgedBefore.getTime() &&
    a.runSeen === b.runSeen &&
    a.rule !== undefined &&
    b.rule !== undefined &&
    isSameRule(a.rule, b.rule) &&
    JSON.stringify(times(a)) === JSON.stringify(times(b))
  );
}

/** What a mark write did: `conflict` if another instance wrote first. */
type MarkWrite = 'conflict' | 'written' | 'unchanged';

/** The late-run scan of one function instance's jobs, safe across concurrent checks. */
export class LateRunScan {
  readonly #deps: LateRunScanDeps;

  constructor(deps: LateRunScanDeps) {
    this.#deps = deps;
  }
  /**
   * Judges the job's slots in `scope` since its mark, logs each newly late one once
   * ({@link LATE_RUN}, WARNING), moves the mark (fenced: of two instances, one logs), then, for a
   * job with `catchUp`, delivers the oldest pending slot through `send`. `pausesRead`: the job's
   * pauses as the missed-run check just read them (saves this scan its read of the check document).
   * @throws {LedgerUnavailableError} if a read or the mark's write fails; nothing was logged.
   */
  async scan(
    job: DeclaredJob,
    scope: Scope,
    logger: Logger,
    send?: CatchUpSender,
    pausesRead?: PausesRead,
  ): Promise<ScanResult> {
    const { clock } = this.#deps;
    const now = await clock();
    const markId = lateDocumentId(job.id, scope);
    const [pauses, markRead] = await Promise.all([
      pausesRead ?? this.#readPauses(job, scope, now),
      this.#deps.jobDocuments.readData(markId),
    ]);
    if (pauses === 'unreadable') {
      return { late: 0 }; // the missed-run check says so; no slot is late until it is repaired
    }
    const stored = readMark(markRead.data);
    const { judged, mark, target, paused } = await this.#judge(
      job,
      scope,
      stored,
      pauses,
      now,
    );
    const logAll = (more: object) => {
      for (const { slot, runId } of judged.late) {
        const waits = mark.pending.some(
          (held) => held.getTime() === slot.getTime(),
        );
        const follows =
          paused && waits
            ? PAUSED_FOLLOWS
            : whatFollows(job, slot, mark.pending, target);
        logLate(job, { slot, runId }, follows, logger, more);
      }
    };
    let written: MarkWrite;
    try {
      written = await this.#writeMark(job, markId, stored, mark, markRead);
    } catch (err) {
      // The write may have landed: its slots are then never judged again, so they are said now
      // (at worst twice, never not at all), and the next check delivers what it left pending.
      logAll({ unconfirmed: true });
      throw err;
    }
    if (written === 'conflict') {
      return { late: 0 }; // another instance judged these slots: it logs them
    }
    logAll({});
    if (target === undefined || send === undefined) {
      return { late: judged.late.length };
    }
    const sent = await send(job, target.slot, target.runId);
    warnIfNotDelivered(job, target, sent, logger);
    return { late: judged.late.length, caughtUp: { slot: target.slot, sent } };
  }
  /**
   * Judges the job's slots since the `stored` mark at `now`: the late ones, the mark to write (how
   * far it judged, the slots still waiting for catch-up) and the slot to deliver now, if any.
   */
  async #judge(
    job: DeclaredJob,
    scope: Scope,
    storedMark: LateMark | undefined,
    pauses: readonly Pause[],
    now: Date,
  ) {
    const stored = markOfRule(storedMark, job);
    const read = await this.#readSlots(job, scope, stored, now);
    const judged = judgeLateSlots(
      job,
      read.before,
      read.rows,
      read.mark,
      pauses,
      now,
    );
    const pending = nextPending(job, stored?.pending ?? [], judged.late);
    const pendingRows = pending.map((slot) => read.rowOf(slot));
    // Paused now: Scheduler fires nothing, and neither does the audit; the slots wait for the resume.
    const paused = pauseAt(pauses, now) !== undefined;
    const { target, kept } = paused
      ? { target: undefined, kept: pending }
      : catchUpTarget(job, pendingRows, now);
    const mark: LateMark = {
      judgedBefore: judged.judgedBefore,
      runSeen: judged.runSeen,
      pending: kept,
      rule: ruleOf(job),
    };
    return { judged, mark, target, paused };
  }
  /** The job's pauses from its check document, read at `now`. */
  async #readPauses(
    job: DeclaredJob,
    scope: Scope,
    now: Date,
  ): Promise<PausesRead> {
    const id = checkDocumentId(job.id, scope);
    const checkRead = await this.#deps.jobDocuments.readData(id);
    return readPauses(checkRead.data, now);
  }
  /** Writes the mark if it moved, fenced on the read: `conflict` if another instance wrote first. */
  async #writeMark(
    job: DeclaredJob,
    markId: string,
    stored: LateMark | undefined,
    mark: LateMark,
    markRead: { readonly updateTime: Timestamp | undefined },
  ): Promise<MarkWrite> {
    if (sameMark(stored, mark)) {
      return 'unchanged';
    }
    const { jobDocuments } = this.#deps;
    const document = markDocument(job, mark, jobDocuments.expireAt());
    const written = await jobDocuments.write(
      markId,
      'late-run mark',
      document,
      markRead.updateTime,
    );
    return written === 'conflict' ? written : 'written';
  }
  /** Reads the slots since the mark (and the one before them) and the pending ones' records. */
  async #readSlots(
    job: DeclaredJob,
    scope: Scope,
    stored: LateMark | undefined,
    now: Date,
  ) {
    const end = new Date(now.getTime() - lateGraceMs(job));
    // Older slots are the missed-run check's; a first scan starts now (its first sighting).
    const oldest = now.getTime() - closedAfterMs(job);
    const from = new Date(
      Math.max(stored?.judgedBefore.getTime() ?? end.getTime(), oldest),
    );
    const range = slotsBetween(job, from, end, MAX_LATE_SLOTS);
    const first = range.slots[0];
    const before = first === undefined ? undefined : previousSlot(job, first);
    const last = range.slots.at(-1);
    const markEnd =
      range.truncated && last !== undefined
        ? new Date(last.getTime() + 1)
        : end;
    const times = new Set(
      [...(before === undefined ? [] : [before]), ...range.slots]
        .concat(stored?.pending ?? [])
        .map((slot) => slot.getTime()),
    );
    const all = [...times].map((t) => new Date(t));
    const tolerance = () =>
      forcedRunToleranceMs(job, this.#deps.forcedRunToleranceMs ?? 0);
    const records = await readSlotRecords(
      this.#deps.history,
      job,
      all,
      scope,
      tolerance,
    );
    const byTime = new Map<number, SlotRead>();
    for (const [i, slot] of all.entries()) {
      const runId = records.runIds[i] as string;
      byTime.set(slot.getTime(), {
        slot,
        runId,
        record: records.records.get(runId),
      });
    }
    const rowOf = (slot: Date): SlotRead =>
      byTime.get(slot.getTime()) as SlotRead;
    return {
      before: before === undefined ? undefined : rowOf(before),
      rows: range.slots.map(rowOf),
      rowOf,
      mark: { runSeen: stored?.runSeen ?? false, end: markEnd },
    };
  }
}
