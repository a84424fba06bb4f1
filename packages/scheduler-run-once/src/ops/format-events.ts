/**
 * What the local Scheduler prints: one line per delivery, for people, as pure functions of its
 * events (`ops/local-scheduler.ts`).
 */
import { nextSlots, toUtcRfc3339 } from '../policy/schedule.ts';
import type {
  AttemptEvent,
  SchedulerEvent,
  SchedulerJob,
} from './local-scheduler.ts';

/** `HH:MM:SS.mmmZ` of an instant (ms since the epoch). */
function clockTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(11, 23)}Z`;
}

/** A duration for people: `0.04 s`, `15.00 s`, `90 s`. */
export function seconds(ms: number): string {
  return ms >= 60_000
    ? `${Math.round(ms / 1000)} s`
    : `${(ms / 1000).toFixed(2)} s`;
}

function answerOf(event: AttemptEvent): string {
  if (event.outcome === 'deadline_exceeded') {
    return 'deadline exceeded';
  }
  if (event.status === undefined) {
    return 'no answer';
  }
  return `${event.status} ${event.outcome}`;
}

function whatNext(event: AttemptEvent): string {
  const notes: string[] = [];
  if (event.error !== undefined) {
    notes.push(event.error);
  }
  if (event.delivery === 'duplicate') {
    notes.push('duplicate delivery');
  }
  if (event.answerDropped) {
    notes.push('answer dropped');
  }
  const { next } = event;
  if (next.kind === 'retry') {
    notes.push(`retry in ${seconds(next.inMs)}`);
  }
  if (next.kind === 'gave_up') {
    notes.push(
      `gave up after ${next.retries} ${next.retries === 1 ? 'retry' : 'retries'}`,
    );
  }
  return notes.join('; ');
}

/**
 * One line for an event: when the delivery was sent (UTC), the job, its slot, the attempt, the
 * answer, how long it took, and what follows. `idWidth` pads the job id so columns line up.
 *
 * @example
 * // 12:05:00.003Z  scheduled-job  slot 2026-10-24T12:05:00Z  attempt 1  200 processed           1.02 s
 * // 12:05:00.003Z  slow-job       slot 2026-10-24T12:05:00Z  attempt 1  deadline exceeded      15.00 s  retry in 5.00 s
 * // 12:05:20.015Z  slow-job       slot 2026-10-24T12:05:00Z  attempt 2  409 in_progress         0.05 s  retry in 10.00 s
 */
export function formatEvent(event: SchedulerEvent, idWidth = 0): string {
  const job = event.jobId.padEnd(idWidth);
  const slot = `slot ${toUtcRfc3339(event.scheduleTime)}`;
  if (event.type === 'recovered') {
    const older = event.missed - 1;
    return `${' '.repeat(14)}  ${job}  ${slot}  recovered: came while no Scheduler ran (dev stopped or crashed); delivered now, late${older === 0 ? '' : `; ${older} older missed slot(s) not delivered (npm run runs -- --job ${event.jobId})`}`;
  }
  if (event.type === 'delayed') {
    return `${' '.repeat(14)}  ${job}  ${slot}  delayed: fires when the execution of slot ${toUtcRfc3339(
      event.outstanding,
    )} ends (Scheduler runs one execution of a job at a time)`;
  }
  if (event.type === 'paused') {
    return `${' '.repeat(14)}  ${job}  ${slot}  paused${event.note === '' ? '' : ` (${event.note})`}: not fired (npm run resume -- ${event.jobId})`;
  }
  if (event.type === 'dropped') {
    return `${' '.repeat(14)}  ${job}  ${slot}  dropped: ${event.jobId} is no longer declared, so its retries stop (its history: npm run runs -- --job ${event.jobId})`;
  }
  if (event.type === 'skipped') {
    return `${' '.repeat(14)}  ${job}  ${slot}  skipped: the execution of slot ${toUtcRfc3339(
      event.outstanding,
    )} is still outstanding and a slot is already delayed (Scheduler allows one at a time)`;
  }
  const forced = event.scheduleTimeSent
    ? ' (forced run)'
    : ' (forced run, no ScheduleTime sent)';
  const attempt = `attempt ${event.attempt}${event.forced ? forced : ''}`;
  const columns = [
    clockTime(event.startedAt),
    job,
    slot,
    attempt,
    answerOf(event).padEnd(20),
    seconds(event.durationMs).padStart(8),
  ];
  const notes = whatNext(event);
  return `${columns.join('  ')}${notes === '' ? '' : `  ${notes}`}`;
}

/**
 * The jobs a local Scheduler fires, each with its schedule, zone and next slot after `now`: what
 * `npm run dev` prints at start and after every reload.
 *
 * @example firingList(jobs, new Date()) // 'scheduled-job (*\/5 * * * *, Etc/UTC; next 2026-12-01T20:55:00Z)'
 */
export function firingList(jobs: readonly SchedulerJob[], now: Date): string {
  return jobs
    .map((j) => {
      const [next] = nextSlots(j, now, 1);
      return `${j.id} (${j.schedule}, ${j.timeZone}; next ${next ? toUtcRfc3339(next) : 'never'})`;
    })
    .join(', ');
}
