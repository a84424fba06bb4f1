/**
 * The console's "Force run" without `X-CloudScheduler-ScheduleTime` ("uses the timestamp of the
 * next scheduled execution or may be omitted", the Scheduler guide), through the handler on the
 * emulator, each delivery at its own time on a driven clock standing for Firestore's. The slot is
 * a daily one a few minutes from the real time: a record's first claim is Firestore's real time.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { JobContext } from '../src/core/job-context.ts';
import { computeRunId } from '../src/core/run-key.ts';
import {
  defineJob,
  type JobDeclaration,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { toUtcRfc3339 } from '../src/policy/schedule.ts';
import { firestore, schedulerHeaders, serveJobs } from './helpers.ts';

const MINUTE = 60_000;

/** A daily job whose slot is about four minutes after the real time, and that slot. */
function dailyJobSoon(
  settings: { retryCount?: number; maxRetryDurationSeconds?: number } = {},
) {
  const slot = new Date(Math.ceil(Date.now() / MINUTE) * MINUTE + 4 * MINUTE);
  const calls: JobContext[] = [];
  const jobs = validateJobs([
    defineJob({
      id: 'nightly-report',
      schedule: `${slot.getUTCMinutes()} ${slot.getUTCHours()} * * *`,
      ...settings,
      run: async (ctx) => {
        calls.push(ctx);
      },
    }),
  ]);
  return { jobs, calls, slot };
}

/** A per-minute job with `settings`, the contexts it ran with, and its Force run's headers. */
function everyMinuteJob(settings: Partial<JobDeclaration>) {
  const calls: JobContext[] = [];
  const jobs = validateJobs([
    defineJob({
      id: 'every-minute',
      schedule: '* * * * *',
      ...settings,
      run: async (ctx) => {
        calls.push(ctx);
      },
    }),
  ]);
  return {
    jobs,
    calls,
    forceRun: { 'X-CloudScheduler-JobName': 'every-minute' },
  };
}

/**
 * Retry settings whose retries may come after the retry window: none under retryCount, so retries
 * come only while maxRetryDuration (60 s) allows one. The retry window assumes each attempt ran to
 * its 15 s deadline (15 + 16 + 15 = 46 s); an attempt that fails fast leaves its retry later.
 */
const RETRIES_PAST_THE_WINDOW = {
  attemptDeadlineSeconds: 15,
  retryCount: 0,
  maxRetryDurationSeconds: 60,
  minBackoffSeconds: 16,
  maxBackoffSeconds: 20,
  maxDoublings: 0,
} as const satisfies Partial<JobDeclaration>;

const at = (slot: Date, ms: number) => new Date(slot.getTime() + ms);
const FORCE_RUN = { 'X-CloudScheduler-JobName': 'nightly-report' };

describe('a Force run without X-CloudScheduler-ScheduleTime', () => {
  it('is one forced run keyed on the next slot: a second click is a duplicate, and the slot runs at its time', async () => {
    const { jobs, calls, slot } = dailyJobSoon();
    let now = at(slot, -4 * MINUTE);
    const { request, logs } = serveJobs(jobs, {}, { clock: async () => now });

    const first = await request.post('/').set(FORCE_RUN);
    now = at(slot, -2 * MINUTE);
    const second = await request.post('/').set(FORCE_RUN);
    now = slot;
    const scheduled = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', toUtcRfc3339(slot)));

    assert.deepEqual(
      [first, second, scheduled].map((r) => [r.status, r.body.outcome]),
      [
        [200, 'processed'],
        [200, 'duplicate'],
        [200, 'processed'],
      ],
    );
    const name = {
      jobName: 'nightly-report',
      scheduleTime: toUtcRfc3339(slot),
      scope: [],
    };
    assert.equal(
      first.body.runId,
      computeRunId(name, ['forced']),
      'the forced run of the next slot',
    );
    assert.equal(second.body.runId, first.body.runId);
    assert.equal(
      scheduled.body.runId,
      computeRunId(name),
      'the slot keeps its own run',
    );
    assert.deepEqual(
      calls.map((c) => [c.kind, c.scheduleTime.toISOString()]),
      [
        ['forced', slot.toISOString()],
        ['slot', slot.toISOString()],
      ],
    );
    assert.match(
      first.body.message,
      /^Forced run without X-CloudScheduler-ScheduleTime/,
    );
    const line = logs
      .lines()
      .find((l) => l.runId === first.body.runId && l.outcome === 'processed');
    assert.equal(line?.runKind, 'forced');
    assert.equal(line?.scheduleTimeSent, false);
  });

  it('is a run of its own even a few seconds before the slot, where a timed one would be the slot', async () => {
    const { jobs, calls, slot } = dailyJobSoon();
    let now = at(slot, -5_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const forced = await request.post('/').set(FORCE_RUN);
    now = slot;
    const scheduled = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', toUtcRfc3339(slot)));

    assert.deepEqual(
      [forced, scheduled].map((r) => r.body.outcome),
      ['processed', 'processed'],
    );
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced', 'slot'],
    );
  });

  it('takes a retry that comes after the slot, within the retry window, for the same forced run', async () => {
    const { jobs, calls, slot } = dailyJobSoon();
    let now = at(slot, -4 * MINUTE);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const first = await request.post('/').set(FORCE_RUN);
    now = at(slot, 2 * MINUTE);
    const retry = await request.post('/').set(FORCE_RUN);

    assert.deepEqual(
      [first, retry].map((r) => [r.body.outcome, r.body.runId]),
      [
        ['processed', first.body.runId],
        ['duplicate', first.body.runId],
      ],
    );
    assert.equal(calls.length, 1);
  });

  it('takes a retry of a per-minute job that comes more than 100 slots later, within the retry window, for the same forced run', async () => {
    // Back-offs of 10 min to an hour: a window of about three and a half hours, 200-odd slots.
    const { jobs, calls, forceRun } = everyMinuteJob({
      retryCount: 5,
      maxRetryDurationSeconds: 0,
      minBackoffSeconds: 600,
      maxBackoffSeconds: 3600,
    });
    let now = new Date();
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const first = await request.post('/').set(forceRun);
    now = new Date(now.getTime() + 150 * MINUTE);
    const retry = await request.post('/').set(forceRun);

    assert.deepEqual(
      [first, retry].map((r) => [r.body.outcome, r.body.runId]),
      [
        ['processed', first.body.runId],
        ['duplicate', first.body.runId],
      ],
    );
    assert.equal(calls.length, 1);
  });

  it('takes a retry that comes after the retry window, within maxRetryDuration, for the same forced run', async () => {
    // Fault-biased seed 5, history 23.
    const { jobs, calls, forceRun } = everyMinuteJob(RETRIES_PAST_THE_WINDOW);
    // The claim's first_claimed_at is the emulator's own time: the retry comes 51 s after it by
    // the driven clock, and the forced slot lies within the 75 s the retry looks back over.
    const claimedFrom = Date.now();
    const slot = new Date(Math.ceil((claimedFrom - 23_000) / MINUTE) * MINUTE);
    let now = at(slot, -20_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const first = await request.post('/').set(forceRun);
    now = new Date(claimedFrom + 51_000);
    const retry = await request.post('/').set(forceRun);

    assert.deepEqual(
      [first, retry].map((r) => [r.body.outcome, r.body.runId]),
      [
        ['processed', first.body.runId],
        ['duplicate', first.body.runId],
      ],
    );
    assert.equal(calls.length, 1);
  });

  it('takes its retry for its own forced run when its first delivery took over the failed forced run an earlier click of the slot left', async () => {
    // The simulator, --seed=625370594 --path 225: the record keeps the earlier click's first claim.
    const calls: JobContext[] = [];
    const jobs = validateJobs([
      defineJob({
        id: 'every-minute',
        schedule: '* * * * *',
        attemptDeadlineSeconds: 120,
        retryCount: 0,
        maxRetryDurationSeconds: 0,
        run: async (ctx) => {
          calls.push(ctx);
          if (calls.length === 1) {
            throw new Error('the earlier click failed');
          }
        },
      }),
    ]);
    const forceRun = { 'X-CloudScheduler-JobName': 'every-minute' };
    let now = new Date();
    const { request, collection } = serveJobs(
      jobs,
      {},
      { clock: async () => now },
    );
    const earlier = await request.post('/').set(forceRun);
    // That click was ten minutes ago: long before the window its slot's next click looks back over.
    const tenMinutesAgo = new Date(now.getTime() - 10 * MINUTE);
    await firestore.collection(collection).doc(earlier.body.runId).update({
      first_claimed_at: tenMinutesAgo,
      claimed_at: tenMinutesAgo,
    });

    const click = await request.post('/').set(forceRun);
    // The slot both clicks were taken for: the next one, strictly after their time.
    const slot = new Date((Math.floor(now.getTime() / MINUTE) + 1) * MINUTE);
    now = at(slot, 5_000);
    const retry = await request.post('/').set(forceRun);

    assert.deepEqual(
      [earlier, click, retry].map((r) => [r.body.outcome, r.body.runId]),
      [
        ['failed', earlier.body.runId],
        ['processed', earlier.body.runId],
        ['duplicate', earlier.body.runId],
      ],
    );
    assert.equal(calls.length, 2);
  });

  it('answers a slot’s retry after the retry window, within maxRetryDuration, as the forced run its on-time delivery was taken for', async () => {
    const { jobs, calls } = everyMinuteJob(RETRIES_PAST_THE_WINDOW);
    // The claim's first_claimed_at is the emulator's own time, at or after the slot: the forced
    // run is the slot's own delivery, judged 45 s early by a clock that is behind.
    const slot = new Date(Math.floor(Date.now() / MINUTE) * MINUTE);
    const headers = schedulerHeaders('every-minute', toUtcRfc3339(slot));
    let now = at(slot, -45_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const onTime = await request.post('/').set(headers);
    now = at(slot, 51_000);
    const retry = await request.post('/').set(headers);

    const forced = computeRunId(
      { jobName: 'every-minute', scheduleTime: toUtcRfc3339(slot), scope: [] },
      ['forced'],
    );
    assert.deepEqual(
      [onTime, retry].map((r) => [r.body.outcome, r.body.runId]),
      [
        ['processed', forced],
        ['duplicate', forced],
      ],
    );
    assert.equal(calls.length, 1);
  });

  it('is a new forced run, of the next slot, once the last one’s retry window has passed', async () => {
    // No retries (both limits 0, as Scheduler retries until both are reached): a window of one attempt deadline, 180 s.
    const { jobs, slot } = dailyJobSoon({
      retryCount: 0,
      maxRetryDurationSeconds: 0,
    });
    let now = at(slot, -4 * MINUTE);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const first = await request.post('/').set(FORCE_RUN);
    now = at(slot, 10 * MINUTE);
    const later = await request.post('/').set(FORCE_RUN);

    assert.deepEqual(
      [first, later].map((r) => r.body.outcome),
      ['processed', 'processed'],
    );
    const next = toUtcRfc3339(at(slot, 24 * 60 * MINUTE));
    assert.equal(
      later.body.runId,
      computeRunId(
        { jobName: 'nightly-report', scheduleTime: next, scope: [] },
        ['forced'],
      ),
    );
  });

  it('from a job not declared here answers 400 with advice for a groc schedule, and writes nothing', async () => {
    const { jobs, calls } = dailyJobSoon();
    const { request } = serveJobs(jobs);

    const res = await request
      .post('/')
      .set({ 'X-CloudScheduler-JobName': 'groc-job' });

    assert.equal(res.status, 400);
    assert.equal(res.body.outcome, 'invalid_request');
    assert.match(res.body.message, /no job "groc-job" is declared/);
    assert.match(
      res.body.message,
      /App Engine-style schedules \("every 5 minutes"\) send none/,
    );
    assert.equal(calls.length, 0);
  });

  it('with the trigger headers of a run by hand answers 400: npm run trigger sends a time', async () => {
    const { jobs, calls } = dailyJobSoon();
    const { request } = serveJobs(jobs);

    const res = await request.post('/').set({
      ...FORCE_RUN,
      'X-Run-Once-Mode': 'manual',
      'X-Run-Once-Trigger-Id': randomUUID(),
    });

    assert.equal(res.status, 400);
    assert.match(res.body.message, /npm run trigger -- JOB/);
    assert.equal(calls.length, 0);
  });
});
