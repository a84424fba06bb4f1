/** Pauses (`npm run pause`): a slot in one is never missed (docs/how-it-works.md, "Pauses"). */
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import type { Logger } from '../core/logger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import { PAUSED_SLOT } from './log-messages.ts';
import { REPORT_LOG_GRACE_MS } from './run-history.ts';

/** The log messages of a slot judged inside a pause (`log-messages.ts`), and of a pause past its bound (once). */
export { PAUSED_SLOT };
export const PAUSE_OVERDUE = 'pause outlived its bound';

/** How long a pause without `until` lasts before it is reported, ms: a week. */
export const DEFAULT_PAUSE_BOUND_MS = 7 * 86_400_000;
/** The furthest `until` may lie after the pause starts, ms: 30 days. */
export const MAX_PAUSE_MS = 30 * 86_400_000;
/** The shortest pause `until` may ask for, ms: a minute (an `until` in the past is a typo). */
export const MIN_PAUSE_MS = 60_000;
/** The longest note, in characters. */
export const MAX_PAUSE_NOTE_LENGTH = 500;
/** Pauses kept on a document: the newest; older ones are dropped when a pause is added. */
export const MAX_PAUSES = 20;
/** How far a stored pause time may lie after the reader's `now` (Firestore's, estimated), ms. */
export const PAUSE_CLOCK_SLACK_MS = 60_000;

/** One pause of a job, times Firestore's, as `npm run pause` (`--until`, `--note`) and `resume` set. */
export interface Pause {
  readonly pausedAt: Date;
  readonly until: Date | undefined;
  readonly note: string;
  readonly resumedAt: Date | undefined;
  readonly overdueReportedAt: Date | undefined;
  /** Its overdue report is written but not yet acknowledged as logged (docs/how-it-works.md). */
  readonly overdueUnlogged?: true;
}

/** Whether `note` may be stored: {@link MAX_PAUSE_NOTE_LENGTH} characters at most, none control. */
export function isPauseNote(note: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refused, since the note is printed
  const hasControl = /[\u0000-\u001f\u007f]/.test(note);
  return note.length <= MAX_PAUSE_NOTE_LENGTH && !hasControl;
}

/** Whether `until` may end a pause from `from`: {@link MIN_PAUSE_MS} to 30 days after. */
export function isPauseEnd(until: Date, from: Date): boolean {
  const ms = until.getTime() - from.getTime();
  return ms >= MIN_PAUSE_MS && ms <= MAX_PAUSE_MS;
}

/** When a pause is reported as outliving its bound. */
export function pauseBound(pause: Pick<Pause, 'pausedAt' | 'until'>): Date {
  return (
    pause.until ?? new Date(pause.pausedAt.getTime() + DEFAULT_PAUSE_BOUND_MS)
  );
}

function optionalTime(value: unknown): Date | undefined | 'bad' {
  if (value === undefined || value === null) {
    return undefined;
  }
  return value instanceof Timestamp ? value.toDate() : 'bad';
}

/** One stored pause, or `undefined` for one this code never writes (e.g. past the CLI's bounds). */
function readPause(value: unknown, now: Date): Pause | undefined {
  if (typeof value !== 'object' || value === null) {
    return undefined;
  }
  const { note, ...p } = value as Record<string, unknown>;
  const times = [p.paused_at, p.until, p.resumed_at, p.overdue_reported_at].map(
    optionalTime,
  );
  if (times.includes('bad') || typeof note !== 'string' || !isPauseNote(note)) {
    return undefined;
  }
  const unlogged = p.overdue_unlogged;
  if (unlogged !== undefined && unlogged !== null && unlogged !== true) {
    return undefined;
  }
  const [pausedAt, until, resumedAt, overdue] = times as (Date | undefined)[];
  if (pausedAt === undefined) {
    return undefined;
  }
  // The CLI's bounds: an `until` it would refuse is not a pause it wrote.
  if (until !== undefined && !isPauseEnd(until, pausedAt)) {
    return undefined;
  }
  if (resumedAt !== undefined && resumedAt < pausedAt) {
    return undefined;
  }
  // Each time was Firestore's when written: one in the future was not.
  const latest = now.getTime() + PAUSE_CLOCK_SLACK_MS;
  if (
    [pausedAt, resumedAt, overdue].some((t) => (t?.getTime() ?? 0) > latest)
  ) {
    return undefined;
  }
  if (unlogged === true && overdue === undefined) {
    return undefined;
  }
  const pause = {
    pausedAt,
    until,
    note,
    resumedAt,
    overdueReportedAt: overdue,
  };
  return unlogged === true ? { ...pause, overdueUnlogged: true } : pause;
}

/** A job's pauses as read from its check document (`unreadable`: fields this version never writes). */
export type PausesRead = readonly Pause[] | 'unreadable';

/** The pauses on a job's check document, oldest first; `unreadable`: any this code never writes. */
export function readPauses(
  data: DocumentData | undefined,
  now: Date,
): Pause[] | 'unreadable' {
  const stored = data?.pauses;
  if (stored === undefined) {
    return [];
  }
  if (!Array.isArray(stored) || stored.length > MAX_PAUSES) {
    return 'unreadable';
  }
  const pauses = stored.map((p) => readPause(p, now));
  if (!pauses.every((p) => p !== undefined)) {
    return 'unreadable';
  }
  const apart = pauses.slice(1).every((p, i) => {
    const resumed = pauses[i]?.resumedAt;
    return resumed !== undefined && resumed <= p.pausedAt;
  });
  return apart ? pauses : 'unreadable';
}

/** The pauses as stored. */
export function pausesField(pauses: readonly Pause[]): DocumentData[] {
  const at = (t: Date | undefined) =>
    t === undefined ? null : Timestamp.fromDate(t);
  return pauses.map((p) => ({
    paused_at: Timestamp.fromDate(p.pausedAt),
    until: at(p.until),
    note: p.note,
    resumed_at: at(p.resumedAt),
    overdue_reported_at: at(p.overdueReportedAt),
    ...(p.overdueUnlogged === true ? { overdue_unlogged: true } : {}),
  }));
}

/** The pause `slot` falls in, if any. */
export function pauseAt(
  pauses: readonly Pause[],
  slot: Date,
): Pause | undefined {
  return pauses.find(
    (p) =>
      p.pausedAt <= slot && (p.resumedAt === undefined || slot < p.resumedAt),
  );
}

/** The pause that lasts now (not resumed), if any. */
export function activePause(pauses: readonly Pause[]): Pause | undefined {
  const last = pauses.at(-1);
  return last?.resumedAt === undefined ? last : undefined;
}

/** The active pause past its bound at `now`, not reported yet. */
export function overduePause(
  pauses: readonly Pause[],
  now: Date,
): Pause | undefined {
  const pause = activePause(pauses);
  if (pause === undefined || pause.overdueReportedAt !== undefined) {
    return undefined;
  }
  return now >= pauseBound(pause) ? pause : undefined;
}

/**
 * Reports `job`'s active pause past its bound: `overdue_reported_at`, marked not yet logged,
 * fenced on the `read` of document `id` that found `pauses`; the call whose write lands logs ERROR
 * {@link PAUSE_OVERDUE}, then drops the mark (fenced). A check that finds a report still marked
 * {@link REPORT_LOG_GRACE_MS} after it was written claims it (the same write again, fenced), logs
 * it and drops the mark: at worst twice, never not at all.
 * @returns the new update time (the read's if nothing was due), or `changed` if another came first.
 * @throws {LedgerUnavailableError} if the report's write fails.
 */
export async function reportOverduePause(
  documents: Pick<RunDocuments, 'write'>,
  id: string,
  job: { readonly id: string },
  pauses: readonly Pause[],
  read: { readonly updateTime: Timestamp | undefined },
  now: Date,
  logger: Logger,
): Promise<Timestamp | undefined | 'changed'> {
  if (read.updateTime === undefined) {
    return read.updateTime;
  }
  const fresh = overduePause(pauses, now);
  const pause = fresh ?? unloggedOverdue(pauses, now);
  if (pause === undefined) {
    return read.updateTime;
  }
  // A report its writer never marked logged is claimed by writing it again (fenced, its time
  // moved to now): of two checks that found it, one logs it.
  const report = await writeOverdueReport(
    documents,
    id,
    pauses,
    pause,
    read.updateTime,
    now,
  );
  if (report === 'changed') {
    return report;
  }
  const pausedAt = pause.pausedAt.toISOString();
  const bound = pauseBound(pause).toISOString();
  const again = fresh === undefined ? { relogged: true } : {};
  // The document names the key scope too: two scopes' pauses of one job are told apart.
  const fields = { jobName: job.id, document: id, pausedAt, bound };
  logger.error({ ...fields, note: pause.note, ...again }, PAUSE_OVERDUE);
  // Logged: the mark goes, fenced; if that fails, a later check logs it again (at worst twice).
  const { overdueUnlogged: _, ...logged } = report.pauses.at(-1) as Pause;
  const acknowledged = {
    pauses: pausesField([...report.pauses.slice(0, -1), logged]),
  };
  const what = 'overdue pause report acknowledgement';
  const written = await documents
    .write(id, what, acknowledged, report.token)
    .catch(() => 'conflict' as const);
  return written === 'conflict' ? 'changed' : written;
}

/** Writes `pause`'s overdue report, marked not yet logged, fenced on `token`. */
async function writeOverdueReport(
  documents: Pick<RunDocuments, 'write'>,
  id: string,
  pauses: readonly Pause[],
  pause: Pause,
  token: Timestamp,
  now: Date,
): Promise<
  { readonly token: Timestamp; readonly pauses: readonly Pause[] } | 'changed'
> {
  const reported = {
    ...pause,
    overdueReportedAt: now,
    overdueUnlogged: true as const,
  };
  const marked = pauses.map((p) => (p === pause ? reported : p));
  const data = { pauses: pausesField(marked) };
  const written = await documents.write(
    id,
    'overdue pause report',
    data,
    token,
  );
  return written === 'conflict'
    ? 'changed'
    : { token: written, pauses: marked };
}

/** The active pause whose overdue report was written {@link REPORT_LOG_GRACE_MS} ago, unlogged. */
function unloggedOverdue(
  pauses: readonly Pause[],
  now: Date,
): Pause | undefined {
  const pause = activePause(pauses);
  const reportedAt = pause?.overdueReportedAt?.getTime();
  if (pause?.overdueUnlogged !== true || reportedAt === undefined) {
    return undefined;
  }
  return now.getTime() - reportedAt >= REPORT_LOG_GRACE_MS ? pause : undefined;
}
