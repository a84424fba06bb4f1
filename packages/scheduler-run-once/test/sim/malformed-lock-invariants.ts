/**
 * Invariant 39: an overlap lock whose holder id is not a run id (another version's, or a hand's:
 * a number, no field, a run id with a character before or after it, in capitals) is answered as
 * docs/how-it-works.md says ("The overlap lock"): "like an unreadable holder record: 500
 * `unreadable_record` naming the lock document and the repair (delete it)". Which run holds it is
 * unknown, so until the lock is deleted or replaced, a run of its `skip` or `wait` job in its key
 * scope (but a manual run or re-run sent with `--allow-overlap`, which reads no lock):
 *
 * - **never starts** (it could run beside a run in progress, as an unreadable holder could);
 * - **is never answered** `skipped` or `waiting` (a skip behind no known run loses its slot
 *   silently), nor as a run that ran (`processed`, `failed`);
 * - **is answered `unreadable_record`** on an ERROR line naming the lock (`blockedBy`) and its
 *   field (`field: holder_run_id`), its `problem` quoting the holder id as stored (or `missing`),
 *   and its answer names the lock document and the repair (its id, "lock document", "delete"), so
 *   the operator learns which document to delete and what is wrong in it.
 *
 * Judged against what the jobs executed and the answers each request got, for the requests sent
 * after the lock landed and answered before it was deleted or replaced (`malformedLocks`).
 */

import type {
  Delivered,
  Execution,
  LogLine,
  MalformedLock,
  SimOutcome,
} from './simulator.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** The lock's field naming its holder (`HOLDER` in src/policy/overlap.ts, docs/how-it-works.md). */
const HOLDER_FIELD = 'holder_run_id';

/**
 * Whether `message` names the lock document and the repair, as docs/how-it-works.md promises
 * ("naming the lock document and the repair (delete it)"): the document's id, the words "lock
 * document", and "delete".
 */
function namesTheRepair(
  message: string | undefined,
  lock: MalformedLock,
): boolean {
  if (message === undefined) {
    return false;
  }
  return (
    message.includes(lock.lockId) &&
    message.includes('lock document') &&
    /\bdelete\b/i.test(message)
  );
}

/** Answers that say a run ran, or was blocked by a known holder: never behind a lock naming none. */
const ANSWERS_OF_A_KNOWN_HOLDER = new Set([
  'processed',
  'failed',
  'skipped',
  'waiting',
]);

/** Invariant 39 over every malformed lock of the history. */
export function malformedLocksAnswered(outcome: SimOutcome): string[] {
  return (outcome.malformedLocks ?? []).flatMap((lock) => [
    ...runsBesideMalformedLock(outcome, lock),
    ...answersBesideMalformedLock(outcome, lock),
  ]);
}

/** When `lock` stopped naming its holder id: deleted by a repair, or replaced, ms. */
function standsUntil(lock: MalformedLock): number {
  return Math.min(
    lock.deletedAt ?? Number.POSITIVE_INFINITY,
    lock.replacedAt ?? Number.POSITIVE_INFINITY,
  );
}

/** `jobId`'s overlap policy in `deployment`'s `revision`, if it declares the job. */
function policyOf(
  outcome: SimOutcome,
  deployment: number,
  revision: number,
  jobId: string,
): string | undefined {
  return outcome.deployments[deployment]?.revisions[revision]?.jobs.find(
    (j) => j.id === jobId,
  )?.overlap;
}

/** Whether `policy` takes the overlap lock. */
function isGuarded(policy: string | undefined): boolean {
  return policy === 'skip' || policy === 'wait';
}

/** Executions of the lock's guarded job started while it stood. */
function runsBesideMalformedLock(
  outcome: SimOutcome,
  lock: MalformedLock,
): string[] {
  const until = standsUntil(lock);
  const beside = outcome.executions.filter(
    (e: Execution) =>
      e.deployment === lock.deployment &&
      e.jobId === lock.jobId &&
      isGuarded(policyOf(outcome, e.deployment, e.revision, e.jobId)) &&
      e.allowOverlap !== true &&
      e.start > lock.lockedAt &&
      e.start < until,
  );
  return beside.map(
    (e) =>
      `${e.jobId}@${iso(e.scheduleTime)} (${e.source}) started at ${iso(e.start)} on ${e.instance} while ${lock.lockId} named no run (holder id ${lock.form}, written ${iso(lock.lockedAt)}): which run holds the lock is unknown`,
  );
}

/** Whether every revision of `deployment` that declares `jobId` declares it with a lock. */
function guardedEverywhere(
  outcome: SimOutcome,
  deployment: number,
  jobId: string,
): boolean {
  const revisions = outcome.deployments[deployment]?.revisions ?? [];
  return revisions.every((r) => {
    const job = r.jobs.find((j) => j.id === jobId);
    return job === undefined || isGuarded(job.overlap);
  });
}

/**
 * The requests of the lock's job sent after it landed and answered while it stood: none answered
 * as a run that ran or was blocked by a known holder, and each `unreadable_record` on an ERROR line
 * naming the lock and its field. Judged only where every revision guards the job (a request does
 * not say which revision answered it).
 */
function answersBesideMalformedLock(
  outcome: SimOutcome,
  lock: MalformedLock,
): string[] {
  if (!guardedEverywhere(outcome, lock.deployment, lock.jobId)) {
    return [];
  }
  const until = standsUntil(lock);
  const found: string[] = [];
  for (const d of outcome.deliveries) {
    const within =
      d.deployment === lock.deployment &&
      d.jobId === lock.jobId &&
      d.allowOverlap !== true &&
      d.sentAt > lock.lockedAt &&
      d.endedAt !== undefined &&
      d.endedAt < until;
    if (!within) {
      continue;
    }
    const what = `${d.jobId}@${d.scheduleTime || '(no schedule time)'} (${d.source}) sent ${iso(d.sentAt)}, answered ${String(d.outcome)} at ${iso(d.endedAt ?? 0)} while ${lock.lockId} named no run (holder id ${lock.form}, written ${iso(lock.lockedAt)})`;
    if (ANSWERS_OF_A_KNOWN_HOLDER.has(String(d.outcome))) {
      found.push(`${what}: it must be answered unreadable_record`);
    } else if (d.outcome === 'unreadable_record') {
      const line = answerLine(outcome, d);
      if (line === undefined || !namesTheLock(line, lock)) {
        found.push(
          `${what}, but no ERROR line of its answer names the lock (blockedBy ${lock.lockId}, field ${HOLDER_FIELD}): the operator cannot tell which document is wrong`,
        );
      }
      const shown = problemShows(line, lock);
      if (shown !== undefined) {
        found.push(
          `${what}, but its ERROR's problem does not quote the holder id as stored (${shown}): ${JSON.stringify(line?.fields.problem)}`,
        );
      }
      if (!namesTheRepair(d.message, lock)) {
        found.push(
          `${what}, but its answer does not name the lock document ${lock.lockId} and the repair (delete it): ${JSON.stringify(d.message)}`,
        );
      }
    }
  }
  return found;
}

/**
 * What the ERROR's `problem` should quote and does not, or `undefined`: the holder id as the lock
 * stores it (JSON: `42`, `"vabc…"`), or `missing` for no field, so the operator sees the wrong
 * value itself. Unjudged without the stored value (outcomes made by hand).
 */
function problemShows(
  line: LogLine | undefined,
  lock: MalformedLock,
): string | undefined {
  if (line === undefined || !('holderValue' in lock)) {
    return undefined;
  }
  const expected =
    lock.holderValue === undefined
      ? 'missing'
      : JSON.stringify(lock.holderValue);
  const problem = line.fields.problem;
  return typeof problem === 'string' && problem.includes(expected)
    ? undefined
    : expected;
}

/** The log line of `d`'s answer: its job's outcome line on its instance, when it was answered. */
export function answerLine(
  outcome: SimOutcome,
  d: Delivered,
): LogLine | undefined {
  return outcome.logs.find(
    (l) =>
      l.at === d.endedAt &&
      l.instance === d.instance &&
      l.fields.jobName === d.jobId &&
      l.fields.outcome === d.outcome &&
      (d.runId === undefined ||
        l.fields.runId === undefined ||
        l.fields.runId === d.runId),
  );
}

/** Whether `line` is an ERROR naming `lock` and its holder field. */
function namesTheLock(line: LogLine, lock: MalformedLock): boolean {
  const isError = /^(error|50)$/i.test(line.level);
  return (
    isError &&
    line.fields.blockedBy === lock.lockId &&
    line.fields.field === HOLDER_FIELD
  );
}
