/**
 * Invariant 22, a lost lease told truly: the `leaseLoss` an attempt's completion or release logs
 * (`LEASE_LOSS_MESSAGES` in src/core/run-once.ts, answered to Scheduler and documented in
 * docs/operations.md) names a cause that happened, judged against the history: `extensions_failed`
 * only after the attempt logged a failed extension, `stalled` and `extension_unanswered` only when
 * its instance was paused while the job ran (or Firestore's answers came late), `job_timeout` only for a job that ran past
 * JOB_TIMEOUT_SECONDS. `unknown` claims nothing. A wrong cause sends the operator after the wrong fault, and the invariants of a
 * double run (invariant 1) excuse a run by these causes.
 *
 * Kept in its own file (issue 40, mutation testing of `run-once.ts`'s `#causeOfLoss`).
 */
import type { Execution, LogLine, SimOutcome } from './simulator.ts';

/**
 * JOB_TIMEOUT_SECONDS in every simulated deployment: the simulator leaves it at its documented
 * default of an hour (docs/configuration.md), longer than any simulated job.
 */
const SIM_JOB_TIMEOUT_MS = 3_600_000;

/**
 * Whether Firestore could hold a renewal unanswered for a whole lease in `outcome`: answers that
 * come late, or a hanging connection. The product then tells a stall too (no extension failed, none
 * confirmed), although its instance ran: see docs/tests.md, "Mutation testing".
 */
function slowAnswers(outcome: SimOutcome): boolean {
  const history = outcome.history as SimOutcome['history'] | undefined;
  return (
    history === undefined ||
    (history.lateAnswers ?? 0) > 0 ||
    history.events.some((event) => event.type === 'hang')
  );
}

/** Why `line`'s cause could not have happened to `e`'s attempt, or `undefined` if it could. */
function falseCause(
  line: LogLine,
  e: Execution | undefined,
  outcome: SimOutcome,
): string | undefined {
  const { logs } = outcome;
  const cause = line.fields.leaseLoss;
  if (cause === 'extensions_failed') {
    const failed = logs.some(
      (l) =>
        l.fields.attemptId === line.fields.attemptId &&
        l.at <= line.at &&
        l.message.startsWith('lease extension failed'),
    );
    return failed ? undefined : 'no extension of it had failed';
  }
  if (cause === 'stalled' || cause === 'extension_unanswered') {
    return (e !== undefined && e.pausedMs > 0) || slowAnswers(outcome)
      ? undefined
      : 'its instance was never paused while the job ran, and Firestore never answered late nor hung';
  }
  if (cause === 'job_timeout') {
    const ranMs = e === undefined ? 0 : (e.end ?? line.at) - e.start;
    return ranMs >= SIM_JOB_TIMEOUT_MS
      ? undefined
      : `the job ran ${ranMs} ms, within JOB_TIMEOUT_SECONDS`;
  }
  return undefined;
}

/** Invariant 22: every logged lease loss names a cause that happened to its attempt. */
export function leaseLossCausesTrue(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const byAttempt = new Map(outcome.executions.map((e) => [e.attemptId, e]));
  for (const line of outcome.logs) {
    if (typeof line.fields.leaseLoss !== 'string') {
      continue;
    }
    const e = byAttempt.get(String(line.fields.attemptId));
    const why = falseCause(line, e, outcome);
    if (why !== undefined) {
      found.push(
        `${line.instance} logged a lease of run ${String(line.fields.runId ?? e?.runId).slice(0, 12)} lost to ${line.fields.leaseLoss} at ${new Date(line.at).toISOString()}, but ${why}`,
      );
    }
  }
  return found;
}
