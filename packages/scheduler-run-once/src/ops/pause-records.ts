/**
 * Pausing and resuming a job (`npm run pause` / `npm run resume`): the pause written on the job's
 * check document beside the missed-run cursor, fenced on its update time. The function only reads
 * pauses (`src/policy/pauses.ts`); it never loads this module.
 */
import type { RunDocuments } from '../core/run-documents.ts';
import {
  activePause,
  isPauseEnd,
  isPauseNote,
  MAX_PAUSE_MS,
  MAX_PAUSE_NOTE_LENGTH,
  MAX_PAUSES,
  type Pause,
  pausesField,
  readPauses,
} from '../policy/pauses.ts';

/** Why a note cannot be stored ({@link isPauseNote}), or undefined: too long, or a control one. */
export function pauseNoteProblem(note: string): string | undefined {
  if (isPauseNote(note)) {
    return undefined;
  }
  return note.length > MAX_PAUSE_NOTE_LENGTH
    ? `the note is ${note.length} characters; at most ${MAX_PAUSE_NOTE_LENGTH}`
    : 'the note holds a control character (a newline?)';
}

/** Why `until` cannot end a pause from `from` ({@link isPauseEnd}), or undefined: what to give. */
export function pauseUntilProblem(until: Date, from: Date): string | undefined {
  if (isPauseEnd(until, from)) {
    return undefined;
  }
  const ms = until.getTime() - from.getTime();
  if (ms > MAX_PAUSE_MS) {
    return `${until.toISOString()} is more than 30 days after now (${from.toISOString()}): pause for at most 30 days, then pause again`;
  }
  return `${until.toISOString()} is ${ms <= 0 ? 'not after' : 'less than a minute after'} now (${from.toISOString()}): give a time in the future`;
}

/** What {@link recordPause} and {@link recordResume} need of the per-job documents. */
export type PauseStore = Pick<RunDocuments, 'readData' | 'write' | 'expireAt'>;

/** A refusal of a pause or a resume, with what to do. */
export class PauseRefused extends Error {
  override name = 'PauseRefused';
}

/** An `--until` outside {@link pauseUntilProblem}'s bounds of the pause's start: a bad argument. */
export class PauseUntilRefused extends Error {
  override name = 'PauseUntilRefused';
}

/**
 * When a pause is meant to end, given its start (Firestore's time of the read that records it): a
 * fixed time, or a duration after the start. Resolved against that one read so that `--until 1m`
 * is a minute after the recorded start, not after an earlier read of the clock.
 */
export type PauseUntil = (pausedAt: Date) => Date;

/**
 * Records a pause of a job starting now (Firestore's time of the read), on its check document
 * `id`: fenced on the document's update time, so a concurrent cursor write is never lost (the
 * loser of a race reads again).
 *
 * @param until - when it is meant to end, from the pause's start: checked once, against that start,
 *   within `pauseUntilProblem`'s bounds.
 * @returns the pause as stored.
 * @throws {PauseUntilRefused} if `until` is out of bounds; {@link PauseRefused} if the job is paused
 *   already or the note is out of bounds; `LedgerUnavailableError` if Firestore fails.
 */
export async function recordPause(
  store: PauseStore,
  id: string,
  jobId: string,
  request: { readonly until?: PauseUntil | undefined; readonly note: string },
): Promise<Pause> {
  const noteProblem = pauseNoteProblem(request.note);
  if (noteProblem !== undefined) {
    throw new PauseRefused(`--note: ${noteProblem}`);
  }
  return changeFenced(store, id, jobId, (pauses, now) => {
    const active = activePause(pauses);
    if (active !== undefined) {
      throw new PauseRefused(
        `${jobId} is paused already, since ${active.pausedAt.toISOString()}${active.note === '' ? '' : ` (${active.note})`}: npm run resume -- ${jobId} first`,
      );
    }
    const until = request.until?.(now);
    if (until !== undefined) {
      const problem = pauseUntilProblem(until, now);
      if (problem !== undefined) {
        throw new PauseUntilRefused(`--until ${problem}`);
      }
    }
    const pause: Pause = {
      pausedAt: now,
      until,
      note: request.note,
      resumedAt: undefined,
      overdueReportedAt: undefined,
    };
    return { pauses: [...pauses, pause].slice(-MAX_PAUSES), result: pause };
  });
}

/**
 * Records the end of the job's active pause, now (Firestore's time of the read), fenced like
 * {@link recordPause}.
 *
 * @returns the pause as it ended.
 * @throws {PauseRefused} if the job is not paused; `LedgerUnavailableError` if Firestore fails.
 */
export async function recordResume(
  store: PauseStore,
  id: string,
  jobId: string,
): Promise<Pause> {
  return changeFenced(store, id, jobId, (pauses, now) => {
    const active = activePause(pauses);
    if (active === undefined) {
      throw new PauseRefused(`${jobId} is not paused`);
    }
    const ended: Pause = { ...active, resumedAt: now };
    return { pauses: [...pauses.slice(0, -1), ended], result: ended };
  });
}

/** Reads the pauses, changes them, and writes them fenced; a lost race reads again (5 tries). */
async function changeFenced(
  store: PauseStore,
  id: string,
  jobId: string,
  change: (
    pauses: readonly Pause[],
    now: Date,
  ) => { pauses: Pause[]; result: Pause },
): Promise<Pause> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const { data, updateTime, readTime } = await store.readData(id);
    const pauses = readPauses(data, readTime);
    if (pauses === 'unreadable') {
      throw new PauseRefused(
        `the pauses on ${jobId}'s document ${id} hold fields this version never writes: repair or delete its "pauses" field first`,
      );
    }
    const { pauses: next, result } = change(pauses, readTime);
    const fields = {
      job_name: jobId,
      pauses: pausesField(next),
      expire_at: store.expireAt(),
    };
    if ((await store.write(id, 'pause', fields, updateTime)) !== 'conflict') {
      return result;
    }
  }
  throw new PauseRefused(
    `${jobId}'s document kept changing under five tries; run it again`,
  );
}
