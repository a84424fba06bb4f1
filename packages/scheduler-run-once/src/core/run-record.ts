/** The run record: its schema, converter and claim decision (its writes: `record-writes.ts`). */
import {
  type DocumentData,
  type FirestoreDataConverter,
  type QueryDocumentSnapshot,
  Timestamp,
} from '@google-cloud/firestore';
import { MAX_LEASE_MS } from './lease-limit.ts';
import type { NoteValue } from './notes.ts';
import { Field, RunKind, RunStatus } from './run-fields.ts';

export { Field, RunKind, RunStatus };

/** A run record the ledger understands. Times are Firestore's (server) clock. */
export interface RunRecord {
  readonly status: RunStatus;
  /** The attempt that holds, completed or last failed the run; `''` when none did (`missed`). */
  readonly attemptId: string;
  /** When the holder's lease lapses; only while `in_progress`. */
  readonly leaseExpires: Date | undefined;
  /** How many attempts claimed the run (records of earlier versions: 1; `missed`: 0). */
  readonly attempts: number;
  /** The first attempt's claim (`claimedAt`: the current or last one's). */
  readonly firstClaimedAt: Date | undefined;
  readonly claimedAt: Date | undefined;
  readonly completedAt: Date | undefined;
  readonly failedAt: Date | undefined;
  /** The last failure's message, at most {@link MAX_ERROR_LENGTH} characters; never request data. */
  readonly lastError: string | undefined;
  /** When it was reported missed or finally failed (once across instances), and by which check. */
  readonly reportedAt: Date | undefined;
  readonly reportedBy: string | undefined;
  /** The check that claimed logging the report again, its writer having never marked it logged. */
  readonly relogBy?: string | undefined;
  readonly jobName: string | undefined;
  readonly scheduleTime: Date | undefined;
  readonly kind: RunKind;
  /** For a re-run: the run id of the slot it runs again. */
  readonly rerunOf: string | undefined;
  /** A forced run delivered without a schedule time: never its slot's delivery. */
  readonly withoutScheduleTime: boolean;
  /** When the run audit last delivered the slot itself, Scheduler having not (catch-up). */
  readonly caughtUpAt?: Date | undefined;
  /** For `skipped`: the run id of the earlier slot that was still running. */
  readonly blockedBy: string | undefined;
  /** What the job noted (`ctx.note`), by name. */
  readonly notes: Readonly<Record<string, NoteValue>>;
  /** The key scope's id (`scopeId` of `run-key.ts`); `undefined` on a record of an earlier version. */
  readonly keyScope: string | undefined;
  /**
   * The rule its job was declared with in the revision that first claimed or skipped the slot
   * (Scheduler's delivery of a slot; none on other runs, on the run audit's catch-up deliveries
   * and on records of earlier versions): a cron expression and an IANA time zone.
   */
  readonly claimedUnder?: ClaimedRule | undefined;
}

/** A schedule rule as a claim stamps it: the job's cron expression and IANA time zone. */
export interface ClaimedRule {
  readonly schedule: string;
  readonly timeZone: string;
}

export { MAX_LEASE_MS };

/** The longest `last_error` kept, in characters: enough to act on, never a dump. */
export const MAX_ERROR_LENGTH = 300;

/** A document this code never writes (unknown `status`, bad lease): left as is, never judged expired. */
export interface UnreadableRecord {
  readonly status: 'unreadable';
  /** The field at fault, and what is wrong with it (for the log line). */
  readonly field: string;
  readonly problem: string;
}

/** What a read of a run document yields. */
export type StoredRecord = RunRecord | UnreadableRecord;

/** Fields stored with a claim; `scheduleTime` in canonical RFC 3339 (`…Z`, ≤ 9 fraction digits). */
export interface RunDetails
  extends Partial<
    Pick<
      RunRecord,
      'jobName' | 'kind' | 'rerunOf' | 'withoutScheduleTime' | 'keyScope'
    >
  > {
  readonly scheduleTime?: string;
  /** A slot delivered by the run audit's catch-up: the claim stamps `caught_up_at`. */
  readonly caughtUp?: boolean;
  /** Scheduler's delivery of a slot: the rule its job is declared with (`schedule`, `time_zone`), stamped by the first claim. */
  readonly claimedUnder?: ClaimedRule;
}

const dateOf = (value: unknown) =>
  value instanceof Timestamp ? value.toDate() : undefined;
const stringOf = (value: unknown) =>
  typeof value === 'string' ? value : undefined;

function unreadable(field: string, problem: string): UnreadableRecord {
  return { status: 'unreadable', field, problem };
}

const FINISHED: readonly unknown[] = Object.values(RunStatus).filter(
  (s) => s !== 'in_progress',
);

/** The fields every status shares, read leniently: a missing or mistyped field is `undefined`. */
function commonFields(data: DocumentData, status: unknown, attempts: unknown) {
  const claimedAt = dateOf(data[Field.claimedAt]);
  const notes = data[Field.notes];
  return {
    attempts:
      typeof attempts === 'number'
        ? attempts
        : status === RunStatus.Missed
          ? 0
          : 1,
    firstClaimedAt: dateOf(data[Field.firstClaimedAt]) ?? claimedAt,
    claimedAt,
    completedAt: dateOf(data[Field.completedAt]),
    failedAt: dateOf(data[Field.failedAt]),
    lastError: stringOf(data[Field.lastError]),
    reportedAt: dateOf(data[Field.reportedAt]),
    reportedBy: stringOf(data[Field.reportedBy]),
    relogBy: stringOf(data[Field.relogBy]),
    jobName: stringOf(data[Field.jobName]),
    scheduleTime: dateOf(data[Field.scheduleTime]),
    kind:
      Object.values(RunKind).find((k) => k === data[Field.kind]) ??
      RunKind.Slot,
    rerunOf: stringOf(data[Field.rerunOf]),
    withoutScheduleTime: data[Field.scheduleTimeSent] === false,
    caughtUpAt: dateOf(data[Field.caughtUpAt]),
    blockedBy: stringOf(data[Field.blockedBy]),
    notes:
      typeof notes === 'object' && notes !== null && !Array.isArray(notes)
        ? (notes as Record<string, NoteValue>)
        : {},
    keyScope: stringOf(data[Field.keyScope]),
    claimedUnder: claimedRuleOf(data),
  };
}

/** The rule a claim stamped, when both of its fields are strings. */
function claimedRuleOf(data: DocumentData): ClaimedRule | undefined {
  const schedule = stringOf(data[Field.schedule]);
  const timeZone = stringOf(data[Field.timeZone]);
  return schedule === undefined || timeZone === undefined
    ? undefined
    : { schedule, timeZone };
}

/** The fields of a record of any status, as {@link commonFields} reads them. */
type CommonFields = ReturnType<typeof commonFields>;

/** An in_progress record with its lease, or what makes it unreadable (its attempt or lease). */
function inProgressRecord(
  data: DocumentData,
  attemptId: unknown,
  common: CommonFields,
): StoredRecord {
  if (typeof attemptId !== 'string' || attemptId === '') {
    return unreadable(Field.attemptId, 'is missing or not a string');
  }
  const { [Field.leasedAt]: leasedAt, [Field.leaseMs]: leaseMs } = data;
  if (!(leasedAt instanceof Timestamp)) {
    return unreadable(Field.leasedAt, 'is missing or not a timestamp');
  }
  if (
    !Number.isSafeInteger(leaseMs) ||
    leaseMs <= 0 ||
    leaseMs > MAX_LEASE_MS
  ) {
    return unreadable(
      Field.leaseMs,
      `is missing or not a positive whole number of ms up to ${MAX_LEASE_MS} (the longest LEASE_SECONDS)`,
    );
  }
  return {
    status: RunStatus.InProgress,
    attemptId,
    leaseExpires: new Date(leasedAt.toMillis() + leaseMs),
    ...common,
  };
}

/** Reads a run document into a {@link StoredRecord}; writes use the builders of `record-writes.ts`. */
export const runRecordConverter: FirestoreDataConverter<StoredRecord> = {
  toFirestore(): DocumentData {
    throw new Error(
      'run records are written with the builders of record-writes.ts',
    );
  },
  fromFirestore(snap: QueryDocumentSnapshot): StoredRecord {
    const data = snap.data();
    const status = data[Field.status];
    const attemptId = data[Field.attemptId];
    const attempts = data[Field.attempts];
    if (
      attempts !== undefined &&
      !(Number.isSafeInteger(attempts) && attempts >= 0)
    ) {
      return unreadable(Field.attempts, 'is not a whole number of attempts');
    }
    const common = commonFields(data, status, attempts);
    if (FINISHED.includes(status)) {
      return {
        status,
        attemptId: stringOf(attemptId) ?? '',
        leaseExpires: undefined,
        ...common,
      };
    }
    if (status !== RunStatus.InProgress) {
      const shown = JSON.stringify(status) ?? 'missing';
      return unreadable(Field.status, `is ${shown}, not a known status`);
    }
    return inProgressRecord(data, attemptId, common);
  },
};

/** How a claim proceeds on a record read at server time `now`, with the record it decided on. */
export type ClaimDecision =
  | { readonly decision: 'absent' }
  | { readonly decision: 'unreadable'; readonly record: UnreadableRecord }
  | {
      readonly decision: 'completed' | 'lease_live' | 'take_over';
      readonly record: RunRecord;
    };

/** A completed (or skipped) run: every later delivery is a duplicate, even past `expire_at`. */
export function isCompleted(record: StoredRecord): boolean {
  return (
    record.status === RunStatus.Completed || record.status === RunStatus.Skipped
  );
}

/**
 * The record as judged at server time `now`: unreadable if an `in_progress` lease ends more than
 * {@link MAX_LEASE_MS} after `now`. Every reader that judges a lease goes through it.
 */
export function judgedAt(record: StoredRecord, now: Date): StoredRecord {
  const expires =
    record.status === RunStatus.InProgress ? record.leaseExpires : undefined;
  if (
    expires !== undefined &&
    expires.getTime() - now.getTime() > MAX_LEASE_MS
  ) {
    return unreadable(Field.leasedAt, "is later than Firestore's time now");
  }
  return record;
}

/**
 * An attempt holds the run with a lease live at server time `now`. False for a record
 * {@link judgedAt} finds unreadable, which is not free either: a caller checks that first.
 */
export function isLeaseLive(record: StoredRecord, now: Date): boolean {
  const judged = judgedAt(record, now);
  const expires =
    judged.status === RunStatus.InProgress ? judged.leaseExpires : undefined;
  return expires !== undefined && expires.getTime() > now.getTime();
}

/**
 * Decides a claim from the record read and the read's server time. A finished run is never taken
 * over, nor a reported one (missed, or failed after retries) unless `reopenReported` (a backfill).
 */
export function claimDecision(
  stored: StoredRecord | undefined,
  now: Date,
  reopenReported = false,
): ClaimDecision {
  if (stored === undefined) {
    return { decision: 'absent' };
  }
  const record = judgedAt(stored, now);
  if (record.status === 'unreadable') {
    return { decision: 'unreadable', record };
  }
  if (isCompleted(record)) {
    return { decision: 'completed', record };
  }
  const retryable =
    record.status === RunStatus.Failed || record.status === RunStatus.Missed;
  if (retryable && record.reportedAt !== undefined && !reopenReported) {
    return { decision: 'completed', record };
  }
  if (retryable || !isLeaseLive(record, now)) {
    return { decision: 'take_over', record };
  }
  return { decision: 'lease_live', record };
}

/** The Firestore Timestamp of a canonical RFC 3339 instant, to the nanosecond (a `Date` keeps ms). */
export function timestampOf(rfc3339: string): Timestamp {
  const [whole = '', fraction = ''] = rfc3339.replace(/Z$/, '').split('.');
  return new Timestamp(
    Date.parse(`${whole}Z`) / 1000,
    Number(fraction.padEnd(9, '0')),
  );
}
