/**
 * Entry point: wires configuration, logger, ledger and job into the HTTP function
 * `handleScheduledJob`, and re-exports the building blocks.
 */
import { Firestore } from '@google-cloud/firestore';
import * as functions from '@google-cloud/functions-framework';
import { createOidcAuthenticator } from './auth.ts';
import { type Config, loadConfig } from './config.ts';
import { ConfigError } from './errors.ts';
import { createScheduledJobHandler } from './handler.ts';
import { runJobLogic } from './job.ts';
import { RunLedger } from './ledger.ts';
import { createLogger } from './logger.ts';
import { drainOnSignals, GracefulShutdown } from './shutdown.ts';

function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // Cold start fails with every problem listed, readable in the revision's logs.
    console.error(err.message);
    process.exit(1);
  }
}

const config = loadConfigOrExit();
const logger = createLogger(config);
const firestore = new Firestore({
  ...(config.projectId === undefined ? {} : { projectId: config.projectId }),
  databaseId: config.firestoreDatabase,
  ignoreUndefinedProperties: true,
});
const ledger = new RunLedger(firestore, {
  collection: config.runsCollection,
  leaseMs: config.leaseMs,
  retentionMs: config.retentionMs,
  timeoutMs: config.firestoreTimeoutMs,
});

const shutdown = new GracefulShutdown();
drainOnSignals(shutdown, config.shutdownGraceMs, logger);
const authenticate =
  config.authMode === 'verify-oidc'
    ? createOidcAuthenticator({ audience: config.oidcAudience, invokers: config.oidcInvokers })
    : undefined;

functions.http(
  'handleScheduledJob',
  createScheduledJobHandler({ config, ledger, job: runJobLogic, logger, authenticate, shutdown }),
);

export { type Config, loadConfig, OPTIONS } from './config.ts';
export {
  ConfigError,
  InvalidRequestError,
  LedgerUnavailableError,
  RunOnceError,
} from './errors.ts';
export { createScheduledJobHandler, STATUS_BY_OUTCOME } from './handler.ts';
export type { JobContext } from './job.ts';
export { type Claim, type ClaimResult, RunLedger, type RunRecord, RunStatus } from './ledger.ts';
export { createLogger, traceFields, withTrace } from './logger.ts';
export { computeRunId } from './run-key.ts';
export { type Attempt, type RunOutcome, runOnce } from './run-once.ts';
export { normaliseScheduleTime, readScheduledRun, type ScheduledRun } from './scheduler-request.ts';
export { drainOnSignals, GracefulShutdown } from './shutdown.ts';
