/**
 * `scheduler-run-once/testing`: run a job in a test, in-process and in milliseconds, without an
 * emulator (functions-framework's `getTestServer`, for this library). `createTestContext` gives a
 * job's `run` the context the function would; `createTestServer` runs the function's own HTTP
 * handler over an in-memory run ledger, so a test sees `processed`, then `duplicate`. Never loaded
 * by the main entry: a deployed function does not load it.
 *
 * @example
 * ```ts
 * import supertest from 'supertest';
 * import { createTestContext, createTestServer, schedulerHeaders } from 'scheduler-run-once/testing';
 *
 * const ctx = createTestContext();
 * await runJobLogic(ctx);
 * assert.ok(ctx.logs.some((line) => line.message === 'job finished'));
 *
 * const { server } = createTestServer(jobs);
 * const response = await supertest(server).post('/').set(schedulerHeaders(job));
 * assert.equal(response.body.outcome, 'processed');
 * ```
 * @packageDocumentation
 */
export {
  type AbortReason,
  createTestContext,
  DEFAULT_TEST_JOB,
  type LoggedLine,
  type TestContext,
  type TestContextOverrides,
  type TestJob,
} from './testing/context.ts';
export type { MemoryFirestore } from './testing/memory-firestore.ts';
export {
  createTestServer,
  type HeadersJob,
  schedulerHeaders,
  type TestServer,
  type TestServerOptions,
} from './testing/server.ts';
