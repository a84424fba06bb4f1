/** Run history: records read by run id in batches (no query, no index), and the reports. */
import type { Timestamp } from '@google-cloud/firestore';
import { reportFailure } from '../core/ledger.ts';
import {
  missedDocument,
  relogClaimUpdate,
  skippedDocument,
} from '../core/record-writes.ts';
import type { BatchRead, RunDocuments } from '../core/run-documents.ts';
import { computeRunId, type RunVariant, type Scope } from '../core/run-key.ts';
import {
  Field,
  type RunDetails,
  RunKind,
  type RunRecord,
  type StoredRecord,
} from '../core/run-record.ts';
import type { DeclaredJob } from './job-declaration.ts';
import { toCanonicalRfc3339 } from './rfc3339.ts';

/** The `last_error` of an attempt ended by a failed-run report: its lease lapsed unanswered. */
const LAPSED_ERROR =
  'its lease lapsed past the retry window without an answer (the instance crashed or stalled): reported failed after retries';
/** A report's write: its time (the token its acknowledgement is fenced on), or `exists`. */
type Report = { readonly writtenAt: Timestamp } | 'exists';

/**
 * Appended to `reported_by` by a check's report write, removed by its acknowledgement once the
 * report's log line is out: a report found still marked was written by a check that may have died
 * before logging it (docs/how-it-works.md, "Missed runs").
 */
const UNLOGGED = '~unlogged';

/**
 * How long after a check's report write its log line and acknowledgement may still be coming, ms:
 * a report found unacknowledged this long after its write was not logged by its writer (it died
 * between the two), so the finder logs it; a younger one is left to a later check.
 */
export const REPORT_LOG_GRACE_MS = 120_000;

/** The `reported_by` a check's report write stores: `reporter`, marked not yet logged. */
export function unloggedReporter(reporter: string): string {
  return `${reporter}${UNLOGGED}`;
}

/** The reporter of a report written but not yet acknowledged as logged, else `undefined`. */
export function unloggedReportBy(
  reportedBy: string | undefined,
): string | undefined {
  return reportedBy?.endsWith(UNLOGGED)
    ? reportedBy.slice(0, -UNLOGGED.length)
    : undefined;
}

/** The run id a delivery of the job's slot gets (short job id, canonical schedule time, scope). */
export function slotRunId(
  jobId: string,
  slot: Date,
  scope: Scope,
  variant?: RunVariant,
): string {
  return computeRunId(
    { jobName: jobId, scheduleTime: toCanonicalRfc3339(slot), scope },
    variant,
  );
}

/** The run id of the forced run an early delivery of the slot is taken for (`run-plan.ts`). */
export function forcedRunId(jobId: string, slot: Date, scope: Scope): string {
  return slotRunId(jobId, slot, scope, ['forced']);
}

/**
 * Whether a forced run's record was the slot's own delivery (a misjudged clock): timed, first
 * claimed at most half `toleranceMs` before the slot (why half: docs/limits.md, "Schedule times,
 * forced runs and backfill").
 */
export function isSlotsOwnDelivery(
  record: StoredRecord | undefined,
  slot: Date,
  toleranceMs: number,
): record is RunRecord {
  const run = record?.status === 'unreadable' ? undefined : record;
  if (
    run?.kind !== 'forced' ||
    run.withoutScheduleTime ||
    run.firstClaimedAt === undefined
  ) {
    return false;
  }
  return run.firstClaimedAt.getTime() >= slot.getTime() - toleranceMs / 2;
}

/**
 * Reads the records of `job`'s `slots`, then the forced runs' of those without one, taken if
 * {@link isSlotsOwnDelivery} (as `kind: slot`). `toleranceMs`: gives it in ms, called only then.
 * `runIds`: each slot's run id by index, its own or its forced run's if taken.
 * @throws {LedgerUnavailableError} if Firestore fails (as every read and write of this module).
 */
export async function readSlotRecords(
  store: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slots: readonly Date[],
  scope: Scope,
  toleranceMs: () => number,
): Promise<BatchRead & { readonly runIds: readonly string[] }> {
  const runIds = slots.map((slot) => slotRunId(job.id, slot, scope));
  const own = await store.getMany(runIds);
  const absent = runIds.flatMap((id, i) =>
    own.records.get(id) === undefined ? [i] : [],
  );
  if (absent.length === 0) {
    return { ...own, runIds };
  }
  const forcedIds = absent.map((i) =>
    forcedRunId(job.id, slots[i] as Date, scope),
  );
  const forced = await store.getMany(forcedIds);
  const records = new Map(own.records);
  const updateTimes = new Map(own.updateTimes);
  const chosen = [...runIds];
  for (const [k, i] of absent.entries()) {
    const id = forcedIds[k] as string;
    const record = forced.records.get(id);
    if (
      record === undefined ||
      !isSlotsOwnDelivery(record, slots[i] as Date, toleranceMs())
    ) {
      continue;
    }
    chosen[i] = id;
    records.set(id, { ...record, kind: RunKind.Slot });
    const updateTime = forced.updateTimes.get(id);
    if (updateTime !== undefined) {
      updateTimes.set(id, updateTime);
    }
  }
  return { records, updateTimes, readTime: forced.readTime, runIds: chosen };
}

/** The forced run that was the slot's own delivery, if it has no record of its own (one read). */
export async function slotsForcedRun(
  store: Pick<RunHistory, 'getMany'>,
  job: DeclaredJob,
  slot: Date,
  scope: Scope,
  toleranceMs: number,
): Promise<{ runId: string; record: RunRecord } | undefined> {
  const own = slotRunId(job.id, slot, scope);
  const forced = forcedRunId(job.id, slot, scope);
  const { records } = await store.getMany([own, forced]);
  const record = records.get(forced);
  const taken =
    records.get(own) === undefined &&
    isSlotsOwnDelivery(record, slot, toleranceMs);
  return taken ? { runId: forced, record } : undefined;
}

/** Run records as history: batched reads by id, each report once by a conditional write. */
export class RunHistory {
  readonly #documents: RunDocuments;

  constructor(documents: RunDocuments) {
    this.#documents = documents;
  }
  /** Reads many run records by id (batched). */
  getMany(runIds: readonly string[]): Promise<BatchRead> {
    return this.#documents.readMany(runIds);
  }
  /**
   * Creates a slot's `missed` record, reported by `reporter` and marked not yet logged
   * ({@link unloggedReporter}); `exists` if one came first.
   */
  async reportMissed(
    runId: string,
    details: RunDetails,
    reporter: string,
  ): Promise<Report> {
    const marked = unloggedReporter(reporter);
    const document = missedDocument(
      this.#documents.expireAt(),
      details,
      marked,
    );
    const created = await this.#documents.write(
      runId,
      'missed-run report',
      document,
    );
    return created === 'conflict' ? 'exists' : { writtenAt: created };
  }
  /**
   * Marks a finally failed run reported (not yet logged, as {@link reportMissed}), fenced on
   * `updateTime` (the read that found it unreported); `exists`: it changed first. `lapsed`: an
   * `in_progress` run's lease lapsed; the report fails it.
   */
  async markReported(
    runId: string,
    updateTime: Timestamp,
    reporter: string,
    lapsed = false,
  ): Promise<Report> {
    const marked = unloggedReporter(reporter);
    const lapsedError = lapsed ? LAPSED_ERROR : undefined;
    const written = await reportFailure(
      this.#documents,
      runId,
      updateTime,
      marked,
      lapsedError,
    );
    return written === 'exists' ? 'exists' : { writtenAt: written };
  }
  /**
   * Acknowledges that `reporter`'s report of `runId` was logged, fenced on `token` (its write, or
   * the read that found it); false if the record changed first: it was acknowledged, re-opened by
   * a backfill, or claimed by another check that logs it again (`claimRelog`).
   * @throws {LedgerUnavailableError} if the write fails (a later check logs the report again).
   */
  async acknowledgeReport(
    runId: string,
    reporter: string,
    token: Timestamp,
  ): Promise<boolean> {
    const update = { [Field.reportedBy]: reporter };
    const written = await this.#documents.write(
      runId,
      'report acknowledgement',
      update,
      token,
    );
    return written !== 'conflict';
  }
  /**
   * Claims logging again a report its writer never marked logged: `relog_by` names `claimant`,
   * and other checks hold it for {@link REPORT_LOG_GRACE_MS} after the claim (the record's update
   * time); fenced on `token` (the read that found it), so of two checks that found it, one logs it.
   * Returns the write's time, or `conflict` if the record changed first.
   * @throws {LedgerUnavailableError} if the write fails.
   */
  async claimRelog(
    runId: string,
    claimant: string,
    token: Timestamp,
  ): Promise<Timestamp | 'conflict'> {
    const update = relogClaimUpdate(claimant);
    return this.#documents.write(runId, 'report relog claim', update, token);
  }
  /** Records a slot skipped (final) while `blockedBy` ran; `exists` if a record appeared first. */
  async recordSkipped(
    runId: string,
    details: RunDetails,
    blockedBy: string,
  ): Promise<'recorded' | 'exists'> {
    const document = skippedDocument(
      this.#documents.expireAt(),
      details,
      blockedBy,
    );
    const created = await this.#documents.write(runId, 'skip', document);
    return created === 'conflict' ? 'exists' : 'recorded';
  }
}
