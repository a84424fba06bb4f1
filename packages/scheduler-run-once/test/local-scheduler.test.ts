/**
 * The local Scheduler (`src/ops/local-scheduler.ts`) against the real handler and ledger on the
 * Firestore emulator, over real HTTP, on the real clock with sub-second settings (durations in a
 * declaration are whole seconds from 15 s up; the Scheduler's core takes any). Each case serves its
 * own function on a free port with its own collection, fires one job at once (a forced run) and
 * follows it to its end: what Scheduler's retries meet, and how often the job ran.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import * as functions from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import {
  type Authenticator,
  createOidcAuthenticator,
} from '../src/function/auth.ts';
import { createScheduledJobHandler } from '../src/function/handler.ts';
import {
  type AttemptEvent,
  LocalScheduler,
  type LocalSchedulerOptions,
  type SchedulerJob,
} from '../src/ops/local-scheduler.ts';
import { startOidcIssuer } from '../src/ops/oidc-issuer.ts';
import {
  defineJob,
  JOB_DEFAULTS,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { captureLogs, countingJob, newLedger, testConfig } from './helpers.ts';

const servers: Server[] = [];
after(() => {
  for (const server of servers) {
    server.close();
  }
});

/**
 * Serves `job` (declared as `slow`) through the real handler on 127.0.0.1, and returns its URL and
 * the job's executions.
 */
async function serveOnPort(
  job: ReturnType<typeof countingJob>,
  authenticate?: Authenticator,
) {
  const { ledger, history, jobDocuments } = newLedger();
  // Firestore's time is read once per ledger; read it now, so the first delivery's half-second
  // attempt deadline measures the function, not the Firestore client's first connection.
  await ledger.documents.serverTime();
  const name = `fn_${randomUUID()}`;
  functions.http(
    name,
    createScheduledJobHandler({
      config: testConfig(),
      ledger,
      history,
      jobDocuments,
      clock: () => ledger.documents.serverTime(),
      jobs: validateJobs([
        defineJob({ id: 'slow', schedule: SCHEDULE, run: job.job }),
      ]),
      logger: captureLogs().logger,
      ...(authenticate === undefined ? {} : { authenticate }),
    }),
  );
  const server = getTestServer(name);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/**
 * Daily, at the hour half a day from now: a forced run's schedule time (the next slot) is then at
 * least 11 hours ahead, so every attempt of it is the forced run. With a per-minute schedule, a
 * forced run fired 30–60 s before a minute would have its retries cross into the slot's tolerance
 * and run as that slot, early (docs/limits.md, Forced runs): a second execution, by design.
 */
const SCHEDULE = `0 ${(new Date().getUTCHours() + 12) % 24} * * *`;

/**
 * The job as the Scheduler knows it: retries every 0.3 s, up to 10 s of them, so a slow machine
 * ends the case by success, not by the retry limit; a 10 s attempt deadline, so only the case that
 * sets a shorter one ({@link SHORT_DEADLINE}) meets it, even on a loaded machine.
 */
const SLOW: SchedulerJob = {
  ...JOB_DEFAULTS,
  id: 'slow',
  schedule: SCHEDULE,
  attemptDeadlineSeconds: 10,
  retryCount: 3,
  maxRetryDurationSeconds: 10,
  minBackoffSeconds: 0.3,
  maxBackoffSeconds: 0.3,
  maxDoublings: 0,
};

/** Half a second: shorter than the slow job (1.5 s), so its first attempt misses it. */
const SHORT_DEADLINE = { attemptDeadlineSeconds: 0.5 };

/** Fires `slow` once through a Scheduler with `options`, and returns what each delivery got. */
async function fireOnce(
  options: Omit<LocalSchedulerOptions, 'jobs' | 'onEvent'>,
  settings: Partial<SchedulerJob> = {},
) {
  const events: AttemptEvent[] = [];
  const scheduler = new LocalScheduler({
    ...options,
    jobs: [{ ...SLOW, ...settings }],
    onEvent: (event) => {
      if (event.type === 'attempt') {
        events.push(event);
      }
    },
  });
  const result = await scheduler.fire('slow');
  await scheduler.stop();
  const answers = (delivery: AttemptEvent['delivery']) =>
    events
      .filter((e) => e.delivery === delivery)
      .map(
        (e) =>
          `${e.status ?? '-'} ${e.outcome}${e.answerDropped ? ' (dropped)' : ''}`,
      );
  return {
    result,
    primary: answers('primary'),
    duplicates: answers('duplicate'),
  };
}

describe('local Scheduler against the function', () => {
  it('a job slower than its attempt deadline: the retry meets 409 while it runs, then duplicate; it runs once', async () => {
    const job = countingJob({ delayMs: 1500 });
    const url = await serveOnPort(job);

    const { result, primary } = await fireOnce({ url }, SHORT_DEADLINE);

    assert.equal(result.succeeded, true);
    assert.equal(primary[0], '- deadline_exceeded');
    assert.equal(primary.at(-1), '200 duplicate');
    const between = primary.slice(1, -1);
    // On a loaded machine a retry can itself miss the half-second deadline; what must hold is that
    // a retry met the running job (409), no attempt ran it again, and it ended as a duplicate.
    assert.ok(
      between.includes('409 in_progress'),
      `a retry while the job ran: ${primary.join(', ')}`,
    );
    assert.ok(
      between.every(
        (answer) =>
          answer === '409 in_progress' || answer === '- deadline_exceeded',
      ),
      primary.join(', '),
    );
    assert.equal(job.calls.length, 1);
  });

  it('answers dropped as lost acknowledgements: every retry is answered duplicate, the job runs once', async () => {
    const job = countingJob();
    const url = await serveOnPort(job);

    const { result, primary } = await fireOnce(
      { url, dropAnswers: 1 },
      {
        retryCount: 3,
        maxRetryDurationSeconds: 0,
        minBackoffSeconds: 0,
        maxBackoffSeconds: 0,
      },
    );

    assert.equal(result.succeeded, false);
    assert.deepEqual(primary, [
      '200 processed (dropped)',
      '200 duplicate (dropped)',
      '200 duplicate (dropped)',
      '200 duplicate (dropped)',
    ]);
    assert.equal(job.calls.length, 1);
  });

  it('every attempt delivered twice at once: one execution, the other answered 409 or duplicate', async () => {
    const job = countingJob({ delayMs: 100 });
    const url = await serveOnPort(job);

    const { result, primary, duplicates } = await fireOnce({
      url,
      duplicates: 1,
    });

    assert.equal(result.succeeded, true);
    const answers = [...primary, ...duplicates];
    assert.equal(
      answers.filter((a) => a === '200 processed').length,
      1,
      answers.join(', '),
    );
    assert.ok(
      answers.every((a) =>
        ['200 processed', '409 in_progress', '200 duplicate'].includes(a),
      ),
      answers.join(', '),
    );
    assert.equal(job.calls.length, 1);
  });

  it('with verify-oidc, its locally signed tokens pass the function check; without them 401', async () => {
    const issuer = await startOidcIssuer();
    after(() => issuer.close());
    const audience = 'https://scheduled-job.example';
    const email = 'invoker@demo-project.iam.gserviceaccount.com';
    const job = countingJob();
    const url = await serveOnPort(
      job,
      createOidcAuthenticator({
        audience,
        invokers: [email],
        certsUrl: issuer.certsUrl,
      }),
    );

    const signed = await fireOnce({
      url,
      tokens: { audience, email, token: issuer.token },
    });
    const unsigned = await fireOnce(
      { url },
      { retryCount: 0, maxRetryDurationSeconds: 0 },
    );

    assert.deepEqual(signed.primary, ['200 processed']);
    assert.deepEqual(unsigned.primary, ['401 unauthenticated']);
    assert.equal(job.calls.length, 1);
  });
});
