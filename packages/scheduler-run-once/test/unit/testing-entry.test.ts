/**
 * The `testing` entry (`src/testing.ts`): a test context that behaves as the function's `ctx`
 * (its run id, its note checks, its abort), and a test server that is the function's own handler
 * over the in-memory Firestore: processed, then duplicate; 500, then a retry that runs the job.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import supertest from 'supertest';
import {
  AttemptAbortedError,
  ConfigError,
  RunOnceError,
} from '../../src/core/errors.ts';
import type { JobContext } from '../../src/core/job-context.ts';
import type { NoteValue } from '../../src/core/notes.ts';
import { computeRunId } from '../../src/core/run-key.ts';
import { defineJob } from '../../src/policy/job-declaration.ts';
import {
  createTestContext,
  createTestServer,
  DEFAULT_TEST_JOB,
  schedulerHeaders,
} from '../../src/testing.ts';

const EVERY_MINUTE = {
  id: 'minutely',
  schedule: '* * * * *',
  timeZone: 'Etc/UTC',
};

/** A job every minute that records each context it was called with, and runs `work` in it. */
function recordingJob(
  work: (ctx: JobContext, call: number) => Promise<void> | void = () => {},
) {
  const calls: JobContext[] = [];
  const job = defineJob({
    ...EVERY_MINUTE,
    run: (ctx) => {
      calls.push(ctx);
      return work(ctx, calls.length);
    },
  });
  return { job, calls };
}

/** What a note the function refuses is refused with, by the function itself (its `ctx.note`). */
async function functionsRefusal(
  name: string,
  value: NoteValue,
): Promise<unknown> {
  let refusal: unknown;
  const { job } = recordingJob(async (ctx) => {
    refusal = await ctx.note(name, value).then(
      () => 'accepted',
      (err: unknown) => err,
    );
  });
  const { server } = createTestServer([job]);
  const res = await supertest(server).post('/').set(schedulerHeaders(job));
  assert.equal(res.body.outcome, 'processed', JSON.stringify(res.body));
  return refusal;
}

describe('createTestContext', () => {
  it("gives a slot run of the default job at its latest slot, with the function's run id", () => {
    const before = Date.now();

    const ctx = createTestContext();

    const slot = ctx.scheduleTime;
    assert.equal(ctx.kind, 'slot');
    assert.deepEqual(ctx.job, DEFAULT_TEST_JOB);
    assert.equal(ctx.jobName, DEFAULT_TEST_JOB.id);
    assert.ok(
      slot.getTime() <= Date.now() && slot.getTime() > before - 5 * 60_000,
    );
    assert.equal(slot.getUTCMinutes() % 5, 0);
    assert.equal(slot.getUTCSeconds(), 0);
    const scheduleTime = `${slot.toISOString().slice(0, 19)}Z`;
    assert.equal(
      ctx.runId,
      computeRunId({ scope: [], jobName: 'test-job', scheduleTime }),
    );
    assert.equal(ctx.signal.aborted, false);
    assert.ok(ctx.leaseExpires.getTime() > ctx.firstClaimedAt.getTime());
  });

  it('stands for its slot as a slot run, for none as a Force run or a manual run (ctx.slot)', () => {
    const slotRun = createTestContext();
    const forced = createTestContext({ kind: 'forced' });
    const manual = createTestContext({ kind: 'manual' });

    assert.equal(slotRun.slot?.getTime(), slotRun.scheduleTime.getTime());
    assert.equal(forced.slot, undefined);
    assert.equal(manual.slot, undefined);
  });

  it('passes every field a test sets through to the job', () => {
    const scheduleTime = new Date('2026-10-16T12:00:00Z');
    const overrides = {
      runId: 'a'.repeat(64),
      jobName: 'projects/p/locations/l/jobs/nightly',
      scheduleTime,
      kind: 'rerun' as const,
      rerunOf: 'b'.repeat(64),
      attemptId: 'attempt-2',
      firstClaimedAt: new Date('2026-10-16T12:00:01Z'),
      leaseExpires: new Date('2026-10-16T12:05:01Z'),
      job: { id: 'nightly', schedule: '0 12 * * *', timeZone: 'Europe/Berlin' },
    };

    const ctx = createTestContext(overrides);

    for (const [field, value] of Object.entries(overrides)) {
      assert.deepEqual(ctx[field as keyof typeof overrides], value, field);
    }
  });

  it("computes the run id from the job and schedule time it is given, as the function's", () => {
    const scheduleTime = new Date('2026-10-16T12:00:00Z');

    const ctx = createTestContext({ job: EVERY_MINUTE, scheduleTime });

    const expected = computeRunId({
      scope: [],
      jobName: 'minutely',
      scheduleTime: '2026-10-16T12:00:00Z',
    });
    assert.equal(ctx.runId, expected);
  });

  it("records the job's log lines with the run's bindings, a child's and the call's fields", () => {
    const ctx = createTestContext();

    ctx.logger.info('job started');
    ctx.logger.child({ step: 'upload' }).warn({ bytes: 12 }, 'slow upload');

    assert.deepEqual(
      ctx.logs.map((line) => [line.level, line.message]),
      [
        ['info', 'job started'],
        ['warn', 'slow upload'],
      ],
    );
    const [, slow] = ctx.logs;
    assert.equal(slow?.fields.runId, ctx.runId);
    assert.equal(slow?.fields.attemptId, ctx.attemptId);
    assert.equal(slow?.fields.step, 'upload');
    assert.equal(slow?.fields.bytes, 12);
  });

  it('keeps the notes the function would keep, the last value per name', async () => {
    const ctx = createTestContext();

    await ctx.note('uploadId', 'u-1');
    await ctx.note('uploadId', 'u-2');
    await ctx.note('counts', { rows: 3, done: true });

    assert.deepEqual(ctx.notes, {
      uploadId: 'u-2',
      counts: { rows: 3, done: true },
    });
  });

  for (const [what, name, value] of [
    ['a Date', 'when', new Date(0)],
    ['a name of the prototype', 'constructor', 'x'],
    ['a string over 1500 characters', 'long', 'x'.repeat(1501)],
  ] as const) {
    it(`refuses ${what} as a note, with the function's own error`, async () => {
      const ctx = createTestContext();
      const refused = await functionsRefusal(name, value as NoteValue);

      const ours = await ctx.note(name, value as NoteValue).then(
        () => 'accepted',
        (err: unknown) => err,
      );

      assert.ok(
        refused instanceof RunOnceError,
        `the function refused it: ${String(refused)}`,
      );
      assert.ok(ours instanceof RunOnceError);
      assert.equal(ours.message, refused.message);
      assert.deepEqual(ctx.notes, {});
    });
  }

  it('refuses the 101st note as the run record would', async () => {
    const ctx = createTestContext();
    for (let i = 0; i < 100; i++) {
      await ctx.note(`n${i}`, i);
    }

    await assert.rejects(ctx.note('n100', 100), (err: Error) => {
      return err instanceof RunOnceError && /at most 100/.test(err.message);
    });
  });

  it('aborts its signal with the reason a test gives, an AttemptAbortedError', () => {
    const ctx = createTestContext();

    ctx.abort('job_timeout');

    assert.equal(ctx.signal.aborted, true);
    assert.ok(ctx.signal.reason instanceof AttemptAbortedError);
    assert.equal(ctx.signal.reason.reason, 'job_timeout');
  });

  it('rejects notes after a lost lease with its reason, but not after a shutdown', async () => {
    const lost = createTestContext();
    const stopping = createTestContext();

    lost.abort('lease_lost');
    stopping.abort('shutdown');

    await assert.rejects(
      lost.note('step', 2),
      (err: unknown) => err === lost.signal.reason,
    );
    await stopping.note('step', 2);
    assert.deepEqual(stopping.notes, { step: 2 });
  });

  it("follows the test's own signal too", () => {
    const controller = new AbortController();
    const ctx = createTestContext({ signal: controller.signal });

    controller.abort(new Error('stop'));

    assert.equal(ctx.signal.aborted, true);
    assert.equal((ctx.signal.reason as Error).message, 'stop');
  });
});

describe('createTestServer', () => {
  it('runs a slot once: processed with the run id, then duplicate without running it again', async () => {
    const { job, calls } = recordingJob();
    const { server } = createTestServer([job]);
    const headers = schedulerHeaders(job);

    const first = await supertest(server).post('/').set(headers);
    const second = await supertest(server).post('/').set(headers);

    assert.equal(first.status, 200);
    assert.equal(first.body.outcome, 'processed', JSON.stringify(first.body));
    assert.equal(second.status, 200);
    assert.equal(second.body.outcome, 'duplicate', JSON.stringify(second.body));
    assert.equal(calls.length, 1);
    const scheduleTime = new Date(
      headers['X-CloudScheduler-ScheduleTime'] as string,
    );
    assert.equal(
      first.body.runId,
      createTestContext({ job: EVERY_MINUTE, scheduleTime }).runId,
    );
    assert.equal(calls[0]?.runId, first.body.runId);
  });

  it('answers 500 failed for a job that throws, and runs it again on the retry', async () => {
    const { job, calls } = recordingJob((_ctx, call) => {
      if (call === 1) {
        throw new Error('downstream said 503');
      }
    });
    const { server } = createTestServer([job]);
    const headers = schedulerHeaders(job);

    const failed = await supertest(server).post('/').set(headers);
    const retried = await supertest(server).post('/').set(headers);

    assert.equal(failed.status, 500);
    assert.equal(failed.body.outcome, 'failed');
    assert.equal(retried.status, 200);
    assert.equal(
      retried.body.outcome,
      'processed',
      JSON.stringify(retried.body),
    );
    assert.equal(calls.length, 2);
    assert.equal(calls[1]?.runId, calls[0]?.runId);
    assert.notEqual(calls[1]?.attemptId, calls[0]?.attemptId);
  });

  it("logs the function's lines and the job's own, bound to the run", async () => {
    const { job } = recordingJob((ctx) => ctx.logger.info('job finished'));
    const { server, logs } = createTestServer([job]);

    const res = await supertest(server).post('/').set(schedulerHeaders(job));

    const jobLine = logs.find((line) => line.message === 'job finished');
    const answerLine = logs.find(
      (line) => line.message === 'scheduled run: processed',
    );
    assert.equal(jobLine?.runId, res.body.runId);
    assert.equal(answerLine?.runId, res.body.runId);
  });

  it('keeps the run record in its in-memory Firestore', async () => {
    const { job } = recordingJob();
    const { server, firestore } = createTestServer([job]);

    const res = await supertest(server).post('/').set(schedulerHeaders(job));

    const record = firestore.dump().get(`scheduler_runs/${res.body.runId}`);
    assert.equal(record?.data.status, 'completed');
  });

  it("ignores the caller's process.env: a variable there that the function refuses changes nothing", async () => {
    const { job } = recordingJob();
    const saved = process.env.LEASE_SECONDS;
    process.env.LEASE_SECONDS = 'not seconds';
    try {
      const { server } = createTestServer([job]);
      const res = await supertest(server).post('/').set(schedulerHeaders(job));
      assert.equal(res.body.outcome, 'processed', JSON.stringify(res.body));
    } finally {
      if (saved === undefined) {
        delete process.env.LEASE_SECONDS;
      } else {
        process.env.LEASE_SECONDS = saved;
      }
    }
  });

  it('applies the configuration a test gives, and refuses a bad one as the function does', async () => {
    const { job } = recordingJob();
    const oidc = {
      AUTH_MODE: 'verify-oidc',
      OIDC_AUDIENCE: 'a',
      OIDC_INVOKERS: 's@p.iam',
    };
    const { server } = createTestServer([job], { env: oidc });

    const unauthenticated = await supertest(server)
      .post('/')
      .set(schedulerHeaders(job));

    assert.equal(unauthenticated.status, 401);
    assert.throws(
      () => createTestServer([job], { env: { LEASE_SECONDS: '0' } }),
      (err: unknown) =>
        err instanceof ConfigError && /LEASE_SECONDS="0"/.test(err.message),
    );
  });

  it('answers 400 for a slot an hour ahead, as the function refuses it', async () => {
    const { job, calls } = recordingJob();
    const { server } = createTestServer([job]);
    const hourAhead = new Date(
      Math.floor(Date.now() / 60_000) * 60_000 + 3_600_000,
    );

    const res = await supertest(server)
      .post('/')
      .set(schedulerHeaders(job.id, hourAhead));

    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(calls.length, 0);
  });
});

describe('schedulerHeaders', () => {
  it("names the job and the slot as Cloud Scheduler's headers do", () => {
    const headers = schedulerHeaders(
      'nightly',
      new Date('2026-10-16T03:00:00.000Z'),
    );

    assert.deepEqual(headers, {
      'X-CloudScheduler-JobName': 'nightly',
      'X-CloudScheduler-ScheduleTime': '2026-10-16T03:00:00Z',
    });
  });

  it('asks for a schedule time when the job has no schedule to find its latest slot', () => {
    assert.throws(() => schedulerHeaders('nightly'), TypeError);
  });
});
