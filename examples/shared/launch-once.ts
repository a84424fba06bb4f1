/**
 * Look before you launch: the step the three proxy examples share (Workflows, Cloud Run jobs,
 * Cloud Build). None of those APIs takes a request id, so a proxy that launched an execution and
 * died before its run's completion write would, on the retry, launch a second one. Here every
 * attempt first asks the API for an execution of its run (one list call, matched on the run id the
 * launch carried: a label, an environment override or a substitution) and adopts it if there is
 * one; only if there is none does it launch.
 *
 * The rule is "always look", not "look only on a takeover": `ctx` does not say whether the attempt
 * took over an earlier one, and one list call per run is cheap next to a launch. What it does not
 * cover: an earlier attempt that is still alive (paused past its lease, a zombie) and launches
 * *after* this attempt looked. The ledger's fencing stops that attempt's completion, not its launch,
 * so the launched service must still de-duplicate on the run id (the guide's downstream
 * idempotency; `examples/cloud-run-job/task.ts` shows it for a Cloud Run job).
 */
import type { JobContext } from '../../src/core/job-context.ts';

/** An execution (or build) of the run: launched by this attempt, or adopted from an earlier one. */
export interface Launch {
  /** Which API: `workflows`, `cloud-run-job` or `cloud-build`. */
  readonly target: string;
  /** The execution's full resource name, e.g. `projects/p/locations/l/jobs/j/executions/j-x7k2p`. */
  readonly name: string;
  /** True when an earlier attempt of this run launched it and this attempt found it instead. */
  readonly adopted: boolean;
}

/**
 * Records a launch in the run's record before the run completes, so people (and tools) can see
 * which execution a run started. Throwing fails the attempt: the claim is released and the retry
 * finds the execution and records it again.
 */
export type RecordLaunch = (ctx: JobContext, launch: Launch) => Promise<void> | void;

/**
 * The default {@link RecordLaunch}: `ctx.note('launch', { target, name, adopted })`, one fenced
 * write of the ledger that lands only while this attempt holds the run (and extends its lease).
 */
export const noteLaunch: RecordLaunch = (ctx, launch) =>
  ctx.note('launch', { target: launch.target, name: launch.name, adopted: launch.adopted });

/** The two calls a target needs for {@link launchOnce}. */
export interface LaunchSteps {
  /** Which API, for the log line and the record. */
  readonly target: string;
  /**
   * One list call: the name of an execution that carries this run's id, or `undefined`.
   * @throws when the API fails: the attempt fails and Scheduler retries.
   */
  find(): Promise<string | undefined>;
  /**
   * Starts one execution carrying this run's id; resolves to its name once the API accepted it.
   * @throws when the API refuses or fails.
   */
  launch(): Promise<string>;
}

/**
 * Launches at most one execution per run, as far as this proxy can tell: finds one this run already
 * launched (an earlier attempt that died between its launch and its completion write) and adopts
 * it, else launches. Then logs the launch and records it in the run's record (`notes.launch`).
 *
 * Cost: one list call per run on top of the launch (none launched on an adoption).
 *
 * @param ctx - the job's context: the run id, the logger, and the signal checked before launching
 *   (an attempt whose lease was lost must not launch).
 * @param steps - the target's list and launch calls.
 * @param record - how the launch is recorded; {@link noteLaunch} (the run's record) unless given.
 * @returns the launch, `adopted` telling which way it went.
 * @throws whatever `find`, `launch` or `record` throw, and the signal's reason if it aborted before
 *   the launch: the claim is then released and Scheduler retries.
 * @example
 * const launch = await launchOnce(ctx, {
 *   target: 'cloud-run-job',
 *   find: () => findExecution(ctx.runId),
 *   launch: () => runJob(ctx.runId),
 * });
 */
export async function launchOnce(
  ctx: JobContext,
  steps: LaunchSteps,
  record: RecordLaunch = noteLaunch,
): Promise<Launch> {
  const found = await steps.find();
  let launch: Launch;
  if (found === undefined) {
    // A lease lost while we listed belongs to another attempt now: it launches, not us.
    ctx.signal.throwIfAborted();
    launch = { target: steps.target, name: await steps.launch(), adopted: false };
  } else {
    launch = { target: steps.target, name: found, adopted: true };
  }
  ctx.logger.info(
    { target: launch.target, execution: launch.name, adopted: launch.adopted },
    launch.adopted
      ? `${launch.target}: adopted the execution an earlier attempt of this run launched`
      : `${launch.target}: launched one execution for this run`,
  );
  await record(ctx, launch);
  return launch;
}

/**
 * The resource name an API answered with, or a throw: an answer without one cannot be recorded or
 * found again. Throwing after a launch is safe: the retry's look finds the execution and adopts it.
 *
 * @throws Error naming `what` when `name` is missing or empty.
 * @example nameOf(execution.name, 'execution') // 'projects/p/locations/l/workflows/w/executions/…'
 */
export function nameOf(name: string | null | undefined, what: string): string {
  if (typeof name !== 'string' || name === '')
    throw new Error(`the API's answer carries no name of the ${what}`);
  return name;
}
