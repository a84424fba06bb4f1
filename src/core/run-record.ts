/**
 * The run record: the schema of one run document (field names, statuses), its converter, and the
 * claim decision as named conditions. The ledger owns every read and write; this module owns what
 * a record *is*.
 *
 * Timeline of one run document (the Scheduler guide's state machine, plus the lease heartbeat, and
 * failures kept for the run's history instead of deleted):
 *
 *   (absent) ──create──► in_progress ──complete──► completed              (fenced on our write)
 *      │                  │  │  ▲ └──────release──► failed               (fenced on our write)
 *      │                  │  └──┘ extend: leased_at = now, every lease/3  (fenced on our write)
 *      │                  └── now ≥ leased_at + lease_ms: another attempt takes over
 *      │                                                                 (fenced on what it read)
 *      ├──report──► missed         failed, missed ──a retry takes over at once──► in_progress
 *      └──overlap──► skipped                                             (fenced on what it read)
 *
 * A failed attempt leaves `failed` (attempts so far, when it failed, the error's message) where the
 * guide's sample deletes the claim: a retry still claims at once, with the same fenced takeover as
 * after a lapsed lease. When the caller's retry policy proves no retry can follow, the same write
 * sets `reported_at` (the final failure reported by its own attempt). `missed` is written by missed-run detection for a slot with no attempt past
 * its retry window, so it is reported once across instances; a late delivery (a backfill) may still
 * claim it. `skipped` is a slot not run because an earlier slot of its job still ran (overlap policy
 * `skip`): final, like `completed`: no delivery takes a finished run over. A re-run
 * (`npm run trigger -- JOB --rerun --slot T`) is a run of its own (`run_kind: rerun`), keyed by its
 * trigger id and naming the slot's run in `rerun_of`, so its retries are one run by construction.
 *
 * Every time on the lease is Firestore's: `leased_at` is a server timestamp written by the claim,
 * the takeover and each extension, and "now" is the `readTime` of the read that decides. No
 * instance's clock enters a lease, so a skewed instance can neither write an expired lease nor a
 * too long one; a lease that ends more than `MAX_LEASE_MS` after "now" was never written by this
 * code and is unreadable wherever a lease is judged (`judgedAt`). Each record names its key scope
 * (`key_scope`), so one scope's history never lists another's.
 */
import {
  type DocumentData,
  FieldValue,
  type FirestoreDataConverter,
  type QueryDocumentSnapshot,
  Timestamp,
} from '@google-cloud/firestore';
import type { NoteValue } from './notes.ts';

/** Run statuses, as the guide's sample writes them. */
export const RunStatus = {
  InProgress: 'in_progress',
  Completed: 'completed',
  /** The last attempt failed; a retry may claim the run at once. */
  Failed: 'failed',
  /** No attempt came within the retry window; reported by missed-run detection. */
  Missed: 'missed',
  /** Not run: an earlier slot of the job still ran (overlap policy `skip`). Final. */
  Skipped: 'skipped',
} as const;

/**
 * What a run is: its slot's run, a forced run (Scheduler's "Force run"), a manual run, or a
 * re-run of a finished slot (a record of its own, keyed by its trigger id, naming the slot's run).
 */
export const RunKind = {
  Slot: 'slot',
  Forced: 'forced',
  Manual: 'manual',
  Rerun: 'rerun',
} as const;
export type RunKind = (typeof RunKind)[keyof typeof RunKind];
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus];

/**
 * Field names of a run document. They follow the guide's sample where it has one (`status`,
 * `expire_at` for a TTL policy), so its TTL policy and queries carry over.
 */
export const Field = {
  status: 'status',
  /** The attempt holding (or that completed) the run; for people, logs and fenced-write checks. */
  attemptId: 'attempt_id',
  /** Server time of the claim, takeover or last lease extension. */
  leasedAt: 'leased_at',
  /** Lease length from `leased_at`, ms. */
  leaseMs: 'lease_ms',
  /** When a Firestore TTL policy may delete the document (TTL deletion lags up to days). */
  expireAt: 'expire_at',
  /** Server time of the first write of the current attempt. */
  claimedAt: 'claimed_at',
  /** Server time of the first attempt's claim: `first_claimed_at − schedule_time` is how late the run started. */
  firstClaimedAt: 'first_claimed_at',
  /** How many attempts claimed the run so far. */
  attempts: 'attempts',
  /** Server time of the completion. */
  completedAt: 'completed_at',
  /** Server time of the last failure. */
  failedAt: 'failed_at',
  /** The last failure's `message`, at most {@link MAX_ERROR_LENGTH} characters; never request data. */
  lastError: 'last_error',
  /** Server time at which a missed or finally failed run was reported (once across instances). */
  reportedAt: 'reported_at',
  /** Which check wrote `reported_at`: the report that finds its own id after a lost answer logs it. */
  reportedBy: 'reported_by',
  /** `forced`, `manual` or `rerun` for runs that are not their slot's; absent for a slot. */
  kind: 'run_kind',
  /** For a re-run: the run id of the slot it runs again. */
  rerunOf: 'rerun_of',
  /** `false` on a forced run whose delivery carried no schedule time (the console's Force run). */
  scheduleTimeSent: 'schedule_time_sent',
  /** The run id of the earlier slot that was still running when this one was skipped. */
  blockedBy: 'blocked_by',
  /** What the job noted about its run (`ctx.note`), by name: e.g. the execution a proxy launched. */
  notes: 'notes',
  /**
   * The key scope the run belongs to (`scopeId` of `run-key.ts`: `''` for none), so the history of
   * one scope never lists or judges another's records; absent on records of earlier versions.
   */
  keyScope: 'key_scope',
  jobName: 'job_name',
  scheduleTime: 'schedule_time',
} as const;

/** A run record the ledger understands. Times are Firestore's (server) clock. */
export interface RunRecord {
  readonly status: RunStatus;
  /** The attempt that holds, completed or last failed the run; `''` when none did (`missed`). */
  readonly attemptId: string;
  /** When the holder's lease lapses, by Firestore's clock; only while `in_progress`. */
  readonly leaseExpires: Date | undefined;
  /** How many attempts claimed the run (records of earlier versions: 1; `missed`: 0). */
  readonly attempts: number;
  /** The first attempt's claim. */
  readonly firstClaimedAt: Date | undefined;
  /** The current (or last) attempt's claim. */
  readonly claimedAt: Date | undefined;
  readonly completedAt: Date | undefined;
  readonly failedAt: Date | undefined;
  /** The last failure's message. */
  readonly lastError: string | undefined;
  /** When it was reported as missed or finally failed. */
  readonly reportedAt: Date | undefined;
  /** The id of the check that reported it. */
  readonly reportedBy: string | undefined;
  readonly jobName: string | undefined;
  readonly scheduleTime: Date | undefined;
  readonly kind: RunKind;
  /** For a re-run: the run id of the slot it runs again. */
  readonly rerunOf: string | undefined;
  /** False for a forced run delivered without a schedule time: it was never its slot's delivery. */
  readonly untimed: boolean;
  /** For `skipped`: the run that was still running. */
  readonly blockedBy: string | undefined;
  /** What the job noted about its run (`ctx.note`), by name. */
  readonly notes: Readonly<Record<string, NoteValue>>;
  /** The key scope's id (`scopeId`); `undefined` on a record of an earlier version (any scope). */
  readonly keyScope: string | undefined;
}

/**
 * The longest lease a record may carry, ms: the largest LEASE_SECONDS the configuration accepts
 * (a day). A longer `lease_ms` was never written by this code, so the record is unreadable.
 */
export const MAX_LEASE_MS = 86_400_000;

/** The longest `last_error` kept, in characters: enough to act on, never a dump. */
export const MAX_ERROR_LENGTH = 300;

/**
 * A document in the runs collection that is not a run record this version can read: an unknown
 * `status`, or an `in_progress` record without a valid lease. Never overwritten: a run we cannot
 * read may be running, and "never twice" comes first.
 */
export interface UnreadableRecord {
  readonly status: 'unreadable';
  /** The field at fault. */
  readonly field: string;
  /** What is wrong with it, for the log line. */
  readonly problem: string;
}

/** What a read of a run document yields. */
export type StoredRecord = RunRecord | UnreadableRecord;

/** Descriptive fields stored with a claim, for people, logs and run history. */
export interface RunDetails {
  /** The Scheduler job id. */
  readonly jobName?: string;
  /** The schedule time as canonical RFC 3339 (`…Z`, up to 9 fraction digits). */
  readonly scheduleTime?: string;
  /** `forced`, `manual` or `rerun`; a slot's run when absent. */
  readonly kind?: RunKind;
  /** For a re-run: the run id of the slot it runs again. */
  readonly rerunOf?: string;
  /** A forced run delivered without `X-CloudScheduler-ScheduleTime` (stored `schedule_time_sent: false`). */
  readonly untimed?: boolean;
  /** The key scope's id (`scopeId` of `run-key.ts`, `''` for none), stored as `key_scope`. */
  readonly keyScope?: string;
}

function dateOf(value: unknown): Date | undefined {
  return value instanceof Timestamp ? value.toDate() : undefined;
}

function unreadable(field: string, problem: string): UnreadableRecord {
  return { status: 'unreadable', field, problem };
}

/** The lease end of an in-progress document, or why it has none. */
function leaseOf(data: DocumentData): Date | UnreadableRecord {
  const leasedAt = data[Field.leasedAt];
  const leaseMs = data[Field.leaseMs];
  if (!(leasedAt instanceof Timestamp)) {
    return unreadable(Field.leasedAt, 'is missing or not a timestamp');
  }
  if (
    typeof leaseMs !== 'number' ||
    !Number.isSafeInteger(leaseMs) ||
    leaseMs <= 0 ||
    leaseMs > MAX_LEASE_MS
  ) {
    return unreadable(
      Field.leaseMs,
      `is missing or not a positive whole number of ms up to ${MAX_LEASE_MS} (the longest LEASE_SECONDS)`,
    );
  }
  return new Date(leasedAt.toMillis() + leaseMs);
}

/**
 * Reads a run document into a {@link StoredRecord}; writes go through the builders below, which
 * use server timestamps that a typed model cannot express.
 */
export const runRecordConverter: FirestoreDataConverter<StoredRecord> = {
  toFirestore(): DocumentData {
    throw new Error('run records are written with the builders of run-record.ts');
  },
  fromFirestore(snap: QueryDocumentSnapshot): StoredRecord {
    const data = snap.data();
    const status = data[Field.status];
    const attemptId = data[Field.attemptId];
    const jobName = data[Field.jobName];
    const attempts = data[Field.attempts];
    const lastError = data[Field.lastError];
    const kind = Object.values(RunKind).find((k) => k === data[Field.kind]) ?? RunKind.Slot;
    const rerunOf = data[Field.rerunOf];
    const blockedBy = data[Field.blockedBy];
    const notes = data[Field.notes];
    const keyScope = data[Field.keyScope];
    const claimedAt = dateOf(data[Field.claimedAt]);
    if (attempts !== undefined && !(Number.isSafeInteger(attempts) && attempts >= 0)) {
      return unreadable(Field.attempts, 'is not a whole number of attempts');
    }
    const common = {
      attempts: typeof attempts === 'number' ? attempts : status === RunStatus.Missed ? 0 : 1,
      firstClaimedAt: dateOf(data[Field.firstClaimedAt]) ?? claimedAt,
      claimedAt,
      completedAt: dateOf(data[Field.completedAt]),
      failedAt: dateOf(data[Field.failedAt]),
      lastError: typeof lastError === 'string' ? lastError : undefined,
      reportedAt: dateOf(data[Field.reportedAt]),
      reportedBy: typeof data[Field.reportedBy] === 'string' ? data[Field.reportedBy] : undefined,
      jobName: typeof jobName === 'string' ? jobName : undefined,
      scheduleTime: dateOf(data[Field.scheduleTime]),
      kind,
      rerunOf: typeof rerunOf === 'string' ? rerunOf : undefined,
      untimed: data[Field.scheduleTimeSent] === false,
      blockedBy: typeof blockedBy === 'string' ? blockedBy : undefined,
      notes:
        typeof notes === 'object' && notes !== null && !Array.isArray(notes)
          ? (notes as Record<string, NoteValue>)
          : {},
      keyScope: typeof keyScope === 'string' ? keyScope : undefined,
    };
    if (
      status === RunStatus.Completed ||
      status === RunStatus.Failed ||
      status === RunStatus.Missed ||
      status === RunStatus.Skipped
    ) {
      return {
        status,
        attemptId: typeof attemptId === 'string' ? attemptId : '',
        leaseExpires: undefined,
        ...common,
      };
    }
    if (status !== RunStatus.InProgress) {
      return unreadable(
        Field.status,
        `is ${JSON.stringify(status) ?? 'missing'}, not a known status`,
      );
    }
    if (typeof attemptId !== 'string' || attemptId === '') {
      return unreadable(Field.attemptId, 'is missing or not a string');
    }
    const lease = leaseOf(data);
    if (!(lease instanceof Date)) return lease;
    return { status, attemptId, leaseExpires: lease, ...common };
  },
};

/**
 * How a claim proceeds on a record read at server time `now` (see the timeline above), carrying
 * the record it decided on:
 * - `absent`: no document (released between a create and its read): create again;
 * - `completed`: a duplicate; `unreadable`: never overwritten; `lease_live`: another attempt holds it;
 * - `take_over`: the lease lapsed, the last attempt failed, or the slot was reported missed: take
 *   it over, fenced on the read.
 */
export type ClaimDecision =
  | { readonly decision: 'absent' }
  | { readonly decision: 'completed'; readonly record: RunRecord }
  | { readonly decision: 'unreadable'; readonly record: UnreadableRecord }
  | { readonly decision: 'lease_live'; readonly record: RunRecord }
  | { readonly decision: 'take_over'; readonly record: RunRecord };

/** A completed (or skipped) run: every later delivery is a duplicate, even past `expire_at`. */
export function isCompleted(record: StoredRecord): boolean {
  return record.status === RunStatus.Completed || record.status === RunStatus.Skipped;
}

/** The last attempt failed, or no attempt came (reported missed): a retry claims it at once. */
export function isRetryable(record: StoredRecord): boolean {
  return record.status === RunStatus.Failed || record.status === RunStatus.Missed;
}

/**
 * The record as judged at server time `now`: an `in_progress` record whose lease ends more than
 * {@link MAX_LEASE_MS} after `now` is unreadable. Only a `leased_at` later than Firestore's now
 * gives a lease end that far ahead, and this code never writes one (`leased_at` is a server
 * timestamp). The one rule for a lease from the future: the claim, the overlap policy, the run
 * history and missed-run detection all read records through it (or through
 * {@link isLeaseLive}, which uses it), so such a record never counts as a live lease anywhere.
 */
export function judgedAt(record: StoredRecord, now: Date): StoredRecord {
  if (
    record.status === RunStatus.InProgress &&
    record.leaseExpires !== undefined &&
    record.leaseExpires.getTime() - now.getTime() > MAX_LEASE_MS
  ) {
    return unreadable(Field.leasedAt, "is later than Firestore's time now");
  }
  return record;
}

/**
 * An attempt holds the run and its lease has not lapsed at server time `now`. False for a record
 * {@link judgedAt} finds unreadable: a caller that must not treat it as free checks that first.
 */
export function isLeaseLive(record: StoredRecord, now: Date): boolean {
  const judged = judgedAt(record, now);
  return (
    judged.status === RunStatus.InProgress &&
    judged.leaseExpires !== undefined &&
    judged.leaseExpires.getTime() > now.getTime()
  );
}

/** A run reported missed or failed after retries (`reported_at`): closed but to a backfill. */
export function isReported(record: RunRecord): boolean {
  return isRetryable(record) && record.reportedAt !== undefined;
}

/**
 * Decides a claim from the record read and the read's server time. A finished run is never taken
 * over: a re-run is a record of its own (`run_kind: rerun`). A reported run (missed, or failed
 * after retries) is finished too, unless `reopenReported` (a backfill's delivery): a delivery an
 * instance held past the run's window must not turn the report into a lie.
 */
export function claimDecision(
  stored: StoredRecord | undefined,
  now: Date,
  reopenReported = false,
): ClaimDecision {
  if (stored === undefined) return { decision: 'absent' };
  const record = judgedAt(stored, now);
  if (record.status === 'unreadable') return { decision: 'unreadable', record };
  if (isCompleted(record)) return { decision: 'completed', record };
  if (isReported(record) && !reopenReported) return { decision: 'completed', record };
  if (isRetryable(record) || !isLeaseLive(record, now)) {
    return { decision: 'take_over', record };
  }
  return { decision: 'lease_live', record };
}

/**
 * The Firestore Timestamp of a canonical RFC 3339 instant, keeping up to nanoseconds (a `Date`
 * keeps only ms).
 */
export function timestampOf(rfc3339: string): Timestamp {
  const [whole = '', fraction = ''] = rfc3339.replace(/Z$/, '').split('.');
  return new Timestamp(Date.parse(`${whole}Z`) / 1000, Number(fraction.padEnd(9, '0')));
}

function detailFields(details: RunDetails): DocumentData {
  const fields: DocumentData = {};
  if (details.jobName !== undefined) fields[Field.jobName] = details.jobName;
  if (details.kind !== undefined && details.kind !== RunKind.Slot)
    fields[Field.kind] = details.kind;
  if (details.rerunOf !== undefined) fields[Field.rerunOf] = details.rerunOf;
  if (details.untimed === true) fields[Field.scheduleTimeSent] = false;
  if (details.keyScope !== undefined) fields[Field.keyScope] = details.keyScope;
  if (details.scheduleTime !== undefined) {
    fields[Field.scheduleTime] = timestampOf(details.scheduleTime);
  }
  return fields;
}

/** The lease fields of a claim, takeover or extension: a server-time lease of `leaseMs`. */
function leaseFields(leaseMs: number, expireAt: Timestamp): DocumentData {
  return {
    [Field.leasedAt]: FieldValue.serverTimestamp(),
    [Field.leaseMs]: leaseMs,
    [Field.expireAt]: expireAt,
  };
}

/** The fields of an attempt's claim, fresh or taken over. */
function attemptFields(
  attemptId: string,
  leaseMs: number,
  expireAt: Timestamp,
  details: RunDetails,
): DocumentData {
  return {
    ...detailFields(details),
    [Field.status]: RunStatus.InProgress,
    [Field.attemptId]: attemptId,
    ...leaseFields(leaseMs, expireAt),
    [Field.claimedAt]: FieldValue.serverTimestamp(),
  };
}

/** The document a fresh claim creates: the run's first attempt. */
export function claimDocument(
  attemptId: string,
  leaseMs: number,
  expireAt: Timestamp,
  details: RunDetails,
): DocumentData {
  return {
    ...attemptFields(attemptId, leaseMs, expireAt, details),
    [Field.attempts]: 1,
    [Field.firstClaimedAt]: FieldValue.serverTimestamp(),
  };
}

/**
 * The update that takes over a lapsed lease, a failed attempt or a reported miss: the next attempt
 * over the record `previous` (read just before; the update is fenced on that read, so counting from
 * it is exact).
 */
export function takeoverUpdate(
  attemptId: string,
  leaseMs: number,
  expireAt: Timestamp,
  details: RunDetails,
  previous: RunRecord,
): DocumentData {
  return {
    ...attemptFields(attemptId, leaseMs, expireAt, details),
    [Field.attempts]: previous.attempts + 1,
    ...(previous.firstClaimedAt === undefined
      ? { [Field.firstClaimedAt]: FieldValue.serverTimestamp() }
      : {}),
  };
}

/**
 * The update that records a failed attempt in a state a retry claims at once; with `reporter`, a
 * final failure (no retry can follow) reported by the same write.
 */
export function failureUpdate(
  message: string,
  expireAt: Timestamp,
  reporter?: string,
): DocumentData {
  return {
    ...(reporter === undefined ? {} : reportedUpdate(reporter)),
    [Field.status]: RunStatus.Failed,
    [Field.failedAt]: FieldValue.serverTimestamp(),
    [Field.lastError]: message.slice(0, MAX_ERROR_LENGTH),
    [Field.leasedAt]: FieldValue.delete(),
    [Field.leaseMs]: FieldValue.delete(),
    [Field.expireAt]: expireAt,
  };
}

/** The document that reports a slot no attempt came for: created once across instances. */
export function missedDocument(
  expireAt: Timestamp,
  details: RunDetails,
  reporter: string,
): DocumentData {
  return {
    ...detailFields(details),
    [Field.status]: RunStatus.Missed,
    [Field.attempts]: 0,
    [Field.reportedAt]: FieldValue.serverTimestamp(),
    [Field.reportedBy]: reporter,
    [Field.expireAt]: expireAt,
  };
}

/** The document of a slot skipped while `blockedBy`, an earlier slot of its job, still ran. */
export function skippedDocument(
  expireAt: Timestamp,
  details: RunDetails,
  blockedBy: string,
): DocumentData {
  return {
    ...detailFields(details),
    [Field.status]: RunStatus.Skipped,
    [Field.attempts]: 0,
    [Field.blockedBy]: blockedBy,
    [Field.expireAt]: expireAt,
  };
}

/** The update that marks a finally failed run reported (fenced, so only one instance reports). */
export function reportedUpdate(reporter: string): DocumentData {
  return { [Field.reportedAt]: FieldValue.serverTimestamp(), [Field.reportedBy]: reporter };
}

/**
 * The update that extends a held lease from Firestore's now, with a note of the job's if given
 * (checked with {@link noteProblem} first).
 */
export function extensionUpdate(
  leaseMs: number,
  expireAt: Timestamp,
  note?: { readonly name: string; readonly value: NoteValue },
): DocumentData {
  const fields = leaseFields(leaseMs, expireAt);
  if (note !== undefined) fields[`${Field.notes}.${note.name}`] = note.value;
  return fields;
}

/** The update that marks a run completed. */
export function completionUpdate(expireAt: Timestamp): DocumentData {
  return {
    [Field.status]: RunStatus.Completed,
    [Field.completedAt]: FieldValue.serverTimestamp(),
    [Field.expireAt]: expireAt,
  };
}
