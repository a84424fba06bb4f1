/**
 * Test helpers: a real Firestore client on the emulator, a fresh collection per test, captured
 * logs, and a registered function to drive with supertest.
 */

import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Firestore } from '@google-cloud/firestore';
import * as functions from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import type { Logger } from 'pino';
import supertest from 'supertest';
import type { JobRun } from '../src/core/job-context.ts';
import { type LedgerOptions, RunLedger } from '../src/core/ledger.ts';
import {
  RunDocuments,
  type RunDocumentsOptions,
} from '../src/core/run-documents.ts';
import { freshCollection, sleep, waitFor } from '../src/dev/local-processes.ts';
import { type Config, loadConfig } from '../src/function/config.ts';
import {
  createScheduledJobHandler,
  type HandlerDeps,
} from '../src/function/handler.ts';
import { createLogger } from '../src/function/logger.ts';
import { defineJob, validateJobs } from '../src/policy/job-declaration.ts';
import { jobStateCollection } from '../src/policy/job-state.ts';
import { RunHistory } from '../src/policy/run-history.ts';
import { PAST_NOON } from './fixtures/times.ts';

if (!process.env.FIRESTORE_EMULATOR_HOST) {
  throw new Error(
    'Run the tests through `npm test`, or one file with `npm run test:file -- FILE`: both start the Firestore emulator.',
  );
}

export {
  atOffset,
  PAST_DAY,
  PAST_NOON,
  PAST_NOON_MS,
  rfc3339,
} from './fixtures/times.ts';

/** The emulator-backed client every test shares. */
export const firestore = new Firestore({
  projectId: process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
});

export { freshCollection, sleep };

/** Every document in `collection`, by id. */
export async function documents(
  collection: string,
): Promise<Map<string, FirebaseFirestore.DocumentData>> {
  const snap = await firestore.collection(collection).get();
  return new Map(snap.docs.map((d) => [d.id, d.data()]));
}

/** A ledger on its own fresh collection. */
export function newLedger(
  options: Partial<LedgerOptions & RunDocumentsOptions> = {},
  db: Firestore = firestore,
): {
  ledger: RunLedger;
  collection: string;
  documents: RunDocuments;
  history: RunHistory;
  jobDocuments: RunDocuments;
} {
  const collection = options.collection ?? freshCollection();
  const documents = new RunDocuments(db, {
    collection,
    retentionMs: options.retentionMs ?? 86_400_000,
    timeoutMs: options.timeoutMs ?? 10_000,
  });
  const ledger = new RunLedger(documents, {
    leaseMs: options.leaseMs ?? 60_000,
  });
  const jobDocuments = new RunDocuments(db, {
    collection: jobStateCollection(collection),
    retentionMs: options.retentionMs ?? 86_400_000,
    timeoutMs: options.timeoutMs ?? 10_000,
  });
  return {
    ledger,
    collection,
    documents,
    history: new RunHistory(documents),
    jobDocuments,
  };
}

/** A logger whose JSON lines are kept for assertions. */
export function captureLogs(config: Partial<Pick<Config, 'logLevel'>> = {}): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
  raw: () => string;
} {
  let text = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger(
    {
      logLevel: config.logLevel ?? 'trace',
      projectId: 'demo-project',
      serviceName: 'test',
    },
    sink,
  );
  return {
    logger,
    raw: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/**
 * Test configuration: defaults plus `env`. Missed-run detection is off unless a test turns it on:
 * the handler tests deliver slots whose earlier slots never ran. Development with error text
 * exposed, as `npm run dev` runs, unless `env` names a `NODE_ENV` (a test of production).
 */
export function testConfig(env: Record<string, string> = {}): Config {
  const development =
    env.NODE_ENV === undefined
      ? { NODE_ENV: 'test', EXPOSE_ERRORS: 'true' }
      : {};
  // A year's retention, far beyond the fixtures' schedule times (a day back, PAST_NOON).
  return loadConfig({
    MISSED_RUN_CHECK: 'off',
    RETENTION_SECONDS: '31536000',
    ...development,
    ...env,
  });
}

/** The job ids the handler tests deliver; {@link serve} declares its job under each. */
export const TEST_JOB_IDS = [
  'nightly-report',
  'nightly',
  'other',
  'j',
] as const;

/** `run` declared under each of `ids` (every minute, UTC), validated as at cold start. */
export function declareJobs(
  run: JobRun,
  ids: readonly string[] = TEST_JOB_IDS,
) {
  return validateJobs(
    ids.map((id) => defineJob({ id, schedule: '* * * * *', run })),
  );
}

/**
 * Registers a handler under a unique name and returns a supertest agent for it, with the ledger,
 * collection and captured logs behind it. `job` is declared under {@link TEST_JOB_IDS}.
 */
export function serve(
  job: JobRun,
  overrides: Parameters<typeof serveJobs>[1] = {},
) {
  return serveJobs(declareJobs(job), overrides);
}

/**
 * {@link serve} with the declared jobs given; `deps` replaces handler dependencies (a clock; by
 * default the ledger's Firestore time).
 */
export function serveJobs(
  jobs: HandlerDeps['jobs'],
  overrides: {
    env?: Record<string, string>;
    ledger?: RunLedger;
    collection?: string;
    authenticate?: HandlerDeps['authenticate'];
    /** Missed-run detection's store; the test's ledger unless given. */
    history?: HandlerDeps['history'];
  } = {},
  deps: Partial<Pick<HandlerDeps, 'clock'>> = {},
) {
  const config = testConfig(overrides.env);
  const made = overrides.ledger
    ? {
        ledger: overrides.ledger,
        collection: overrides.collection ?? '',
        history: new RunHistory(
          new RunDocuments(firestore, {
            collection: overrides.collection ?? '',
            retentionMs: config.retentionMs,
            timeoutMs: 10_000,
          }),
        ),
        jobDocuments: new RunDocuments(firestore, {
          collection: jobStateCollection(
            overrides.collection ?? freshCollection(),
          ),
          retentionMs: config.retentionMs,
          timeoutMs: 10_000,
        }),
      }
    : newLedger({
        leaseMs: config.leaseMs,
        retentionMs: config.retentionMs,
        ...(overrides.collection === undefined
          ? {}
          : { collection: overrides.collection }),
      });
  const logs = captureLogs();
  const name = `fn_${randomUUID()}`;
  functions.http(
    name,
    createScheduledJobHandler({
      config,
      ledger: made.ledger,
      history: overrides.history ?? made.history,
      jobDocuments: made.jobDocuments,
      clock: () => made.ledger.documents.serverTime(),
      jobs,
      logger: logs.logger,
      authenticate: overrides.authenticate,
      ...deps,
    }),
  );
  return {
    request: supertest(getTestServer(name)),
    name,
    ...made,
    logs,
    config,
  };
}

/** The two Cloud Scheduler headers of a delivery. */
export function schedulerHeaders(
  jobName = 'nightly-report',
  scheduleTime: string = PAST_NOON,
): Record<string, string> {
  return {
    'X-CloudScheduler-JobName': jobName,
    'X-CloudScheduler-ScheduleTime': scheduleTime,
  };
}

/** A job that counts its executions and can be made slow or failing. */
export function countingJob(
  behaviour: { delayMs?: number; fail?: (n: number) => boolean } = {},
) {
  const calls: string[] = [];
  const job: JobRun = async (ctx) => {
    calls.push(ctx.attemptId);
    if (behaviour.delayMs) {
      await new Promise((r) => setTimeout(r, behaviour.delayMs));
    }
    if (behaviour.fail?.(calls.length)) {
      throw new Error(`job failed on execution ${calls.length}`);
    }
  };
  return { job, calls };
}

type RefMethod = 'create' | 'get' | 'update' | 'delete';
/** Replaces a document method; `real` is the genuine emulator-backed reference. */
export type RefHook = (
  real: FirebaseFirestore.DocumentReference,
  args: unknown[],
) => Promise<unknown>;

/**
 * A Firestore stand-in that forwards every call to the real emulator client, except the document
 * methods given in `hooks`: for injecting an interleaving or a fault at an exact step. It covers
 * only what the ledger calls (`collection().doc()`, `withConverter` and the four document methods).
 */
export function hookedFirestore(
  hooks: Partial<Record<RefMethod, RefHook>>,
): Firestore {
  const wrap = (real: FirebaseFirestore.DocumentReference): object => {
    const call =
      (method: RefMethod) =>
      (...args: unknown[]) => {
        const hook = hooks[method];
        if (hook) {
          return hook(real, args);
        }
        return (real[method] as (...a: unknown[]) => Promise<unknown>).apply(
          real,
          args,
        );
      };
    return {
      create: call('create'),
      get: call('get'),
      update: call('update'),
      delete: call('delete'),
      withConverter: (
        converter: FirebaseFirestore.FirestoreDataConverter<unknown>,
      ) =>
        wrap(
          real.withConverter(converter) as FirebaseFirestore.DocumentReference,
        ),
    };
  };
  return {
    collection: (name: string) => ({
      doc: (id: string) => wrap(firestore.collection(name).doc(id)),
    }),
  } as unknown as Firestore;
}

/**
 * The emulator-backed client with each document call it forwards counted, for tests that prove
 * what an operation costs in Firestore calls.
 */
export function countingFirestore(): {
  db: Firestore;
  calls: Record<RefMethod, number>;
} {
  const calls: Record<RefMethod, number> = {
    create: 0,
    get: 0,
    update: 0,
    delete: 0,
  };
  const counted =
    (method: RefMethod): RefHook =>
    (real, args) => {
      calls[method]++;
      return (real[method] as (...a: unknown[]) => Promise<unknown>).apply(
        real,
        args,
      );
    };
  const db = hookedFirestore({
    create: counted('create'),
    get: counted('get'),
    update: counted('update'),
    delete: counted('delete'),
  });
  return { db, calls };
}

/** An error shaped like the Firestore client's for gRPC code `code` (14 = UNAVAILABLE). */
export function grpcError(code: number, message = 'injected fault'): Error {
  return Object.assign(new Error(`${code} ${message}`), { code });
}

/** The stored run document `id` of `collection`; fails the test if it does not exist. */
export async function storedRecord(
  collection: string,
  id: string,
): Promise<FirebaseFirestore.DocumentData> {
  const data = (await firestore.collection(collection).doc(id).get()).data();
  if (data === undefined) {
    throw new Error(`no document ${collection}/${id}`);
  }
  return data;
}

/** Polls `condition` every 25 ms until it holds; fails after `timeoutMs`. */
export async function until(
  condition: () => Promise<boolean> | boolean,
  timeoutMs = 10_000,
): Promise<void> {
  await waitFor(
    'condition',
    async () => ((await condition()) ? true : undefined),
    timeoutMs,
    25,
  );
}

/** What {@link loseCommitAnswers} needs of the client's internals; checked, so a change fails loudly. */
interface GrpcStub {
  commit: (
    request: unknown,
    metadata: unknown,
    options: unknown,
    callback: GrpcCallback,
  ) => unknown;
}
type GrpcCallback = (err: Error | null, response?: unknown) => void;

/**
 * A Firestore client of its own whose first `lose` commits land in the emulator but answer
 * `UNAVAILABLE` (14), as a connection reset after the write would: the fault sits under the
 * client's own retry (google-gax retries Commit on UNAVAILABLE, per the client's service config),
 * so the client sends the commit again, exactly as in production. Patches the gRPC stub's
 * `commit` of the client's one gapic client (the pool's, after a first read), and throws if that
 * internal shape is not there.
 */
export async function loseCommitAnswers(
  lose: number,
): Promise<{ db: Firestore; commits: () => number }> {
  const db = new Firestore({
    projectId: process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
  });
  await db.collection(freshCollection()).doc('warm-up').get();
  const pool = (
    db as unknown as { _clientPool?: { activeClients?: Map<object, unknown> } }
  )._clientPool;
  const clients = [...(pool?.activeClients?.keys() ?? [])];
  const stub = (await (
    clients[0] as { firestoreStub?: Promise<GrpcStub> } | undefined
  )?.firestoreStub) as GrpcStub | undefined;
  if (clients.length !== 1 || typeof stub?.commit !== 'function') {
    throw new Error(
      'loseCommitAnswers: the Firestore client no longer has one pooled gapic client with a gRPC stub',
    );
  }
  const real = stub.commit;
  let commits = 0;
  stub.commit = function (this: unknown, request, metadata, options, callback) {
    commits++;
    if (commits > lose) {
      return real.call(this, request, metadata, options, callback);
    }
    return real.call(this, request, metadata, options, (err) =>
      callback(
        err ?? grpcError(14, 'UNAVAILABLE: connection reset after the commit'),
      ),
    );
  };
  return { db, commits: () => commits };
}
