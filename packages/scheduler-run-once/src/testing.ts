/**
 * `scheduler-run-once/testing`: run your job in your own tests, in-process, in milliseconds,
 * without the Firestore emulator, as functions-framework's `getTestServer` does for its users.
 *
 * - {@link createTestContext}: a job context to call your job's `run` with, recording its log
 *   lines and notes, with an `abort` to stop it as a lost lease or a shutdown would.
 * - {@link createTestServer}: the real HTTP function over an in-memory run ledger, for supertest:
 *   a delivery runs the job once, a second delivery of the same slot is a duplicate.
 * - {@link schedulerHeaders} and {@link latestSlot}: what Cloud Scheduler sends, for a slot of a job.
 *
 * Nothing the deployed function loads imports this module.
 *
 * @example
 * ```ts
 * import { createTestContext } from 'scheduler-run-once/testing';
 * import { runJobLogic } from '../src/job.ts';
 *
 * const ctx = createTestContext();
 * await runJobLogic(ctx);
 * assert.ok(ctx.logLines().some((line) => line.msg === 'job finished'));
 * ```
 * @packageDocumentation
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import * as functions from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import { AttemptAbortedError, RunOnceError } from './core/errors.ts';
import type { JobContext, JobInfo } from './core/job-context.ts';
import { RunLedger } from './core/ledger.ts';
import { type NoteValue, noteProblem, notesBoundProblem } from './core/notes.ts';
import { RunDocuments } from './core/run-documents.ts';
import { loadConfig } from './function/config.ts';
import { createScheduledJobHandler } from './function/handler.ts';
import { createLogger } from './function/logger.ts';
import { type JobDeclaration, validateJobs } from './policy/job-declaration.ts';
import { jobStateCollection } from './policy/job-state.ts';
import { RunHistory } from './policy/run-history.ts';
import { previousSlot, toUtcRfc3339 } from './policy/schedule.ts';
import { asFirestore, MemoryFirestore } from './testing/memory-firestore.ts';

/** A test context's lease: long enough that no test's job outlives it (ms). */
const TEST_LEASE_MS = 10 * 60_000;

/** Why a test aborted its context, as the function's message would say it. */
const ABORT_MESSAGES = {
  lease_lost: 'the test aborted the attempt: its lease was lost',
  shutdown: 'the test aborted the attempt: the instance is shutting down',
  job_timeout: 'the test aborted the attempt: it ran past JOB_TIMEOUT_SECONDS',
} as const;

/** One JSON log line, as the function writes it (`message`, `severity`, the run's fields). */
export type LogLine = Readonly<Record<string, unknown>>;

/** A logger whose lines are kept, and the lines so far. */
function recordingLogger(serviceName: string) {
  let text = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger({ logLevel: 'trace', projectId: 'test-project', serviceName }, sink);
  const logLines = (): LogLine[] =>
    text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as LogLine);
  return { logger, logLines };
}

/** A {@link JobContext} for a test, with what the job did to it. */
export interface TestContext extends JobContext {
  /** The log lines the job wrote through `ctx.logger`, oldest first. */
  logLines(): LogLine[];
  /** The notes the job wrote with `ctx.note`, by name. */
  notes(): Readonly<Record<string, NoteValue>>;
  /**
   * Aborts `ctx.signal` with an `AttemptAbortedError`, as a lost lease (`lease_lost`), a shutdown
   * (`shutdown`) or the job timeout (`job_timeout`) would.
   */
  abort(cause?: 'lease_lost' | 'shutdown' | 'job_timeout'): void;
}

/**
 * A job context for calling a job's `run` directly: a scheduled run (`kind` `slot`) of the job
 * `test-job`, slot and schedule time the last whole minute, attempt 1, a lease ten minutes long.
 * Every field can be replaced through `overrides`. `note` checks a note as the function does (same
 * names, values and bounds; a refused note rejects with a `RunOnceError` naming it) and keeps it;
 * once {@link TestContext.abort} was called, it rejects with the abort's `AttemptAbortedError`.
 *
 * @param overrides - fields of the context to replace, e.g. `{ kind: 'forced', slot: undefined }`.
 * @example
 * const ctx = createTestContext({ scheduleTime: new Date('2026-12-01T03:00:00Z') });
 * await myJob.run(ctx);
 * assert.deepEqual(ctx.notes(), { exportId: 'e-42' });
 */
export function createTestContext(overrides: Partial<JobContext> = {}): TestContext {
  const now = Date.now();
  const scheduleTime = overrides.scheduleTime ?? new Date(Math.floor(now / 60_000) * 60_000);
  const job: JobInfo = overrides.job ?? {
    id: 'test-job',
    schedule: '* * * * *',
    timeZone: 'Etc/UTC',
  };
  const controller = new AbortController();
  const { logger, logLines } = recordingLogger(job.id);
  const notes: Record<string, NoteValue> = {};
  const note = async (name: string, value: NoteValue): Promise<void> => {
    if (controller.signal.aborted) {
      throw controller.signal.reason;
    }
    const problem = noteProblem(name, value) ?? notesBoundProblem(notes, name, value);
    if (problem !== undefined) {
      throw new RunOnceError(problem);
    }
    notes[name] = value;
  };
  const context: JobContext = {
    runId: createHash('sha256').update(randomUUID()).digest('hex'),
    jobName: job.id,
    scheduleTime,
    slot: scheduleTime,
    kind: 'slot',
    attemptId: randomUUID(),
    firstClaimedAt: new Date(now),
    leaseExpires: new Date(now + TEST_LEASE_MS),
    signal: controller.signal,
    logger,
    note,
    job,
    ...overrides,
  };
  return {
    ...context,
    logLines,
    notes: () => ({ ...notes }),
    abort: (cause = 'lease_lost') => {
      controller.abort(new AttemptAbortedError(cause, ABORT_MESSAGES[cause]));
    },
  };
}

/** What {@link createTestServer} takes besides the jobs. */
export interface TestServerOptions {
  /**
   * The function's configuration variables (docs/configuration.md), on top of a test's defaults:
   * development with error text in the answers, the missed-run check off, a year's retention.
   */
  readonly env?: Readonly<Record<string, string>>;
  /** The run ledger's clock, Firestore's in production (ms since the epoch): `Date.now` unless given. */
  readonly now?: () => number;
}

/** The function under test, and what it wrote. */
export interface TestServer {
  /** The HTTP server, not listening: give it to supertest (`request(server.server)`). */
  readonly server: Server;
  /** The function's log lines, oldest first. */
  logLines(): LogLine[];
  /** The run records in the in-memory ledger, by run id. */
  records(): Promise<Map<string, Readonly<Record<string, unknown>>>>;
}

/** The collection the test server's ledger writes to. */
const TEST_COLLECTION = 'runs';

/**
 * The HTTP function `registerScheduledJob(name, jobs)` deploys, over an in-memory run ledger (no
 * emulator): deliveries are decided, claimed, run, completed and answered as in production, with
 * Firestore's behaviour as the simulator's in-memory store has it. Each call is a server of its own
 * with an empty ledger.
 *
 * @throws {ConfigError} listing every problem of `jobs` or `options.env`, as the function's cold
 *   start would.
 * @example
 * const { server } = createTestServer(jobs);
 * const headers = schedulerHeaders('nightly-report', latestSlot(nightlyReport));
 * const first = await request(server).post('/').set(headers);   // 200, outcome 'processed'
 * const second = await request(server).post('/').set(headers);  // 200, outcome 'duplicate'
 */
export function createTestServer(
  jobs: readonly JobDeclaration[],
  options: TestServerOptions = {},
): TestServer {
  const config = loadConfig({
    NODE_ENV: 'test',
    EXPOSE_ERRORS: 'true',
    MISSED_RUN_CHECK: 'off',
    RETENTION_SECONDS: '31536000',
    GOOGLE_CLOUD_PROJECT: 'test-project',
    ...options.env,
  });
  const declared = validateJobs(jobs);
  const store = new MemoryFirestore({ now: options.now ?? Date.now });
  const firestore = asFirestore(store);
  const { retentionMs, firestoreTimeoutMs: timeoutMs } = config;
  const documents = new RunDocuments(firestore, {
    collection: TEST_COLLECTION,
    retentionMs,
    timeoutMs,
  });
  const jobDocuments = new RunDocuments(firestore, {
    collection: jobStateCollection(TEST_COLLECTION),
    retentionMs,
    timeoutMs,
  });
  const { logger, logLines } = recordingLogger('test-server');
  const handler = createScheduledJobHandler({
    config,
    ledger: new RunLedger(documents, { leaseMs: config.leaseMs }),
    history: new RunHistory(documents),
    jobDocuments,
    clock: () => documents.serverTime(),
    jobs: declared,
    logger,
  });
  const name = `scheduler_run_once_test_${randomUUID().replaceAll('-', '')}`;
  functions.http(name, handler);
  const records = async () => {
    const snapshot = await firestore.collection(TEST_COLLECTION).get();
    return new Map(snapshot.docs.map((doc) => [doc.id, doc.data()]));
  };
  return { server: getTestServer(name), logLines, records };
}

/**
 * The headers Cloud Scheduler sends with a delivery of `jobId`'s slot at `scheduleTime`.
 *
 * @example request(server).post('/').set(schedulerHeaders('nightly-report', latestSlot(job)))
 */
export function schedulerHeaders(jobId: string, scheduleTime: Date): Record<string, string> {
  return {
    'X-CloudScheduler-JobName': jobId,
    'X-CloudScheduler-ScheduleTime': toUtcRfc3339(scheduleTime),
  };
}

/**
 * The latest slot of `job` at or before `now` (default: now), by its schedule and time zone: a
 * schedule time the function accepts for a scheduled run.
 *
 * @throws {Error} if the schedule has no slot before `now`.
 * @example latestSlot(defineJob({ id: 'j', schedule: '0 * * * *', run })) // the last whole hour
 */
export function latestSlot(job: JobDeclaration, now: Date = new Date()): Date {
  const [declared] = validateJobs([job]);
  const slot = declared && previousSlot(declared, new Date(now.getTime() + 1));
  if (slot === undefined) {
    throw new Error(`job ${job.id} has no slot at or before ${now.toISOString()}`);
  }
  return slot;
}
