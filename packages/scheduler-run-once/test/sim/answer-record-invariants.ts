/**
 * Invariant 44: an answer says what became of its run, as its record does (docs/operations.md,
 * "Overlap policy": a `skip` slot that meets a running one "is not run: answered 200 `skipped`,
 * recorded as `skipped`"; a delivery of a run that is done is a duplicate, and Scheduler stops
 * retrying it):
 *
 * - a run answered `skipped` never ran: no execution of it started (since its record was last
 *   deleted, by the documented repair or the TTL);
 * - the request that recorded its run `skipped` is answered `skipped` (a write making the record
 *   `skipped` landed on its instance while it was open), unless it got no answer, failed (5xx), or
 *   a fault met its write (its answer lost, the client's retry found the record there);
 * - a Scheduler request answered by a revision that does not declare its job `wait` is never
 *   answered 409 `waiting` when its run's record was final before it was sent (`completed`,
 *   `skipped`, or reported missed or failed after retries): Scheduler would retry a run that is
 *   done, and count the slot failed once its retries ran out;
 * - an answer says its job ran (`processed`, `failed`: docs/operations.md, "Logs in production")
 *   only when the request's own job ran: a request that met a live lease, a done run or a failing
 *   Firestore says that instead.
 *
 * Judged against what the jobs executed and the writes that landed, memory store only (the last
 * also on the emulator).
 */
import type { Delivered, RecordWrite, SimOutcome } from './simulator.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** The statuses after which a run never runs again (`isCompleted`, docs/how-it-works.md). */
const FINAL = new Set(['completed', 'skipped']);

/** Whether `w` left its run final: completed, skipped, or reported (missed, failed after retries). */
function leftFinal(w: RecordWrite): boolean {
  return FINAL.has(String(w.status)) || w.reported === true;
}

/** How a request is named in a violation: its source, job, slot and instance. */
function requestOf(d: Delivered): string {
  return `a ${d.source} request of ${d.jobId}@${d.scheduleTime || '(no schedule time)'} on ${d.instance}`;
}

/** The outcomes that say the request's own job ran (docs/operations.md, "Logs in production"). */
const RAN_OUTCOMES = new Set(['processed', 'failed']);

/** Invariant 44 over every answered request and every record write of the history. */
export function answersSayWhatBecameOfTheRun(outcome: SimOutcome): string[] {
  const ran = ranOnlyWhenItsJobRan(outcome);
  if (outcome.emulator || outcome.recordWrites === undefined) {
    return ran;
  }
  return [
    ...ran,
    ...skippedNeverRan(outcome, outcome.recordWrites),
    ...skipperAnsweredSkipped(outcome, outcome.recordWrites),
    ...doneRunsNeverWait(outcome, outcome.recordWrites),
  ];
}

/** An answer says its job ran (`processed`, `failed`) only when the request's own job started. */
function ranOnlyWhenItsJobRan(outcome: SimOutcome): string[] {
  return outcome.deliveries.flatMap((d) => {
    if (!RAN_OUTCOMES.has(d.outcome ?? '') || d.ranAs !== undefined) {
      return [];
    }
    return [
      `${requestOf(d)} was answered ${d.status} ${d.outcome} at ${iso(d.endedAt ?? 0)} saying ${JSON.stringify(d.message)}, but its own job never ran`,
    ];
  });
}

/**
 * A run answered `skipped` never ran: no execution of it started, before or after, since its
 * record was last deleted before the answer (the documented repair of a record, or the TTL: the
 * next delivery decides afresh).
 */
function skippedNeverRan(
  outcome: SimOutcome,
  writes: readonly RecordWrite[],
): string[] {
  return outcome.deliveries.flatMap((d) => {
    const { runId, endedAt } = d;
    if (
      d.outcome !== 'skipped' ||
      runId === undefined ||
      endedAt === undefined
    ) {
      return [];
    }
    const deletedAt =
      writes.findLast(
        (w) => w.runId === runId && w.status === undefined && w.at < endedAt,
      )?.at ?? Number.NEGATIVE_INFINITY;
    const ran = outcome.executions.find(
      (e) => e.runId === runId && e.start > deletedAt,
    );
    return ran === undefined
      ? []
      : [
          `${requestOf(d)} was answered skipped at ${iso(endedAt)}, but its run ${runId.slice(0, 12)} ran on ${ran.instance} from ${iso(ran.start)}`,
        ];
  });
}

/**
 * The request that recorded its run `skipped` is answered `skipped`: among the requests of that
 * run open on the writer's instance as the write landed, one was answered `skipped` or got no
 * answer (its instance died, its caller gave up).
 */
function skipperAnsweredSkipped(
  outcome: SimOutcome,
  writes: readonly RecordWrite[],
): string[] {
  const found: string[] = [];
  const statusBefore = new Map<string, unknown>();
  for (const w of writes) {
    const before = statusBefore.get(w.runId);
    statusBefore.set(w.runId, w.status);
    if (w.status !== 'skipped' || before === 'skipped') {
      continue;
    }
    const open = outcome.deliveries.filter(
      (d) =>
        d.instance === w.machine &&
        d.sentAt <= w.at &&
        (d.endedAt === undefined || d.endedAt >= w.at),
    );
    const ofRun = open.filter((d) => d.runId === w.runId);
    const told = open.some(
      (d) =>
        (d.status === undefined &&
          d.jobId === ofRun[0]?.jobId &&
          d.scheduleTime === ofRun[0]?.scheduleTime) ||
        (d.runId === w.runId && d.outcome === 'skipped'),
    );
    const first = ofRun[0];
    if (told || first === undefined || troubled(outcome, w, first)) {
      continue;
    }
    found.push(
      `the run ${w.runId.slice(0, 12)} was recorded skipped at ${iso(w.at)} on ${w.machine}, but no request of it there was answered skipped: ${requestOf(first)} was answered ${String(first.status)} ${String(first.outcome)}`,
    );
  }
  return found;
}

/**
 * Whether `d` could not know the write `w` was its own: it was answered 5xx (it failed, and its
 * caller retries), or a fault met an operation its instance sent on the record while it was open
 * (a write that landed with its answer lost, and the client's retry found the record there).
 */
function troubled(outcome: SimOutcome, w: RecordWrite, d: Delivered): boolean {
  if ((d.status ?? 500) >= 500) {
    return true;
  }
  const until = d.endedAt ?? Infinity;
  return (outcome.troubledOps ?? []).some(
    (op) =>
      op.machine === w.machine &&
      op.at >= d.sentAt &&
      op.at <= until &&
      op.paths.some((path) => path.endsWith(`/${w.runId}`)),
  );
}

/**
 * No Scheduler request is answered `waiting` when its run's record was final before it was sent
 * (completed, skipped, or reported), unless the revision that answered declares its job `wait`
 * (whose blocked runs wait whatever their record: docs/operations.md).
 */
function doneRunsNeverWait(
  outcome: SimOutcome,
  writes: readonly RecordWrite[],
): string[] {
  const found: string[] = [];
  for (const d of outcome.deliveries) {
    if (
      d.outcome !== 'waiting' ||
      d.source !== 'scheduler' ||
      d.runId === undefined ||
      d.endedAt === undefined ||
      answeredUnderWait(outcome, d)
    ) {
      continue;
    }
    const { runId, sentAt } = d;
    const last = writes.findLast((w) => w.runId === runId && w.at < sentAt);
    if (last === undefined || !leftFinal(last)) {
      continue;
    }
    const what = last.reported === true ? 'reported' : String(last.status);
    found.push(
      `${requestOf(d)} was answered ${String(d.status)} waiting at ${iso(d.endedAt)}, but its run ${runId.slice(0, 12)} was ${what} since ${iso(last.at)}, before the request was sent: Scheduler retries a run that is done`,
    );
  }
  return found;
}

/**
 * Whether the revision that answered `d` (its instance's `-rN`) declares its job `wait`; if the
 * instance names none, whether any revision of its deployment does.
 */
function answeredUnderWait(outcome: SimOutcome, d: Delivered): boolean {
  return answeringRevisions(outcome, d).some((r) =>
    (r?.jobs ?? []).some((job) => job.id === d.jobId && job.overlap === 'wait'),
  );
}

/**
 * The revision that answered `d` (its instance's `-rN`), or, if the instance names none, every
 * revision of its deployment.
 */
export function answeringRevisions(outcome: SimOutcome, d: Delivered) {
  const revisions = outcome.deployments[d.deployment]?.revisions ?? [];
  const named = /-r(\d+)$/.exec(d.instance);
  return named === null ? revisions : [revisions[Number(named[1])]];
}
