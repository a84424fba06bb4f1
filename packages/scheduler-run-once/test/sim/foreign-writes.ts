/**
 * What the simulator's world writes beside the product: records and overlap locks of another
 * version (a status this version does not know, fields it never writes, a lock naming a holder
 * whose claim never lands, pauses it never writes or writes only at their edge), and the operator's documented repair of a record this version cannot
 * read (delete it if no attempt of it is running; the lock that names it stays). Each is written
 * through the Firestore API, as another version's instance or the Firebase console would, and
 * fenced where a careful writer would fence (another version keeps the lock protocol: it takes a
 * lock only while no live run holds it).
 */
import {
  type DocumentData,
  FieldValue,
  type Firestore,
  Timestamp,
} from '@google-cloud/firestore';
import { type Scope, scopeId } from '../../src/core/run-key.ts';
import type { DeclaredJob } from '../../src/policy/job-declaration.ts';
import { jobStateCollection } from '../../src/policy/job-state.ts';
import { slotRunId } from '../../src/policy/run-history.ts';
import { previousSlot, slotsBetween } from '../../src/policy/schedule.ts';
import {
  type ForeignLockHolder,
  type ForeignPauseKind,
  isMalformedHolder,
  type MalformedHolder,
} from './model.ts';
import { v1CheckDocumentId } from './run-id-invariants.ts';

/** A status no version of this product writes: another (newer) version's. */
export const UNKNOWN_STATUS = 'deferred';

/** The statuses this version writes and reads (docs/how-it-works.md, "The run record"). */
export const KNOWN_STATUSES: ReadonlySet<unknown> = new Set([
  'in_progress',
  'completed',
  'failed',
  'missed',
  'skipped',
]);

/** Fields another version adds to its records: this version never writes them. */
const EXTRA_FIELDS = { v9_lane: 'blue', v9_meta: { retries: 2, origin: 'v9' } };

/** Where the simulated world writes: the store, its runs collection and the clock, ms. */
export interface ForeignStore {
  readonly store: Firestore;
  readonly collection: string;
  readonly now: () => number;
  /** How long a record is kept (its `expire_at` from now), ms. */
  readonly retentionMs: number;
  /** 64 hex digits from the seeded PRNG: a run id this version never computed. */
  readonly randomRunId: () => string;
}

/** The document id of `job`'s overlap lock in `scope` (as `src/policy/overlap.ts` names it). */
export function lockIdOf(jobId: string, scope: Scope): string {
  const keyScope = scopeId(scope);
  return keyScope === '' ? `${jobId}~overlap` : `${jobId}~overlap~${keyScope}`;
}

/**
 * The forms of a record this version cannot read (docs/how-it-works.md, the `on conflict` row: an
 * unknown status, a `lease_ms` that is not a whole number of ms from 1 to a day, a `leased_at`
 * later than Firestore's now, `attempts` that are not a whole number; an `in_progress` record
 * without its attempt, without `leased_at`, or with the guide's `lease_expires` alone), as another
 * version or a hand would write them.
 */
export const UNREADABLE_FORMS = [
  'unknown_status',
  'lease_expires_only',
  'lease_ms_zero',
  'lease_ms_past_a_day',
  'lease_ms_fraction',
  'leased_at_ahead',
  'no_leased_at',
  'attempts_negative',
  'attempts_text',
  'no_attempt_id',
] as const;
export type UnreadableForm = (typeof UNREADABLE_FORMS)[number];

/** A day, ms: the longest lease a record may hold (`MAX_LEASE_MS`, the longest `LEASE_SECONDS`). */
const DAY_MS = 86_400_000;

/** The lease another version's live record holds in the forms that keep one readable, ms. */
const FOREIGN_LEASE_MS = 30_000;

/**
 * The form of another version's unreadable record written at `atMs`, from the event's own time
 * (no new draw, so no other history moves): an unknown status in one second in two, else each
 * malformed form in turn.
 */
export function unreadableFormAt(atMs: number): UnreadableForm {
  const second = Math.floor(atMs / 1000);
  if (second % 2 === 0) {
    return 'unknown_status';
  }
  const malformed = UNREADABLE_FORMS.slice(1);
  return (
    malformed[Math.floor(second / 2) % malformed.length] ?? 'unknown_status'
  );
}

/** The fields of a live `in_progress` record of another version, less what `form` breaks. */
function inProgressFields(w: ForeignStore, form: UnreadableForm): DocumentData {
  const now = w.now();
  const lease = {
    leased_at: Timestamp.fromMillis(now),
    lease_ms: FOREIGN_LEASE_MS,
  };
  switch (form) {
    case 'lease_expires_only':
      return { lease_expires: Timestamp.fromMillis(now + FOREIGN_LEASE_MS) };
    case 'lease_ms_zero':
      return { ...lease, lease_ms: 0 };
    case 'lease_ms_past_a_day':
      return { ...lease, lease_ms: DAY_MS + 1 };
    case 'lease_ms_fraction':
      return { ...lease, lease_ms: FOREIGN_LEASE_MS + 0.5 };
    case 'leased_at_ahead':
      return { ...lease, leased_at: Timestamp.fromMillis(now + 2 * DAY_MS) };
    case 'no_leased_at':
      return { lease_ms: FOREIGN_LEASE_MS };
    default:
      return lease;
  }
}

/**
 * A record of another version in `form`, for `job`'s slot `slotMs`: unreadable to this version.
 * Its attempt id is drawn unless given.
 */
export function unreadableRecord(
  w: ForeignStore,
  job: DeclaredJob,
  slotMs: number,
  form: UnreadableForm = 'unknown_status',
  attemptId = `v9-${w.randomRunId().slice(0, 12)}`,
): DocumentData {
  const common = {
    job_name: job.id,
    schedule_time: Timestamp.fromMillis(slotMs),
    expire_at: Timestamp.fromMillis(w.now() + w.retentionMs),
    ...EXTRA_FIELDS,
  };
  if (form === 'unknown_status') {
    return {
      status: UNKNOWN_STATUS,
      attempt_id: attemptId,
      attempts: 1,
      ...common,
    };
  }
  if (form === 'attempts_negative' || form === 'attempts_text') {
    return {
      status: 'failed',
      attempt_id: attemptId,
      attempts: form === 'attempts_negative' ? -1 : '2',
      failed_at: Timestamp.fromMillis(w.now()),
      last_error: 'failed in another version',
      ...common,
    };
  }
  return {
    status: 'in_progress',
    ...(form === 'no_attempt_id' ? {} : { attempt_id: attemptId }),
    attempts: 1,
    ...inProgressFields(w, form),
    ...common,
  };
}

/**
 * Why this version cannot read a run record, judged by the documented rules
 * ({@link UNREADABLE_FORMS}) rather than by the product's parser, at `nowMs` (Firestore's time);
 * `undefined` when it can.
 */
export function unreadableBecause(
  data: Readonly<Record<string, unknown>>,
  nowMs: number,
): string | undefined {
  const { status, attempts } = data;
  if (!KNOWN_STATUSES.has(status)) {
    return `status ${JSON.stringify(status)}`;
  }
  if (
    attempts !== undefined &&
    !(Number.isSafeInteger(attempts) && (attempts as number) >= 0)
  ) {
    return `attempts ${JSON.stringify(attempts)}`;
  }
  if (status !== 'in_progress') {
    return undefined;
  }
  const {
    attempt_id: attemptId,
    leased_at: leasedAt,
    lease_ms: leaseMs,
  } = data;
  if (typeof attemptId !== 'string' || attemptId === '') {
    return 'no attempt_id';
  }
  if (!(leasedAt instanceof Timestamp)) {
    return 'no leased_at';
  }
  if (
    !Number.isSafeInteger(leaseMs) ||
    (leaseMs as number) < 1 ||
    (leaseMs as number) > DAY_MS
  ) {
    return `lease_ms ${JSON.stringify(leaseMs)}`;
  }
  if (leasedAt.toMillis() + (leaseMs as number) - nowMs > DAY_MS) {
    return "leased_at later than Firestore's now";
  }
  return undefined;
}

/** A record another version wrote: its run id, and the form of an unreadable one. */
export interface ForeignWrite {
  readonly runId: string;
  readonly form?: UnreadableForm;
}

/**
 * The forms of the records one `unknown_status` event writes, from `first`: each form of
 * {@link UNREADABLE_FORMS} once, in order, the first one `first`. Another version writes the records
 * of every slot it runs, so its unreadable records come in runs of slots; writing each form at each
 * such event (rather than one form an event) lets a few histories meet every form, a mistake in
 * reading any one of them included.
 */
export function unreadableFormsFrom(first: UnreadableForm): UnreadableForm[] {
  const at = UNREADABLE_FORMS.indexOf(first);
  return UNREADABLE_FORMS.map(
    (_, i) =>
      UNREADABLE_FORMS[(at + i) % UNREADABLE_FORMS.length] ?? 'unknown_status',
  );
}

/**
 * `unknown_status`: creates the records of `job`'s next slots within an hour, one in each form
 * {@link unreadableFormsFrom} `form` gives (a slot that has a record already keeps it).
 * `extra_fields`: adds fields this version never writes to the record of the job's last slot, if
 * that record is final (completed, skipped, or reported), fenced on its read.
 * @returns the records written, none if the slots had records already (`extra_fields`: one at most).
 */
export async function writeForeignRecord(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
  kind: 'unknown_status' | 'extra_fields',
  form: UnreadableForm = 'unknown_status',
): Promise<ForeignWrite[]> {
  if (kind === 'unknown_status') {
    return writeUnreadableRecords(w, job, scope, form);
  }
  const runId = await addExtraFields(w, job, scope);
  return runId === undefined ? [] : [{ runId }];
}

/** The `unknown_status` records of {@link writeForeignRecord}. */
async function writeUnreadableRecords(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
  first: UnreadableForm,
): Promise<ForeignWrite[]> {
  const runs = w.store.collection(w.collection);
  const forms = unreadableFormsFrom(first);
  const now = new Date(w.now());
  const { slots } = slotsBetween(
    job,
    now,
    new Date(now.getTime() + 3_600_000),
    forms.length,
  );
  const written: ForeignWrite[] = [];
  for (const [i, slot] of slots.entries()) {
    const form = forms[i] ?? first;
    const runId = slotRunId(job.id, slot, scope);
    // The first record's attempt id is drawn, as it always was; the others' come from their slot,
    // so that no draw of the history after this event moves.
    const attemptId =
      i === 0 ? undefined : `v9-${slot.getTime().toString(16).slice(-12)}`;
    const created = await runs
      .doc(runId)
      .create(unreadableRecord(w, job, slot.getTime(), form, attemptId))
      .then(
        () => true,
        () => false,
      );
    if (created) {
      written.push({ runId, form });
    }
  }
  return written;
}

/** The `extra_fields` write of {@link writeForeignRecord}: the run id written, if one was. */
async function addExtraFields(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
): Promise<string | undefined> {
  const runs = w.store.collection(w.collection);
  const slot = previousSlot(job, new Date(w.now()));
  if (slot === undefined) {
    return undefined;
  }
  const runId = slotRunId(job.id, slot, scope);
  const snap = await runs.doc(runId).get();
  const data = snap.data();
  const final =
    data?.status === 'completed' ||
    data?.status === 'skipped' ||
    data?.reported_at !== undefined;
  if (!snap.exists || !final || snap.updateTime === undefined) {
    return undefined;
  }
  const written = await runs
    .doc(runId)
    .update(EXTRA_FIELDS, { lastUpdateTime: snap.updateTime })
    .then(
      () => true,
      () => false,
    );
  return written ? runId : undefined;
}

/** A run id as this version writes it: 64 lowercase hex digits (a SHA-256). */
const RUN_ID = /^[0-9a-f]{64}$/;

/**
 * The `holder_run_id` a lock naming no run holds: `form` made from `runId` (a run id of no
 * record); `undefined` for no field.
 */
export function malformedHolderValue(
  form: MalformedHolder,
  runId: string,
): unknown {
  switch (form) {
    case 'number':
      return 42;
    case 'missing':
      return undefined;
    case 'prefixed':
      return `v${runId}`;
    case 'suffixed':
      return `${runId}-v9`;
    case 'capitals':
      return runId.toUpperCase();
  }
}

/**
 * The `holder_run_id` field of a lock naming no run ({@link malformedHolderValue}), or the field
 * deleted (a lock without it, written over an earlier lock).
 */
function malformedHolderField(
  form: MalformedHolder,
  runId: string,
): DocumentData {
  const value = malformedHolderValue(form, runId);
  return { holder_run_id: value === undefined ? FieldValue.delete() : value };
}

/**
 * Another version takes `job`'s overlap lock for a run whose claim never lands, fenced on its read
 * of the lock, and only if the lock's holder is not live (no `in_progress` record under a live
 * lease): `absent`, its holder never recorded; `unknown_status`, its holder's record written
 * after the lock (as a claim follows its lock) with {@link UNKNOWN_STATUS}; a malformed holder
 * (`MALFORMED_HOLDERS`), a holder id that is not a run id. `isJobBusy`: whether a run of the job
 * executes or is being delivered now (the model's knowledge; then nothing is written).
 * @returns the holder's run id (for a malformed holder, the run id its form was made from), when
 * the lock landed and when the holder's record did (answered: it landed by then), or `undefined`
 * if nothing was written.
 */
export async function writeForeignLock(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
  holder: ForeignLockHolder,
  isJobBusy: () => boolean,
): Promise<
  | {
      readonly runId: string;
      /** When the lock's write was sent, ms: it landed between then and `lockedAt`. */
      readonly sentAt: number;
      readonly lockedAt: number;
      readonly recordedAt?: number;
    }
  | undefined
> {
  if (isJobBusy()) {
    return undefined;
  }
  const lockRef = w.store
    .collection(jobStateCollection(w.collection))
    .doc(lockIdOf(job.id, scope));
  const lock = await lockRef.get();
  const current = lock.data()?.holder_run_id;
  if (typeof current === 'string' && (await isLiveRecord(w, current))) {
    return undefined;
  }
  const runId = w.randomRunId();
  const malformed = isMalformedHolder(holder);
  const data = {
    ...(malformed
      ? malformedHolderField(holder, runId)
      : { holder_run_id: runId }),
    job_name: job.id,
    expire_at: Timestamp.fromMillis(w.now() + w.retentionMs),
  };
  const sentAt = w.now();
  const written =
    lock.exists && lock.updateTime !== undefined
      ? lockRef.update(data, { lastUpdateTime: lock.updateTime })
      : lockRef.create(withoutDeletes(data));
  const landed = await written.then(
    () => true,
    () => false,
  );
  if (!landed) {
    return undefined;
  }
  const lockedAt = w.now();
  if (malformed) {
    return { runId, sentAt, lockedAt };
  }
  // As this version's older revisions did: the lock first, then the claim (its record).
  if (holder === 'unknown_status') {
    const slotMs = Math.floor(lockedAt / 60_000) * 60_000;
    const record = unreadableRecord(w, job, slotMs);
    await w.store.collection(w.collection).doc(runId).create(record);
    return { runId, sentAt, lockedAt, recordedAt: w.now() };
  }
  return { runId, sentAt, lockedAt };
}

/** `data` less its deleted fields: what a `create` writes (it takes no `FieldValue.delete()`). */
function withoutDeletes(data: DocumentData): DocumentData {
  const deleted = FieldValue.delete();
  return Object.fromEntries(
    Object.entries(data).filter(([, value]) => !deleted.isEqual(value)),
  );
}

/** Whether run `runId`'s record is `in_progress` under a lease not yet lapsed at `w.now()`. */
async function isLiveRecord(w: ForeignStore, runId: string): Promise<boolean> {
  const data = (await w.store.collection(w.collection).doc(runId).get()).data();
  if (data?.status !== 'in_progress') {
    return false;
  }
  const leasedAt =
    data.leased_at instanceof Timestamp ? data.leased_at.toMillis() : Infinity;
  const leaseMs = typeof data.lease_ms === 'number' ? data.lease_ms : Infinity;
  return leasedAt + leaseMs > w.now();
}

/** What a repair deleted: the record of the lock's holder, or the lock (its holder id no run id). */
export type Repaired =
  | { readonly deleted: 'record'; readonly runId: string }
  /** `sentAt`: when the delete was sent, ms (it landed between then and its answer). */
  | { readonly deleted: 'lock'; readonly sentAt: number };

/**
 * The documented repair (docs/limits.md): deletes the record `job`'s overlap lock names if no
 * attempt of it is running: a status this version does not know, or `in_progress` under a lapsed
 * lease whose attempts all ended (`isRunEnded`, the model's knowledge); the lock stays. A lock
 * whose holder id is not a run id is deleted itself, fenced on its read, as the answer
 * `unreadable_record` says (docs/how-it-works.md, "The overlap lock").
 * @returns what was deleted, or `undefined` if nothing was.
 */
export async function repairLockHolder(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
  isRunEnded: (runId: string) => boolean,
): Promise<Repaired | undefined> {
  const lockRef = w.store
    .collection(jobStateCollection(w.collection))
    .doc(lockIdOf(job.id, scope));
  const lock = await lockRef.get();
  if (!lock.exists || lock.updateTime === undefined) {
    return undefined;
  }
  const holder = lock.data()?.holder_run_id;
  if (typeof holder !== 'string' || !RUN_ID.test(holder)) {
    const sentAt = w.now();
    const deleted = await lockRef
      .delete({ lastUpdateTime: lock.updateTime })
      .then(
        () => true,
        () => false,
      );
    return deleted ? { deleted: 'lock', sentAt } : undefined;
  }
  const recordRef = w.store.collection(w.collection).doc(holder);
  const snap = await recordRef.get();
  const data = snap.data();
  const status = data?.status;
  if (data === undefined || snap.updateTime === undefined) {
    return undefined;
  }
  const unreadable = unreadableBecause(data, w.now()) !== undefined;
  const lapsed =
    status === 'in_progress' &&
    !(await isLiveRecord(w, holder)) &&
    isRunEnded(holder);
  if (!unreadable && !lapsed) {
    return undefined;
  }
  const deleted = await recordRef
    .delete({ lastUpdateTime: snap.updateTime })
    .then(
      () => true,
      () => false,
    );
  return deleted ? { deleted: 'record', runId: holder } : undefined;
}

/** Where another version's pauses start: weeks before any slot of the history. */
const FOREIGN_PAUSES_BACK_MS = 21 * DAY_MS;
/** One foreign pause's length, and the gap between two, ms. */
const FOREIGN_PAUSE_MS = 3_600_000;

/** A pause as this version stores it (ops/pause-records.ts), resumed, from `fromMs`. */
function storedPause(fromMs: number): Record<string, unknown> {
  return {
    paused_at: Timestamp.fromMillis(fromMs),
    until: null,
    note: 'v9 maintenance',
    resumed_at: Timestamp.fromMillis(fromMs + FOREIGN_PAUSE_MS),
    overdue_reported_at: null,
  };
}

/** `count` resumed pauses, each starting as the one before resumed. */
function backToBack(fromMs: number, count: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) =>
    storedPause(fromMs + i * FOREIGN_PAUSE_MS),
  );
}

/** `pause` without `field`. */
function without(
  pause: Record<string, unknown>,
  field: string,
): Record<string, unknown> {
  const { [field]: _, ...rest } = pause;
  return rest;
}

/**
 * The `pauses` field another version writes, by kind (`FOREIGN_PAUSE_KINDS` in model.ts); the
 * bounds are docs/operations.md's ("`npm run pause` and `npm run resume`", "Bounds": at most 20
 * pauses kept, `--until` a minute to 30 days after the pause, a note of at most 500 characters on
 * one line, no time more than a minute after Firestore's now).
 */
export function foreignPauses(kind: ForeignPauseKind, nowMs: number): unknown {
  const from = nowMs - FOREIGN_PAUSES_BACK_MS;
  const pause = storedPause(from);
  const at = (ms: number) => Timestamp.fromMillis(ms);
  const pauses: Record<ForeignPauseKind, () => unknown> = {
    not_a_list: () => pause,
    too_many: () => backToBack(from, 21),
    not_an_object: () => ['paused'],
    time_not_timestamp: () => [
      { ...pause, paused_at: new Date(from).toISOString() },
    ],
    no_note: () => [without(pause, 'note')],
    note_too_long: () => [{ ...pause, note: 'x'.repeat(501) }],
    note_with_control: () => [{ ...pause, note: 'v9\u0007maintenance' }],
    unlogged_not_true: () => [{ ...pause, overdue_unlogged: 'yes' }],
    no_paused_at: () => [{ ...pause, paused_at: null }],
    until_too_soon: () => [{ ...pause, until: at(from + 59_000) }],
    until_too_far: () => [{ ...pause, until: at(from + 30 * DAY_MS + 1_000) }],
    resumed_before_paused: () => [{ ...pause, resumed_at: at(from - 1_000) }],
    ahead_of_firestore: () => [
      { ...pause, paused_at: at(nowMs + DAY_MS), resumed_at: null },
    ],
    unlogged_never_reported: () => [{ ...pause, overdue_unlogged: true }],
    overlapping: () => [
      { ...pause, resumed_at: null },
      storedPause(from + 2 * FOREIGN_PAUSE_MS),
    ],
    readable_most_pauses: () => backToBack(from, 20),
    readable_longest_note: () => [{ ...pause, note: 'x'.repeat(500) }],
    readable_shortest_until: () => [{ ...pause, until: at(from + 60_000) }],
    readable_longest_until: () => [{ ...pause, until: at(from + 30 * DAY_MS) }],
    readable_back_to_back: () => backToBack(from, 2),
  };
  return pauses[kind]();
}

/** `job`'s check document in `scope` (`{jobId}~check…`, missed-run-cursor.ts), and its id. */
export function checkDocumentOf(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
) {
  const id = v1CheckDocumentId(job.id, scope);
  const doc = w.store.collection(jobStateCollection(w.collection)).doc(id);
  return { id, doc };
}

/**
 * Another version writes the `pauses` of `job`'s check document in `scope` (`foreign_pause`),
 * fenced on its read, only if no pause is stored there (no one paused the job here).
 * @returns the document's id, or `undefined` if nothing was written.
 */
export async function writeForeignPauses(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
  kind: ForeignPauseKind,
): Promise<string | undefined> {
  const { id, doc } = checkDocumentOf(w, job, scope);
  const snap = await doc.get();
  const stored = snap.data()?.pauses;
  if (Array.isArray(stored) ? stored.length > 0 : stored !== undefined) {
    return undefined;
  }
  const pauses = foreignPauses(kind, w.now());
  const write = snap.exists
    ? doc.update({ pauses }, { lastUpdateTime: snap.updateTime })
    : doc.create({ job_name: job.id, pauses });
  return write.then(
    () => id,
    () => undefined,
  );
}
