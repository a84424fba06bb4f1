/**
 * Example job: the guide's "idempotent proxy". Each scheduled run starts one Cloud Workflows
 * execution and passes the run id in the execution's argument, so the workflow (and whatever it
 * calls) can use it as its own idempotency key. The Workflows API starts a new execution on every
 * call: the ledger in front of it is what makes one run start one execution.
 *
 * To use it: copy this file into src/, move `@google-cloud/workflows` from devDependencies to
 * dependencies, and in src/job.ts write
 *
 *   export const runJobLogic = createWorkflowsJob({
 *     workflow: 'projects/PROJECT/locations/REGION/workflows/WORKFLOW',
 *   });
 *
 * The runtime service account needs `roles/workflows.invoker` (and `roles/datastore.user` for the
 * ledger, which deploy.sh grants).
 */
import { ExecutionsClient } from '@google-cloud/workflows';
import type { JobContext } from '../../src/job.ts';

/** Options of {@link createWorkflowsJob}. */
export interface WorkflowsJobOptions {
  /** The workflow to execute: `projects/PROJECT/locations/REGION/workflows/WORKFLOW`. */
  readonly workflow: string;
  /** The Workflows executions client; tests give one pointed at a local fake. */
  readonly client?: ExecutionsClient;
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
 * Creates a job that starts one execution of `options.workflow` per scheduled run.
 *
 * @throws (from the job) when the Workflows API refuses or fails: the claim is released and
 *   Scheduler retries. If the API started the execution but its answer was lost, the retry starts a
 *   second one: the workflow must de-duplicate on `runId` (the guide's downstream idempotency).
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
    const [execution] = await client.createExecution({
      parent: options.workflow,
      execution: { argument: JSON.stringify(argument) },
    });
    ctx.logger.info({ execution: execution.name }, 'workflow execution started');
  };
}
