/**
 * A job's schedule over a history with schedule changes (`scheduleChanges`): which rule Scheduler
 * delivered when, and which slots the documented rules leave unjudged.
 *
 * Scheduler delivers a job's slots by the schedule of the revision deployed at the time
 * (`setJobs` at each deploy), so a slot exists only within its schedule's span. The missed-run
 * check judges a slot only if every rule that may have been in force at its time schedules it; it
 * knows a rule by the checks that saw it (docs/how-it-works.md, "The schedule in force";
 * docs/limits.md, "Schedule changes"): after a change, the old rule's slots up to its last sighting,
 * the new one's from its first, and between the two sightings only the slots both rules have. A
 * slot only one rule has in that window is never reported, by design.
 *
 * The sightings here are the checks certainly made, from the outcome, not the product's cursor: a
 * run audit that logged `run audit done` with no failed check checked every job with its
 * instance's revision (its sighting lies between the audit's start and that line), and the final
 * check saw the last revision's. Checks not certainly made (an audit that died, a delivery's own check) can only narrow
 * the product's window, so the window taken here is never narrower than the product's.
 */
import type { DeclaredJob } from '../../src/policy/job-declaration.ts';
import { MISSED_RUN } from '../../src/policy/log-messages.ts';
import {
  CURSOR_OF_SHORTER_WINDOW,
  UNREADABLE_CURSOR,
} from '../../src/policy/missed-runs.ts';
import { slotRunId } from '../../src/policy/run-history.ts';
import { nextSlotMs } from './cloud-scheduler.ts';
import type { KNOWN_GAPS } from './model.ts';
import { v1CheckDocumentId } from './run-id-invariants.ts';
import type { LogLine, SimOutcome } from './simulator.ts';

type Deployment = SimOutcome['deployments'][number];

/** Which schedule a job ran on over [from, to), ms; `from` is -Infinity for the first. */
export interface ScheduleSegment {
  readonly job: DeclaredJob;
  readonly from: number;
  readonly to: number;
}

/** The line a run audit logs once it checked every job. */
const AUDIT_DONE = 'run audit done';

/** Whether two declarations of a job have the same rule (schedule and time zone). */
function sameRule(a: DeclaredJob, b: DeclaredJob): boolean {
  return a.schedule === b.schedule && a.timeZone === b.timeZone;
}

/** Job `jobId`'s schedules in deployment `dep`, oldest first (a revision that drops it ends one). */
export function scheduleSegments(
  dep: Deployment,
  jobId: string,
): ScheduleSegment[] {
  const segments: ScheduleSegment[] = [];
  let open: { job: DeclaredJob; from: number } | undefined;
  for (const [r, revision] of dep.revisions.entries()) {
    const job = revision.jobs.find((j) => j.id === jobId);
    if (open !== undefined && (job === undefined || !sameRule(open.job, job))) {
      segments.push({ ...open, to: revision.at });
      open = undefined;
    }
    if (job !== undefined && open === undefined) {
      open = { job, from: r === 0 ? Number.NEGATIVE_INFINITY : revision.at };
    } else if (job !== undefined && open !== undefined) {
      open = { ...open, job }; // the same rule, its latest declaration
    }
  }
  if (open !== undefined) {
    segments.push({ ...open, to: Number.POSITIVE_INFINITY });
  }
  return segments;
}

/** The segment of `segments` in force at `ms`, or `undefined`. */
export function segmentAt(
  segments: readonly ScheduleSegment[],
  ms: number,
): ScheduleSegment | undefined {
  return segments.find((segment) => segment.from <= ms && ms < segment.to);
}

/** A check certainly made with a rule: between `from` and `at`, ms. */
interface Sighting {
  readonly schedule: string;
  readonly from: number;
  readonly at: number;
}

/** The revision an instance of the simulator belongs to, from its name (`d0-i3-r1`). */
function revisionOf(instance: string, d: number): number | undefined {
  const match = /^d(\d+)-i\d+-r(\d+)$/.exec(instance);
  return match !== null && Number(match[1]) === d
    ? Number(match[2])
    : undefined;
}

/**
 * The checks of job `jobId` in deployment `d` certainly made, with the rule each saw; with
 * `maybe`, those of audits that logged a failed check too (the job's own may have ended).
 */
function sightingsOf(
  outcome: SimOutcome,
  d: number,
  jobId: string,
  maybe = false,
): Sighting[] {
  const dep = outcome.deployments[d] as Deployment;
  const ruleAt = (revision: number) =>
    dep.revisions[revision]?.jobs.find((j) => j.id === jobId)?.schedule;
  const sightings: Sighting[] = [];
  for (const line of outcome.logs) {
    // An audit that logs its end with a failed check may not have seen the rule (its cursor write
    // failed): only one whose every check ended counts.
    const checkedAll =
      line.message === AUDIT_DONE && (maybe || line.fields.failed === 0);
    const revision = checkedAll ? revisionOf(line.instance, d) : undefined;
    const schedule = revision === undefined ? undefined : ruleAt(revision);
    if (schedule === undefined) {
      continue;
    }
    const started = auditStartedBefore(outcome, line);
    if (!cursorOff(outcome, line.instance, jobId, started, line.at)) {
      sightings.push({ schedule, from: started, at: line.at });
    }
  }
  const last = ruleAt(dep.revisions.length - 1);
  if (last !== undefined) {
    sightings.push({
      schedule: last,
      from: outcome.finalMs,
      at: outcome.finalMs,
    });
  }
  return sightings;
}

/**
 * Whether `instance` said `jobId`'s cursor unreadable, or ahead of a longer retry window's
 * boundary, from `fromMs` to `toMs`: its check judged nothing and wrote no rule, so the audit
 * around it saw no rule of the job (docs/limits.md: a deploy that changes the schedule and
 * lengthens the retry window at once leaves a slot only the new rule has unjudged until the
 * cursor reads again).
 */
function cursorOff(
  outcome: SimOutcome,
  instance: string,
  jobId: string,
  fromMs: number,
  toMs: number,
): boolean {
  return outcome.logs.some(
    (l) =>
      (l.message === CURSOR_OF_SHORTER_WINDOW ||
        l.message === UNREADABLE_CURSOR) &&
      l.instance === instance &&
      l.fields.jobName === jobId &&
      l.at >= fromMs &&
      l.at <= toMs,
  );
}

/** How long before its `run audit done` a run audit is taken to start where no delivery says, ms. */
const AUDIT_AT_MOST_MS = 60_000;

/**
 * When the run audit that logged `line` began: the latest of the audit's deliveries to its instance
 * sent by then (its checks took their clocks after it). The run audit's own runs are not among
 * the outcome's executions (stop 73: this took `line.at - 60 s` for every audit, so a check the
 * audit made after a slot counted as made before it, and the slot as judged by the new rule).
 */
function auditStartedBefore(outcome: SimOutcome, line: LogLine): number {
  const sent = (outcome.auditDeliveries ?? [])
    .filter((a) => a.instance === line.instance && a.sentAt <= line.at)
    .map((a) => a.sentAt);
  return sent.length === 0 ? line.at - AUDIT_AT_MOST_MS : Math.max(...sent);
}

/** How long before a run audit's start a delivery's check may still race it for the cursor, ms. */
const RACE_WINDOW_MS = 30_000;

/**
 * Whether a delivery's check with another rule ran while the run audit of `sighting` checked: the
 * two race for the job's cursor, and the audit's write may be the one that lost (a lost race is no
 * failed check), so its rule is not certainly seen (a rolling deploy's old revision still serving
 * the first slot of an hour: `--seed 9`, the 62nd history, stop 71).
 */
function racedByOtherRule(
  sighting: Sighting,
  deliveryChecks: readonly Sighting[],
): boolean {
  return deliveryChecks.some(
    (c) =>
      c.schedule !== sighting.schedule &&
      c.from >= sighting.from - RACE_WINDOW_MS &&
      c.from <= sighting.at,
  );
}

/**
 * The checks of job `jobId` that deliveries in deployment `d` made beside their job (they read its
 * check document), with the rule of the revision each ran on, from its start: checks that may
 * have seen the rule, not certainly (their cursor write may not land).
 */
function deliveryCheckSightings(
  outcome: SimOutcome,
  d: number,
  jobId: string,
): Sighting[] {
  const dep = outcome.deployments[d] as Deployment;
  const document = v1CheckDocumentId(jobId, dep.keyScope);
  return outcome.executions.flatMap((e) => {
    const revision = revisionOf(e.instance, d);
    const schedule =
      revision === undefined
        ? undefined
        : dep.revisions[revision]?.jobs.find((j) => j.id === jobId)?.schedule;
    const read = outcome.checkReads?.get(e.attemptId) ?? [];
    return schedule !== undefined && read.includes(document)
      ? [{ schedule, from: e.start, at: e.start }]
      : [];
  });
}

/** Whether `schedule` has a slot at `t`, ms (by croner, as Scheduler). */
export function isSlotOf(schedule: string, t: number): boolean {
  return nextSlotMs(schedule, t - 1) === t;
}

/**
 * Whether the slot at `slotMs` of `segment` is a slot of a rule no run audit saw, which the first
 * rule a check saw after it does not have: a check that knows only later rules never reads it,
 * and learns the rule only from the claims at the slots it reads (docs/limits.md, "A schedule
 * changed before any check saw the old one").
 */
function unseenRuleSlot(
  sightings: readonly Sighting[],
  segment: ScheduleSegment,
  slotMs: number,
): boolean {
  if (sightings.some((s) => s.schedule === segment.job.schedule)) {
    return false;
  }
  const after = sightings.filter((s) => s.at > slotMs);
  const next = after.reduce<Sighting | undefined>(
    (first, s) => (first === undefined || s.at < first.at ? s : first),
    undefined,
  );
  return next !== undefined && !isSlotOf(next.schedule, slotMs);
}

/**
 * Whether the slot at `slotMs` lies between the sightings of two rules, the last before it and the
 * first after it, and not both have it: either may have been in force then, so no check judges it
 * (docs/how-it-works.md, "The schedule in force"). Whatever rules were deployed between them
 * unseen: after A, then a rule no check saw, then B, a slot only B has before B's first sighting.
 * The rule before it may be one a check may have seen (`maybeSeen`: a delivery's hourly check,
 * an audit that logged a failed check), whose cursor write is not known to land.
 */
function betweenOtherRules(
  sightings: readonly Sighting[],
  maybeSeen: readonly Sighting[],
  slotMs: number,
): boolean {
  const before = maybeSeen
    .filter((s) => s.from < slotMs)
    .reduce<Sighting | undefined>(
      (last, s) => (last === undefined || s.from > last.from ? s : last),
      undefined,
    );
  const after = sightings
    .filter((s) => s.at > slotMs)
    .reduce<Sighting | undefined>(
      (first, s) => (first === undefined || s.at < first.at ? s : first),
      undefined,
    );
  if (before === undefined || after === undefined) {
    return false;
  }
  return (
    before.schedule !== after.schedule &&
    !(isSlotOf(before.schedule, slotMs) && isSlotOf(after.schedule, slotMs))
  );
}

/**
 * Whether the slot at `slotMs` of segment `index` of `segments` is one the documented rules leave
 * unjudged: a slot of a rule no check saw that the rule seen next does not have
 * ({@link unseenRuleSlot}), or a slot only one of two consecutive rules has, between the old
 * rule's last sighting before the change and the new rule's first after the old one's last.
 */
export function unjudgedAcrossChange(
  outcome: SimOutcome,
  d: number,
  segments: readonly ScheduleSegment[],
  index: number,
  slotMs: number,
): boolean {
  const jobId = segments[index]?.job.id;
  if (jobId === undefined) {
    return false;
  }
  const deliveryChecks = deliveryCheckSightings(outcome, d, jobId);
  const sightings = sightingsOf(outcome, d, jobId).filter(
    (s) => !racedByOtherRule(s, deliveryChecks),
  );
  if (unseenRuleSlot(sightings, segments[index] as ScheduleSegment, slotMs)) {
    return true;
  }
  const changes = [index, index + 1].flatMap((i) => {
    const before = segments[i - 1];
    const after = segments[i];
    return before === undefined || after === undefined
      ? []
      : [
          {
            before: before.job.schedule,
            after: after.job.schedule,
            at: after.from,
          },
        ];
  });
  const maybeSeen = [
    ...deliveryChecks,
    ...sightingsOf(outcome, d, jobId, true),
  ];
  if (betweenOtherRules(sightings, maybeSeen, slotMs)) {
    return true;
  }
  return changes.some(({ before, after, at }) => {
    if (isSlotOf(before, slotMs) === isSlotOf(after, slotMs)) {
      return false; // both rules have it (judged), or neither
    }
    const old = sightings.filter((s) => s.schedule === before);
    const lastOld = Math.max(
      Number.NEGATIVE_INFINITY,
      ...old.filter((s) => s.from < at).map((s) => s.from),
    );
    const lastOldAt = Math.max(
      Number.NEGATIVE_INFINITY,
      ...old.map((s) => s.at),
    );
    const firstNew = Math.min(
      Number.POSITIVE_INFINITY,
      ...sightings
        .filter((s) => s.schedule === after && s.at > lastOldAt)
        .map((s) => s.at),
    );
    return slotMs > lastOld && slotMs < firstNew;
  });
}

/**
 * Whether the missed-run check judges job `jobId`'s time `slotMs` in deployment `d`: a slot of the
 * schedule Scheduler delivered then, and not one {@link unjudgedAcrossChange} leaves unjudged.
 */
export function isJudgedSlot(
  outcome: SimOutcome,
  d: number,
  jobId: string,
  slotMs: number,
): boolean {
  const dep = outcome.deployments[d];
  if (dep === undefined) {
    return false;
  }
  const segments = scheduleSegments(dep, jobId);
  const index = segments.findIndex((s) => s.from <= slotMs && slotMs < s.to);
  const segment = segments[index];
  if (segment === undefined || !isSlotOf(segment.job.schedule, slotMs)) {
    return false;
  }
  return !unjudgedAcrossChange(outcome, d, segments, index, slotMs);
}

/**
 * Invariant 53: a slot reported `missed run` was a slot of the schedule Scheduler delivered at its
 * time, in its deployment. After a schedule change, the old rule's times after it and the new rule's
 * before it were never slots: a report of one is a false alarm (docs/how-it-works.md, "The schedule
 * in force": a slot is judged only if every rule that may have been in force then schedules it).
 * Nor was any time before the history began, when Scheduler had no job: a check that judged a
 * cursor nobody wrote for days from where it stood, rather than starting afresh, would report
 * those (stop 74).
 */
export function missedReportsNameSlots(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const line of outcome.logs) {
    if (line.message !== MISSED_RUN) {
      continue;
    }
    const jobId = String(line.fields.jobName);
    const slotMs = Date.parse(String(line.fields.slot));
    if (slotMs < outcome.startMs) {
      // Scheduler's jobs are created as the history begins: no slot before it was scheduled.
      found.push(
        `${jobId}@${String(line.fields.slot)} was reported "${MISSED_RUN}" (${line.instance}, ${new Date(line.at).toISOString()}), before the history began (${new Date(outcome.startMs).toISOString()}): Scheduler had no job then`,
      );
      continue;
    }
    const d = outcome.deployments.findIndex(
      (dep) =>
        slotRunId(jobId, new Date(slotMs), dep.keyScope) === line.fields.runId,
    );
    const dep = outcome.deployments[d];
    if (dep === undefined) {
      continue; // a run id of no deployment: invariant 47's
    }
    if (!dep.revisions.at(-1)?.jobs.some((j) => j.id === jobId)) {
      // A job a redeploy dropped: only the simulator's final checks judge it still (simulator.ts,
      // `auditDeployment`), past the drop too; invariant 2 judges it up to the drop.
      continue;
    }
    const segment = scheduleSegments(dep, jobId).find(
      (s) => s.from <= slotMs && slotMs < s.to,
    );
    if (segment !== undefined && !ruleStampedInSpan(outcome, d, segment)) {
      // No record the check could read stamps the old rule (another version's records, late
      // first claims by the new revision): it cannot learn the old rule (docs/limits.md, "A
      // schedule changed before any check saw the old one").
      continue;
    }
    if (
      outcome.gaps.oldRuleSeenAfterChange &&
      segment !== undefined &&
      otherRuleSeenBefore(outcome, d, segment, slotMs)
    ) {
      continue; // KNOWN_GAPS.oldRuleSeenAfterChange
    }
    if (segment === undefined || !isSlotOf(segment.job.schedule, slotMs)) {
      found.push(
        `${jobId}@${String(line.fields.slot)} was reported "${MISSED_RUN}" (${line.instance}, ${new Date(line.at).toISOString()}), but the schedule deployed then${segment === undefined ? ' (none)' : ` (${segment.job.schedule})`} has no slot there: Scheduler never had it`,
      );
    }
  }
  return found;
}

/**
 * Whether a check of `segment`'s job in deployment `d` under another rule that has a slot at
 * `slotMs` (a run audit's or a delivery's, on an instance of another revision: a rolling deploy's
 * old one) began after the segment's schedule was deployed and before the slot: it may have
 * written that rule back into the cursor ({@link KNOWN_GAPS}`.oldRuleSeenAfterChange`).
 */
function otherRuleSeenBefore(
  outcome: SimOutcome,
  d: number,
  segment: ScheduleSegment,
  slotMs: number,
): boolean {
  const jobId = segment.job.id;
  const checks = [
    ...sightingsOf(outcome, d, jobId, true),
    ...deliveryCheckSightings(outcome, d, jobId),
  ];
  return checks.some(
    (c) =>
      c.schedule !== segment.job.schedule &&
      c.from >= segment.from &&
      c.from <= slotMs &&
      isSlotOf(c.schedule, slotMs),
  );
}

/**
 * Whether a record of `segment`'s job in deployment `d`, at a time within the segment that a later
 * schedule of the job has a slot at (a time the check, knowing only later rules, reads), stamps
 * the segment's own rule: the product's only evidence of a rule no check saw.
 */
function ruleStampedInSpan(
  outcome: SimOutcome,
  d: number,
  segment: ScheduleSegment,
): boolean {
  const dep = outcome.deployments[d];
  if (dep === undefined) {
    return false;
  }
  const segments = scheduleSegments(dep, segment.job.id);
  const later = segments.filter((s) => s.from >= segment.to);
  for (const [runId, record] of outcome.records) {
    const at = record.schedule_time as { toMillis?: () => number } | undefined;
    const slotMs = at?.toMillis?.();
    if (
      record.job_name !== segment.job.id ||
      slotMs === undefined ||
      slotMs < segment.from ||
      slotMs >= segment.to ||
      slotRunId(segment.job.id, new Date(slotMs), dep.keyScope) !== runId
    ) {
      continue;
    }
    const stampsItsRule =
      record.schedule === segment.job.schedule &&
      record.time_zone === segment.job.timeZone;
    const readByLaterRule = later.some((s) => isSlotOf(s.job.schedule, slotMs));
    if (stampsItsRule && readByLaterRule) {
      return true;
    }
  }
  return false;
}
