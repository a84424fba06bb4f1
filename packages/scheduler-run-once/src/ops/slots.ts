/**
 * Slot arithmetic only the operations commands use: a job's last slots before an instant, its
 * longest gap, and an instant shown in a job's zone. Built on `src/policy/schedule.ts`; the function
 * never loads it.
 */
import {
  nextSlots,
  previousSlot,
  type ScheduleSpec,
  wallAt,
} from '../policy/schedule.ts';

/**
 * The `count` slots of `job` before `before` (strictly), oldest first; fewer when the schedule has
 * no more (a job whose months ran out, or the start of `SLOT_RANGE`).
 *
 * @example previousSlots({ schedule: '0 * * * *', timeZone: 'Etc/UTC' }, now, 10)
 */
export function previousSlots(
  job: ScheduleSpec,
  before: Date,
  count: number,
): Date[] {
  const slots: Date[] = [];
  let at = before;
  while (slots.length < count) {
    const slot = previousSlot(job, at);
    if (slot === undefined) {
      break;
    }
    slots.unshift(slot);
    at = slot;
  }
  return slots;
}

/**
 * The longest gap between consecutive slots among the next `count` after `after`, ms (`undefined`
 * with fewer than two): the period for alerting, which for weekdays-only schedules is the weekend.
 */
export function longestGapMs(
  job: ScheduleSpec,
  after: Date,
  count = 50,
): number | undefined {
  const slots = nextSlots(job, after, count);
  let longest: number | undefined;
  for (let i = 1; i < slots.length; i++) {
    const gap = (slots[i] as Date).getTime() - (slots[i - 1] as Date).getTime();
    longest = Math.max(longest ?? 0, gap);
  }
  return longest;
}

/**
 * An instant as RFC 3339 in the zone's local time with its offset, to the second.
 *
 * @throws {RangeError} for an invalid `Date`.
 * @example toZonedRfc3339(new Date('2026-03-29T01:00:00Z'), 'Europe/Berlin') // '2026-03-29T03:00:00+02:00'
 */
export function toZonedRfc3339(instant: Date, timeZone: string): string {
  if (!Number.isFinite(instant.getTime())) {
    throw new RangeError('instant is not a valid Date');
  }
  const t = Math.floor(instant.getTime() / 1000) * 1000;
  const wall = wallAt(timeZone, t);
  const offsetMinutes = Math.round((wall - t) / 60_000);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const hh = String(Math.floor(Math.abs(offsetMinutes) / 60)).padStart(2, '0');
  const mm = String(Math.abs(offsetMinutes) % 60).padStart(2, '0');
  return `${new Date(wall).toISOString().slice(0, 19)}${sign}${hh}:${mm}`;
}
