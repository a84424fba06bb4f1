/**
 * `scheduler-run-once`: run each Cloud Scheduler job exactly once per scheduled run on Cloud Run
 * functions, with a Firestore run ledger.
 *
 * @example
 * ```ts
 * import { defineJob, registerScheduledJob } from 'scheduler-run-once';
 *
 * const nightly = defineJob({
 *   id: 'nightly-report',
 *   schedule: '0 3 * * *',
 *   run: async (ctx) => {
 *     await sendReport({ idempotencyKey: ctx.runId, signal: ctx.signal });
 *   },
 * });
 * registerScheduledJob('handleScheduledJob', [nightly]);
 * ```
 * @packageDocumentation
 */
export {
  AttemptAbortedError,
  ConfigError,
  DatabaseNotFoundError,
  LedgerUnavailableError,
  RunOnceError,
} from './core/errors.ts';
export type { JobContext, JobInfo, JobRun } from './core/job-context.ts';
export type { Note, NoteValue } from './core/notes.ts';
export { registerScheduledJob } from './function/register.ts';
export type {
  CatchUpDeclaration,
  CatchUpSlots,
} from './policy/catch-up.ts';
export {
  type DeclaredJob,
  defineJob,
  type JobDeclaration,
  type OverlapPolicy,
  validateJobs,
} from './policy/job-declaration.ts';
export { defineAuditJob } from './policy/run-audit.ts';
