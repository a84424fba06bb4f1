/**
 * Example job: the guide's "idempotent proxy" in front of a Cloud Run job. Each scheduled run
 * starts one execution of the job (Cloud Run Admin API v2 `jobs.run`), passing the run id, the
 * schedule time and the job name to the container as environment overrides; the container's entry
 * point (`task.ts`) applies `runOnce` to that run id before its state-changing step.
 *
 * `jobs.run` takes no request id and starts a new execution on every call. The ledger in front of
 * it makes one run start one execution, and the look before the launch (`../shared/launch-once.ts`)
 * adopts an execution that an earlier attempt of the run started and then died.
 *
 * To use it: copy this file and `../shared/launch-once.ts` into src/ (fix the imports as README.md's "Use it" lists them), move
 * `@google-cloud/run` from devDependencies to dependencies, and declare the job in src/jobs.ts:
 *
 *   defineJob({
 *     id: 'nightly-export',
 *     schedule: '0 3 * * *',
 *     run: createCloudRunJob({ job: 'projects/PROJECT/locations/REGION/jobs/JOB' }),
 *   })
 *
 * Roles of the function's runtime service account, on the Cloud Run job:
 * `roles/run.jobsExecutorWithOverrides` (`run.jobs.runWithOverrides`) and `roles/run.viewer`
 * (`run.executions.list`); see README.md.
 */
import { ExecutionsClient, JobsClient, type protos } from '@google-cloud/run';
import type { JobContext } from '../../src/core/job-context.ts';
import {
  findSince,
  launchOnce,
  lookSince,
  NEXT_PAGE_ON_DEMAND,
  nameOf,
  type RecordLaunch,
  timestampToDate,
} from '../shared/launch-once.ts';
import { JOB_NAME_ENV, RUN_ID_ENV, SCHEDULE_TIME_ENV } from './run-env.ts';

export { JOB_NAME_ENV, RUN_ID_ENV, SCHEDULE_TIME_ENV };

/**
 * The page size the look asks for. ListExecutionsRequest.page_size is only the "Maximum number of
 * Executions to return in this call": the service may answer fewer, and the look follows
 * `next_page_token` ("there are more items than page_size") to the end of its window either way.
 */
export const LIST_PAGE_SIZE = 100;

/** Options of {@link createCloudRunJob}. */
export interface CloudRunJobOptions {
  /** The Cloud Run job: `projects/PROJECT/locations/REGION/jobs/JOB`. */
  readonly job: string;
  /**
   * The container to give the overrides to, by name; only needed for a job with several
   * containers (`ContainerOverride.name`).
   */
  readonly container?: string;
  /** The jobs client (`jobs.run`); tests give one pointed at a local fake. */
  readonly jobsClient?: JobsClient;
  /** The executions client (`jobs.executions.list`); tests give one pointed at a local fake. */
  readonly executionsClient?: ExecutionsClient;
  /** Writes the execution's name into the run's record before the run completes; optional. */
  readonly recordLaunch?: RecordLaunch;
}

/**
 * The environment overrides of one run's execution. `ContainerOverride.env` "will be merged with
 * existing env" (RunJobRequest.Overrides, google/cloud/run/v2/job.proto), so the job's own
 * variables stay.
 *
 * @example runEnvironment(ctx) // [{ name: 'SCHEDULER_RUN_ID', value: '0f3a…' }, …]
 */
export function runEnvironment(
  ctx: Pick<JobContext, 'runId' | 'scheduleTime' | 'jobName'>,
): protos.google.cloud.run.v2.IEnvVar[] {
  return [
    { name: RUN_ID_ENV, value: ctx.runId },
    { name: SCHEDULE_TIME_ENV, value: ctx.scheduleTime.toISOString() },
    { name: JOB_NAME_ENV, value: ctx.jobName },
  ];
}

/**
 * The run id an execution was started with: the value of {@link RUN_ID_ENV} in the containers of
 * the execution's `template` ("the template used to create tasks for this execution",
 * Execution.template, google/cloud/run/v2/execution.proto), which carries the overrides.
 *
 * @returns the run id, or `undefined` for an execution started without one (by hand, or by
 *   another caller).
 * @example runIdOf(execution) // '0f3a…'
 */
export function runIdOf(
  execution: protos.google.cloud.run.v2.IExecution,
): string | undefined {
  for (const container of execution.template?.containers ?? []) {
    const found = container.env?.find((v) => v.name === RUN_ID_ENV);
    if (typeof found?.value === 'string') {
      return found.value;
    }
  }
  return undefined;
}

/**
 * Whether `execution` may be a launch whose overrides its template does not show yet: no run id,
 * and neither started nor completed (`start_time`, `completion_time` unset).
 *
 * @example mayBeUnseenRun({ template: { containers: [{ env: [] }] } }) // true
 */
export function mayBeUnseenRun(
  execution: protos.google.cloud.run.v2.IExecution,
): boolean {
  return (
    runIdOf(execution) === undefined &&
    timestampToDate(execution.startTime) === undefined &&
    timestampToDate(execution.completionTime) === undefined
  );
}

/**
 * Creates a job that starts one execution of `options.job` per scheduled run.
 *
 * The look: `jobs.executions.list` takes only `parent`, `pageSize`, `pageToken` and `showDeleted`,
 * no filter (ListExecutionsRequest, google/cloud/run/v2/execution.proto), and an execution has no
 * labels of its own to set per run (its `labels` are output only, copied from the job). The
 * reference documents the order: "Lists Executions from a Job. Results are sorted by creation
 * time, descending." (https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions/list).
 * So the look reads the job's executions page after page, newest first, up to the look's bounds
 * (`findSince`: a count, and a day before the run's first claim by `Execution.create_time`, which
 * "is not guaranteed to be set in happens-before order across separate operations": an order off
 * by minutes changes nothing), and matches {@link RUN_ID_ENV} in each execution's template.
 * Nothing promises that an execution's `template` shows the overrides when it first appears in the
 * list; it is "the template used to create tasks for this execution", so once the execution has
 * started (`start_time`, "when the execution started to run") or completed, its tasks were made
 * from it. An execution without the run id that has neither ({@link mayBeUnseenRun}) may be this
 * run's, its overrides not shown yet: the look then refuses the launch, and the retry looks again.
 *
 * The launch: `jobs.run` with the overrides. It answers a long-running operation whose metadata is
 * the new Execution; the operation completes only when the execution does, so the job records the
 * execution's name from the metadata and does not wait.
 *
 * @param options - the job, and optionally the container, clients and recorder.
 * @returns the job's `run`, for `defineJob({ id, schedule, run })`.
 * @throws (from the job) when the Cloud Run Admin API refuses or fails, the look is incomplete
 *   (`LookIncompleteError`: its count reached, or an execution not showing its run id yet), or
 *   the recorder throws: the claim is released and Scheduler retries, and the retry adopts an
 *   execution that started.
 * @example
 * defineJob({ id: 'nightly-export', schedule: '0 3 * * *', run: createCloudRunJob({ job }) });
 */
export function createCloudRunJob(
  options: CloudRunJobOptions,
): (ctx: JobContext) => Promise<void> {
  const jobs = options.jobsClient ?? new JobsClient();
  const executions = options.executionsClient ?? new ExecutionsClient();
  return async (ctx) => {
    await launchOnce(
      ctx,
      {
        target: 'cloud-run-job',
        find: async () => {
          const found = await findSince(
            executions.listExecutionsAsync(
              { parent: options.job, pageSize: LIST_PAGE_SIZE },
              NEXT_PAGE_ON_DEMAND,
            ),
            lookSince(ctx),
            {
              time: (e) => timestampToDate(e.createTime),
              matches: (e) => runIdOf(e) === ctx.runId,
              pending: mayBeUnseenRun,
            },
          );
          return found?.name ?? undefined;
        },
        launch: async () => {
          const [operation] = await jobs.runJob({
            name: options.job,
            overrides: {
              containerOverrides: [
                {
                  ...(options.container === undefined
                    ? {}
                    : { name: options.container }),
                  env: runEnvironment(ctx),
                },
              ],
            },
          });
          // The operation's metadata is the new Execution (google-gax types it as gRPC metadata).
          const execution =
            operation.metadata as protos.google.cloud.run.v2.IExecution | null;
          return nameOf(execution?.name, 'execution');
        },
      },
      options.recordLaunch,
    );
  };
}
