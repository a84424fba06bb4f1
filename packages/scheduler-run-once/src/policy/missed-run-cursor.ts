/** A job's missed-run check cursor (`{jobId}~check`), moved after the reports, fenced. */
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import type { Logger } from '../core/logger.ts';
import { type Scope, scopeId } from '../core/run-key.ts';
import { type DeclaredJob, SETTING_RANGES } from './job-declaration.ts';
import {
  CURSOR_CLOCK_SLACK_MS,
  isUnreadable,
  type JudgedRule,
  nextRules,
  readRules,
  ruleOf,
  type Unreadable,
} from './missed-run-rules.ts';
import type { Pause } from './pauses.ts';
import { nextSlots } from './schedule.ts';
import { closedAfterMs } from './slot-verdict.ts';

/** How far back a job's first check (no cursor, or one the TTL removed) looks, ms: a day. */
export const FIRST_LOOK_BACK_MS = 86_400_000;
/** A cursor unwritten this long is written again though nothing closed, ms. */
export const CURSOR_HEARTBEAT_MS = 3_600_000;
/** A cursor unwritten this long (or four of the job's gaps), ms, starts afresh. */
export const STALE_CURSOR_MS = 2 * 86_400_000;

/** The id of a job's check cursor: `{jobId}~check`, plus a hash of a non-empty key scope. */
export function checkDocumentId(jobId: string, scope: Scope): string {
  const keyScope = scopeId(scope);
  return keyScope === '' ? `${jobId}~check` : `${jobId}~check~${keyScope}`;
}

/**
 * A job's check cursor: every slot before `checkedBefore` was judged, by `rules` (oldest first);
 * `runSeen`: a slot with a record was seen (none before it is missed); `seenAt`: its write, ms.
 */
export interface Cursor {
  readonly checkedBefore: Date;
  readonly runSeen: boolean;
  readonly rules: readonly JudgedRule[];
  readonly seenAt: number;
}

/**
 * The shortest `closed_after_ms` any check writes, ms: a retry window of none plus the shortest
 * attempt deadline Scheduler takes (`SETTING_RANGES`; Scheduler's HTTP targets: 15 s to 30 min).
 * A shorter one would let a cursor ahead of the job's boundary pass for one a shorter window
 * explains (the attack of stop 75).
 */
const SHORTEST_CLOSED_AFTER_MS =
  SETTING_RANGES.attemptDeadlineSeconds[0] * 1000;

/** What a cursor holds that no check writes, for {@link Unreadable}. */
const CURSOR_PROBLEM = {
  checkedBefore: 'checked_before is not a timestamp',
  runSeen: 'run_seen is not true or false',
  seenAt: 'seen_at is not a timestamp',
  seenAhead: "seen_at is ahead of Firestore's now",
  closedAfter: `closed_after_ms is not a whole number of ms of at least ${SHORTEST_CLOSED_AFTER_MS} (the shortest attempt deadline)`,
  shorterWindow:
    "checked_before is ahead of the job's closed boundary, as a cursor written under a shorter retry window than the job's now is (its closed_after_ms); it reads again by itself once the boundary passes it",
  ahead:
    "checked_before is ahead of the job's closed boundary, further than its writer's retry window explains (written by hand?)",
  aheadOfWriter:
    "checked_before was ahead of its writer's own boundary when it was written (seen_at minus closed_after_ms), which no check writes (written by hand?); it stays unreadable until it is deleted, though the job's boundary has passed it",
} as const;

/**
 * The cursor a document holds, or {@link Unreadable} naming what in it this code never writes
 * (docs/how-it-works.md); `undefined` where the document holds none. `now`: Firestore's time.
 */
export function readCursor(
  data: DocumentData | undefined,
  updateTime: Timestamp | undefined,
  job: DeclaredJob,
  now: Date,
): Cursor | Unreadable | undefined {
  // A document with only pauses on it (`pauses.ts`) has no cursor yet.
  if (data?.checked_before === undefined && data?.run_seen === undefined) {
    return undefined;
  }
  // A cursor of an earlier version has no `seen_at`: its write's time stands for it.
  const seenAt = data.seen_at === undefined ? updateTime : data.seen_at;
  const { checked_before: at, run_seen: seen } = data;
  const problem = fieldProblem(at, seen, seenAt, now);
  if (problem !== undefined) {
    return { unreadable: problem };
  }
  // `closed_after_ms` is its writer's (older retry settings): checked for shape only.
  const closedAfter =
    data.closed_after_ms === undefined
      ? closedAfterMs(job)
      : data.closed_after_ms;
  if (
    !Number.isSafeInteger(closedAfter) ||
    closedAfter < SHORTEST_CLOSED_AFTER_MS
  ) {
    return { unreadable: CURSOR_PROBLEM.closedAfter };
  }
  if (
    at.toMillis() >
    now.getTime() - closedAfterMs(job) + CURSOR_CLOCK_SLACK_MS
  ) {
    return aheadOfBoundary(at.toMillis(), closedAfter, seenAt.toMillis(), job);
  }
  // Behind the job's boundary now, but never behind its writer's: still written by hand. Every
  // version that wrote `seen_at` wrote `closed_after_ms` beside it; a cursor with neither is an
  // earlier version's, dated by its update time, which a pause's write moves on.
  if (
    (data.closed_after_ms !== undefined || data.seen_at !== undefined) &&
    aheadOfItsWriter(at.toMillis(), closedAfter, seenAt.toMillis())
  ) {
    return { unreadable: CURSOR_PROBLEM.aheadOfWriter };
  }
  const rules = readRules(data.rules, job, now.getTime());
  if (isUnreadable(rules)) {
    return rules;
  }
  return {
    checkedBefore: at.toDate(),
    runSeen: seen,
    rules,
    seenAt: seenAt.toMillis(),
  };
}

/**
 * Whether a cursor's `checked_before` (`atMs`) stands past the boundary its writer had when it wrote
 * it: `seenAtMs` (its write) minus `writerClosedAfter` (its `closed_after_ms`), beyond
 * {@link CURSOR_CLOCK_SLACK_MS}. A check moves `checked_before` at most to its own boundary and
 * stamps `seen_at` and `closed_after_ms` in the same write, so no check writes such a cursor; read
 * as a cursor once the job's boundary passed it, it would leave the slots before it unjudged
 * without a word (stop 74's `aheadCursorReadsLater`). A cursor with `seen_at` but no
 * `closed_after_ms` (no version wrote one: both came in one change) is judged by the job's window;
 * an earlier version's, with neither, against the job's own boundary alone ({@link aheadOfBoundary}).
 * Cursors of a few unreleased commits before 0.1.0 (2026-12-01) that carried a shorter window's
 * `checked_before` forward under a longer window's stamp are refused too (stop 75's attack).
 */
function aheadOfItsWriter(
  atMs: number,
  writerClosedAfter: number,
  seenAtMs: number,
): boolean {
  return atMs > seenAtMs - writerClosedAfter + CURSOR_CLOCK_SLACK_MS;
}

/**
 * The {@link Unreadable} of a cursor whose `checked_before` (`atMs`) stands ahead of `job`'s closed
 * boundary. After a change to a longer retry window, a cursor its writer's shorter window explains
 * (`writerClosedAfter`, at most its writer's boundary when written at `seenAtMs`) reads again by
 * itself once the boundary passes it (`readsAgainAt`); any other was written by hand.
 */
function aheadOfBoundary(
  atMs: number,
  writerClosedAfter: number,
  seenAtMs: number,
  job: DeclaredJob,
): Unreadable {
  const closedAfter = closedAfterMs(job);
  const writersBoundary = seenAtMs - writerClosedAfter + CURSOR_CLOCK_SLACK_MS;
  if (writerClosedAfter < closedAfter && atMs <= writersBoundary) {
    return {
      unreadable: CURSOR_PROBLEM.shorterWindow,
      readsAgainAt: atMs + closedAfter - CURSOR_CLOCK_SLACK_MS,
    };
  }
  return { unreadable: CURSOR_PROBLEM.ahead };
}

/**
 * What is wrong with a cursor's own fields, or `undefined` (then `at` and `seenAt` are timestamps
 * and `seen` true or false): a field of another type, or a `seen_at` ahead of `now` past
 * {@link CURSOR_CLOCK_SLACK_MS}.
 */
function fieldProblem(
  at: unknown,
  seen: unknown,
  seenAt: unknown,
  now: Date,
): string | undefined {
  if (!(at instanceof Timestamp)) {
    return CURSOR_PROBLEM.checkedBefore;
  }
  if (typeof seen !== 'boolean') {
    return CURSOR_PROBLEM.runSeen;
  }
  if (!(seenAt instanceof Timestamp)) {
    return CURSOR_PROBLEM.seenAt;
  }
  if (seenAt.toMillis() > now.getTime() + CURSOR_CLOCK_SLACK_MS) {
    return CURSOR_PROBLEM.seenAhead;
  }
  return undefined;
}

/** The cursor as stored, with the job's closed boundary and the per-job documents' TTL. */
export function cursorDocument(
  job: DeclaredJob,
  cursor: Cursor,
  expires: Timestamp,
): DocumentData {
  return {
    job_name: job.id,
    checked_before: Timestamp.fromDate(cursor.checkedBefore),
    run_seen: cursor.runSeen,
    closed_after_ms: closedAfterMs(job),
    seen_at: Timestamp.fromMillis(cursor.seenAt),
    rules: cursor.rules.map((r) => ({
      schedule: r.schedule,
      time_zone: r.timeZone,
      ...(r.since === undefined
        ? {}
        : { since: Timestamp.fromMillis(r.since) }),
      ...(r.until === undefined
        ? {}
        : { until: Timestamp.fromMillis(r.until) }),
      ...(r.firstSeen === undefined
        ? {}
        : { first_seen: Timestamp.fromMillis(r.firstSeen) }),
    })),
    expire_at: expires,
  };
}

/** Whether nothing wrote the cursor for {@link STALE_CURSOR_MS} (or four of the job's gaps). */
function isStale(
  job: DeclaredJob,
  cursor: Cursor,
  lastWrite: number,
  now: Date,
): boolean {
  const slots = nextSlots(job, cursor.checkedBefore, 3).map((slot) =>
    slot.getTime(),
  );
  const gap = Math.max(
    0,
    ...slots.slice(1).map((t, i) => t - (slots[i] as number)),
  );
  return now.getTime() - lastWrite > Math.max(STALE_CURSOR_MS, 4 * gap);
}

/** A cursor nobody wrote for days starts at the boundary, the range not judged said in a WARN. */
function startAfresh(
  job: DeclaredJob,
  cursor: Cursor,
  now: Date,
  logger: Logger,
): Cursor {
  const boundary = now.getTime() - closedAfterMs(job);
  const checkedBefore = new Date(
    Math.max(boundary, cursor.checkedBefore.getTime()),
  );
  const from = cursor.checkedBefore.toISOString();
  const to = checkedBefore.toISOString();
  const hours = Math.max(
    1,
    Math.ceil((boundary - cursor.checkedBefore.getTime()) / 3_600_000) + 1,
  );
  const message = `missed-run check: nothing checked job ${job.id} from ${from} to ${to} (it was not declared, or no check ran), so it starts afresh from its declaration now: the slots in that range, and those after it before the job's next record (it may be declared again only now), are not judged; see them with npm run runs -- --job ${job.id} --since ${hours}h --check`;
  logger.warn({ jobName: job.id, from, to }, message);
  return {
    checkedBefore,
    runSeen: false,
    rules: [{ ...ruleOf(job), firstSeen: now.getTime() }],
    seenAt: now.getTime(),
  };
}

/**
 * What a check knows before it judges, at Firestore's `now`: slots before `boundary` (ms) have
 * closed; judging starts at `from`; `updateTime`: the cursor write's fencing token (none: create);
 * `current`: the cursor as read needs no write of its own (not afresh, its rules unchanged compared
 * whole, since at MAX_RULES a change keeps the count, no heartbeat due).
 */
export interface Window {
  readonly id: string;
  readonly now: Date;
  readonly boundary: number;
  readonly from: Date;
  readonly rules: readonly JudgedRule[];
  readonly cursor: Cursor | undefined;
  readonly runSeen: boolean;
  readonly current: boolean;
  readonly updateTime: Timestamp | undefined;
  readonly pauses: readonly Pause[];
}

/**
 * What {@link windowOf} gives when the cursor was written by another check after this check's
 * `now` was taken, while its read was on its way: that check is ahead of this one, which stops
 * without a word (as when it loses a fenced write to it).
 */
export const OVERTAKEN = 'overtaken';

/**
 * The window at `now` from the check document `read` ({@link Unreadable}: see {@link readCursor};
 * {@link OVERTAKEN}: another check wrote the cursor after `now`). A cursor unreadable at `now` but
 * readable at the read's time (Firestore's `readTime`, later) was written while the read was on
 * its way, by a check that took its own time later (the attack of stop 72: a slow read, a
 * heartbeat's `seen_at` 11 s after `now`, an ERROR for a cursor nothing was wrong with). Judging
 * from it at `now` would write times out of order (a rule's `until` before its `since`), so the
 * check leaves it to the check that wrote it.
 */
export function windowOf(
  job: DeclaredJob,
  read: {
    readonly data: DocumentData | undefined;
    readonly updateTime: Timestamp | undefined;
    readonly readTime: Date;
  },
  now: Date,
  retentionMs: number,
  logger: Logger,
):
  | Omit<Window, 'id' | 'updateTime' | 'pauses'>
  | Unreadable
  | typeof OVERTAKEN {
  const stored = readCursor(read.data, read.updateTime, job, now);
  if (isUnreadable(stored)) {
    const atRead =
      read.readTime > now
        ? readCursor(read.data, read.updateTime, job, read.readTime)
        : stored;
    return isUnreadable(atRead) ? atRead : OVERTAKEN;
  }
  const boundary = now.getTime() - closedAfterMs(job);
  const lastWrite = stored?.seenAt ?? now.getTime();
  const afresh = stored !== undefined && isStale(job, stored, lastWrite, now);
  const cursor = afresh ? startAfresh(job, stored, now, logger) : stored;
  // Never before the retention: an older slot's absence proves nothing (TTL).
  const retained = now.getTime() - retentionMs;
  const start =
    cursor?.checkedBefore.getTime() ?? boundary - FIRST_LOOK_BACK_MS;
  // Rules are kept for the retention, so `runs --check` judges older windows by them too.
  const rules = nextRules(
    cursor?.rules ?? [],
    job,
    now.getTime(),
    lastWrite,
    retained,
  );
  const heartbeat = now.getTime() - lastWrite >= CURSOR_HEARTBEAT_MS;
  const sameRules = JSON.stringify(cursor?.rules) === JSON.stringify(rules);
  return {
    now,
    boundary,
    from: new Date(Math.max(start, retained)),
    rules,
    cursor,
    runSeen:
      cursor?.runSeen === true && cursor.checkedBefore.getTime() >= retained,
    current: cursor !== undefined && !afresh && sameRules && !heartbeat,
  };
}
