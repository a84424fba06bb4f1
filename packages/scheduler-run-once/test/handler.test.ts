/**
 * The HTTP function through functions-framework's test server and supertest, on the real emulator:
 * one behaviour per test, table-driven where the cases share a shape.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JobContext } from '../src/core/job-context.ts';
import { computeRunId } from '../src/core/run-key.ts';
import { defineJob, validateJobs } from '../src/policy/job-declaration.ts';
import {
  atOffset,
  countingFirestore,
  countingJob,
  declareJobs,
  documents,
  firestore,
  grpcError,
  hookedFirestore,
  newLedger,
  PAST_NOON,
  PAST_NOON_MS,
  rfc3339,
  schedulerHeaders,
  serve,
  serveJobs,
  storedRecord,
  until,
} from './helpers.ts';

const RUN = { jobName: 'nightly-report', scheduleTime: PAST_NOON, scope: [] };

describe('handleScheduledJob', () => {
  it('runs the job on the first delivery and answers 200 processed with the run id', async () => {
    const { job, calls } = countingJob();
    const { request, collection } = serve(job);

    const res = await request.post('/').set(schedulerHeaders());

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    assert.equal(res.body.runId, computeRunId(RUN));
    assert.equal(calls.length, 1);
    const record = await storedRecord(collection, res.body.runId);
    assert.equal(record.status, 'completed');
    assert.equal(record.job_name, 'nightly-report');
    assert.equal(
      record.schedule_time.toDate().toISOString(),
      new Date(PAST_NOON_MS).toISOString(),
    );
  });

  it('lets a job replace its ctx.logger with a child (a plain-JS job can assign it)', async () => {
    let replaced: unknown;
    const { request } = serve((ctx) => {
      const writable = ctx as { logger: JobContext['logger'] };
      writable.logger = writable.logger.child({ step: 'one' });
      replaced = writable.logger;
    });

    const res = await request.post('/').set(schedulerHeaders());

    assert.equal(res.body.outcome, 'processed', JSON.stringify(res.body));
    assert.ok(replaced !== undefined);
  });

  it('answers a delivery of a completed run 200 duplicate without running the job', async () => {
    const { job, calls } = countingJob();
    const { request } = serve(job);
    await request.post('/').set(schedulerHeaders());

    const res = await request.post('/').set(schedulerHeaders());

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'duplicate');
    assert.match(
      res.body.message,
      /already completed at .*; the job was not run again/,
    );
    assert.equal(calls.length, 1);
  });

  it('treats lowercase (HTTP/2) header names and another offset for the same instant as the same run', async () => {
    const { job, calls } = countingJob();
    const { request } = serve(job);
    await request.post('/').set(schedulerHeaders('nightly-report', PAST_NOON));

    const res = await request.post('/').set({
      'x-cloudscheduler-jobname': 'nightly-report',
      'x-cloudscheduler-scheduletime': atOffset(PAST_NOON_MS, -7 * 60),
    });

    assert.equal(res.body.outcome, 'duplicate');
    assert.equal(calls.length, 1);
  });

  it('answers a retry during a slow run 409 in_progress, then 200 duplicate after it completes', async () => {
    const { job, calls } = countingJob({ delayMs: 800 });
    const { request, collection } = serve(job);

    const first = request.post('/').set(schedulerHeaders());
    const firstDone = first.then((r) => r);
    await until(() => calls.length === 1);
    assert.equal(
      (await documents(collection)).size,
      1,
      'claimed before the job started',
    );
    const retry = await request.post('/').set(schedulerHeaders());
    const done = await firstDone;
    const late = await request.post('/').set(schedulerHeaders());

    assert.equal(retry.status, 409);
    assert.equal(retry.body.outcome, 'in_progress');
    assert.match(retry.body.message, /lease until \d{4}-/);
    assert.equal(done.status, 200);
    assert.equal(late.body.outcome, 'duplicate');
    assert.equal(calls.length, 1);
  });

  for (const [how, failure] of [
    ['rejects', async () => Promise.reject(new Error('downstream said no'))],
    [
      'throws synchronously',
      () => {
        throw new Error('downstream said no');
      },
    ],
  ] as const) {
    it(`releases the claim and answers 500 when the job ${how}; the retry runs it again`, async () => {
      let executions = 0;
      const { request, collection } = serve((ctx) => {
        executions++;
        return executions === 1
          ? failure()
          : ctx.logger.info('second try works');
      });

      const failed = await request.post('/').set(schedulerHeaders());
      const afterFailure = await storedRecord(collection, failed.body.runId);
      const retried = await request.post('/').set(schedulerHeaders());

      assert.equal(failed.status, 500);
      assert.equal(failed.body.outcome, 'failed');
      assert.match(
        failed.body.message,
        /downstream said no.*claim is released/,
      );
      assert.equal(
        afterFailure.status,
        'failed',
        'the failure is kept, not deleted',
      );
      assert.equal(afterFailure.last_error, 'downstream said no');
      assert.equal(afterFailure.attempts, 1);
      assert.equal(retried.status, 200);
      assert.equal(retried.body.outcome, 'processed');
      assert.equal(executions, 2);
      const completed = await storedRecord(collection, failed.body.runId);
      assert.equal(completed.status, 'completed');
      assert.equal(completed.attempts, 2, 'the history shows both attempts');
    });
  }

  it('hides the job error text from the client in production, and logs it', async () => {
    const production = serve(countingJob({ fail: () => true }).job, {
      env: { NODE_ENV: 'production' },
    });
    const development = serve(countingJob({ fail: () => true }).job);

    const hidden = await production.request.post('/').set(schedulerHeaders());
    const shown = await development.request.post('/').set(schedulerHeaders());

    assert.equal(hidden.status, 500);
    assert.equal(hidden.body.outcome, 'failed');
    assert.equal(
      hidden.body.message,
      'The job failed; the claim is released so a retry can run it.',
      'the production message is the fixed text alone',
    );
    assert.match(
      shown.body.message,
      /^The job failed \(job failed on execution 1\); the claim is released/,
    );
    const logged = production.logs.lines().find((l) => l.outcome === 'failed');
    assert.match(
      JSON.stringify(logged),
      /job failed on execution 1/,
      'the log keeps the error',
    );
  });

  it('runs 50 concurrent identical deliveries exactly once', async () => {
    const { job, calls } = countingJob({ delayMs: 200 });
    const { request } = serve(job);

    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        request.post('/').set(schedulerHeaders()),
      ),
    );

    assert.equal(calls.length, 1);
    const outcomes = responses.map((r) => `${r.status} ${r.body.outcome}`);
    assert.equal(outcomes.filter((o) => o === '200 processed').length, 1);
    assert.ok(
      outcomes.every((o) =>
        ['200 processed', '200 duplicate', '409 in_progress'].includes(o),
      ),
      outcomes.join(', '),
    );
  });

  const invalid: [string, Record<string, string>, RegExp][] = [
    ['no headers at all', {}, /X-CloudScheduler-JobName is missing/],
    [
      'no ScheduleTime from a job not declared here (an "every 5 minutes" job)',
      { 'X-CloudScheduler-JobName': 'groc-job' },
      /ScheduleTime is missing, and no job "groc-job" is declared.*unix-cron/,
    ],
    ['an empty JobName', schedulerHeaders(''), /JobName is empty/],
    ['a JobName with a slash', schedulerHeaders('a/b'), /not a job id/],
    ['a JobName with a dot', schedulerHeaders('a.b'), /not a job id/],
    [
      'a JobName of 501 characters',
      schedulerHeaders('j'.repeat(501)),
      /not a job id/,
    ],
    [
      'a ScheduleTime without offset',
      schedulerHeaders('j', PAST_NOON.replace('Z', '')),
      /not an RFC 3339/,
    ],
    [
      'an impossible date',
      schedulerHeaders('j', '2026-02-30T12:00:00Z'),
      /not a real instant/,
    ],
    [
      'a leap second',
      schedulerHeaders('j', '2016-12-31T23:59:60Z'),
      /not a real instant/,
    ],
    [
      'year 0000',
      schedulerHeaders('j', '0000-01-01T00:00:00Z'),
      /not a real instant/,
    ],
    [
      'trailing junk',
      schedulerHeaders('j', `${PAST_NOON}junk`),
      /not an RFC 3339/,
    ],
    ['an epoch number', schedulerHeaders('j', '1792152000'), /not an RFC 3339/],
    [
      'an oversized ScheduleTime',
      schedulerHeaders('j', PAST_NOON.replace('Z', `.${'0'.repeat(40)}Z`)),
      /longer than 40/,
    ],
  ];
  for (const [what, headers, message] of invalid) {
    it(`refuses ${what} with 400 and writes nothing`, async () => {
      const { job, calls } = countingJob();
      const { request, collection } = serve(job);

      const res = await request.post('/').set(headers);

      assert.equal(res.status, 400);
      assert.equal(res.body.outcome, 'invalid_request');
      assert.match(res.body.message, message);
      assert.equal(res.body.runId, undefined);
      assert.equal(calls.length, 0);
      assert.equal((await documents(collection)).size, 0);
    });
  }

  it('refuses a repeated ScheduleTime header with 400', async () => {
    const { job, calls } = countingJob();
    const { request } = serve(job);

    const res = await request
      .post('/')
      .set('X-CloudScheduler-JobName', 'nightly')
      .set('X-CloudScheduler-ScheduleTime', [
        PAST_NOON,
        rfc3339(PAST_NOON_MS + 3_600_000),
      ] as unknown as string);

    assert.equal(res.status, 400);
    assert.match(res.body.message, /sent 2 times/);
    assert.equal(calls.length, 0);
  });

  it('keys runs by the scope header: two scopes run twice, one scope once', async () => {
    const { job, calls } = countingJob();
    const { request } = serve(job, { env: { RUN_KEY_SCOPE_HEADERS: 'X-Env' } });

    const prod = await request
      .post('/')
      .set({ ...schedulerHeaders(), 'X-Env': 'prod' });
    const staging = await request
      .post('/')
      .set({ ...schedulerHeaders(), 'x-env': 'staging' });
    const prodAgain = await request
      .post('/')
      .set({ ...schedulerHeaders(), 'X-ENV': 'prod' });
    const unscoped = await request.post('/').set(schedulerHeaders());

    assert.deepEqual(
      [prod.body.outcome, staging.body.outcome, prodAgain.body.outcome],
      ['processed', 'processed', 'duplicate'],
    );
    assert.notEqual(prod.body.runId, staging.body.runId);
    assert.equal(unscoped.status, 400);
    assert.match(unscoped.body.message, /Scope header x-env is missing/);
    assert.equal(calls.length, 2);
  });

  it('keys runs by the scope query parameters', async () => {
    const { job, calls } = countingJob();
    const { request } = serve(job, {
      env: { RUN_KEY_SCOPE_PARAMS: 'project,location' },
    });

    const a = await request
      .post('/?project=p1&location=us-central1')
      .set(schedulerHeaders());
    const b = await request
      .post('/?project=p2&location=us-central1')
      .set(schedulerHeaders());
    const repeated = await request
      .post('/?project=p1&project=p2&location=x')
      .set(schedulerHeaders());

    assert.deepEqual(
      [a.body.outcome, b.body.outcome],
      ['processed', 'processed'],
    );
    assert.equal(repeated.status, 400);
    assert.equal(calls.length, 2);
  });

  it('answers 200 and logs an error when the job succeeded but completion cannot be recorded', async () => {
    const { ledger: seed, collection } = newLedger();
    const db = hookedFirestore({
      update: async () => Promise.reject(grpcError(14)),
    });
    const { ledger } = newLedger({ collection }, db);
    const { job, calls } = countingJob();
    const { request, logs } = serve(job, { ledger, collection });

    const res = await request.post('/').set(schedulerHeaders());

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    assert.match(res.body.message, /did not record its completion/);
    assert.equal(calls.length, 1);
    assert.equal(
      (await seed.documents.read(res.body.runId)).record?.status,
      'in_progress',
    );
    const errors = logs.lines().filter((l) => l.severity === 'ERROR');
    assert.ok(
      errors.some((l) =>
        String(l.message).includes('completion could not be recorded'),
      ),
    );
  });

  it('says what a retry meets after a release Firestore never recorded: this instance runs it at once', async () => {
    let releaseFails = true;
    const db = hookedFirestore({
      update: (real, args) => {
        if (releaseFails) {
          return Promise.reject(grpcError(14, 'UNAVAILABLE: injected'));
        }
        return (real.update as (...a: unknown[]) => Promise<unknown>).apply(
          real,
          args,
        );
      },
    });
    const { ledger, collection } = newLedger({ timeoutMs: 300 }, db);
    const { job, calls } = countingJob({ fail: (n) => n === 1 });
    const { request } = serve(job, { ledger, collection });
    const headers = schedulerHeaders();

    const first = await request.post('/').set(headers);
    releaseFails = false;
    const retry = await request.post('/').set(headers);

    assert.equal(first.body.outcome, 'failed');
    assert.equal(
      retry.body.outcome,
      'processed',
      'a retry on this instance ran at once',
    );
    assert.equal(calls.length, 2);
    assert.match(
      first.body.message,
      /a retry reaching this instance runs it at once/,
    );
  });

  it('answers 500 unavailable without running the job when Firestore does not answer', async () => {
    const db = hookedFirestore({ create: () => new Promise(() => {}) });
    const { ledger, collection } = newLedger({ timeoutMs: 300 }, db);
    const { job, calls } = countingJob();
    const { request } = serve(job, { ledger, collection });

    const res = await request.post('/').set(schedulerHeaders());

    assert.equal(res.status, 500);
    assert.equal(res.body.outcome, 'unavailable');
    assert.match(
      res.body.message,
      /Firestore is unavailable.*the job was not run/,
    );
    assert.equal(calls.length, 0);
  });

  it('logs one line per request with the run fields, severity and trace, and never the token', async () => {
    const { request, logs } = serve(async (ctx) =>
      ctx.logger.info({ authorization: 'Bearer s3cret' }, 'job log'),
    );

    const res = await request
      .post('/')
      .set({
        ...schedulerHeaders(),
        Authorization: 'Bearer s3cret-token',
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      })
      .send({ secret: 'body-value' });

    const lines = logs.lines();
    const summary = lines.filter((l) => l.outcome !== undefined);
    assert.equal(summary.length, 1);
    const [line] = summary;
    assert.equal(line?.severity, 'INFO');
    assert.equal(line?.outcome, 'processed');
    assert.equal(line?.runId, res.body.runId);
    assert.equal(line?.jobName, 'nightly-report');
    assert.equal(line?.scheduleTime, PAST_NOON);
    assert.equal(typeof line?.attemptId, 'string');
    assert.equal(typeof line?.durationMs, 'number');
    assert.equal(
      line?.['logging.googleapis.com/trace'],
      'projects/demo-project/traces/0af7651916cd43dd8448eb211c80319c',
    );
    assert.equal(line?.['logging.googleapis.com/spanId'], 'b7ad6b7169203331');
    const jobLine = lines.find((l) => l.message === 'job log');
    assert.equal(jobLine?.attemptId, line?.attemptId);
    assert.doesNotMatch(logs.raw(), /s3cret|body-value/);
  });

  for (const method of ['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']) {
    it(`answers ${method} 405 with an Allow header and runs nothing`, async () => {
      const { job, calls } = countingJob();
      const { request, collection } = serve(job);

      const res = await request[method.toLowerCase() as 'get'](`/`).set(
        schedulerHeaders(),
      );

      assert.equal(res.status, 405);
      assert.equal(res.headers.allow, 'POST');
      if (method !== 'HEAD') {
        assert.equal(res.body.outcome, 'method_not_allowed');
      }
      assert.equal(calls.length, 0);
      assert.equal((await documents(collection)).size, 0, 'nothing written');
    });
  }

  it('runs the job for the method HTTP_METHOD names, and refuses POST then', async () => {
    const { job, calls } = countingJob();
    const { request } = serve(job, { env: { HTTP_METHOD: 'put' } });

    const put = await request.put('/').set(schedulerHeaders());
    const post = await request.post('/').set(schedulerHeaders('other'));

    assert.equal(put.status, 200);
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'PUT');
    assert.equal(calls.length, 1);
  });

  it('answers 500 unreadable_record for a record it cannot read, leaves it, and logs an ERROR naming run, field and repair', async () => {
    const { job, calls } = countingJob();
    const { request, collection, logs } = serve(job);
    const runId = computeRunId(RUN);
    const bad = {
      status: 'in_progress',
      attempt_id: 'x',
      leased_at: 'yesterday',
      lease_ms: 1000,
    };
    await firestore.collection(collection).doc(runId).set(bad);

    const res = await request.post('/').set(schedulerHeaders());

    assert.equal(res.status, 500);
    assert.equal(res.body.outcome, 'unreadable_record');
    assert.match(
      res.body.message,
      /field leased_at is missing or not a timestamp/,
    );
    assert.equal(calls.length, 0);
    assert.deepEqual(await storedRecord(collection, runId), bad);
    const error = logs.lines().find((l) => l.outcome === 'unreadable_record');
    assert.equal(error?.severity, 'ERROR');
    assert.equal(error?.runId, runId);
    assert.equal(error?.field, 'leased_at');
    assert.match(String(error?.message), /scheduled run: unreadable_record/);
  });

  const missingDatabase: [string, 'create' | 'get'][] = [
    ['at the claim', 'create'],
    ['at the clock read, before any claim', 'get'],
  ];
  for (const [where, method] of missingDatabase) {
    it(`answers 500 unavailable naming FIRESTORE_DATABASE, even in production, when the database does not exist (${where})`, async () => {
      const db = hookedFirestore({
        [method]: async () => Promise.reject(grpcError(5, 'NOT_FOUND')),
      });
      const { ledger, collection } = newLedger({}, db);
      const { job, calls } = countingJob();
      const { request } = serve(job, {
        ledger,
        collection,
        env: { NODE_ENV: 'production' },
      });

      const res = await request.post('/').set(schedulerHeaders());

      assert.equal(res.status, 500);
      assert.equal(res.body.outcome, 'unavailable');
      assert.match(
        res.body.message,
        /database "\(default\)" was not found.*check FIRESTORE_DATABASE/,
      );
      assert.equal(calls.length, 0);
    });
  }

  const oddThrows: [string, () => unknown][] = [
    ['an object without a prototype', () => Object.create(null)],
    ['a string', () => 'plain string'],
    ['undefined', () => undefined],
    [
      'an object whose message getter throws',
      () =>
        Object.defineProperty({}, 'message', {
          get() {
            throw new Error('getter');
          },
        }),
    ],
    [
      'a revoked proxy',
      () => {
        const { proxy, revoke } = Proxy.revocable({}, {});
        revoke();
        return proxy;
      },
    ],
  ];
  for (const [what, value] of oddThrows) {
    it(`answers JSON 500 failed and releases the claim when the job throws ${what}`, async () => {
      const { request, collection, logs } = serve(async () => {
        throw value();
      });

      const res = await request.post('/').set(schedulerHeaders());

      assert.equal(res.status, 500);
      assert.equal(res.body.outcome, 'failed');
      assert.match(
        res.body.message,
        /^The job failed \(.*\); the claim is released/,
      );
      assert.equal(
        (await storedRecord(collection, res.body.runId)).status,
        'failed',
        'released',
      );
      const line = logs.lines().find((l) => l.outcome === 'failed');
      assert.equal(line?.status, 500, 'the log reports the status sent');
      assert.equal(
        logs.lines().filter((l) => /TypeError/.test(JSON.stringify(l))).length,
        0,
      );
    });
  }

  describe('dispatch on X-CloudScheduler-JobName', () => {
    function twoJobs() {
      const ran: { job: string; ctx: JobContext }[] = [];
      const jobs = validateJobs([
        defineJob({
          id: 'nightly-report',
          schedule: '0 2 * * *',
          timeZone: 'Europe/Berlin',
          run: (ctx) => {
            ran.push({ job: 'nightly-report', ctx });
          },
        }),
        defineJob({
          id: 'hourly-sync',
          schedule: '0 * * * *',
          run: (ctx) => {
            ran.push({ job: 'hourly-sync', ctx });
          },
        }),
      ]);
      return { jobs, ran };
    }

    it("runs the named job's function once, with its declaration in ctx.job", async () => {
      const { jobs, ran } = twoJobs();
      const { request } = serveJobs(jobs);

      const nightly = await request
        .post('/')
        .set(schedulerHeaders('nightly-report'));
      const hourly = await request
        .post('/')
        .set(schedulerHeaders('hourly-sync'));
      const again = await request
        .post('/')
        .set(schedulerHeaders('hourly-sync'));

      assert.deepEqual(
        [nightly.body.outcome, hourly.body.outcome, again.body.outcome],
        ['processed', 'processed', 'duplicate'],
      );
      assert.deepEqual(
        ran.map((r) => r.job),
        ['nightly-report', 'hourly-sync'],
      );
      assert.deepEqual(ran[0]?.ctx.job, {
        id: 'nightly-report',
        schedule: '0 2 * * *',
        timeZone: 'Europe/Berlin',
      });
      assert.notEqual(nightly.body.runId, hourly.body.runId);
    });

    it('treats the short id and projects/P/locations/L/jobs/ID as the same job and the same run', async () => {
      const { jobs, ran } = twoJobs();
      const { request, collection } = serveJobs(jobs);
      const full =
        'projects/my-project/locations/us-central1/jobs/nightly-report';

      const first = await request.post('/').set(schedulerHeaders(full));
      const second = await request
        .post('/')
        .set(schedulerHeaders('nightly-report'));

      assert.equal(first.body.outcome, 'processed');
      assert.equal(second.body.outcome, 'duplicate');
      assert.equal(first.body.runId, second.body.runId);
      assert.equal(
        first.body.runId,
        computeRunId({ ...RUN, jobName: 'nightly-report' }),
      );
      assert.equal(ran.length, 1);
      assert.equal(ran[0]?.ctx.job.id, 'nightly-report');
      assert.equal(
        (await storedRecord(collection, first.body.runId)).job_name,
        'nightly-report',
      );
    });

    it('answers 404 unknown_job naming the id it got, writes nothing and runs nothing', async () => {
      const { jobs, ran } = twoJobs();
      const { request, collection, logs } = serveJobs(jobs);

      const res = await request
        .post('/')
        .set(schedulerHeaders('weekly-cleanup'));

      assert.equal(res.status, 404);
      assert.equal(res.body.outcome, 'unknown_job');
      assert.match(res.body.message, /No job "weekly-cleanup" is declared/);
      assert.match(res.body.message, /declared: nightly-report, hourly-sync/);
      assert.equal(res.body.runId, undefined);
      assert.equal(ran.length, 0);
      assert.equal((await documents(collection)).size, 0);
      assert.equal(
        logs.lines().find((l) => l.outcome === 'unknown_job')?.severity,
        'WARNING',
      );
    });

    it('answers 404 unknown_job without the declared ids when errors are not exposed: they tell any caller which jobs run here', async () => {
      const { jobs } = twoJobs();
      const { request } = serveJobs(jobs, { env: { NODE_ENV: 'production' } });

      const res = await request
        .post('/')
        .set(schedulerHeaders('weekly-cleanup'));

      assert.equal(res.status, 404);
      assert.equal(res.body.outcome, 'unknown_job');
      assert.match(
        res.body.message,
        /^No job "weekly-cleanup" is declared in this function\. /,
      );
      assert.doesNotMatch(res.body.message, /nightly-report|hourly-sync/);
    });
  });
});

describe("Firestore's time per delivery", () => {
  it('is read once per delivery, whatever the delivery is: a slot on time, late, a forced run, a Force run without its time, a manual run', async () => {
    const { job } = countingJob();
    const now = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 1_000);
    let reads = 0;
    const clock = async () => {
      reads++;
      return now;
    };
    const { request } = serveJobs(declareJobs(job), {}, { clock });
    const minute = (n: number) =>
      new Date(now.getTime() - 1_000 + n * 60_000).toISOString();
    const deliveries: Record<string, string>[] = [
      schedulerHeaders('nightly-report', minute(0)),
      schedulerHeaders('nightly', minute(-2)),
      schedulerHeaders('other', minute(1)),
      { 'X-CloudScheduler-JobName': 'j' },
      {
        ...schedulerHeaders('nightly-report', minute(0)),
        'X-Run-Once-Mode': 'manual',
        'X-Run-Once-Trigger-Id': 'manual-0001',
      },
    ];

    for (const headers of deliveries) {
      reads = 0;
      const res = await request.post('/').set(headers);

      assert.equal(res.body.outcome, 'processed', JSON.stringify(res.body));
      assert.equal(reads, 1, `${JSON.stringify(headers)}: ${reads} reads`);
    }
  });
});

describe('what a processed run costs in Firestore', () => {
  it('a run of an allow job is two writes and no read once the instance knows Firestore’s time: no lock, no batch', async () => {
    const { job, calls } = countingJob();
    const { db, calls: firestoreCalls } = countingFirestore();
    const { ledger, collection } = newLedger(
      { retentionMs: 31_536_000_000 },
      db,
    );
    const { request } = serve(job, { ledger, collection });
    const minute = Math.floor((Date.now() - 3_600_000) / 60_000) * 60_000;
    const slot = (m: number) =>
      new Date(minute + m * 60_000).toISOString().replace('.000Z', 'Z');
    await request.post('/').set(schedulerHeaders('nightly-report', slot(0)));
    const before = { ...firestoreCalls };

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', slot(1)));

    assert.equal(res.body.outcome, 'processed');
    assert.deepEqual(
      {
        create: firestoreCalls.create - before.create,
        update: firestoreCalls.update - before.update,
        get: firestoreCalls.get - before.get,
      },
      { create: 1, update: 1, get: 0 },
    );
    assert.equal(calls.length, 2);
  });
});
