/** The function's real HTTP handler over an in-memory run ledger, for a user's tests. */
import type { Server } from 'node:http';
import * as functions from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import type { DestinationStream } from 'pino';
import { createLogger } from '../function/logger.ts';
import {
  createInstanceHandler,
  loadConfigAndJobs,
} from '../function/register.ts';
import {
  JOB_NAME_HEADER,
  SCHEDULE_TIME_HEADER,
} from '../function/scheduler-request.ts';
import type { JobDeclaration } from '../policy/job-declaration.ts';
import { toCanonicalRfc3339 } from '../policy/rfc3339.ts';
import { previousSlot } from '../policy/schedule.ts';
import { asFirestore, MemoryFirestore } from './memory-firestore.ts';

/** How {@link createTestServer} configures the function. */
export interface TestServerOptions {
  /**
   * Configuration variables, as the function reads them from its environment
   * (docs/configuration.md), e.g. `{ EXPOSE_ERRORS: 'true' }` for error text in 500 bodies. The
   * caller's `process.env` is never read; unset variables take their defaults.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** A function under test: its server, its log lines and its run ledger's store. */
export interface TestServer {
  /** A server (not listening) running the function: give it to supertest, or `listen(0)` it. */
  readonly server: Server;
  /**
   * Each line the function logged, parsed, as Cloud Logging receives it (`severity`, `message`,
   * `runId`, `outcome`…), the job's own lines (`ctx.logger`) among them.
   */
  readonly logs: readonly Record<string, unknown>[];
  /** The in-memory Firestore holding the run records (`scheduler_runs` unless `RUNS_COLLECTION`). */
  readonly firestore: MemoryFirestore;
}

/**
 * A project id for the logger's trace links: set, it keeps the logging library from asking the
 * metadata server for one, which a developer's machine has not.
 */
const TEST_ENV = { GOOGLE_CLOUD_PROJECT: 'scheduler-run-once-test' };

let servers = 0;

/** A pino destination appending each JSON line, parsed, to `lines`. */
function recordingDestination(
  lines: Record<string, unknown>[],
): DestinationStream {
  return {
    write: (line: string) => {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    },
  };
}

/**
 * Creates the HTTP function `registerScheduledJob` registers for `jobs` (the same handler, ledger
 * and checks), over a fresh in-memory Firestore instead of a real one, for a user's tests: a
 * delivery of a slot answers 200 `processed` and runs the job in-process, the next delivery of the
 * same slot 200 `duplicate`; a job that throws answers 500 `failed` and a retry runs it again.
 * What differs from a deployed instance: no Firestore, no graceful shutdown, no process listeners,
 * no caller check unless `env` sets `AUTH_MODE=verify-oidc`. Build the headers of a delivery with
 * {@link schedulerHeaders}; a schedule time must be a slot of the job, not in the future, within
 * RETENTION_SECONDS of now (the function's own checks).
 *
 * @param jobs the declarations, as given to `registerScheduledJob` (`jobs.ts`).
 * @param options configuration variables; see {@link TestServerOptions}.
 * @returns the server, the function's log lines and its store; each call makes a separate store.
 * @throws {ConfigError} listing every problem of `jobs` and `options.env` at once, as the function
 *   lists them at its cold start (where it exits instead).
 * @example
 * ```ts
 * import supertest from 'supertest';
 * import { createTestServer, schedulerHeaders } from 'scheduler-run-once/testing';
 * import { job, jobs } from '../src/jobs.ts';
 *
 * const { server } = createTestServer(jobs);
 * const headers = schedulerHeaders(job); // its latest slot
 * const first = await supertest(server).post('/').set(headers);
 * assert.equal(first.body.outcome, 'processed');
 * const second = await supertest(server).post('/').set(headers);
 * assert.equal(second.body.outcome, 'duplicate');
 * ```
 */
export function createTestServer(
  jobs: readonly JobDeclaration[],
  options: TestServerOptions = {},
): TestServer {
  const env = { ...TEST_ENV, ...options.env };
  const loaded = loadConfigAndJobs(jobs, env);
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger(loaded.config, recordingDestination(logs));
  // As the function's own client (src/function/register.ts).
  const firestore = new MemoryFirestore({
    now: () => Date.now(),
    ignoreUndefinedProperties: true,
  });
  const parts = { ...loaded, firestore: asFirestore(firestore), logger };
  const { handler } = createInstanceHandler(parts);
  // functions-framework builds its test server from a registered function: one name per server.
  servers += 1;
  const name = `scheduler-run-once-test-server-${servers}`;
  functions.http(name, handler);
  return { server: getTestServer(name), logs, firestore };
}

/** A job as {@link schedulerHeaders} takes it: its id, and its schedule to find its latest slot. */
export type HeadersJob =
  | string
  | Readonly<{ id: string; schedule?: string; timeZone?: string }>;

/**
 * The headers Cloud Scheduler sends with a delivery of `job`'s slot at `scheduleTime`:
 * `X-CloudScheduler-JobName` (the job id) and `X-CloudScheduler-ScheduleTime` (RFC 3339, UTC).
 * Without `scheduleTime`, the job's latest slot at or before now, read from its `schedule` and
 * `timeZone` (default `Etc/UTC`).
 *
 * @param job a job id, or a declaration (`defineJob(…)`, `ctx.job`).
 * @param scheduleTime the slot: a `Date`, or an RFC 3339 string sent as given.
 * @returns the two headers, to `set` on a request (supertest) or pass to `fetch`.
 * @throws {TypeError} if no `scheduleTime` is given and `job` has no `schedule`;
 *   {@link RangeError} for an invalid `Date`, or a schedule with no slot before now.
 * @example
 * ```ts
 * schedulerHeaders('nightly', new Date('2026-10-16T03:00:00Z'));
 * // { 'X-CloudScheduler-JobName': 'nightly', 'X-CloudScheduler-ScheduleTime': '2026-10-16T03:00:00Z' }
 * ```
 */
export function schedulerHeaders(
  job: HeadersJob,
  scheduleTime?: Date | string,
) {
  const spec = typeof job === 'string' ? { id: job } : job;
  const slot = scheduleTime ?? latestSlotOf(spec);
  const time = typeof slot === 'string' ? slot : toCanonicalRfc3339(slot);
  return { [JOB_NAME_HEADER]: spec.id, [SCHEDULE_TIME_HEADER]: time };
}

/** `job`'s latest slot at or before now. @throws TypeError, RangeError as {@link schedulerHeaders}. */
function latestSlotOf(job: Exclude<HeadersJob, string>): Date {
  if (job.schedule === undefined) {
    throw new TypeError(
      `schedulerHeaders: give a scheduleTime, or a job with a schedule (${job.id} has none)`,
    );
  }
  const spec = { schedule: job.schedule, timeZone: job.timeZone ?? 'Etc/UTC' };
  const slot = previousSlot(spec, new Date(Date.now() + 1));
  if (slot === undefined) {
    throw new RangeError(
      `schedulerHeaders: ${job.id}'s schedule shows no slot before now`,
    );
  }
  return slot;
}
