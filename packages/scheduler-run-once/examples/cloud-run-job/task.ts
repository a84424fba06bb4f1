/**
 * The downstream side of the Cloud Run job example: the guide's "enforce idempotency in the most
 * downstream service". Each task of an execution applies `runOnce` to the run id the proxy passed
 * in its environment (`SCHEDULER_RUN_ID`) before its state-changing step, so two executions of one
 * run (a zombie proxy attempt that launched after the look, a person re-running an execution with
 * the same overrides) do the work once.
 *
 * `task-main.ts` is the container's entry point that wires this to Firestore; this file holds the
 * decision, with the environment passed in, so tests drive it without a process.
 */
import type { Logger } from 'pino';
import type { Ledger } from '../../src/core/ledger.ts';
import {
  type Attempt,
  type RunOutcome,
  runOnce,
} from '../../src/core/run-once.ts';
import { JOB_NAME_ENV, RUN_ID_ENV, SCHEDULE_TIME_ENV } from './run-env.ts';

/** What the task's work knows: the attempt (run id, signal, lease) and the run it belongs to. */
export interface TaskContext extends Attempt {
  /** The run's schedule time, from `SCHEDULER_SCHEDULE_TIME`; `undefined` if absent or invalid. */
  readonly scheduleTime: Date | undefined;
  /** The Scheduler job id, from `SCHEDULER_JOB_NAME`. */
  readonly jobName: string | undefined;
  /** This task's index in its execution (`CLOUD_RUN_TASK_INDEX`), 0 for a one-task job. */
  readonly taskIndex: number;
}

/**
 * The task's state-changing step. Throwing releases the claim; the task exits 1 and Cloud Run
 * retries it.
 */
export type TaskWork = (task: TaskContext) => Promise<void> | void;

/** Options of {@link runTaskOnce}. */
export interface TaskOptions {
  /** The container's environment; `process.env` in `task-main.ts`, a plain object in tests. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The ledger of the task's runs: its own collection, not the proxy's (same run ids). */
  readonly ledger: Ledger;
  readonly work: TaskWork;
  readonly logger: Logger;
}

/** The name of every run outcome. */
type OutcomeName = RunOutcome['outcome'];

/** What one task did, and the exit code the container should end with. */
export interface TaskResult {
  /** `runOnce`'s outcome, or `no_run_id` when the environment carries no valid run id. */
  readonly outcome: OutcomeName | 'no_run_id';
  /** 0: the work is done (now or before). 1: it is not, and Cloud Run may retry the task. */
  readonly exitCode: 0 | 1;
}

/**
 * The exit code of each outcome. A task that exits non-zero is retried by Cloud Run up to the job's
 * `--max-retries` ("Container runtime contract", jobs), so every outcome whose work is not known to
 * be done exits 1: `in_progress` too, since the other execution may still fail and release its
 * claim; the retry then claims the run or finds it completed.
 */
export const EXIT_CODE_BY_OUTCOME = {
  processed: 0,
  duplicate: 0,
  in_progress: 1,
  failed: 1,
  unavailable: 1,
  unreadable_record: 1,
  guard_changed: 1, // only for a claim with a guarded write; this task passes none
} as const satisfies Record<OutcomeName, 0 | 1>;

/** A run id as the proxy computes it: SHA-256, 64 lowercase hex (`src/run-key.ts`). */
const RUN_ID = /^[0-9a-f]{64}$/;

/**
 * The idempotency key of this task: the run id, and for a job with several tasks per execution
 * (`CLOUD_RUN_TASK_COUNT` > 1) the run id and the task's index, so each task does its share once.
 *
 * @param env - the container's environment.
 * @returns the key, or `undefined` if `SCHEDULER_RUN_ID` is missing or not a run id (an execution
 *   started by hand, without the proxy's overrides).
 * @example taskKey({ SCHEDULER_RUN_ID: id, CLOUD_RUN_TASK_COUNT: '3', CLOUD_RUN_TASK_INDEX: '2' }) // `${id}-task-2`
 */
export function taskKey(
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  const runId = env[RUN_ID_ENV];
  if (runId === undefined || !RUN_ID.test(runId)) {
    return undefined;
  }
  const count = Number(env.CLOUD_RUN_TASK_COUNT ?? '1');
  return count > 1
    ? `${runId}-task-${Number(env.CLOUD_RUN_TASK_INDEX ?? '0')}`
    : runId;
}

/**
 * Runs `work` at most once per run (and task) across every execution of the Cloud Run job: claims
 * {@link taskKey} in `ledger`, runs the work, completes or releases; duplicates skip the work.
 *
 * @param options - environment, ledger, work and logger.
 * @returns the outcome and the exit code (see {@link EXIT_CODE_BY_OUTCOME}); never throws for the
 *   work's or Firestore's failures, which are outcomes.
 * @example
 * process.exitCode = (await runTaskOnce({ env: process.env, ledger, work, logger })).exitCode;
 */
export async function runTaskOnce(options: TaskOptions): Promise<TaskResult> {
  const { env, logger } = options;
  const key = taskKey(env);
  if (key === undefined) {
    logger.error(
      { [RUN_ID_ENV]: env[RUN_ID_ENV] },
      `${RUN_ID_ENV} is missing or not a run id: this execution was not started by the scheduler proxy, so the task refuses to run (set it to run by hand)`,
    );
    return { outcome: 'no_run_id', exitCode: 1 };
  }
  const scheduleTime = new Date(env[SCHEDULE_TIME_ENV] ?? Number.NaN);
  const result = await runOnce(
    options.ledger,
    key,
    (attempt) =>
      options.work({
        runId: attempt.runId,
        attemptId: attempt.attemptId,
        takeover: attempt.takeover,
        firstClaimedAt: attempt.firstClaimedAt,
        attempts: attempt.attempts,
        signal: attempt.signal,
        note: attempt.note,
        get leaseExpires() {
          return attempt.leaseExpires;
        },
        scheduleTime: Number.isNaN(scheduleTime.getTime())
          ? undefined
          : scheduleTime,
        jobName: env[JOB_NAME_ENV],
        taskIndex: Number(env.CLOUD_RUN_TASK_INDEX ?? '0'),
      }),
    { logger, details: { jobName: env[JOB_NAME_ENV] } },
  );
  const exitCode = EXIT_CODE_BY_OUTCOME[result.outcome];
  const err =
    result.outcome === 'failed' || result.outcome === 'unavailable'
      ? result.error
      : undefined;
  logger[exitCode === 0 ? 'info' : 'warn'](
    { outcome: result.outcome, key, execution: env.CLOUD_RUN_EXECUTION, err },
    `task: ${result.outcome}`,
  );
  return { outcome: result.outcome, exitCode };
}
