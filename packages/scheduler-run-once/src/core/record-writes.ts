/** The builders of every write to a run document: `DocumentData` with server timestamps. */
import {
  type DocumentData as Data,
  FieldValue,
  Timestamp,
} from '@google-cloud/firestore';
import type { Note } from './notes.ts';
import {
  Field,
  MAX_ERROR_LENGTH,
  type RunDetails,
  RunKind,
  type RunRecord,
  RunStatus,
  timestampOf,
} from './run-record.ts';

function detailFields(details: RunDetails): Data {
  const fields: Data = {};
  if (details.jobName !== undefined) {
    fields[Field.jobName] = details.jobName;
  }
  if ((details.kind ?? RunKind.Slot) !== RunKind.Slot) {
    fields[Field.kind] = details.kind;
  }
  if (details.rerunOf !== undefined) {
    fields[Field.rerunOf] = details.rerunOf;
  }
  if (details.withoutScheduleTime === true) {
    fields[Field.scheduleTimeSent] = false;
  }
  if (details.caughtUp === true) {
    fields[Field.caughtUpAt] = FieldValue.serverTimestamp();
  }
  if (details.keyScope !== undefined) {
    fields[Field.keyScope] = details.keyScope;
  }
  if (details.scheduleTime !== undefined) {
    fields[Field.scheduleTime] = timestampOf(details.scheduleTime);
  }
  if (details.claimedUnder !== undefined) {
    fields[Field.schedule] = details.claimedUnder.schedule;
    fields[Field.timeZone] = details.claimedUnder.timeZone;
  }
  return fields;
}

/** The lease fields of a claim, takeover or extension: a server-time lease of `leaseMs`. */
function leaseFields(leaseMs: number, expireAt: Timestamp): Data {
  return {
    [Field.leasedAt]: FieldValue.serverTimestamp(),
    [Field.leaseMs]: leaseMs,
    [Field.expireAt]: expireAt,
  };
}

/**
 * The fields of an attempt's claim: the document a fresh claim creates, or the update that takes
 * over `previous`, the record read just before (the update is fenced on that read).
 */
export function claimFields(
  attemptId: string,
  leaseMs: number,
  expireAt: Timestamp,
  details: RunDetails,
  previous: RunRecord | undefined,
): Data {
  // The rule stamped is the first claim's, made at its slot; a takeover (a retry, maybe by a
  // revision deployed since) leaves it.
  const { claimedUnder: _first, ...taken } = details;
  return {
    ...detailFields(previous === undefined ? details : taken),
    [Field.status]: RunStatus.InProgress,
    [Field.attemptId]: attemptId,
    ...leaseFields(leaseMs, expireAt),
    [Field.claimedAt]: FieldValue.serverTimestamp(),
    [Field.attempts]: (previous?.attempts ?? 0) + 1,
    // Carried over when there is one: a record of an earlier version read its first claim from
    // `claimed_at`, which this claim moves on, so the field is written where it was missing.
    [Field.firstClaimedAt]:
      previous?.firstClaimedAt === undefined
        ? FieldValue.serverTimestamp()
        : Timestamp.fromDate(previous.firstClaimedAt),
  };
}

/** The update that records a failed attempt (a retry claims it at once); `reporter` reports it final. */
export function failureUpdate(
  message: string,
  expireAt: Timestamp,
  reporter?: string,
): Data {
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

/** A finished run no attempt ran. */
function unattempted(
  status: RunStatus,
  expireAt: Timestamp,
  details: RunDetails,
  fields: Data,
) {
  return {
    ...detailFields(details),
    [Field.status]: status,
    [Field.attempts]: 0,
    ...fields,
    [Field.expireAt]: expireAt,
  };
}

/** The document that reports a slot no attempt came for, by check `reporter`. */
export function missedDocument(
  expireAt: Timestamp,
  details: RunDetails,
  reporter: string,
): Data {
  return unattempted(
    RunStatus.Missed,
    expireAt,
    details,
    reportedUpdate(reporter),
  );
}

/** The document of a slot skipped while `blockedBy`, an earlier slot of its job, still ran. */
export function skippedDocument(
  expireAt: Timestamp,
  details: RunDetails,
  blockedBy: string,
): Data {
  return unattempted(RunStatus.Skipped, expireAt, details, {
    [Field.blockedBy]: blockedBy,
  });
}

/** The update that marks a run reported by check `reporter` (fenced, so only one instance reports). */
export function reportedUpdate(reporter: string): Data {
  return {
    [Field.reportedAt]: FieldValue.serverTimestamp(),
    [Field.reportedBy]: reporter,
  };
}

/**
 * The update that claims logging a report again: `relog_by` names the claimant (`reported_at`
 * stays the report's time; the record's update time tells when it was claimed).
 */
export function relogClaimUpdate(claimant: string): Data {
  return { [Field.relogBy]: claimant };
}

/** The update that extends a held lease from Firestore's now, with a note if given (checked first). */
export function extensionUpdate(
  leaseMs: number,
  expireAt: Timestamp,
  note?: Note,
): Data {
  const fields = leaseFields(leaseMs, expireAt);
  if (note !== undefined) {
    fields[`${Field.notes}.${note.name}`] = note.value;
  }
  return fields;
}

/** The update that marks a run completed. */
export function completionUpdate(expireAt: Timestamp): Data {
  return {
    [Field.status]: RunStatus.Completed,
    [Field.completedAt]: FieldValue.serverTimestamp(),
    [Field.expireAt]: expireAt,
  };
}
