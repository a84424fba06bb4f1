/**
 * Invariant 15's judges of the notes that probe `ctx.note`'s documented limits (docs/jobs.md; the
 * `JobContext.note` TSDoc): a refusal names the note it refuses, and a fill of a run's notes to a
 * bound (`NOTE_FILLS`, test/sim/note-cases.ts) is answered up to the bound exactly and refused one
 * note past it; and no note is answered once another attempt took its run over.
 */
import { notesSize } from './note-cases.ts';
import type { Execution, SimOutcome } from './simulator.ts';

/** Why a valid note may be refused: the lease was lost, or Firestore failed (`ctx.note`'s TSDoc). */
export const NOTE_REFUSALS = new Set([
  'AttemptAbortedError',
  'LedgerUnavailableError',
]);

/** At most this many notes per run, and this many bytes of them (docs/jobs.md). */
const NOTES_PER_RUN = 100;
const NOTE_BYTES_PER_RUN = 256 * 1024;

/** A short label of an execution for these judges' messages (never its random attempt id). */
function labelOf(e: Execution): string {
  return `${e.instance}: ${e.jobId}@${new Date(e.scheduleTime).toISOString()}`;
}

/**
 * Whether `message` names the note `name`: a `RunOnceError` from `ctx.note` names the note it
 * refuses (the `JobContext.note` TSDoc), so the job's author knows which to fix.
 */
function namesNote(message: string, name: string): boolean {
  return message.includes(name === '' ? '""' : name);
}

/**
 * A refused invalid second note whose refusal does not say which note it refuses, or what is wrong
 * with it (`NoteCase.says`).
 */
export function caseRefusalUnnamed(e: Execution): string[] {
  const tried = e.caseNote;
  if (tried?.refused !== 'RunOnceError') {
    return [];
  }
  const message = tried.refusedMessage ?? '';
  const { says, name, label } = tried.note;
  const quoted = JSON.stringify(message.slice(0, 120));
  if (!namesNote(message, name)) {
    return [
      `${labelOf(e)} had its note (${label}) refused with a message that does not name it: ${quoted}`,
    ];
  }
  return says === undefined || message.includes(says)
    ? []
    : [
        `${labelOf(e)} had its note (${label}) refused with a message that does not say "${says}": ${quoted}`,
      ];
}

/**
 * A fill judged: every note within the bound answered, unless the lease was lost or Firestore
 * failed; the one past it refused with a `RunOnceError` that names it.
 */
export function fillJudged(e: Execution): string[] {
  const tried = e.noteFill;
  if (tried === undefined) {
    return [];
  }
  const what = `${labelOf(e)} filling its notes (${tried.fill.label})`;
  const last = tried.planned.length - 1;
  const { refused } = tried;
  if (refused === undefined) {
    return tried.answered === tried.planned.length
      ? [`${what} had the note past the bound accepted`]
      : [];
  }
  if (NOTE_REFUSALS.has(refused.name)) {
    return [];
  }
  if (refused.name !== 'RunOnceError') {
    return [`${what} had note ${tried.answered} refused with ${refused.name}`];
  }
  if (tried.answered !== last) {
    return [
      `${what} had note ${tried.answered} of ${last} within the bound refused: ${refused.message.slice(0, 100)}`,
    ];
  }
  const name = tried.planned[last]?.name ?? '';
  return namesNote(refused.message, name)
    ? []
    : [
        `${what} had the note past the bound refused with a message that does not name ${name}: ${JSON.stringify(refused.message.slice(0, 80))}`,
      ];
}

/**
 * A completed run whose completer filled its notes to the bound holds them: exactly 100 notes, or
 * exactly 256 KiB of them by Firestore's storage sizes.
 */
export function fillStored(
  runId: string,
  record: Readonly<Record<string, unknown>>,
  completer: Execution,
): string[] {
  const tried = completer.noteFill;
  if (tried === undefined || tried.answered !== tried.planned.length - 1) {
    return [];
  }
  const notes = (record.notes ?? {}) as Record<string, unknown>;
  const held =
    tried.fill.bound === 'count' ? Object.keys(notes).length : notesSize(notes);
  const bound =
    tried.fill.bound === 'count' ? NOTES_PER_RUN : NOTE_BYTES_PER_RUN;
  return held === bound
    ? []
    : [
        `run ${runId.slice(0, 12)} completed by ${labelOf(completer)}, who filled its notes to ${bound} (${tried.fill.bound}), holds ${held}`,
      ];
}

/**
 * A progress note answered after another attempt's claim of its run had landed (after its job
 * started, before the note was called): a note is a fenced write, and the takeover changed the
 * record it is fenced on, so it was never stored; `ctx.note` must refuse it (`lease_lost`, the
 * `JobContext.note` TSDoc), or the job goes on as if its progress were kept.
 */
export function noteAnsweredAfterTakeover(
  e: Execution,
  leaseEnds: SimOutcome['leaseEnds'],
): string[] {
  const calledAt = e.progressNote?.calledAt;
  if (e.progressNote?.answered !== true || calledAt === undefined) {
    return [];
  }
  for (const [attemptId, leases] of leaseEnds) {
    const takeover = leases.find(
      (l) =>
        attemptId !== e.attemptId &&
        l.runId === e.runId &&
        l.landedAt > e.start &&
        l.landedAt < calledAt,
    );
    if (takeover !== undefined) {
      return [
        `${labelOf(e)} had its progress note answered at ${new Date(calledAt).toISOString()}, after another attempt's claim of its run landed at ${new Date(takeover.landedAt).toISOString()}: the note was never stored`,
      ];
    }
  }
  return [];
}
