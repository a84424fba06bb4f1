/**
 * RFC 3339 date-times, as `X-CloudScheduler-ScheduleTime` carries them ("RFC3339 UTC 'Zulu'
 * format", the Scheduler guide): one canonical spelling per instant, since the run key hashes it.
 */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** The longest date-time taken, in characters: the longest valid form is 35. */
export const MAX_RFC3339_LENGTH = 40;

/**
 * An RFC 3339 date-time with an offset as the same instant in canonical UTC (`…Z`, the fraction
 * without trailing zeros), or `{ problem }`: not RFC 3339, too long, not a real instant (a leap
 * second included), no offset, or outside years 0001-9999 in UTC.
 * @example canonicalRfc3339('2026-10-16T05:00:00.500-07:00') // '2026-10-16T12:00:00.5Z'
 */
export function canonicalRfc3339(
  value: string,
): string | { readonly problem: string } {
  if (value.length > MAX_RFC3339_LENGTH) {
    return { problem: `is longer than ${MAX_RFC3339_LENGTH} characters` };
  }
  const m = RFC3339.exec(value);
  if (m === null) {
    return { problem: 'is not an RFC 3339 date-time' };
  }
  const [year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0] = m
    .slice(1, 7)
    .map(Number);
  const fraction = (m[7] ?? '').replace(/0+$/, '');
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const offsetHours = Number(m[10] ?? 0);
  const offsetMinutes = Number(m[11] ?? 0);
  const realDate =
    year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth;
  const realTime = hour <= 23 && minute <= 59 && second <= 59;
  if (!realDate || !realTime || offsetHours > 23 || offsetMinutes > 59) {
    return {
      problem: 'is not a real instant (check the date, time and offset)',
    };
  }
  const sign = m[9] === '-' ? -1 : 1;
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear puts them back.
  const local = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  local.setUTCFullYear(year);
  const utc = new Date(
    local.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000,
  );
  if (utc.getUTCFullYear() < 1 || utc.getUTCFullYear() > 9999) {
    return { problem: 'falls outside years 0001-9999 in UTC' };
  }
  return `${utc.toISOString().slice(0, 19)}${fraction === '' ? '' : `.${fraction}`}Z`;
}

/**
 * An instant as {@link canonicalRfc3339} spells it: a computed slot and its delivery share a run id.
 * @throws {RangeError} for an invalid `Date`.
 */
export function toCanonicalRfc3339(instant: Date): string {
  const canonical = canonicalRfc3339(instant.toISOString());
  if (typeof canonical !== 'string') {
    throw new RangeError(`not a valid instant: ${instant}`);
  }
  return canonical;
}
