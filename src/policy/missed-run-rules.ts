/**
 * The schedule rules a job's slots are judged against. A job's check cursor keeps the rules it
 * judged with, so a schedule change judges old slots by the old rule and new ones by the new
 * (docs/how-it-works.md, "Missed runs").
 */
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import { type ScheduleSpec, scheduleProblem, slotsBetween, timeZoneProblem } from './schedule.ts';

/** The schedule rules a cursor remembers at most (each schedule change adds one until passed). */
export const MAX_RULES = 8;

/**
 * A schedule rule a job was judged against: its cron and zone, the first check that saw it
 * (`since`, ms; absent only on an oldest rule in force over the whole retained range) and the last
 * one (`until`, ms, absent for the newest: it is the rule in force now). Between one rule's `until`
 * and the next one's `since` either was in force; before the oldest rule's `since` a rule no longer
 * kept may have been, so no slot there is judged.
 */
export interface JudgedRule extends ScheduleSpec {
  readonly since?: number;
  readonly until?: number;
}

/** The rule of a job as declared now. */
export function ruleOf(job: ScheduleSpec): JudgedRule {
  return { schedule: job.schedule, timeZone: job.timeZone };
}

function sameRule(a: ScheduleSpec, b: ScheduleSpec): boolean {
  return a.schedule === b.schedule && a.timeZone === b.timeZone;
}

/**
 * The rules stored on a cursor (`rules`), `unreadable` for any this code would never write (a
 * schedule or zone a declaration refuses, a missing `since` or `until`); none stored (a cursor of
 * an earlier version) is `job`'s rule.
 */
export function readRules(value: unknown, job: ScheduleSpec): JudgedRule[] | 'unreadable' {
  if (value === undefined) return [ruleOf(job)]; // a cursor of an earlier version
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_RULES) return 'unreadable';
  const rules: JudgedRule[] = [];
  for (const [i, entry] of value.entries()) {
    const { schedule, time_zone: timeZone, since, until } = (entry ?? {}) as DocumentData;
    if (typeof schedule !== 'string' || typeof timeZone !== 'string') return 'unreadable';
    // A rule this code wrote was a declared job's: a schedule and zone declarations accept.
    if (scheduleProblem(schedule) !== undefined || timeZoneProblem(timeZone) !== undefined) {
      return 'unreadable';
    }
    const first = i === 0;
    const last = i === value.length - 1;
    if ((!first && since === undefined) || last !== (until === undefined)) return 'unreadable';
    if (since !== undefined && !(since instanceof Timestamp)) return 'unreadable';
    if (until !== undefined && !(until instanceof Timestamp)) return 'unreadable';
    rules.push({
      schedule,
      timeZone,
      ...(since === undefined ? {} : { since: since.toMillis() }),
      ...(until === undefined ? {} : { until: until.toMillis() }),
    });
  }
  return rules;
}

/**
 * The rules after a check at `now` judged with the declared `job`: the newest one kept, or the
 * declared one appended (first seen now; the one before it last seen at `lastSeen`, the cursor's
 * last write), and those no slot at or after `from` (the retained range) can be judged by dropped.
 * Of at most {@link MAX_RULES}, the oldest keeps its `since` unless it was in force from `from` on:
 * a rule dropped for room was in force before it, so no time before it is judged by the rules.
 */
export function nextRules(
  rules: readonly JudgedRule[],
  job: ScheduleSpec,
  now: number,
  lastSeen: number,
  from: number,
): JudgedRule[] {
  const newest = rules.at(-1);
  // A job's first rule was in force before any check saw it.
  if (newest === undefined) return [ruleOf(job)];
  let out: JudgedRule[] = [...rules];
  if (!sameRule(newest, job)) {
    out = out.map((rule, i) => (i === out.length - 1 ? { ...rule, until: lastSeen } : rule));
    out.push({ ...ruleOf(job), since: now });
  }
  // A rule that was replaced before `from` judges nothing any more.
  while (out.length > 1 && (out[1]?.since ?? 0) <= from) out = out.slice(1);
  const [oldest, ...rest] = out.slice(-MAX_RULES);
  if (oldest === undefined) return [ruleOf(job)];
  if (oldest.since !== undefined && oldest.since > from) return [oldest, ...rest];
  const { since: _since, ...first } = oldest;
  return [first, ...rest];
}

/** The rules that may have been in force at `t`: each from the last sighting of the one before it. */
export function possibleRules(rules: readonly JudgedRule[], t: number): JudgedRule[] {
  return rules.filter(
    (_rule, i) =>
      (i === 0 || t >= (rules[i - 1]?.until ?? 0)) &&
      (i === rules.length - 1 || t < (rules[i + 1]?.since ?? Number.POSITIVE_INFINITY)),
  );
}

/** Whether `rule` schedules a slot at `t`, ms. */
export function isSlotOf(rule: ScheduleSpec, t: number): boolean {
  return slotsBetween(rule, new Date(t), new Date(t + 1), 1).slots.length === 1;
}

/**
 * The slots of [from, to) to judge under `rules`: a time that every rule possibly in force then
 * schedules (after a change, old slots by the old rule, new ones by the new, and in between only
 * those both schedule; none before the oldest rule's `since`), at most `max`, oldest first.
 */
export function judgedSlots(
  rules: readonly JudgedRule[],
  from: Date,
  to: Date,
  max: number,
): { slots: readonly Date[]; truncated: boolean } {
  const start = rules[0]?.since;
  if (start !== undefined && start > from.getTime()) {
    if (start >= to.getTime()) return { slots: [], truncated: false };
    return judgedSlots(rules, new Date(start), to, max);
  }
  if (rules.length === 1) return slotsBetween(rules[0] as JudgedRule, from, to, max);
  const candidates = new Set<number>();
  let truncated = false;
  for (const [i, rule] of rules.entries()) {
    const lo = Math.max(from.getTime(), i === 0 ? 0 : (rules[i - 1]?.until ?? 0));
    const hi = Math.min(to.getTime(), rules[i + 1]?.since ?? Number.POSITIVE_INFINITY);
    if (lo >= hi) continue;
    const got = slotsBetween(rule, new Date(lo), new Date(hi), max);
    truncated ||= got.truncated;
    for (const slot of got.slots) candidates.add(slot.getTime());
  }
  const slots = [...candidates]
    .sort((a, b) => a - b)
    .filter((t) => possibleRules(rules, t).every((rule) => isSlotOf(rule, t)));
  return {
    slots: slots.slice(0, max).map((t) => new Date(t)),
    truncated: truncated || slots.length > max,
  };
}
