/**
 * The missed-run check's cursor as another version (or a hand) writes it (`foreign_cursor`), and
 * the operator's repair of one this version cannot read (docs/limits.md, "Missed runs": delete
 * it; here its cursor fields, so that pauses stored beside them stay). Each form is built from the
 * cursor stored, so that a readable one means what the stored one meant, and written through the
 * Firestore API, fenced on its read, as another version's instance or the Firebase console would.
 */
import {
  type DocumentData,
  FieldValue,
  Timestamp,
} from '@google-cloud/firestore';
import type { Scope } from '../../src/core/run-key.ts';
import type { DeclaredJob } from '../../src/policy/job-declaration.ts';
import { closedAfterMs } from '../../src/policy/slot-verdict.ts';
import { checkDocumentOf, type ForeignStore } from './foreign-writes.ts';
import { type ForeignCursorKind, isReadableCursorKind } from './model.ts';

/** The fields of a cursor on a job's check document (its `pauses` and `job_name` are not). */
const CURSOR_FIELDS = [
  'checked_before',
  'run_seen',
  'seen_at',
  'closed_after_ms',
  'rules',
] as const;

const DAY_MS = 86_400_000;
/** Where the old rules another version keeps start: weeks before any slot of the history. */
const OLD_RULES_BACK_MS = 40 * DAY_MS;
/** A schedule no simulated job declares, for the old rules. */
const OLD_SCHEDULE = '17 3 * * *';
/**
 * How far ahead of the job's closed boundary an unreadable cursor stands, ms: a day, so that it
 * stays ahead for the whole history (one a little ahead reads as a cursor once the boundary
 * passes it: docs/limits.md, another version's longer window).
 */
const AHEAD_MS = DAY_MS;
/** How far past its writer's own boundary an `ahead_of_writers_window` cursor stands, ms. */
const HOUR_MS = 3_600_000;
/** How far ahead of now a forged rule starts, ms: a month (the attack of stop 71). */
const RULE_AHEAD_MS = 30 * DAY_MS;
/** How long before the rule before it ended an out-of-order rule starts, ms. */
const RULE_OVERLAP_MS = DAY_MS;
/** How much longer than the job's the retry window of `readable_other_closed_after`'s writer is, ms. */
const OTHER_WINDOW_MS = 60_000;
/** The shortest retry window a job has, ms: one attempt deadline, Scheduler's shortest (15 s). */
const SHORTEST_WINDOW_MS = 15_000;
/** How long ago a stale cursor was last written, ms: past `STALE_CURSOR_MS`'s two days. */
const STALE_MS = 3 * DAY_MS;
/** The most rules a cursor holds (`MAX_RULES` in src/policy/missed-run-rules.ts), written anew. */
const MOST_RULES = 8;

/** A stored rule, as `cursorDocument` writes it. */
type StoredRule = Record<string, unknown>;

/** The cursor fields of `data`, or `undefined` if it holds no cursor (pauses only, or nothing). */
function storedCursor(
  data: DocumentData | undefined,
): DocumentData | undefined {
  if (data?.checked_before === undefined) {
    return undefined;
  }
  return Object.fromEntries(
    CURSOR_FIELDS.filter((f) => data[f] !== undefined).map((f) => [f, data[f]]),
  );
}

/** A cursor as this version writes a first one at `nowMs`: for a form built where none is stored. */
function firstCursor(job: DeclaredJob, nowMs: number): DocumentData {
  return {
    checked_before: Timestamp.fromMillis(nowMs - closedAfterMs(job) - 60_000),
    run_seen: false,
    seen_at: Timestamp.fromMillis(nowMs),
    closed_after_ms: closedAfterMs(job),
    rules: [{ schedule: job.schedule, time_zone: job.timeZone }],
  };
}

/**
 * `count` rules of {@link OLD_SCHEDULE}, one a day from weeks back, each replaced before the next,
 * then `rules` (the first of them given the `since` a later rule needs).
 */
function afterOldRules(
  rules: readonly StoredRule[],
  count: number,
  nowMs: number,
): StoredRule[] {
  const from = nowMs - OLD_RULES_BACK_MS;
  const old = Array.from({ length: count }, (_, i) => ({
    schedule: OLD_SCHEDULE,
    time_zone: 'UTC',
    ...(i === 0 ? {} : { since: Timestamp.fromMillis(from + i * DAY_MS) }),
    until: Timestamp.fromMillis(from + i * DAY_MS + DAY_MS / 2),
  }));
  const [first, ...rest] = rules;
  const since = first?.since ?? Timestamp.fromMillis(from + count * DAY_MS);
  return [...old, { ...first, since }, ...rest];
}

/** `rules` with the last one changed by `change`. */
function withLastRule(
  rules: readonly StoredRule[],
  change: StoredRule,
): StoredRule[] {
  return rules.map((rule, i) =>
    i === rules.length - 1 ? { ...rule, ...change } : rule,
  );
}

/** An old rule replaced a day ago, then the job's own rule with `since` of `sinceValue`. */
function changedRule(
  job: DeclaredJob,
  nowMs: number,
  sinceValue: unknown,
): StoredRule[] {
  return [
    {
      schedule: OLD_SCHEDULE,
      time_zone: 'UTC',
      until: Timestamp.fromMillis(nowMs - DAY_MS),
    },
    {
      schedule: job.schedule,
      time_zone: job.timeZone,
      ...(sinceValue === undefined ? {} : { since: sinceValue }),
    },
  ];
}

/** The fields each unreadable form writes, built when drawn (by kind: `FOREIGN_CURSOR_KINDS`). */
type Forms = Partial<Record<ForeignCursorKind, () => DocumentData>>;

/**
 * The window of `ahead_of_writers_window`'s writer, ms: half the job's, and no shorter than any
 * job's (one attempt deadline, 15 s), which the check refuses on its own.
 */
function writersWindow(closedAfter: number): number {
  return Math.max(SHORTEST_WINDOW_MS, Math.ceil(closedAfter / 2));
}

/** The unreadable forms of a cursor's own fields, over `job`'s closed boundary at `nowMs`. */
function fieldForms(job: DeclaredJob, nowMs: number): Forms {
  const closedAfter = closedAfterMs(job);
  const iso = new Date(nowMs).toISOString();
  return {
    checked_before_text: () => ({ checked_before: iso }),
    run_seen_text: () => ({ run_seen: 'true' }),
    seen_at_text: () => ({ seen_at: iso }),
    seen_at_null: () => ({ seen_at: null }),
    seen_at_ahead: () => ({ seen_at: Timestamp.fromMillis(nowMs + AHEAD_MS) }),
    closed_after_zero: () => ({ closed_after_ms: 0 }),
    closed_after_fraction: () => ({ closed_after_ms: closedAfter + 0.5 }),
    closed_after_null: () => ({ closed_after_ms: null }),
    ahead_of_boundary: () => ({
      checked_before: Timestamp.fromMillis(nowMs - closedAfter + AHEAD_MS),
    }),
    // A writer's window (half the job's) explains a cursor up to its own boundary, not an hour
    // past it: "written by hand?", not "reads again by itself".
    ahead_of_writers_window: () => ({
      checked_before: Timestamp.fromMillis(
        nowMs - writersWindow(closedAfter) + HOUR_MS,
      ),
      closed_after_ms: writersWindow(closedAfter),
      seen_at: Timestamp.fromMillis(nowMs),
    }),
  };
}

/** The unreadable forms of a cursor's `rules` (stored as `rules`), for `job` at `nowMs`. */
function ruleForms(
  rules: readonly StoredRule[],
  job: DeclaredJob,
  nowMs: number,
): Forms {
  const iso = new Date(nowMs).toISOString();
  const monthAhead = Timestamp.fromMillis(nowMs + RULE_AHEAD_MS);
  // The rule before ends a day ago (`changedRule`): this one starts before that.
  const overlapping = Timestamp.fromMillis(nowMs - DAY_MS - RULE_OVERLAP_MS);
  return {
    rules_not_a_list: () => ({ rules: rules[0] ?? {} }),
    rules_empty: () => ({ rules: [] }),
    rules_too_many: () => ({
      rules: afterOldRules(rules, MOST_RULES + 1 - rules.length, nowMs),
    }),
    rule_not_an_object: () => ({ rules: [null] }),
    rule_schedule_not_text: () => ({
      rules: withLastRule(rules, { schedule: 5 }),
    }),
    rule_bad_schedule: () => ({
      rules: withLastRule(rules, { schedule: 'every minute' }),
    }),
    rule_bad_zone: () => ({
      rules: withLastRule(rules, { time_zone: 'Mars/Olympus_Mons' }),
    }),
    rule_without_since: () => ({ rules: changedRule(job, nowMs, undefined) }),
    rule_until_on_last: () => ({
      rules: withLastRule(rules, { until: Timestamp.fromMillis(nowMs) }),
    }),
    rule_since_text: () => ({ rules: changedRule(job, nowMs, iso) }),
    rule_since_ahead: () => ({ rules: changedRule(job, nowMs, monthAhead) }),
    rules_out_of_order: () => ({ rules: changedRule(job, nowMs, overlapping) }),
    rule_first_seen_text: () => ({
      rules: rules.map((rule, i) =>
        i === 0 ? { ...rule, first_seen: 'yesterday' } : rule,
      ),
    }),
  };
}

/** A form this version never writes, from `cursor` (by kind: `FOREIGN_CURSOR_KINDS`). */
function unreadableCursor(
  kind: ForeignCursorKind,
  cursor: DocumentData,
  job: DeclaredJob,
  nowMs: number,
): DocumentData {
  const rules = (
    Array.isArray(cursor.rules) ? cursor.rules : []
  ) as StoredRule[];
  const forms = { ...fieldForms(job, nowMs), ...ruleForms(rules, job, nowMs) };
  const written: DocumentData = { ...cursor, ...(forms[kind]?.() ?? {}) };
  const missing = MISSING_FIELD[kind];
  if (missing !== undefined) {
    delete written[missing];
  }
  return written;
}

/** The field an unreadable form leaves out (the other of the two that make a cursor stays). */
const MISSING_FIELD: Partial<Record<ForeignCursorKind, string>> = {
  checked_before_missing: 'checked_before',
  run_seen_missing: 'run_seen',
};

/**
 * `cursor` as an earlier version without `rules` wrote it, or `undefined` where its rules say more
 * than the declared one alone (such a cursor knew one rule only).
 */
function withoutRules(
  cursor: DocumentData,
  rules: readonly StoredRule[],
  job: DeclaredJob,
): DocumentData | undefined {
  const [only] = rules;
  const declaredOnly =
    rules.length === 1 &&
    only?.schedule === job.schedule &&
    only?.time_zone === job.timeZone &&
    only?.since === undefined;
  if (!declaredOnly) {
    return undefined;
  }
  const { rules: _, ...rest } = cursor;
  return rest;
}

/** The retry window `cursor`'s writer names (`closed_after_ms`), or else `job`'s, ms. */
function storedClosedAfter(cursor: DocumentData, job: DeclaredJob): number {
  const stored = cursor.closed_after_ms;
  return typeof stored === 'number' ? stored : closedAfterMs(job);
}

/**
 * `cursor` as a version whose retry window was `writer` ms would have written it at its `seen_at`:
 * its `checked_before` no later than that writer's boundary then (a check never writes past it).
 */
function withLongerWindow(cursor: DocumentData, writer: number): DocumentData {
  const seenAt = cursor.seen_at;
  const checkedBefore = cursor.checked_before;
  if (!(seenAt instanceof Timestamp) || !(checkedBefore instanceof Timestamp)) {
    return { ...cursor, closed_after_ms: writer };
  }
  const writersBoundary = seenAt.toMillis() - writer;
  return {
    ...cursor,
    closed_after_ms: writer,
    checked_before: Timestamp.fromMillis(
      Math.min(checkedBefore.toMillis(), writersBoundary),
    ),
  };
}

/**
 * A form this version reads as its own, from `cursor`, or `undefined` where it would mean
 * something else than `cursor` (an earlier version's cursor without `rules` knew one rule only).
 */
function readableCursor(
  kind: ForeignCursorKind,
  cursor: DocumentData,
  job: DeclaredJob,
  nowMs: number,
): DocumentData | undefined {
  if (!Array.isArray(cursor.rules)) {
    return undefined; // an earlier version's cursor: left as it is
  }
  const rules = cursor.rules as StoredRule[];
  switch (kind) {
    case 'readable_extra_fields':
      return {
        ...cursor,
        v9_lane: 'blue',
        rules: rules.map((rule) => ({ ...rule, v9_weight: 2 })),
      };
    case 'readable_no_closed_after': {
      // A version before both (they came in one change): its update time stands for `seen_at`.
      const { closed_after_ms: _, seen_at: __, ...rest } = cursor;
      return rest;
    }
    case 'readable_other_closed_after':
      return withLongerWindow(
        cursor,
        storedClosedAfter(cursor, job) + OTHER_WINDOW_MS,
      );
    case 'readable_no_rules':
      return withoutRules(cursor, rules, job);
    case 'readable_no_seen_at': {
      // A version before `seen_at`: its write's update time stands for it.
      const { seen_at: _, ...rest } = cursor;
      return rest;
    }
    case 'readable_no_first_seen':
      return {
        ...cursor,
        rules: rules.map(({ first_seen: _, ...rule }) => rule),
      };
    case 'readable_stale': {
      // Its writer's boundary then: a check never writes `checked_before` past it.
      const writer = storedClosedAfter(cursor, job);
      return {
        ...cursor,
        checked_before: Timestamp.fromMillis(nowMs - STALE_MS - writer),
        seen_at: Timestamp.fromMillis(nowMs - STALE_MS),
      };
    }
    case 'readable_most_rules':
      return rules.length === 0 || rules.length >= MOST_RULES
        ? undefined
        : {
            ...cursor,
            rules: afterOldRules(rules, MOST_RULES - rules.length, nowMs),
          };
    default:
      return undefined;
  }
}

/**
 * Another version writes the cursor of `job`'s check document in `scope` (`foreign_cursor`),
 * fenced on its read: an unreadable form over the cursor stored (or over a first cursor where none
 * is), a readable one only over a cursor stored. Its `pauses` stay.
 * @returns the document's id, or `undefined` if nothing was written.
 */
export async function writeForeignCursor(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
  kind: ForeignCursorKind,
): Promise<string | undefined> {
  const { id, doc } = checkDocumentOf(w, job, scope);
  const snap = await doc.get();
  const stored = storedCursor(snap.data());
  const nowMs = w.now();
  let cursor: DocumentData | undefined;
  if (isReadableCursorKind(kind)) {
    cursor = stored && readableCursor(kind, stored, job, nowMs);
  } else {
    cursor = unreadableCursor(
      kind,
      stored ?? firstCursor(job, nowMs),
      job,
      nowMs,
    );
  }
  if (cursor === undefined) {
    return undefined;
  }
  const write = snap.exists
    ? doc.update(withDeletes(cursor, stored), {
        lastUpdateTime: snap.updateTime,
      })
    : doc.create({ job_name: job.id, ...cursor });
  return write.then(
    () => id,
    () => undefined,
  );
}

/** `cursor` as an update over `stored`: each stored cursor field it lacks deleted. */
function withDeletes(
  cursor: DocumentData,
  stored: DocumentData | undefined,
): DocumentData {
  const deletes = Object.keys(stored ?? {})
    .filter((field) => !(field in cursor))
    .map((field) => [field, FieldValue.delete()]);
  return { ...cursor, ...Object.fromEntries(deletes) };
}

/**
 * The documented repair of an unreadable cursor: its fields deleted, fenced on its read, the
 * `pauses` beside them kept. The next check starts over, a day back.
 * @returns whether the delete landed.
 */
export async function repairCursor(
  w: ForeignStore,
  job: DeclaredJob,
  scope: Scope,
): Promise<boolean> {
  const { doc } = checkDocumentOf(w, job, scope);
  const snap = await doc.get();
  if (!snap.exists || snap.updateTime === undefined) {
    return false;
  }
  const deletes = Object.fromEntries(
    CURSOR_FIELDS.map((field) => [field, FieldValue.delete()]),
  );
  return doc.update(deletes, { lastUpdateTime: snap.updateTime }).then(
    () => true,
    () => false,
  );
}
