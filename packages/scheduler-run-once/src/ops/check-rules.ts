/**
 * The schedule rules `npm run runs -- --check` judges a job's slots by: the ones its missed-run
 * check cursor recorded, so a slot detection never judges (before a schedule change it cannot
 * place) is not reported missed by the command either. The function never loads this module.
 */
import type { DocumentData, Timestamp } from '@google-cloud/firestore';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { readCursor } from '../policy/missed-run-cursor.ts';
import {
  isSlotOf,
  isUnreadable,
  type JudgedRule,
  judgedSlots,
  nextRules,
  possibleRules,
  type RuleSighting,
  ruleOf,
  rulesFromClaims,
} from '../policy/missed-run-rules.ts';
import type { SlotRow } from './slot-history.ts';

/**
 * Whether detection judges a slot at `slot` under `rules`: it is not before the oldest rule's
 * `since`, and every rule possibly in force then schedules it (`npm run runs -- --check` asks this
 * of each missed row).
 */
export function isJudgedSlot(
  rules: readonly JudgedRule[],
  slot: Date,
): boolean {
  // Before the oldest rule's first sighting, a rule no longer kept may have ruled it.
  if (slot.getTime() < (rules[0]?.since ?? Number.NEGATIVE_INFINITY)) {
    return false;
  }
  return possibleRules(rules, slot.getTime()).every((rule) =>
    isSlotOf(rule, slot.getTime()),
  );
}

/** One read of a job's check document: its data, update time and Firestore's time of the read. */
export interface CheckRead {
  readonly data: DocumentData | undefined;
  readonly updateTime: Timestamp | undefined;
  readonly readTime: Date;
}

/**
 * The check cursor `read` holds, as the function reads it: its times judged at Firestore's time of
 * the read, or at `now` (`--now`) if later, so that a cursor written after a `--now` in the past is
 * read as the function reads it today.
 */
export function checkCursorOf(
  read: CheckRead,
  job: DeclaredJob,
  now: Date,
): ReturnType<typeof readCursor> {
  const readAt = Math.max(read.readTime.getTime(), now.getTime());
  return readCursor(read.data, read.updateTime, job, new Date(readAt));
}

/**
 * The rules a job's slots are judged by at `now`: those its check cursor recorded (the document
 * `{jobId}~check` as `read`, by {@link checkCursorOf}), with `job`'s declared rule as the newest (a
 * change seen now, if it differs). With `claims`, the rules the rows listed stamped, rebuilt as
 * the check does (`rulesFromClaims`) where a claim's rule was not possibly in force at its slot.
 * Unlike the check, which reads only the slots of the rules it knows and learns only until it sees
 * a run, the command lists every record of the job in its window, those of an old schedule
 * included: it learns from them whenever they tell.
 */
export function rulesInForce(
  read: CheckRead,
  job: DeclaredJob,
  now: Date,
  claims: readonly RuleSighting[] = [],
): readonly JudgedRule[] {
  const cursor = checkCursorOf(read, job, now);
  if (cursor === undefined || isUnreadable(cursor)) {
    const declared = [{ ...ruleOf(job), firstSeen: now.getTime() }];
    return rulesFromClaims(declared, job, claims, now.getTime()) ?? declared;
  }
  const rules = nextRules(
    cursor.rules,
    job,
    now.getTime(),
    cursor.seenAt,
    Number.NEGATIVE_INFINITY,
  );
  return rulesFromClaims(rules, job, claims, now.getTime()) ?? rules;
}

/** The sightings of `jobId`'s rules among `rows`: each slot whose first claim stamped one. */
export function claimsOf(
  rows: readonly SlotRow[],
  jobId: string,
): RuleSighting[] {
  return rows.flatMap((row) =>
    row.job === jobId && row.claimedUnder !== undefined
      ? [{ ...row.claimedUnder, at: row.slot.getTime() }]
      : [],
  );
}

/**
 * The slots in [from, to] that `rules` judge and `job`'s declared rule does not schedule: the
 * slots of a rule in force before a schedule change, which a listing by the declared rule alone
 * never shows (so `--check` and `--backfill` would pass a miss detection reports). At most `max`.
 */
export function olderRulesSlots(
  rules: readonly JudgedRule[],
  job: DeclaredJob,
  from: Date,
  to: Date,
  max: number,
): Date[] {
  if (rules.length < 2) {
    return [];
  }
  const end = new Date(to.getTime() + 1);
  const judged = judgedSlots(rules, from, end, max).slots;
  return judged.filter((slot) => !isSlotOf(job, slot.getTime()));
}
