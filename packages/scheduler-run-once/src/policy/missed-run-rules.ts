/** The schedule rules a check cursor judged with (docs/how-it-works.md, "The schedule in force"). */
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import {
  previousSlot,
  type ScheduleSpec,
  scheduleProblem,
  slotsBetween,
  timeZoneProblem,
} from './schedule.ts';

/** The schedule rules a cursor remembers at most (each schedule change adds one until passed). */
export const MAX_RULES = 8;
/**
 * Clock difference between instances a cursor's times may show, ms: two estimates of Firestore's
 * time (each instance's own offset to it), so one check's `now` may read a few seconds before the
 * time another check wrote.
 */
export const CURSOR_CLOCK_SLACK_MS = 10_000;

/**
 * A rule a job was judged against, first seen by a check at `since` (ms; none on an oldest rule in
 * force over the whole retained range), last at `until` (ms; none on the newest).
 */
export interface JudgedRule extends ScheduleSpec {
  readonly since?: number;
  readonly until?: number;
  /**
   * When a check first saw it (ms), on a job's first rule: that rule is still taken for the one in
   * force before then, unless the claims of the job's slots show another ({@link rulesFromClaims}).
   */
  readonly firstSeen?: number;
}

/** The rule of a job as declared now. */
export function ruleOf(job: ScheduleSpec): JudgedRule {
  return { schedule: job.schedule, timeZone: job.timeZone };
}

/** Whether two rules are one: the same schedule in the same time zone. */
export function isSameRule(a: ScheduleSpec, b: ScheduleSpec): boolean {
  return a.schedule === b.schedule && a.timeZone === b.timeZone;
}

/**
 * A stored value this code never writes, and what in it is wrong (`unreadable`): the reason the
 * missed-run check's ERROR and `npm run runs -- --check` give, so that an operator knows which
 * field to repair.
 */
export interface Unreadable {
  readonly unreadable: string;
  /**
   * When the value reads again by itself, ms of Firestore's time: a cursor written under a
   * shorter retry window than the job's now, ahead of the closed boundary until it passes it.
   */
  readonly readsAgainAt?: number;
}

/** Whether `value` is a read refused as {@link Unreadable}. */
export function isUnreadable(value: unknown): value is Unreadable {
  return typeof (value as Unreadable | undefined)?.unreadable === 'string';
}

/** What a cursor's `rules` hold that no check writes, for {@link Unreadable}. */
const RULES_PROBLEM = {
  notAList: `rules is not a list of 1 to ${MAX_RULES} rules`,
  notText: 'has no schedule or time_zone text',
  invalid: 'has a schedule or time zone no declaration accepts',
  bounds:
    'has its since or until where checks never write them (since on every rule but the oldest, until on every rule but the newest)',
  notTimes: 'has a since, until or first_seen that is not a timestamp',
  ahead: "has a time ahead of Firestore's now",
  inverted: 'has a since after its until',
  beforePrevious: 'has a since before the rule before it ended',
} as const;

/** An {@link Unreadable} naming the rule at `index` and what is wrong with it. */
function unreadableRule(index: number, problem: string): Unreadable {
  return { unreadable: `rules[${index}] ${problem}` };
}

/**
 * The rules stored on a cursor, {@link Unreadable} for any this code never writes; none: `job`'s
 * rule. `nowMs`: Firestore's time; a rule's time later than it (past {@link CURSOR_CLOCK_SLACK_MS}),
 * or times out of the order checks write them (a rule's `since` after its `until`, its `since`
 * before the rule before it ended), is none a check wrote: read as written, such a rule would
 * leave slots unjudged for as long as it lies ahead.
 */
export function readRules(
  value: unknown,
  job: ScheduleSpec,
  nowMs: number,
): JudgedRule[] | Unreadable {
  if (value === undefined) {
    return [ruleOf(job)]; // a cursor of an earlier version
  }
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_RULES) {
    return { unreadable: RULES_PROBLEM.notAList };
  }
  const rules: JudgedRule[] = [];
  for (const [i, entry] of value.entries()) {
    const {
      schedule,
      time_zone: timeZone,
      since,
      until,
      first_seen: firstSeen,
    } = (entry ?? {}) as DocumentData;
    if (typeof schedule !== 'string' || typeof timeZone !== 'string') {
      return unreadableRule(i, RULES_PROBLEM.notText);
    }
    // A rule this code wrote was a declared job's: a schedule and zone declarations accept.
    if (!isValidRule({ schedule, timeZone })) {
      return unreadableRule(i, RULES_PROBLEM.invalid);
    }
    const last = i === value.length - 1;
    if ((i > 0 && since === undefined) || last !== (until === undefined)) {
      return unreadableRule(i, RULES_PROBLEM.bounds);
    }
    if (
      ![since, until, firstSeen].every(
        (t) => t === undefined || t instanceof Timestamp,
      )
    ) {
      return unreadableRule(i, RULES_PROBLEM.notTimes);
    }
    const rule: JudgedRule = {
      schedule,
      timeZone,
      ...(since === undefined ? {} : { since: since.toMillis() }),
      ...(until === undefined ? {} : { until: until.toMillis() }),
      ...(firstSeen === undefined ? {} : { firstSeen: firstSeen.toMillis() }),
    };
    const disorder = orderProblem(rule, rules.at(-1), nowMs);
    if (disorder !== undefined) {
      return unreadableRule(i, disorder);
    }
    rules.push(rule);
  }
  return rules;
}

/**
 * What in `rule`'s times is not as checks write them, at Firestore's `nowMs`, or `undefined`: a
 * time ahead of it, its `since` after its `until`, or before `previous` (the rule before it)
 * ended, each past {@link CURSOR_CLOCK_SLACK_MS}.
 */
function orderProblem(
  rule: JudgedRule,
  previous: JudgedRule | undefined,
  nowMs: number,
): string | undefined {
  const { since, until, firstSeen } = rule;
  const latest = nowMs + CURSOR_CLOCK_SLACK_MS;
  if ([since, until, firstSeen].some((t) => t !== undefined && t > latest)) {
    return RULES_PROBLEM.ahead;
  }
  if (
    since !== undefined &&
    until !== undefined &&
    since > until + CURSOR_CLOCK_SLACK_MS
  ) {
    return RULES_PROBLEM.inverted;
  }
  if (
    since !== undefined &&
    previous?.until !== undefined &&
    since + CURSOR_CLOCK_SLACK_MS < previous.until
  ) {
    return RULES_PROBLEM.beforePrevious;
  }
  return undefined;
}

/**
 * The rules after a check at `now` (ms) with the declared `job`: a changed rule appended (the one
 * before it last seen at `lastSeen`), those judging nothing at or after `from` dropped, at most
 * {@link MAX_RULES}; the oldest keeps its `since` unless it was in force from `from` on.
 */
export function nextRules(
  rules: readonly JudgedRule[],
  job: ScheduleSpec,
  now: number,
  lastSeen: number,
  from: number,
): JudgedRule[] {
  const newest = rules.at(-1);
  // A job's first rule was in force before any check saw it, unless its claims tell otherwise.
  if (newest === undefined) {
    return [{ ...ruleOf(job), firstSeen: now }];
  }
  let out = rules;
  if (!isSameRule(newest, job)) {
    out = [
      ...rules.slice(0, -1),
      { ...newest, until: lastSeen },
      { ...ruleOf(job), since: now },
    ];
  }
  // A rule that was replaced before `from` judges nothing any more.
  while (out.length > 1 && (out[1]?.since ?? 0) <= from) {
    out = out.slice(1);
  }
  const [oldest, ...rest] = out.slice(-MAX_RULES) as [
    JudgedRule,
    ...JudgedRule[],
  ];
  if (oldest.since !== undefined && oldest.since > from) {
    return [oldest, ...rest];
  }
  const { since: _since, ...first } = oldest;
  return [first, ...rest];
}

/**
 * Whether any of `rules` records a check's sighting (`firstSeen`, `since` or `until`). A cursor of
 * an earlier version has no rules, and `readRules` gives the declared rule alone, sighted never:
 * the check does not know which rule was in force before it, and learns it from the claims as a
 * check that has seen no run does ({@link rulesFromClaims}; stop 74, seed 23, the 77th).
 */
export function isSighted(rules: readonly JudgedRule[]): boolean {
  return rules.some(
    (rule) =>
      rule.firstSeen !== undefined ||
      rule.since !== undefined ||
      rule.until !== undefined,
  );
}

/** A sighting of a rule at `at` (ms): a slot's first claim (at the slot's time), or a check's. */
export interface RuleSighting extends ScheduleSpec {
  readonly at: number;
  /** A check's sighting (its own time), not a claim's. */
  readonly byCheck?: true;
}

/**
 * The rules a check that has seen no run of its job learns from the claims of the job's slots, or
 * `undefined` when they tell nothing new: every claim's rule was possibly in force at its slot
 * under `rules` (the cursor's, the declared rule newest).
 *
 * Until a check sees a run, the oldest rule it knows is taken for the one in force since the job's
 * first record, even where a rule deployed before any check saw it scheduled those slots
 * (docs/limits.md, "Schedule changes"). The first claim of Scheduler's delivery of a slot stamps
 * the rule its revision declared (`schedule`, `time_zone`), made at the slot's time: a sighting of
 * that rule then, as a check's is at its own time. The rules are rebuilt from all the sightings
 * in time order, the checks' (each rule's `firstSeen`, `since` and `until`, and the declared
 * rule at `now`, ms) and the claims': each rule in force from its first sighting after another
 * rule's (the oldest: from before its first, as before) to its last. Between two rules'
 * sightings, only slots both have are judged, as after any change (`possibleRules`). At most
 * {@link MAX_RULES}, the newest.
 */
export function rulesFromClaims(
  rules: readonly JudgedRule[],
  job: ScheduleSpec,
  claims: readonly RuleSighting[],
  now: number,
): JudgedRule[] | undefined {
  // A stamp this code would not write (another version's, a hand's) tells nothing.
  const told = claims.filter(
    (claim) =>
      isValidRule(claim) &&
      !possibleRules(rules, claim.at).some((rule) => isSameRule(rule, claim)),
  );
  if (told.length === 0) {
    return undefined;
  }
  // A check's sighting last among equal times: the declared rule at `now` stays the newest.
  const sightings = [
    ...claims.filter(isValidRule),
    ...checkSightings(rules, job, now),
  ].sort((a, b) => a.at - b.at);
  const rebuilt: JudgedRule[] = [];
  for (const sighting of sightings) {
    const newest = rebuilt.at(-1);
    if (newest !== undefined && isSameRule(newest, sighting)) {
      rebuilt[rebuilt.length - 1] = { ...newest, until: sighting.at };
      continue;
    }
    if (newest !== undefined && isDeployWindowClaim(sighting, newest)) {
      continue;
    }
    const first =
      newest === undefined
        ? { firstSeen: sighting.at }
        : { since: sighting.at };
    rebuilt.push({ ...ruleOf(sighting), ...first, until: sighting.at });
  }
  // The declared rule, seen `now`, is the newest: in force still, no `until`.
  const { until: _now, ...newest } = rebuilt.pop() as JudgedRule;
  return [...rebuilt, newest].slice(-MAX_RULES);
}

/**
 * Whether `claim`, of another rule than `inForce`, came at a slot `inForce` has too: a revision
 * of its rule served Scheduler's delivery of a slot of the schedule before it. `deploy.sh`
 * deploys the function before it updates Scheduler's jobs, so in that window the new rule's
 * revision claims the old schedule's slots: such a claim tells which revision served, not which
 * schedule Scheduler had. A slot only the new rule has is Scheduler's proof of it.
 */
function isDeployWindowClaim(
  claim: RuleSighting,
  inForce: ScheduleSpec,
): boolean {
  return claim.byCheck !== true && isSlotOf(inForce, claim.at);
}

/**
 * The sightings a cursor's `rules` record (none after `now`: a time a check never wrote), and the
 * declared `job`'s rule at `now` (ms).
 */
function checkSightings(
  rules: readonly JudgedRule[],
  job: ScheduleSpec,
  now: number,
): RuleSighting[] {
  const sightings = rules.flatMap((rule) =>
    [rule.firstSeen, rule.since, rule.until].flatMap((at) =>
      at === undefined || at > now
        ? []
        : [{ ...ruleOf(rule), at, byCheck: true as const }],
    ),
  );
  return [...sightings, { ...ruleOf(job), at: now, byCheck: true }];
}

/** Whether `rule` is one a declaration accepts: a valid schedule in a valid time zone. */
function isValidRule(rule: ScheduleSpec): boolean {
  return (
    scheduleProblem(rule.schedule) === undefined &&
    timeZoneProblem(rule.timeZone) === undefined
  );
}

/** The rules that may have been in force at `t`: each from the last sighting of the one before it. */
export function possibleRules(
  rules: readonly JudgedRule[],
  t: number,
): JudgedRule[] {
  return rules.filter(
    (_rule, i) =>
      (i === 0 || t >= (rules[i - 1]?.until ?? 0)) &&
      (i === rules.length - 1 ||
        t < (rules[i + 1]?.since ?? Number.POSITIVE_INFINITY)),
  );
}

/** Whether `rule` schedules a slot at `t`, ms. */
export function isSlotOf(rule: ScheduleSpec, t: number): boolean {
  return slotsBetween(rule, new Date(t), new Date(t + 1), 1).slots.length === 1;
}

/** How many candidate slots {@link previousJudgedSlot} looks back through before it gives up. */
const PREVIOUS_SLOT_TRIES = 16;

/**
 * The latest slot before `before` that `rules` judge (every rule possibly in force then schedules
 * it), or `undefined` if none is found within a few candidates: the slot whose execution a slot
 * at `before` may have waited behind. The job's declared rule alone would name a slot of the new
 * rule before a slot of the old one, a slot that never existed and so "ran" a retry window late.
 */
export function previousJudgedSlot(
  rules: readonly JudgedRule[],
  before: Date,
): Date | undefined {
  let at = before;
  for (let tries = 0; tries < PREVIOUS_SLOT_TRIES; tries++) {
    const candidates = rules.flatMap(
      (rule) => previousSlot(rule, at)?.getTime() ?? [],
    );
    if (candidates.length === 0) {
      return undefined;
    }
    const latest = Math.max(...candidates);
    const judged = possibleRules(rules, latest).every((rule) =>
      isSlotOf(rule, latest),
    );
    if (judged) {
      return new Date(latest);
    }
    at = new Date(latest);
  }
  return undefined;
}

/**
 * The slots of [from, to) to judge under `rules`, at most `max`, oldest first: the times every
 * rule possibly in force then schedules; none before the oldest rule's `since`, none if from ≥ to.
 */
export function judgedSlots(
  rules: readonly JudgedRule[],
  from: Date,
  to: Date,
  max: number,
): { slots: readonly Date[]; truncated: boolean } {
  const start = Math.max(
    from.getTime(),
    rules[0]?.since ?? Number.NEGATIVE_INFINITY,
  );
  if (start >= to.getTime()) {
    return { slots: [], truncated: false };
  }
  if (rules.length === 1) {
    return slotsBetween(rules[0] as JudgedRule, new Date(start), to, max);
  }
  const candidates = new Set<number>();
  let truncated = false;
  for (const [i, rule] of rules.entries()) {
    const lo = Math.max(start, rules[i - 1]?.until ?? 0);
    const hi = Math.min(
      to.getTime(),
      rules[i + 1]?.since ?? Number.POSITIVE_INFINITY,
    );
    if (lo >= hi) {
      continue;
    }
    const got = slotsBetween(rule, new Date(lo), new Date(hi), max);
    truncated ||= got.truncated;
    for (const slot of got.slots) {
      candidates.add(slot.getTime());
    }
  }
  const slots = [...candidates]
    .sort((a, b) => a - b)
    .filter((t) => possibleRules(rules, t).every((rule) => isSlotOf(rule, t)));
  return {
    slots: slots.slice(0, max).map((t) => new Date(t)),
    truncated: truncated || slots.length > max,
  };
}
