/**
 * Entry point of the Cloud Run job's container (the downstream side of the example): reads the run
 * id the proxy passed (`SCHEDULER_RUN_ID`), applies `runOnce` to it in a Firestore collection of
 * its own, and runs the state-changing step only if this execution claimed the run. Exits 0 when
 * the work is done (now or by another execution), 1 otherwise, so Cloud Run retries the task.
 *
 *   node task-main.ts          (the container's command; Node 22.18+ runs the .ts directly)
 *
 * Environment: `TASK_RUNS_COLLECTION` (default `cloud_run_job_runs`): the task's ledger, apart from
 * the proxy's `RUNS_COLLECTION`, where the same run id is the proxy's own record. The rest is the
 * function's configuration (`src/config.ts`): `LEASE_SECONDS` (keep it above the task timeout, or
 * rely on the heartbeat), `RETENTION_SECONDS`, `FIRESTORE_DATABASE`, `FIRESTORE_TIMEOUT_SECONDS`,
 * `GOOGLE_CLOUD_PROJECT`, `LOG_LEVEL`. The job's service account needs `roles/datastore.user`.
 */
import { Firestore } from '@google-cloud/firestore';
import { ConfigError } from '../../src/core/errors.ts';
import { RunLedger } from '../../src/core/ledger.ts';
import { loadConfig } from '../../src/function/config.ts';
import { createLogger } from '../../src/function/logger.ts';
import { runTaskOnce, type TaskWork } from './task.ts';

/** The task ledger's collection unless `TASK_RUNS_COLLECTION` says otherwise. */
export const DEFAULT_TASK_RUNS_COLLECTION = 'cloud_run_job_runs';

/**
 * YOUR STATE-CHANGING STEP. It runs at most once per run (and task) while each execution holds its
 * lease; pass `task.runId` on as the idempotency key of anything further downstream, and stop when
 * `task.signal` aborts.
 */
const work: TaskWork = async (task) => {
  logger.info(
    {
      runId: task.runId,
      scheduleTime: task.scheduleTime?.toISOString(),
      taskIndex: task.taskIndex,
    },
    'the state-changing step ran',
  );
};

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) {
    throw err;
  }
  console.error(err.message);
  process.exit(1);
}
const logger = createLogger({
  ...config,
  serviceName: process.env.CLOUD_RUN_JOB ?? 'task',
});
const firestore = new Firestore({
  ...(config.projectId === undefined ? {} : { projectId: config.projectId }),
  databaseId: config.firestoreDatabase,
  ignoreUndefinedProperties: true,
});
const ledger = RunLedger.open(firestore, {
  collection: process.env.TASK_RUNS_COLLECTION ?? DEFAULT_TASK_RUNS_COLLECTION,
  leaseMs: config.leaseMs,
  retentionMs: config.retentionMs,
  timeoutMs: config.firestoreTimeoutMs,
});
const { exitCode } = await runTaskOnce({
  env: process.env,
  ledger,
  work,
  logger,
});
await firestore.terminate();
process.exitCode = exitCode;
