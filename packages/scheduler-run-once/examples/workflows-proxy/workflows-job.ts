/**
 * Example job: the guide's "idempotent proxy" in front of Cloud Workflows. Each scheduled run starts
 * one execution and passes the run id in the execution's argument (for the workflow to key its own
 * side effects on, and for this proxy to find the execution again) and in a label (for people). The Workflows API
 * takes no request id and starts a new execution on every call: the ledger in front of it makes
 * one run start one execution, and the look before the launch (`../shared/launch-once.ts`) closes
 * the window between a launch and the run's completion write.
 *
 * To use it: copy this file and `../shared/launch-once.ts` into src/ (fix the imports as README.md's "Use it" lists them), move
 * `@google-cloud/workflows` from devDependencies to dependencies, and declare the job in
 * src/jobs.ts (see README.md):
 *
 *   defineJob({
 *     id: 'nightly-workflow',
 *     schedule: '0 2 * * *',
 *     run: createWorkflowsJob({ workflow: 'projects/PROJECT/locations/REGION/workflows/WORKFLOW' }),
 *   })
 *
 * The runtime service account needs `roles/workflows.invoker` (create and list executions) and
 * `roles/datastore.user` for the ledger, which deploy.sh grants (`EXAMPLE=workflows` grants both).
 */
import { ExecutionsClient, type protos } from '@google-cloud/workflows';
import type { JobContext } from '../../src/core/job-context.ts';
import {
  findSince,
  launchOnce,
  lookSince,
  NEXT_PAGE_ON_DEMAND,
  type NewestFirst,
  nameOf,
  type RecordLaunch,
  timestampToDate,
} from '../shared/launch-once.ts';

/** Options of {@link createWorkflowsJob}. */
export interface WorkflowsJobOptions {
  /** The workflow to execute: `projects/PROJECT/locations/REGION/workflows/WORKFLOW`. */
  readonly workflow: string;
  /** The Workflows executions client; tests give one pointed at a local fake. */
  readonly client?: ExecutionsClient;
  /** Writes the execution's name into the run's record before the run completes; optional. */
  readonly recordLaunch?: RecordLaunch;
}

/** The argument every execution receives (JSON): the run it belongs to. */
export interface WorkflowArgument {
  /** The idempotency key of the scheduled run: the workflow should key its side effects on it. */
  readonly runId: string;
  readonly jobName: string;
  /** RFC 3339, UTC. */
  readonly scheduleTime: string;
}

/**
 * The execution label carrying the run id, for people reading the execution list (the console
 * filters on labels). The look does not use it: the list's `filter` names `label` among its
 * fields but the reference shows no syntax for it, so the look matches the argument instead.
 * Label keys and values are at most 63 lowercase letters, digits, `_` and `-` (Execution.labels,
 * google/cloud/workflows/executions/v1/executions.proto).
 */
export const RUN_ID_LABEL = 'scheduler_run_id';

/**
 * The label value of a run: the first 63 of the run id's 64 hex digits (a label value holds 63).
 *
 * @example runIdLabelValue(ctx.runId).length // 63
 */
export function runIdLabelValue(runId: string): string {
  return runId.slice(0, 63);
}

/** The largest page of the FULL view ("1000 for BASIC and 100 for FULL", ListExecutionsRequest). */
export const FULL_VIEW_PAGE_SIZE = 100;

/**
 * The list request of the look: the workflow's executions, newest first, with labels and
 * argument. Every field is documented in projects.locations.workflows.executions.list
 * (https://cloud.google.com/workflows/docs/reference/executions/rest/v1/projects.locations.workflows.executions/list):
 * `view: FULL` returns the argument (BASIC returns neither argument nor labels, ExecutionView);
 * `orderBy: 'startTime desc'` (startTime is an ordering field in the reference and in the
 * client's proto, AIP-132 syntax) makes the order explicit, since the reference's default is
 * "descending createTime" in one place and "by their start time (newest first)" in another;
 * `pageSize` is the FULL view's maximum. No `filter`: nothing a filter could leave out is
 * trusted to find an execution.
 *
 * @example listRequest('projects/p/locations/l/workflows/w') // { parent, view: 'FULL', orderBy: 'startTime desc', pageSize: 100 }
 */
export function listRequest(workflow: string) {
  return {
    parent: workflow,
    view: 'FULL' as const,
    orderBy: 'startTime desc',
    pageSize: FULL_VIEW_PAGE_SIZE,
  };
}

/**
 * The list request of the backlog: the workflow's executions in state `QUEUED`, with labels and
 * argument. "Request has been placed in the backlog for processing at a later time"
 * (Execution.State.QUEUED, executions.proto): with the concurrency quota reached and buffering
 * on (the default), a new execution waits there. Nothing documents whether a queued execution has
 * a `startTime` ("Marks the beginning of execution") or where it sorts under `startTime desc`, so
 * the look reads the backlog apart, with the one filter form the reference shows
 * (`state="SUCCEEDED"`, projects.locations.workflows.executions.list).
 *
 * @example queuedRequest('projects/p/locations/l/workflows/w') // { parent, view: 'FULL', filter: 'state="QUEUED"', pageSize: 100 }
 */
export function queuedRequest(workflow: string) {
  return {
    parent: workflow,
    view: 'FULL' as const,
    filter: 'state="QUEUED"',
    pageSize: FULL_VIEW_PAGE_SIZE,
  };
}

/**
 * Creates a job that starts one execution of `options.workflow` per scheduled run: it lists the
 * workflow's executions newest first ({@link listRequest}), following the pages up to the look's
 * bounds (`findSince`: a count, and a day before the run's first claim), then the backlog of
 * queued executions ({@link queuedRequest}), and adopts one whose argument carries this run id;
 * else it creates one with the argument and the label.
 *
 * An execution's `startTime` ("Marks the beginning of execution") is the time the look reads: the
 * client's proto (`@google-cloud/workflows` 5.x) has no `createTime`, and an execution starts no
 * earlier than the launch that created it. A queued one may have none; the backlog look needs none.
 *
 * @param options - the workflow, and optionally the client and the launch recorder.
 * @returns the job's `run`, for `defineJob({ id, schedule, run })`.
 * @throws (from the job) when the Workflows API refuses or fails, the look reaches its count
 *   (`LookIncompleteError`), or the recorder throws: the claim is released and Scheduler
 *   retries, and the retry adopts an execution that was started.
 * @example
 * defineJob({ id: 'nightly', schedule: '0 2 * * *', run: createWorkflowsJob({ workflow }) });
 */
export function createWorkflowsJob(
  options: WorkflowsJobOptions,
): (ctx: JobContext) => Promise<void> {
  const client = options.client ?? new ExecutionsClient();
  return async (ctx) => {
    const argument: WorkflowArgument = {
      runId: ctx.runId,
      jobName: ctx.jobName,
      scheduleTime: ctx.scheduleTime.toISOString(),
    };
    await launchOnce(
      ctx,
      {
        target: 'workflows',
        find: async () => {
          const look: NewestFirst<protos.google.cloud.workflows.executions.v1.IExecution> =
            {
              time: (e) => timestampToDate(e.startTime),
              matches: (e) => argumentRunId(e.argument) === ctx.runId,
            };
          const found =
            (await findSince(
              client.listExecutionsAsync(
                listRequest(options.workflow),
                NEXT_PAGE_ON_DEMAND,
              ),
              lookSince(ctx),
              look,
            )) ??
            (await findSince(
              client.listExecutionsAsync(
                queuedRequest(options.workflow),
                NEXT_PAGE_ON_DEMAND,
              ),
              lookSince(ctx),
              look,
            ));
          return found?.name ?? undefined;
        },
        launch: async () => {
          const [execution] = await client.createExecution({
            parent: options.workflow,
            execution: {
              argument: JSON.stringify(argument),
              labels: { [RUN_ID_LABEL]: runIdLabelValue(ctx.runId) },
            },
          });
          return nameOf(execution.name, 'execution');
        },
      },
      options.recordLaunch,
    );
  };
}

function argumentRunId(
  argument: string | null | undefined,
): string | undefined {
  try {
    const runId = (
      JSON.parse(argument ?? '') as Partial<WorkflowArgument> | null
    )?.runId;
    return typeof runId === 'string' ? runId : undefined;
  } catch {
    return undefined; // an execution started by someone else, with an argument of its own
  }
}
