/**
 * Runs that are not simply their slot's, through the handler on the emulator: forced runs (judged on
 * a driven clock), manual runs, deliberate re-runs, and the overlap policies `skip` and `wait` with
 * two instances and a slow job.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import type { JobContext } from '../src/core/job-context.ts';
import { RunDocuments } from '../src/core/run-documents.ts';
import { computeRunId, scopeId } from '../src/core/run-key.ts';
import { readHistory } from '../src/ops/slot-history.ts';
import {
  defineJob,
  type JobDeclaration,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import {
  forcedRunId,
  RunHistory,
  slotRunId,
} from '../src/policy/run-history.ts';
import { forcedRunToleranceMs } from '../src/policy/schedule-time.ts';
import { executionClosedMs } from '../src/policy/slot-verdict.ts';
import {
  documents,
  firestore,
  freshCollection,
  PAST_NOON,
  PAST_NOON_MS,
  rfc3339,
  schedulerHeaders,
  serveJobs,
  storedRecord,
  until,
} from './helpers.ts';

// Noon yesterday: a past slot, as the fixed October 2026 noon was; the driven clocks start from it.
const T = PAST_NOON;
/** `HH:MM` on T's day, as Scheduler sends it. */
const onDay = (hhmm: string) => `${T.slice(0, 10)}T${hhmm}:00Z`;
const at = (iso: string, ms: number) => new Date(Date.parse(iso) + ms);

function counted(
  declaration: Omit<JobDeclaration, 'run'>,
  behaviour: (ctx: JobContext) => Promise<void> | void = () => {},
) {
  const calls: JobContext[] = [];
  const jobs = validateJobs([
    defineJob({
      ...declaration,
      run: async (ctx) => {
        calls.push(ctx);
        await behaviour(ctx);
      },
    }),
  ]);
  return { jobs, calls };
}

function trigger(mode: 'manual' | 'rerun', id: string = randomUUID()) {
  return { 'X-Run-Once-Mode': mode, 'X-Run-Once-Trigger-Id': id };
}

describe('forced runs (a driven clock stands for Firestore’s)', () => {
  it('runs a forced run, its retry is a duplicate, and the slot still runs at its time', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    let now = at(T, -4 * 60_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const forced = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));
    const retry = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));
    now = at(T, 0);
    const scheduled = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));
    now = at(T, 1000);
    const late = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    assert.deepEqual(
      [forced, retry, scheduled, late].map((r) => [r.status, r.body.outcome]),
      [
        [200, 'processed'],
        [200, 'duplicate'],
        [200, 'processed'],
        [200, 'duplicate'],
      ],
    );
    const slotRunId = computeRunId({
      jobName: 'nightly-report',
      scheduleTime: T,
      scope: [],
    });
    assert.equal(
      scheduled.body.runId,
      slotRunId,
      'the scheduled delivery is the slot',
    );
    assert.notEqual(
      forced.body.runId,
      slotRunId,
      'the forced run has an id of its own',
    );
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced', 'slot'],
    );
    // Both carry the slot's schedule time (the run key's); only the slot's run stands for the slot,
    // so a job that does one period per slot does it once, at the slot.
    assert.deepEqual(
      calls.map((c) => [c.scheduleTime.toISOString(), c.slot?.toISOString()]),
      [
        [new Date(T).toISOString(), undefined],
        [new Date(T).toISOString(), new Date(T).toISOString()],
      ],
    );
  });

  it('takes a delivery as its slot up to FORCED_RUN_TOLERANCE_SECONDS early', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    const env = { FORCED_RUN_TOLERANCE_SECONDS: '120' };
    const { request } = serveJobs(
      jobs,
      { env },
      { clock: async () => at(T, -119_000) },
    );

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    assert.equal(
      res.body.runId,
      computeRunId({ jobName: 'nightly-report', scheduleTime: T, scope: [] }),
    );
    assert.equal(calls[0]?.kind, 'slot');
  });
});

describe('forced runs on a warm instance whose wall clock steps (Firestore’s clock, monotonic since)', () => {
  it('takes Scheduler’s on-time delivery as its slot after the wall clock stepped back 5 minutes', async (t) => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '* * * * *',
    });
    const { request, ledger } = serveJobs(jobs);
    const slot = new Date(
      Math.floor((await ledger.documents.serverTime()).getTime() / 60_000) *
        60_000,
    );
    const realNow = Date.now.bind(Date);
    t.mock.method(Date, 'now', () => realNow() - 5 * 60_000);

    const res = await request
      .post('/')
      .set(
        schedulerHeaders(
          'nightly-report',
          slot.toISOString().replace('.000Z', 'Z'),
        ),
      );

    t.mock.restoreAll();
    assert.equal(res.body.outcome, 'processed');
    assert.equal(
      res.body.runId,
      computeRunId({
        jobName: 'nightly-report',
        scheduleTime: slot.toISOString().replace('.000Z', 'Z'),
        scope: [],
      }),
      'the slot’s own run id, not the forced variant’s',
    );
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['slot'],
    );
  });
});

describe('a forced run first claimed within the tolerance before its slot, or later, is the slot’s run', () => {
  it('a Scheduler retry of such a slot within its retry window is its duplicate, not a second run', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    let now = at(T, -4 * 60_000); // the instance's estimate, 4 minutes behind Firestore's
    const { request } = serveJobs(jobs, {}, { clock: async () => now });
    const misjudged = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));
    now = at(T, 3 * 60_000);

    const late = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    assert.deepEqual(
      [late.status, late.body.outcome],
      [200, 'duplicate'],
      late.body.message,
    );
    assert.equal(late.body.runId, misjudged.body.runId);
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced'],
    );
  });

  it('a re-run of such a slot runs (its run is finished), and is not refused as a slot without a record', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    let now = at(T, -4 * 60_000); // the instance's estimate, 4 minutes behind Firestore's
    const { request } = serveJobs(jobs, {}, { clock: async () => now });
    const misjudged = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));
    now = at(T, 3_600_000);

    const rerun = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun') });

    assert.equal(misjudged.body.outcome, 'processed');
    assert.deepEqual(
      [rerun.status, rerun.body.outcome],
      [200, 'processed'],
      rerun.body.message,
    );
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced', 'rerun'],
    );
  });

  it('counts it as the slot (completed, kind slot) and a genuine Force run long before its slot not', async () => {
    const { jobs } = counted({
      id: 'nightly-report',
      schedule: '*/10 * * * *',
    });
    const job = jobs[0] as (typeof jobs)[number];
    const tolerance = forcedRunToleranceMs(job, 60_000);
    const TEN_MINUTES = 600_000;
    const real = (
      await serveJobs(jobs).ledger.documents.serverTime()
    ).getTime();
    // The slot just past, delivered on time; and the first slot Force run may send now, early by
    // more than the tolerance.
    const onTime = new Date(Math.floor(real / TEN_MINUTES) * TEN_MINUTES);
    const future = new Date(
      (Math.floor((real + tolerance) / TEN_MINUTES) + 1) * TEN_MINUTES,
    );
    // An instance whose estimate of Firestore's time is 5 minutes behind, and one that is right.
    const behind = serveJobs(
      jobs,
      {},
      { clock: async () => new Date(onTime.getTime() - 300_000) },
    );
    const right = serveJobs(jobs, { collection: behind.collection });
    const headersOf = (slot: Date) =>
      schedulerHeaders(
        'nightly-report',
        slot.toISOString().replace('.000Z', 'Z'),
      );

    const misjudged = await behind.request.post('/').set(headersOf(onTime));
    const forceRun = await right.request.post('/').set(headersOf(future));
    // Once the future slot is closed to the missed-run check: no delivery of it came, so missed.
    const judgedAt = new Date(future.getTime() + executionClosedMs(job));
    const { rows } = await readHistory(
      behind.history,
      job,
      [onTime, future],
      [],
      judgedAt,
      tolerance,
    );

    assert.equal(
      (await storedRecord(behind.collection, misjudged.body.runId)).run_kind,
      'forced',
    );
    assert.equal(
      (await storedRecord(behind.collection, forceRun.body.runId)).run_kind,
      'forced',
    );
    assert.deepEqual(
      rows.map((r) => [r.kind, r.state, r.runId]),
      [
        ['slot', 'completed', forcedRunId('nightly-report', onTime, [])],
        ['slot', 'missed', slotRunId('nightly-report', future, [])],
      ],
    );
  });
});

describe('runs by hand (npm run trigger sends these headers)', () => {
  it('a manual run has a run id of its own, its retries are duplicates, and the slot is untouched', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    const { request, collection } = serveJobs(jobs);
    const id = randomUUID();

    const manual = await request.post('/').set({
      ...schedulerHeaders('nightly-report', T),
      ...trigger('manual', id),
    });
    const retry = await request.post('/').set({
      ...schedulerHeaders('nightly-report', T),
      ...trigger('manual', id),
    });
    const slot = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    assert.deepEqual(
      [manual.body.outcome, retry.body.outcome, slot.body.outcome],
      ['processed', 'duplicate', 'processed'],
    );
    assert.equal(
      (await storedRecord(collection, manual.body.runId)).run_kind,
      'manual',
    );
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['manual', 'slot'],
    );
  });

  it('one trigger id sent with schedule times 1 s apart is one manual run: the second delivery is its duplicate', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    const { request } = serveJobs(jobs);
    const id = randomUUID();
    const manualAt = (ms: number) =>
      request.post('/').set({
        ...schedulerHeaders('nightly-report', at(T, ms).toISOString()),
        ...trigger('manual', id),
      });

    const first = await manualAt(5_000);
    const second = await manualAt(6_000);

    assert.deepEqual(
      [first.body.outcome, second.body.outcome],
      ['processed', 'duplicate'],
    );
    assert.equal(second.body.runId, first.body.runId);
    assert.equal(calls.length, 1);
  });

  it('a trigger id reused for a re-run of a slot is the manual run’s duplicate, never a second run', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    const { request, collection } = serveJobs(jobs);
    const id = randomUUID();
    await request.post('/').set(schedulerHeaders('nightly-report', T));
    const manual = await request.post('/').set({
      ...schedulerHeaders('nightly-report', at(T, 90_000).toISOString()),
      ...trigger('manual', id),
    });

    const rerun = await request.post('/').set({
      ...schedulerHeaders('nightly-report', T),
      ...trigger('rerun', id),
    });

    assert.equal(rerun.body.outcome, 'duplicate');
    assert.equal(rerun.body.runId, manual.body.runId);
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['slot', 'manual'],
    );
    const record = await storedRecord(collection, manual.body.runId);
    assert.equal(
      record.run_kind,
      'manual',
      'the record keeps the first delivery’s details',
    );
  });

  it('the same trigger id in two key scopes is two runs', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    const { request } = serveJobs(jobs, {
      env: { RUN_KEY_SCOPE_HEADERS: 'x-tenant' },
    });
    const id = randomUUID();
    const manualFor = (tenant: string) =>
      request.post('/').set({
        ...schedulerHeaders('nightly-report', T),
        ...trigger('manual', id),
        'X-Tenant': tenant,
      });

    const answers = [
      await manualFor('a'),
      await manualFor('b'),
      await manualFor('a'),
    ];

    assert.deepEqual(
      answers.map((r) => r.body.outcome),
      ['processed', 'processed', 'duplicate'],
    );
    assert.equal(calls.length, 2);
  });

  it('a re-run is a run of its own keyed by its trigger id: trigger ids A, B, A, B, A run twice, each with a new run id', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    const { request, collection } = serveJobs(jobs);
    const [a, b] = [randomUUID() as string, randomUUID() as string];
    const rerun = (id: string) =>
      request.post('/').set({
        ...schedulerHeaders('nightly-report', T),
        ...trigger('rerun', id),
      });
    const first = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    const answers = [];
    for (const id of [a, b, a, b, a]) {
      answers.push(await rerun(id));
    }
    const schedulerRetry = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    assert.deepEqual(
      answers.map((r) => r.body.outcome),
      ['processed', 'processed', 'duplicate', 'duplicate', 'duplicate'],
    );
    assert.equal(schedulerRetry.body.outcome, 'duplicate');
    const slotRunId = first.body.runId;
    const [runA, runB] = [answers[0]?.body.runId, answers[1]?.body.runId];
    assert.deepEqual(
      calls.map((c) => [c.runId, c.kind, c.rerunOf]),
      [
        [slotRunId, 'slot', undefined],
        [runA, 'rerun', slotRunId],
        [runB, 'rerun', slotRunId],
      ],
    );
    assert.equal(
      new Set([slotRunId, runA, runB]).size,
      3,
      'three idempotency keys',
    );
    const record = await storedRecord(collection, runA);
    assert.equal(record.run_kind, 'rerun');
    assert.equal(record.rerun_of, slotRunId);
    assert.equal(record.job_name, 'nightly-report');
    assert.equal(record.status, 'completed');
    const slot = await storedRecord(collection, slotRunId);
    assert.equal(slot.attempts, 1, 'the slot’s record is untouched');
    assert.equal(slot.rerun_id, undefined);
  });

  it('refuses a re-run of a future slot by Firestore’s clock, and the slot then runs at its time', async () => {
    const { jobs, calls } = counted({
      id: 'nightly-report',
      schedule: '0 12 * * *',
    });
    let now = at(T, -10 * 60_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const early = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun') });
    now = at(T, 1000);
    const scheduled = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    assert.equal(early.status, 400);
    assert.equal(early.body.outcome, 'invalid_request');
    assert.match(early.body.message, /is in the future/);
    assert.equal(scheduled.body.outcome, 'processed');
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['slot'],
    );
  });

  const refused: [string, string, RegExp][] = [
    ['an off-schedule time', onDay('12:01'), /is not a slot of nightly-report/],
    [
      'year 9999',
      '9999-12-31T12:00:00Z',
      /is in the future|after the job's next slot/,
    ],
    [
      'a time before 2000',
      '1999-12-31T12:00:00Z',
      /X-CloudScheduler-ScheduleTime 1999-12-31T12:00:00Z is before 2000-01-01T00:00:00Z/,
    ],
    [
      'a slot with no record',
      rfc3339(PAST_NOON_MS - 86_400_000),
      new RegExp(
        `has no record.*--slot ${rfc3339(PAST_NOON_MS - 86_400_000)} \\(without --rerun\\)`,
      ),
    ],
  ];
  for (const [what, time, message] of refused) {
    it(`refuses a re-run of ${what} with 400 and runs nothing`, async () => {
      const { jobs, calls } = counted({
        id: 'nightly-report',
        schedule: '0 12 * * *',
      });
      const { request } = serveJobs(jobs);

      const answer = await request.post('/').set({
        ...schedulerHeaders('nightly-report', time),
        ...trigger('rerun'),
      });

      assert.equal(answer.status, 400);
      assert.equal(answer.body.outcome, 'invalid_request');
      assert.match(answer.body.message, message);
      assert.equal(calls.length, 0);
    });
  }

  it('refuses a re-run of a failed slot (deliver the slot itself), and waits (409) while the slot runs', async () => {
    let fail = true;
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { jobs, calls } = counted(
      { id: 'nightly-report', schedule: '0 12 * * *' },
      async () => {
        if (fail) {
          throw new Error('downstream answered 503');
        }
        await gate;
      },
    );
    const { request } = serveJobs(jobs);
    const failed = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', T));

    const ofFailed = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun') });
    fail = false;
    const retry = request
      .post('/')
      .set(schedulerHeaders('nightly-report', T))
      .then((r) => r);
    await until(() => calls.length === 2);
    const whileRunning = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun') });
    release();

    assert.equal(failed.body.outcome, 'failed');
    assert.equal(ofFailed.status, 400);
    assert.match(
      ofFailed.body.message,
      /is failed, not finished.*npm run trigger -- nightly-report --slot/,
    );
    assert.equal(whileRunning.status, 409);
    assert.equal(whileRunning.body.outcome, 'in_progress');
    assert.match(
      whileRunning.body.message,
      /running now; re-run it after it finishes/,
    );
    assert.equal((await retry).body.outcome, 'processed');
    assert.equal(calls.length, 2, 'no re-run ran');
  });
});

describe('overlap policy, two instances, a slow job', () => {
  function slowJob(overlap: 'skip' | 'wait') {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { jobs, calls } = counted(
      { id: 'every-five', schedule: '*/5 * * * *', overlap },
      async (ctx) => {
        if (ctx.scheduleTime.getTime() === PAST_NOON_MS) {
          await gate;
        }
      },
    );
    return { jobs, calls, release: () => release() };
  }

  it('skip: a slot arriving while the previous one runs is answered 200 skipped, recorded, and never runs', async () => {
    const { jobs, calls, release } = slowJob('skip');
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });
    const slot = (time: string) => schedulerHeaders('every-five', onDay(time));
    const running = a.request
      .post('/')
      .set(slot('12:00'))
      .then((r) => r);
    await until(() => calls.length === 1);

    const skipped = await b.request.post('/').set(slot('12:05'));
    const skippedRetry = await a.request.post('/').set(slot('12:05'));
    const chained = await b.request.post('/').set(slot('12:10'));
    release();
    const done = await running;
    const after = await b.request.post('/').set(slot('12:15'));

    assert.deepEqual(
      [skipped, skippedRetry, chained].map((r) => [r.status, r.body.outcome]),
      [
        [200, 'skipped'],
        [200, 'duplicate'],
        [200, 'skipped'],
      ],
    );
    assert.equal(done.body.outcome, 'processed');
    assert.equal(after.body.outcome, 'processed');
    assert.deepEqual(
      calls.map((c) => c.scheduleTime.toISOString().slice(11, 16)),
      ['12:00', '12:15'],
    );
    const record = await storedRecord(a.collection, skipped.body.runId);
    assert.equal(record.status, 'skipped');
    assert.equal(record.blocked_by, done.body.runId);
  });

  it('wait: such a slot is answered 409 with nothing written, and runs once the previous one is done', async () => {
    const { jobs, calls, release } = slowJob('wait');
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });
    const slot = (time: string) => schedulerHeaders('every-five', onDay(time));
    const running = a.request
      .post('/')
      .set(slot('12:00'))
      .then((r) => r);
    await until(() => calls.length === 1);

    const waiting = await b.request.post('/').set(slot('12:05'));
    release();
    await running;
    const retried = await b.request.post('/').set(slot('12:05'));

    assert.equal(waiting.status, 409);
    assert.equal(waiting.body.outcome, 'waiting');
    assert.match(
      waiting.body.message,
      /still running \(overlap policy "wait"\); retry later/,
    );
    assert.equal(retried.body.outcome, 'processed');
    assert.equal(calls.length, 2);
  });
});

describe('overlap by the job: the lock holds across slots without records', () => {
  /** A job every minute whose 12:00 run lasts until released (a 150 s job, driven). */
  function minuteJob(overlap: 'skip' | 'wait', gated = ['12:00']) {
    const gates = new Map<string, () => void>();
    const { jobs, calls } = counted(
      { id: 'every-minute', schedule: '* * * * *', overlap },
      (ctx) => {
        const hhmm = ctx.scheduleTime.toISOString().slice(11, 16);
        if (!gated.includes(hhmm)) {
          return;
        }
        return new Promise<void>((resolve) => gates.set(hhmm, resolve));
      },
    );
    return { jobs, calls, release: (hhmm: string) => gates.get(hhmm)?.() };
  }
  const slot = (time: string) => schedulerHeaders('every-minute', onDay(time));
  const ran = (calls: JobContext[]) =>
    calls.map((c) => c.scheduleTime.toISOString().slice(11, 16));

  it('wait: 12:01 waits with no record, and 12:02 does not start while 12:00 still runs', async () => {
    const { jobs, calls, release } = minuteJob('wait');
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });
    const running = a.request
      .post('/')
      .set(slot('12:00'))
      .then((r) => r);
    await until(() => calls.length === 1);

    const first = await b.request.post('/').set(slot('12:01'));
    const second = await b.request.post('/').set(slot('12:02'));
    release('12:00');
    await running;
    const afterwards = await b.request.post('/').set(slot('12:02'));

    assert.deepEqual(
      [first, second].map((r) => [r.status, r.body.outcome]),
      [
        [409, 'waiting'],
        [409, 'waiting'],
      ],
    );
    assert.equal(
      await storedRecord(a.collection, first.body.runId).catch(() => undefined),
      undefined,
    );
    assert.equal(afterwards.body.outcome, 'processed');
    assert.deepEqual(ran(calls), ['12:00', '12:02']);
  });

  it('skip: 12:10 does not start while 12:00 runs, although 12:04 to 12:09 have no records', async () => {
    const { jobs, calls, release } = minuteJob('skip');
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });
    const running = a.request
      .post('/')
      .set(slot('12:00'))
      .then((r) => r);
    await until(() => calls.length === 1);

    const skipped = await b.request.post('/').set(slot('12:10'));
    release('12:00');
    const done = await running;

    assert.deepEqual([skipped.status, skipped.body.outcome], [200, 'skipped']);
    const record = await storedRecord(a.collection, skipped.body.runId);
    assert.equal(record.blocked_by, done.body.runId);
    assert.deepEqual(ran(calls), ['12:00']);
  });

  it('skip: the retry of a failed 12:00 is not run beside 12:01, which holds the lock; it runs after', async () => {
    let failFirst = true;
    const gates = new Map<string, () => void>();
    const { jobs, calls } = counted(
      { id: 'every-minute', schedule: '* * * * *', overlap: 'skip' },
      (ctx) => {
        const hhmm = ctx.scheduleTime.toISOString().slice(11, 16);
        if (hhmm === '12:00' && failFirst) {
          failFirst = false;
          throw new Error('the first attempt of 12:00 fails');
        }
        if (hhmm !== '12:01') {
          return Promise.resolve();
        }
        return new Promise<void>((resolve) => gates.set(hhmm, resolve));
      },
    );
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });
    const failed = await a.request.post('/').set(slot('12:00'));
    const running = b.request
      .post('/')
      .set(slot('12:01'))
      .then((r) => r);
    await until(() => calls.length === 2);

    const retry = await a.request.post('/').set(slot('12:00'));
    gates.get('12:01')?.();
    await running;
    const later = await a.request.post('/').set(slot('12:00'));

    assert.equal(failed.body.outcome, 'failed');
    assert.deepEqual([retry.status, retry.body.outcome], [409, 'waiting']);
    assert.equal(later.body.outcome, 'processed');
    assert.deepEqual(ran(calls), ['12:00', '12:01', '12:00']);
  });

  it('two slots delivered at once to two instances never both run', async () => {
    const { jobs, calls, release } = minuteJob('wait', ['12:01', '12:02']);
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });

    const answers = {
      '12:01': a.request
        .post('/')
        .set(slot('12:01'))
        .then((r) => r),
      '12:02': b.request
        .post('/')
        .set(slot('12:02'))
        .then((r) => r),
    };
    await until(() => calls.length === 1);
    // The loser answers 409 while the winner still runs; only then is the winner released (a
    // release before the loser's answer would let its next round take the lock and run).
    const [runningSlot] = ran(calls) as ['12:01' | '12:02'];
    const loser = runningSlot === '12:01' ? '12:02' : '12:01';
    const lost = await answers[loser];
    const again = await (loser === '12:01' ? a : b).request
      .post('/')
      .set(slot(loser));
    release(runningSlot);
    const results = [lost, await answers[runningSlot]];

    assert.equal(again.body.outcome, 'waiting');
    assert.deepEqual(results.map((r) => r.body.outcome).sort(), [
      'processed',
      'waiting',
    ]);
    assert.equal(calls.length, 1);
  });

  it('keeps the lock in the per-job collection, naming its holder, with expire_at for the TTL', async () => {
    const { jobs, calls, release } = minuteJob('skip');
    const a = serveJobs(jobs);
    const running = a.request
      .post('/')
      .set(slot('12:00'))
      .then((r) => r);
    await until(() => calls.length === 1);

    const lock = await storedRecord(
      `${a.collection}_jobs`,
      'every-minute~overlap',
    );
    release('12:00');
    const done = await running;

    assert.equal(lock.holder_run_id, done.body.runId);
    assert.ok(lock.expire_at, 'expire_at is set');
  });

  it('a job with overlap allow writes no lock', async () => {
    const { jobs } = counted({ id: 'every-minute', schedule: '* * * * *' });
    const a = serveJobs(jobs);

    await a.request.post('/').set(slot('12:00'));

    assert.equal(
      await storedRecord(`${a.collection}_jobs`, 'every-minute~overlap').catch(
        () => undefined,
      ),
      undefined,
    );
  });
});

describe('overlap where it meets other features (issue 25)', () => {
  /** A minute slot two hours ago, and the slots after it, as RFC 3339: relative to the clock. */
  const base = Math.floor((Date.now() - 2 * 3_600_000) / 60_000) * 60_000;
  const slotAt = (minutes: number) =>
    new Date(base + minutes * 60_000).toISOString().replace('.000Z', 'Z');
  const minute = (iso: string) => (Date.parse(iso) - base) / 60_000;
  const deliver = (minutes: number, extra: Record<string, string> = {}) => ({
    ...schedulerHeaders('every-minute', slotAt(minutes)),
    ...extra,
  });

  /** A `skip`/`wait` job every minute whose gated minutes run until released. */
  function gatedJob(overlap: 'skip' | 'wait', gated: readonly number[]) {
    const gates = new Map<number, () => void>();
    const { jobs, calls } = counted(
      { id: 'every-minute', schedule: '* * * * *', overlap },
      (ctx) => {
        const m = minute(ctx.scheduleTime.toISOString());
        if (!gated.includes(m)) {
          return;
        }
        return new Promise<void>((resolve) => gates.set(m, resolve));
      },
    );
    const ran = () => calls.map((c) => minute(c.scheduleTime.toISOString()));
    return { jobs, calls, ran, release: (m: number) => gates.get(m)?.() };
  }

  /**
   * The run history of `collection`, whose batched read that `pauses` (by the run ids asked) holds
   * its answer, as read, until released: the read is stale by the time the handler acts on it.
   */
  function pausedHistory(
    collection: string,
    pauses: (ids: readonly string[]) => boolean,
  ) {
    const real = new RunHistory(
      new RunDocuments(firestore, {
        collection,
        retentionMs: 31_536_000_000,
        timeoutMs: 10_000,
      }),
    );
    let reached = false;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const history = {
      getMany: async (ids: readonly string[]) => {
        const read = await real.getMany(ids);
        if (!reached && pauses(ids)) {
          reached = true;
          await held;
        }
        return read;
      },
      reportMissed: real.reportMissed.bind(real),
      markReported: real.markReported.bind(real),
      claimRelog: real.claimRelog.bind(real),
      acknowledgeReport: real.acknowledgeReport.bind(real),
      recordSkipped: real.recordSkipped.bind(real),
    };
    return { history, reached: () => reached, release: () => release() };
  }

  /** What a SIGKILLed instance leaves: its run's record in progress with a lapsed lease, and the lock naming it. */
  async function crashedHolder(
    collection: string,
    runId: string,
    scheduleTime: string,
  ) {
    const lapsed = Timestamp.fromMillis(Date.now() - 120_000);
    await firestore
      .collection(collection)
      .doc(runId)
      .create({
        status: 'in_progress',
        attempt_id: 'killed-attempt',
        leased_at: lapsed,
        lease_ms: 60_000,
        claimed_at: lapsed,
        first_claimed_at: lapsed,
        attempts: 1,
        job_name: 'every-minute',
        schedule_time: Timestamp.fromDate(new Date(scheduleTime)),
        expire_at: Timestamp.fromMillis(Date.now() + 86_400_000),
      });
    await firestore
      .collection(`${collection}_jobs`)
      .doc('every-minute~overlap')
      .create({
        holder_run_id: runId,
        job_name: 'every-minute',
        expire_at: Timestamp.fromMillis(Date.now() + 86_400_000),
      });
  }
  const runIdOf = (minutes: number) =>
    computeRunId({
      jobName: 'every-minute',
      scheduleTime: slotAt(minutes),
      scope: [],
    });

  it('the lock is per key scope: scope B runs its slots while scope A runs the same job (skip)', async () => {
    const { jobs, calls, release } = gatedJob('skip', [0]);
    const staging = serveJobs(jobs, { env: { RUN_KEY_SCOPE: 'staging' } });
    const production = serveJobs(jobs, {
      collection: staging.collection,
      env: { RUN_KEY_SCOPE: 'production' },
    });
    const running = staging.request
      .post('/')
      .set(deliver(0))
      .then((r) => r);
    await until(() => calls.length === 1);

    const next = await production.request.post('/').set(deliver(1));
    const after = await production.request.post('/').set(deliver(2));
    const stagingNext = await staging.request.post('/').set(deliver(1));
    release(0);
    await running;

    assert.deepEqual(
      [next, after, stagingNext].map((r) => [r.status, r.body.outcome]),
      [
        [200, 'processed'],
        [200, 'processed'],
        [200, 'skipped'],
      ],
    );
    const locks = await documents(`${staging.collection}_jobs`);
    assert.deepEqual(
      [...locks.keys()]
        .filter((id) => id.startsWith('every-minute~overlap'))
        .sort(),
      [
        `every-minute~overlap~${scopeId([['config', 'production']])}`,
        `every-minute~overlap~${scopeId([['config', 'staging']])}`,
      ].sort(),
    );
    assert.equal(
      (await storedRecord(staging.collection, next.body.runId)).key_scope,
      scopeId([['config', 'production']]),
    );
  });

  it('after a crash, the holder’s retry and the next slot never both run: the next slot read the lock first', async () => {
    const { jobs, ran, release } = gatedJob('skip', [0]);
    const collection = freshCollection();
    await crashedHolder(collection, runIdOf(0), slotAt(0));
    const paused = pausedHistory(collection, (ids) => ids.includes(runIdOf(0)));
    const retrying = serveJobs(jobs, { collection });
    const next = serveJobs(jobs, { collection, history: paused.history });

    // The next slot reads the lock and the holder's lapsed record, then stalls before its write.
    const nextSlot = next.request
      .post('/')
      .set(deliver(1))
      .then((r) => r);
    await until(() => paused.reached());
    const retry = retrying.request
      .post('/')
      .set(deliver(0))
      .then((r) => r);
    await until(() => ran().length === 1);
    paused.release();
    const blocked = await nextSlot;
    release(0);
    const done = await retry;

    assert.equal(done.body.outcome, 'processed');
    assert.deepEqual([blocked.status, blocked.body.outcome], [200, 'skipped']);
    assert.deepEqual(ran(), [0]);
  });

  it('after a crash, the holder’s retry and the next slot never both run: the retry read the lock first', async () => {
    const { jobs, ran, release } = gatedJob('wait', [1]);
    const collection = freshCollection();
    await crashedHolder(collection, runIdOf(0), slotAt(0));
    // The retry's batched read (its previous slot's record) stalls after the lock was read.
    const paused = pausedHistory(collection, (ids) =>
      ids.includes(runIdOf(-1)),
    );
    const retrying = serveJobs(jobs, { collection, history: paused.history });
    const next = serveJobs(jobs, { collection });

    const retry = retrying.request
      .post('/')
      .set(deliver(0))
      .then((r) => r);
    await until(() => paused.reached());
    const nextSlot = next.request
      .post('/')
      .set(deliver(1))
      .then((r) => r);
    await until(() => ran().length === 1);
    paused.release();
    const blocked = await retry;
    release(1);
    const done = await nextSlot;

    assert.equal(done.body.outcome, 'processed');
    assert.deepEqual([blocked.status, blocked.body.outcome], [409, 'waiting']);
    assert.deepEqual(ran(), [1]);
  });

  it('under skip, a run that already has a record is never recorded skipped: unfinished it waits, finished it is a duplicate', async () => {
    const { jobs, ran, release } = gatedJob('skip', [1]);
    const collection = freshCollection();
    await crashedHolder(collection, runIdOf(0), slotAt(0));
    const fn = serveJobs(jobs, { collection });
    const finished = await fn.request.post('/').set(deliver(2));
    const running = fn.request
      .post('/')
      .set(deliver(1))
      .then((r) => r);
    await until(() => ran().length === 2);

    const retry = await fn.request.post('/').set(deliver(0));
    const again = await fn.request.post('/').set(deliver(2));
    release(1);
    await running;

    assert.equal(finished.body.outcome, 'processed');
    assert.deepEqual([retry.status, retry.body.outcome], [409, 'waiting']);
    assert.match(
      retry.body.message,
      /already has a record \(an earlier attempt\)/,
    );
    assert.equal(
      (await storedRecord(collection, runIdOf(0))).status,
      'in_progress',
    );
    assert.deepEqual([again.status, again.body.outcome], [200, 'duplicate']);
    assert.deepEqual(ran(), [2, 1]);
  });

  it('under skip, a reported run (missed, or failed after retries) delivered while another run holds the lock is a duplicate, never told to retry', async () => {
    const { jobs, ran, release } = gatedJob('skip', [1]);
    const collection = freshCollection();
    const history = new RunHistory(
      new RunDocuments(firestore, {
        collection,
        retentionMs: 31_536_000_000,
        timeoutMs: 10_000,
      }),
    );
    const details = (minutes: number) => ({
      jobName: 'every-minute',
      scheduleTime: slotAt(minutes),
      keyScope: '',
      kind: 'slot' as const,
    });
    // Slot 0 reported missed; slot 2's attempt lapsed, then reported failed after retries.
    await history.reportMissed(runIdOf(0), details(0), 'a-check');
    const lapsed = Timestamp.fromMillis(Date.now() - 120_000);
    await firestore
      .collection(collection)
      .doc(runIdOf(2))
      .create({
        status: 'in_progress',
        attempt_id: 'lapsed-attempt',
        leased_at: lapsed,
        lease_ms: 60_000,
        claimed_at: lapsed,
        first_claimed_at: lapsed,
        attempts: 1,
        job_name: 'every-minute',
        schedule_time: Timestamp.fromDate(new Date(slotAt(2))),
        expire_at: Timestamp.fromMillis(Date.now() + 86_400_000),
      });
    const { updateTime } = await firestore
      .collection(collection)
      .doc(runIdOf(2))
      .get();
    await history.markReported(
      runIdOf(2),
      updateTime as Timestamp,
      'a-check',
      true,
    );
    const fn = serveJobs(jobs, { collection });
    const running = fn.request
      .post('/')
      .set(deliver(1))
      .then((r) => r);
    await until(() => ran().length === 1);

    const missed = await fn.request.post('/').set(deliver(0));
    const failed = await fn.request.post('/').set(deliver(2));
    release(1);
    await running;

    assert.deepEqual(
      [missed, failed].map((r) => [r.status, r.body.outcome]),
      [
        [200, 'duplicate'],
        [200, 'duplicate'],
      ],
    );
    assert.deepEqual(ran(), [1]);
  });

  it('skip holds against manual and forced runs; a manual run with allow-overlap runs beside', async () => {
    const { jobs, calls, ran, release } = gatedJob('skip', [0]);
    // Firestore's time as the driven clock has it: 50 s before slot 10, so slot 10 is a forced run.
    const clock = async () => new Date(Date.parse(slotAt(10)) - 50_000);
    const fn = serveJobs(jobs, {}, { clock });
    const running = fn.request
      .post('/')
      .set(deliver(0))
      .then((r) => r);
    await until(() => calls.length === 1);

    const manual = await fn.request
      .post('/')
      .set(deliver(9, trigger('manual')));
    const forced = await fn.request.post('/').set(deliver(10));
    const rerunAllowed = await fn.request.post('/').set(
      deliver(9, {
        ...trigger('manual'),
        'X-Run-Once-Allow-Overlap': 'true',
      }),
    );
    release(0);
    await running;

    assert.deepEqual([manual.status, manual.body.outcome], [409, 'waiting']);
    assert.match(manual.body.message, /^Manual run not run: .*--allow-overlap/);
    assert.equal(
      await storedRecord(fn.collection, manual.body.runId).catch(
        () => undefined,
      ),
      undefined,
    );
    assert.deepEqual([forced.status, forced.body.outcome], [200, 'skipped']);
    const skipped = await storedRecord(fn.collection, forced.body.runId);
    assert.deepEqual([skipped.status, skipped.run_kind], ['skipped', 'forced']);
    assert.equal(rerunAllowed.body.outcome, 'processed');
    assert.deepEqual(ran(), [0, 9]);
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['slot', 'manual'],
    );
  });

  it('skip holds against a re-run of a finished slot, unless it asks to overlap', async () => {
    const { jobs, calls, ran, release } = gatedJob('skip', [0]);
    const fn = serveJobs(jobs);
    const finished = await fn.request.post('/').set(deliver(-5));
    const running = fn.request
      .post('/')
      .set(deliver(0))
      .then((r) => r);
    await until(() => calls.length === 2);

    const rerun = await fn.request.post('/').set(deliver(-5, trigger('rerun')));
    const allowed = await fn.request.post('/').set(
      deliver(-5, {
        ...trigger('rerun'),
        'X-Run-Once-Allow-Overlap': 'true',
      }),
    );
    release(0);
    await running;

    assert.equal(finished.body.outcome, 'processed');
    assert.deepEqual([rerun.status, rerun.body.outcome], [409, 'waiting']);
    assert.match(rerun.body.message, /^Re-run not run: /);
    assert.equal(allowed.body.outcome, 'processed');
    assert.deepEqual(ran(), [-5, 0, -5]);
  });

  it('wait holds against a manual run: 409, nothing recorded', async () => {
    const { jobs, calls, ran, release } = gatedJob('wait', [3]);
    const fn = serveJobs(jobs);
    const running = fn.request
      .post('/')
      .set(deliver(3))
      .then((r) => r);
    await until(() => calls.length === 1);

    const manual = await fn.request
      .post('/')
      .set(deliver(5, trigger('manual')));
    release(3);
    await running;
    const later = await fn.request.post('/').set(deliver(5, trigger('manual')));

    assert.deepEqual([manual.status, manual.body.outcome], [409, 'waiting']);
    assert.equal(later.body.outcome, 'processed');
    assert.deepEqual(ran(), [3, 5]);
  });

  it('a backfilled slot blocked under skip is answered 409 with no record, so it stays missed', async () => {
    const { jobs, calls, ran, release } = gatedJob('skip', [7]);
    const fn = serveJobs(jobs);
    const running = fn.request
      .post('/')
      .set(deliver(7))
      .then((r) => r);
    await until(() => calls.length === 1);

    const backfill = { 'X-Run-Once-Backfill': 'true' };
    const blocked = await fn.request.post('/').set(deliver(4, backfill));
    release(7);
    await running;
    const again = await fn.request.post('/').set(deliver(4, backfill));

    assert.deepEqual([blocked.status, blocked.body.outcome], [409, 'waiting']);
    assert.match(blocked.body.message, /the slot stays missed/);
    assert.equal(again.body.outcome, 'processed');
    assert.deepEqual(ran(), [7, 4]);
  });

  /** A lock naming `holder`, as another revision or a repair leaves it; its update time. */
  async function lockNaming(
    collection: string,
    holder: unknown,
  ): Promise<number> {
    const written = await firestore
      .collection(`${collection}_jobs`)
      .doc('every-minute~overlap')
      .set({ holder_run_id: holder, job_name: 'every-minute' });
    return written.writeTime.toMillis();
  }

  it('a lock whose holder has no record holds only through the claim window: a vanished holder skips nothing after it', async () => {
    const { jobs, ran } = gatedJob('skip', []);
    const collection = freshCollection();
    // FIRESTORE_TIMEOUT_SECONDS=1: the claim window is a few seconds; the lease is 300 s.
    const fn = serveJobs(jobs, {
      collection,
      env: { FIRESTORE_TIMEOUT_SECONDS: '1' },
    });
    // The holder's record is gone (deleted by the repair of an unreadable record, or the TTL).
    const lockedAt = await lockNaming(collection, runIdOf(0));

    // Within the window: an older revision's claim may still follow its lock (a rolling deploy).
    const early = await fn.request.post('/').set(deliver(1));
    await until(
      async () =>
        (await fn.ledger.documents.serverTime()).getTime() > lockedAt + 5_000,
    );
    const later = await fn.request.post('/').set(deliver(2));

    assert.deepEqual([early.status, early.body.outcome], [200, 'skipped']);
    assert.deepEqual([later.status, later.body.outcome], [200, 'processed']);
    assert.deepEqual(ran(), [2]);
  });

  it('a lock whose holder id is malformed is answered 500 unreadable_record with the repair, not as Firestore unavailable', async () => {
    const { jobs, calls } = gatedJob('skip', []);
    const collection = freshCollection();
    await lockNaming(collection, 'not-a-run-id');
    const fn = serveJobs(jobs, { collection });

    const res = await fn.request.post('/').set(deliver(1));

    assert.deepEqual(
      [res.status, res.body.outcome],
      [500, 'unreadable_record'],
    );
    assert.match(res.body.message, /holder_run_id is "not-a-run-id"/);
    assert.match(
      res.body.message,
      /delete the lock document every-minute~overlap/,
    );
    assert.equal(calls.length, 0);
  });

  it('a holder record with a lease from the future never makes later slots vanish: each answers 500 naming it', async () => {
    const { jobs, calls } = gatedJob('skip', []);
    const collection = freshCollection();
    await crashedHolder(collection, runIdOf(0), slotAt(0));
    const threeDaysAhead = Timestamp.fromMillis(Date.now() + 3 * 86_400_000);
    await firestore
      .collection(collection)
      .doc(runIdOf(0))
      .update({ leased_at: threeDaysAhead });
    const fn = serveJobs(jobs, { collection });

    const own = await fn.request.post('/').set(deliver(0));
    const later = [];
    for (const m of [1, 2, 3]) {
      later.push(await fn.request.post('/').set(deliver(m)));
    }

    assert.deepEqual(
      [own.status, own.body.outcome],
      [500, 'unreadable_record'],
    );
    for (const res of later) {
      assert.deepEqual(
        [res.status, res.body.outcome],
        [500, 'unreadable_record'],
      );
      assert.ok(
        res.body.message.includes(runIdOf(0)),
        'the answer names the holder record',
      );
      assert.equal(
        await storedRecord(collection, res.body.runId).catch(() => undefined),
        undefined,
      );
    }
    assert.equal(calls.length, 0);
  });
});
