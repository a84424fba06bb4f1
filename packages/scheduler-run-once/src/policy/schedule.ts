/**
 * Unix-cron schedules as Cloud Scheduler reads them, and their slots: each instant the job's zone
 * shows a matching wall-clock time. Pure; UTC `Date`s, ms (docs/how-it-works.md, "Schedules and the
 * wall clock"; bounds: docs/limits.md, "Slot arithmetic's bounds").
 */
import { Cron } from 'croner';

/** The most slots one call returns (`slotsBetween`, `nextSlots`): a week of a per-minute job. */
export const MAX_SLOTS = 10_000;
const RANGE_FROM_MS = Date.UTC(2000, 0, 1);
const RANGE_TO_MS = Date.UTC(2200, 0, 1);
/** The instants slot arithmetic covers, half-open; no slot lies outside. */
export const SLOT_RANGE = Object.freeze({
  from: new Date(RANGE_FROM_MS),
  to: new Date(RANGE_TO_MS),
});

/** The most croner look-ups per slot returned; more is a bug, thrown as a `RangeError`. */
export const MAX_SEARCH_STEPS = 2 * MAX_SLOTS;
function step(steps: { n: number }): void {
  if (++steps.n > MAX_SEARCH_STEPS) {
    throw new RangeError(`a schedule search passed ${MAX_SEARCH_STEPS} steps`);
  }
}

/** Offsets run from −12:00 to +14:00: one wall-clock time's instants lie within 26 h. */
const MAX_OFFSET_MS = 14 * 3_600_000;
const MIN_OFFSET_MS = -12 * 3_600_000;
const OFFSET_SPAN_MS = MAX_OFFSET_MS - MIN_OFFSET_MS;

/** What slot arithmetic needs of a job (a declared job or `ctx.job` fits), both fields valid. */
export type ScheduleSpec = {
  readonly schedule: string;
  readonly timeZone: string;
};

/** The slots of a range, ascending; `truncated`: it held more (the earliest were returned). */
export type SlotRange = {
  readonly slots: readonly Date[];
  readonly truncated: boolean;
};

const MONTHS = [
  'JAN',
  'FEB',
  'MAR',
  'APR',
  'MAY',
  'JUN',
  'JUL',
  'AUG',
  'SEP',
  'OCT',
  'NOV',
  'DEC',
];
const WEEKDAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
const FIELDS = [
  'minute',
  'hour',
  'day of month',
  'month',
  'day of week',
] as const;
const FIELD_NAMES: readonly (readonly string[])[] = [
  [],
  [],
  [],
  MONTHS,
  WEEKDAYS,
];
const NAMES = new RegExp(`\\b(${[...MONTHS, ...WEEKDAYS].join('|')})\\b`, 'gi');
const GROC =
  'App Engine (groc) schedules such as "every 5 minutes" send no X-CloudScheduler-ScheduleTime ' +
  'header, so their runs could not be told apart';

/** UTC's zones, read without ICU's zone data (25-55 ms at a cold start: docs/performance.md). */
const UTC_ZONES: ReadonlySet<string> = new Set(['Etc/UTC', 'UTC']);

/** croner, evaluating the DST-free wall clock; options pinned so a new default cannot change them. */
function wallClockCron(schedule: string): Cron {
  return new Cron(schedule, {
    utcOffset: 0,
    mode: '5-part',
    domAndDow: false,
    sloppyRanges: false,
    alternativeWeekdays: false,
  });
}

/** Croners of the slot functions' last schedules (stateless between look-ups; ~80 KB each: few). */
const crons = new Map<string, Cron>();
const MAX_CRONS = 32;

function cachedCron(schedule: string): Cron {
  let cron = crons.get(schedule);
  if (cron === undefined) {
    cron = wallClockCron(schedule);
    if (crons.size >= MAX_CRONS) {
      crons.clear();
    }
    crons.set(schedule, cron);
  }
  return cron;
}

/**
 * What is wrong with a schedule, one sentence naming what to write instead, or `undefined` if Cloud
 * Scheduler and this module read it alike: five fields in Scheduler's syntax that fire at all.
 */
export function scheduleProblem(schedule: string): string | undefined {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5) {
    const nickname = schedule.trim().startsWith('@')
      ? '; write @daily as "0 0 * * *"'
      : '';
    // Only words (every, minutes, …) suggest a groc schedule; a wrong count of cron fields does not.
    const groc = /[a-z]{3,}/i.test(schedule.replace(NAMES, ''));
    const counted = schedule.trim() === '' ? '' : ` (it has ${fields.length})`;
    return `must be a unix-cron schedule of five fields${counted}, e.g. "*/5 * * * *"${nickname}.${groc ? ` ${GROC}` : ''}`;
  }
  for (const [i, field] of fields.entries()) {
    const names = FIELD_NAMES[i] ?? [];
    const unknown = field
      .match(/[A-Za-z]+/g)
      ?.some((w) => !names.includes(w.toUpperCase()));
    if (!/^[0-9A-Za-z*/,-]+$/.test(field) || unknown) {
      const extra =
        names.length > 0 ? ` and the names ${names[0]}-${names.at(-1)}` : '';
      return (
        `${FIELDS[i]} field "${field}" may hold only numbers, "*", "-", "/" and ","${extra} ` +
        '(Cloud Scheduler takes no L, W, #, ? or @ forms)'
      );
    }
  }
  const [, , dayOfMonth = '', , dayOfWeek = ''] = fields;
  const steppedBeside = (day: string, other: string) =>
    /^\*./.test(day) && other !== '*';
  if (
    steppedBeside(dayOfMonth, dayOfWeek) ||
    steppedBeside(dayOfWeek, dayOfMonth)
  ) {
    return (
      `day of month "${dayOfMonth}" with day of week "${dayOfWeek}": cron implementations disagree ` +
      'whether a stepped "*" counts as restricted (both days must match, or either), and Cloud ' +
      'Scheduler does not document it; write the days out, e.g. "1-31/2" instead of "*/2"'
    );
  }
  let cron: Cron;
  try {
    cron = wallClockCron(fields.join(' '));
  } catch (err) {
    return (err as Error).message.replace(/^CronPattern: /, '');
  }
  if (cron.nextRun(new Date(RANGE_FROM_MS)) === null) {
    return 'never fires (no date matches it)';
  }
  return undefined;
}

/** The schedule with its fields separated by one space, as the function declares and deploys it. */
export function normaliseSchedule(schedule: string): string {
  return schedule.trim().split(/\s+/).join(' ');
}

let canonicalZones: Set<string> | undefined;

/** What is wrong with a time zone (an offset, a wrong capital), or `undefined` for a tz name. */
export function timeZoneProblem(timeZone: string): string | undefined {
  if (UTC_ZONES.has(timeZone)) {
    return undefined;
  }
  // A canonical name is known without building a formatter (a millisecond each, per declared job).
  canonicalZones ??= new Set(Intl.supportedValuesOf('timeZone'));
  try {
    if (!canonicalZones.has(timeZone)) {
      new Intl.DateTimeFormat('en-US', { timeZone });
    }
  } catch {
    return 'is not a time zone of the tz database, e.g. "Etc/UTC" or "Europe/Berlin"';
  }
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(timeZone)) {
    return 'must be a tz database name such as "Europe/Berlin", not a UTC offset';
  }
  // tz database names start every segment with a capital; Intl would take "europe/berlin" too.
  if (!timeZone.split('/').every((segment) => /^[A-Z]/.test(segment))) {
    const spelled = [...canonicalZones].find(
      (z) => z.toLowerCase() === timeZone.toLowerCase(),
    );
    return `must be spelled as in the tz database${spelled === undefined ? '' : `: "${spelled}"`}`;
  }
  return undefined;
}

const wallClocks = new Map<string, Intl.DateTimeFormat>();

/** The zone's wall-clock reading at instant `t` (ms), as ms on the DST-free calendar of `Date.UTC`. */
export function wallAt(timeZone: string, t: number): number {
  if (UTC_ZONES.has(timeZone)) {
    return t;
  }
  let format = wallClocks.get(timeZone);
  if (format === undefined) {
    const n = 'numeric';
    const fields = {
      year: n,
      month: n,
      day: n,
      hour: n,
      minute: n,
      second: n,
    } as const;
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      ...fields,
    });
    wallClocks.set(timeZone, format);
  }
  const part: Record<string, number> = {};
  for (const { type, value } of format.formatToParts(t)) {
    part[type] = Number(value);
  }
  const wall = new Date(0);
  wall.setUTCFullYear(part.year ?? 0, (part.month ?? 1) - 1, part.day ?? 1);
  wall.setUTCHours(
    part.hour ?? 0,
    part.minute ?? 0,
    part.second ?? 0,
    ((t % 1000) + 1000) % 1000,
  );
  return wall.getTime();
}

/** The zone's UTC offset at instant `t`, in ms (east positive). */
function offsetAt(timeZone: string, t: number): number {
  return wallAt(timeZone, t) - t;
}

/** The instants (ms, ascending) at which the zone shows `wall`: none in a gap, two in an overlap. */
function instantsShowing(timeZone: string, wall: number): number[] {
  const before = offsetAt(timeZone, wall - MAX_OFFSET_MS);
  const after = offsetAt(timeZone, wall - MIN_OFFSET_MS);
  return [...new Set([before, after])]
    .map((offset) => wall - offset)
    .filter((t) => offsetAt(timeZone, t) === wall - t)
    .sort((a, b) => a - b);
}

/** How much the offset drops within 26 h after `t` (ms, 0 if it does not drop). */
function dropAfter(timeZone: string, t: number): number {
  return Math.max(
    0,
    offsetAt(timeZone, t) - offsetAt(timeZone, t + OFFSET_SPAN_MS),
  );
}

/** Every slot after `from` (ms), ascending, lazily, each once every earlier wall time was seen. */
function* slotsAfter(
  job: ScheduleSpec,
  from: number,
): Generator<number, void, undefined> {
  const { timeZone } = job;
  const after = Math.max(from, RANGE_FROM_MS - 1);
  if (after >= RANGE_TO_MS) {
    return;
  }
  const cron = cachedCron(normaliseSchedule(job.schedule));
  // A drop within 26 h after `after` shows wall-clock times already passed once more.
  let cursor = new Date(
    wallAt(timeZone, after) - dropAfter(timeZone, after) - 1,
  );
  const pending: { t: number; release: number }[] = [];
  const steps = { n: 0 };
  for (;;) {
    step(steps);
    // Past the range's end (by more than any offset) no instant can fall inside it.
    const found = cron.nextRun(cursor);
    const next =
      found !== null && found.getTime() < RANGE_TO_MS + MAX_OFFSET_MS
        ? found
        : null;
    const wall = next?.getTime() ?? Number.POSITIVE_INFINITY;
    while (pending.length > 0 && (pending[0]?.release ?? 0) < wall) {
      const t = (pending.shift() as { t: number }).t;
      if (t >= RANGE_TO_MS) {
        return;
      }
      steps.n = 0; // the cap bounds the look-ups per slot returned
      yield t;
    }
    if (next === null) {
      return;
    }
    for (const t of instantsShowing(timeZone, wall)) {
      if (t <= after) {
        continue;
      }
      // A drop in the 26 h before t repeats wall-clock times up to `wall + drop` before t.
      const release = wall + dropAfter(timeZone, t - OFFSET_SPAN_MS);
      const at = pending.findIndex((p) => p.t > t);
      pending.splice(at === -1 ? pending.length : at, 0, { t, release });
    }
    cursor = next;
  }
}

function checkedTime(date: Date, what: string): number {
  const t = date.getTime();
  if (!Number.isFinite(t)) {
    throw new RangeError(`${what} is not a valid Date`);
  }
  return t;
}

function checkCount(count: number, what: string): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_SLOTS) {
    throw new RangeError(
      `${what} must be a whole number from 1 to ${MAX_SLOTS}, not ${count}`,
    );
  }
}

/**
 * The job's next `count` (1 to {@link MAX_SLOTS}) slots strictly after `after`, ascending; fewer
 * only at the end of {@link SLOT_RANGE}. `job` must be valid (`validateJobs`'s always is).
 * @throws {RangeError} for an invalid date or count.
 */
export function nextSlots(
  job: ScheduleSpec,
  after: Date,
  count: number,
): Date[] {
  checkCount(count, 'count');
  const slots: Date[] = [];
  for (const t of slotsAfter(job, checkedTime(after, 'after'))) {
    slots.push(new Date(t));
    if (slots.length === count) {
      break;
    }
  }
  return slots;
}

/**
 * The job's slots in [`from`, `to`) (consecutive ranges see each slot once), at most `max` (1 to
 * {@link MAX_SLOTS}); `truncated` says the range held more.
 * @throws {RangeError} for an invalid date or `max` (its message calls it the limit).
 */
export function slotsBetween(
  job: ScheduleSpec,
  from: Date,
  to: Date,
  max = MAX_SLOTS,
): SlotRange {
  checkCount(max, 'limit');
  const end = checkedTime(to, 'to');
  const slots: Date[] = [];
  for (const t of slotsAfter(job, checkedTime(from, 'from') - 1)) {
    if (t >= end) {
      return { slots, truncated: false };
    }
    if (slots.length === max) {
      return { slots, truncated: true };
    }
    slots.push(new Date(t));
  }
  return { slots, truncated: false };
}

/**
 * The job's latest slot strictly before `before`, or `undefined` if none lies in {@link SLOT_RANGE}.
 * @throws {RangeError} for an invalid date.
 */
export function previousSlot(
  job: ScheduleSpec,
  before: Date,
): Date | undefined {
  const { timeZone } = job;
  const b = Math.min(checkedTime(before, 'before'), RANGE_TO_MS);
  if (b <= RANGE_FROM_MS) {
    return undefined;
  }
  const cron = cachedCron(normaliseSchedule(job.schedule));
  // Instants before a drop that comes within 26 h before `b` show later wall-clock times than b.
  let reference = new Date(
    wallAt(timeZone, b) + dropAfter(timeZone, b - OFFSET_SPAN_MS) + 1,
  );
  let best: number | undefined;
  // Wall-clock times more than an offset before the range's start show no instant inside it.
  let floor = RANGE_FROM_MS + MIN_OFFSET_MS;
  const steps = { n: 0 };
  for (;;) {
    step(steps);
    const [previous] = cron.previousRuns(1, reference);
    if (previous === undefined || previous.getTime() < floor) {
      return best === undefined ? undefined : new Date(best);
    }
    const wall = previous.getTime();
    for (const t of instantsShowing(timeZone, wall)) {
      if (t < b && t >= RANGE_FROM_MS && (best === undefined || t > best)) {
        best = t;
        // Earlier wall-clock times can still show later instants only after a drop following t.
        floor = Math.max(floor, wall - dropAfter(timeZone, t));
      }
    }
    reference = previous;
  }
}

/** An instant as RFC 3339 in UTC to the second, as in `X-CloudScheduler-ScheduleTime`. */
export function toUtcRfc3339(instant: Date): string {
  return `${new Date(checkedTime(instant, 'instant')).toISOString().slice(0, 19)}Z`;
}
