/** A {@link JobContext} for a user's test of a job's `run`: no Firestore, no lease, no function. */
import { randomUUID } from 'node:crypto';
import { AttemptAbortedError, RunOnceError } from '../core/errors.ts';
import type { JobContext, JobInfo } from '../core/job-context.ts';
import type { Logger } from '../core/logger.ts';
import {
  type NoteValue,
  noteProblem,
  notesBoundProblem,
} from '../core/notes.ts';
import { computeRunId } from '../core/run-key.ts';
import { MAX_LEASE_MS } from '../core/run-record.ts';
import { JOB_DEFAULTS } from '../policy/job-declaration.ts';
import { toCanonicalRfc3339 } from '../policy/rfc3339.ts';
import { normaliseSchedule, previousSlot } from '../policy/schedule.ts';

/** The lease a test context shows by default, ms: `LEASE_SECONDS`' default (300). */
const DEFAULT_LEASE_MS = Math.min(300_000, MAX_LEASE_MS);

/** The job a test context belongs to unless `overrides.job` names another. */
export const DEFAULT_TEST_JOB: JobInfo = Object.freeze({
  id: 'test-job',
  schedule: '*/5 * * * *',
  timeZone: 'Etc/UTC',
});

/** One line a job wrote through `ctx.logger`: its level, its message, its fields and bindings. */
export interface LoggedLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  /** The message; `''` when the job logged fields only. */
  readonly message: string;
  /** The logger's bindings (runId, jobName, scheduleTime, attemptId, a child's), then the call's fields. */
  readonly fields: Readonly<Record<string, unknown>>;
}

/** Why an attempt's signal is aborted: the reasons the function aborts it for. */
export type AbortReason = AttemptAbortedError['reason'];

/** What a test context adds to the {@link JobContext} the job sees. */
export interface TestContext extends JobContext {
  /** Every line the job logged through `ctx.logger` (and its children), in order. */
  readonly logs: readonly LoggedLine[];
  /** The notes the job made (`ctx.note`), as the run's record would hold them: the last value per name. */
  readonly notes: Readonly<Record<string, NoteValue>>;
  /**
   * Aborts `signal` with an {@link AttemptAbortedError} of `reason`, as the function does when the
   * lease is lost (`lease_lost`: `note` then rejects too), the instance shuts down (`shutdown`) or
   * the job runs past JOB_TIMEOUT_SECONDS (`job_timeout`). A second call does nothing.
   */
  abort(reason?: AbortReason): void;
}

/** A job as a test context takes it: `ctx.job`, or the declaration (`defineJob(…)`) itself. */
export type TestJob = Readonly<{
  id: string;
  schedule: string;
  timeZone?: string;
}>;

/**
 * Fields of {@link JobContext} a test may set, `job` as a declaration too; the rest follow from
 * them ({@link createTestContext}).
 */
export type TestContextOverrides = Partial<Omit<JobContext, 'job'>> & {
  readonly job?: TestJob;
};

const ABORT_MESSAGES: Readonly<Record<AbortReason, string>> = {
  lease_lost: "the attempt's lease was lost (a test's abort)",
  shutdown: "the instance is shutting down (a test's abort)",
  job_timeout: "the job ran past JOB_TIMEOUT_SECONDS (a test's abort)",
};

type Level = LoggedLine['level'];

/** A logger that appends each line to `lines`, its bindings first, as pino merges them. */
function recordingLogger(
  lines: LoggedLine[],
  bindings: Record<string, unknown>,
): Logger {
  const method =
    (level: Level) => (first: string | object, second?: string) => {
      const ownFields = typeof first === 'string' ? {} : first;
      const message = typeof first === 'string' ? first : (second ?? '');
      lines.push({ level, message, fields: { ...bindings, ...ownFields } });
    };
  return {
    debug: method('debug'),
    info: method('info'),
    warn: method('warn'),
    error: method('error'),
    child: (more) => recordingLogger(lines, { ...bindings, ...more }),
  };
}

/** What `ctx.job` carries of a job, as the function's `jobInfoOf` gives it: frozen, no `run`. */
function jobInfoOf(job: TestJob): JobInfo {
  const timeZone = job.timeZone ?? JOB_DEFAULTS.timeZone;
  return Object.freeze({
    id: job.id,
    schedule: normaliseSchedule(job.schedule),
    timeZone,
  });
}

/** The job's latest slot at or before now, or now itself if its schedule shows none. */
function latestSlot(job: JobInfo): Date {
  const justAfterNow = new Date(Date.now() + 1);
  return previousSlot(job, justAfterNow) ?? new Date();
}

/** The run id the function gives a slot run of `job` at `scheduleTime` (empty key scope). */
function slotRunId(job: JobInfo, scheduleTime: Date): string {
  const time = toCanonicalRfc3339(scheduleTime);
  return computeRunId({ scope: [], jobName: job.id, scheduleTime: time });
}

/**
 * `ctx.note` as the run's record takes it: the same checks as the function's (`noteProblem`, then
 * the record's bounds), the same `RunOnceError`; after a lost lease, the abort's reason.
 */
function noteRecorder(notes: Record<string, NoteValue>, signal: AbortSignal) {
  return async (name: string, value: NoteValue): Promise<void> => {
    const problem =
      noteProblem(name, value) ?? notesBoundProblem(notes, name, value);
    if (problem !== undefined) {
      throw new RunOnceError(`ctx.note: ${problem}`);
    }
    const reason: unknown = signal.reason;
    if (
      reason instanceof AttemptAbortedError &&
      reason.reason === 'lease_lost'
    ) {
      throw reason;
    }
    notes[name] = value;
  };
}

/**
 * Creates the context a user's test passes to a job's `run`, as the function would pass it to the
 * first attempt of a slot's run, with every field overridable:
 * - `job`: {@link DEFAULT_TEST_JOB}, or the given job or declaration (`timeZone` default
 *   `Etc/UTC`); `jobName`: `job.id`; `kind`: `'slot'`; `slot`: the schedule time for a `slot` or
 *   `rerun` kind, none for `forced` and `manual`;
 * - `scheduleTime`: the job's latest slot at or before now (ms precision);
 * - `runId`: the function's run id of that slot (64 hex characters, empty key scope);
 * - `attemptId`: a random UUID; `firstClaimedAt`: now; `leaseExpires`: now + 300 s;
 * - `signal`: aborted only by the returned `abort(reason)`, or by `overrides.signal` if given;
 * - `logger`: records each line in `logs` ({@link LoggedLine}), bound to runId, jobName,
 *   scheduleTime and attemptId as the function's is; a given logger replaces it (`logs` stays empty);
 * - `note`: checks a note as the function does and keeps it in `notes`; a given `note` replaces it.
 *
 * @param overrides fields of the context to set; `undefined` values are ignored.
 * @returns the context, with `logs`, `notes` and `abort` for the test's own use.
 * @throws {RangeError} if `overrides.scheduleTime` is an invalid date; an Error from the schedule
 *   parser if `overrides.job.schedule` is not unix-cron and no `scheduleTime` is given.
 * @example
 * ```ts
 * import { createTestContext } from 'scheduler-run-once/testing';
 *
 * const ctx = createTestContext({ job, scheduleTime: new Date('2026-10-16T12:00:00Z') });
 * await runJobLogic(ctx);
 * assert.ok(ctx.logs.some((line) => line.message === 'job finished'));
 *
 * const stopped = createTestContext();
 * const running = runJobLogic(stopped);
 * stopped.abort('shutdown');
 * await assert.rejects(running, { name: 'AttemptAbortedError' });
 * ```
 */
export function createTestContext(
  overrides: TestContextOverrides = {},
): TestContext {
  const given = Object.fromEntries(
    Object.entries(overrides).filter(([, value]) => value !== undefined),
  ) as TestContextOverrides;
  const job = given.job === undefined ? DEFAULT_TEST_JOB : jobInfoOf(given.job);
  const scheduleTime = given.scheduleTime ?? latestSlot(job);
  if (Number.isNaN(scheduleTime.getTime())) {
    throw new RangeError('createTestContext: scheduleTime is an invalid date');
  }
  const runId = given.runId ?? slotRunId(job, scheduleTime);
  const jobName = given.jobName ?? job.id;
  const attemptId = given.attemptId ?? randomUUID();
  const claimedAt = new Date();
  const controller = new AbortController();
  const signal =
    given.signal === undefined
      ? controller.signal
      : AbortSignal.any([controller.signal, given.signal]);
  // A Force run and a manual run stand for no slot (JobContext.slot), unless the test says one.
  const kind = given.kind ?? 'slot';
  const standsForSlot = kind === 'slot' || kind === 'rerun';
  const slot =
    'slot' in overrides
      ? overrides.slot
      : standsForSlot
        ? scheduleTime
        : undefined;
  const logs: LoggedLine[] = [];
  const bindings = {
    runId,
    jobName,
    scheduleTime: scheduleTime.toISOString(),
    attemptId,
  };
  const notes: Record<string, NoteValue> = {};
  return {
    runId,
    jobName,
    scheduleTime,
    kind: 'slot',
    attemptId,
    firstClaimedAt: claimedAt,
    leaseExpires: new Date(claimedAt.getTime() + DEFAULT_LEASE_MS),
    ...given,
    ...(slot === undefined ? {} : { slot }),
    job,
    signal,
    logger: given.logger ?? recordingLogger(logs, bindings),
    note: given.note ?? noteRecorder(notes, signal),
    logs,
    notes,
    abort: (reason = 'shutdown') => {
      controller.abort(new AttemptAbortedError(reason, ABORT_MESSAGES[reason]));
    },
  };
}
