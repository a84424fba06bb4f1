/**
 * Entry point: registers `handleScheduledJob` (every job declared in `jobs.ts`) with
 * functions-framework, and re-exports the building blocks.
 */
import { registerScheduledJob } from './function.ts';
import { jobs } from './jobs.ts';

registerScheduledJob('handleScheduledJob', jobs);

export { type Authenticator, createOidcAuthenticator } from './auth.ts';
export { type Config, loadConfig, OPTIONS } from './config.ts';
export {
  AttemptAbortedError,
  ConfigError,
  DatabaseNotFoundError,
  InvalidRequestError,
  LedgerUnavailableError,
  RunOnceError,
} from './errors.ts';
export { registerScheduledJob } from './function.ts';
export { createScheduledJobHandler } from './handler.ts';
export type { JobContext } from './job.ts';
export {
  type DeclaredJob,
  defineJob,
  findJob,
  type JobDeclaration,
  type JobInfo,
  jobIdOf,
  validateJobs,
} from './job-declaration.ts';
export { LeaseHeartbeat } from './lease-heartbeat.ts';
export {
  type Claim,
  type ClaimResult,
  type FenceResult,
  type Holder,
  type Ledger,
  RunLedger,
} from './ledger.ts';
export { createLogger, traceFields, withTrace } from './logger.ts';
export { type ResponseBody, type ResponseOutcome, STATUS_BY_OUTCOME } from './outcomes.ts';
export { computeRunId } from './run-key.ts';
export { type Attempt, type LeaseLossCause, type RunOutcome, runOnce } from './run-once.ts';
export {
  type RunDetails,
  type RunRecord,
  RunStatus,
  type StoredRecord,
  type UnreadableRecord,
} from './run-record.ts';
export { nextSlots, previousSlot, type ScheduleSpec, slotsBetween } from './schedule.ts';
export { normaliseScheduleTime, readScheduledRun, type ScheduledRun } from './scheduler-request.ts';
export { drainOnSignals, GracefulShutdown } from './shutdown.ts';
