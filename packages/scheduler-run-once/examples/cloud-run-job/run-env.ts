/**
 * The environment variables through which the proxy (`cloud-run-job.ts`) hands a run to the Cloud
 * Run job's container (`task.ts`). A module of its own, without imports, so the container's image
 * needs neither `@google-cloud/run` nor the proxy's code.
 */

/** The run id (64 hex): `task.ts` keys `runOnce` on it. */
export const RUN_ID_ENV = 'SCHEDULER_RUN_ID';
/** The run's schedule time, RFC 3339 UTC. */
export const SCHEDULE_TIME_ENV = 'SCHEDULER_SCHEDULE_TIME';
/** The Scheduler job id. */
export const JOB_NAME_ENV = 'SCHEDULER_JOB_NAME';
