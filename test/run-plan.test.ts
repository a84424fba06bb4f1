/**
 * Runs that are not simply their slot's, through the handler on the emulator: forced runs (judged on
 * a driven clock), manual runs, deliberate re-runs, and the overlap policies `skip` and `wait` with
 * two instances and a slow job.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { JobContext } from '../src/core/job-context.ts';
import { computeRunId } from '../src/core/run-key.ts';
import { defineJob, type JobDeclaration, validateJobs } from '../src/policy/job-declaration.ts';
import { forcedRunId, readHistory, slotRunId } from '../src/policy/run-history.ts';
import { forcedRunToleranceMs } from '../src/policy/schedule-time.ts';
import { schedulerHeaders, serveJobs, storedRecord, until } from './helpers.ts';

const T = '2026-10-16T12:00:00Z';
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
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    let now = at(T, -4 * 60_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const forced = await request.post('/').set(schedulerHeaders('nightly-report', T));
    const retry = await request.post('/').set(schedulerHeaders('nightly-report', T));
    now = at(T, 0);
    const scheduled = await request.post('/').set(schedulerHeaders('nightly-report', T));
    now = at(T, 1000);
    const late = await request.post('/').set(schedulerHeaders('nightly-report', T));

    assert.deepEqual(
      [forced, retry, scheduled, late].map((r) => [r.status, r.body.outcome]),
      [
        [200, 'processed'],
        [200, 'duplicate'],
        [200, 'processed'],
        [200, 'duplicate'],
      ],
    );
    const slotRunId = computeRunId({ jobName: 'nightly-report', scheduleTime: T, scope: [] });
    assert.equal(scheduled.body.runId, slotRunId, 'the scheduled delivery is the slot');
    assert.notEqual(forced.body.runId, slotRunId, 'the forced run has an id of its own');
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced', 'slot'],
    );
  });

  it('takes a delivery as its slot up to FORCED_RUN_TOLERANCE_SECONDS early', async () => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    const env = { FORCED_RUN_TOLERANCE_SECONDS: '120' };
    const { request } = serveJobs(jobs, { env }, { clock: async () => at(T, -119_000) });

    const res = await request.post('/').set(schedulerHeaders('nightly-report', T));

    assert.equal(
      res.body.runId,
      computeRunId({ jobName: 'nightly-report', scheduleTime: T, scope: [] }),
    );
    assert.equal(calls[0]?.kind, 'slot');
  });
});

describe('forced runs on a warm instance whose wall clock steps (Firestore’s clock, monotonic since)', () => {
  it('takes Scheduler’s on-time delivery as its slot after the wall clock stepped back 5 minutes', async (t) => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '* * * * *' });
    const { request, ledger } = serveJobs(jobs);
    const slot = new Date(Math.floor((await ledger.serverTime()).getTime() / 60_000) * 60_000);
    const realNow = Date.now.bind(Date);
    t.mock.method(Date, 'now', () => realNow() - 5 * 60_000);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly-report', slot.toISOString().replace('.000Z', 'Z')));

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
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    let now = at(T, -4 * 60_000); // the instance's estimate, 4 minutes behind Firestore's
    const { request } = serveJobs(jobs, {}, { clock: async () => now });
    const misjudged = await request.post('/').set(schedulerHeaders('nightly-report', T));
    now = at(T, 3 * 60_000);

    const late = await request.post('/').set(schedulerHeaders('nightly-report', T));

    assert.deepEqual([late.status, late.body.outcome], [200, 'duplicate'], late.body.message);
    assert.equal(late.body.runId, misjudged.body.runId);
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced'],
    );
  });

  it('a re-run of such a slot runs (its run is finished), and is not refused as a slot without a record', async () => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    let now = at(T, -4 * 60_000); // the instance's estimate, 4 minutes behind Firestore's
    const { request } = serveJobs(jobs, {}, { clock: async () => now });
    const misjudged = await request.post('/').set(schedulerHeaders('nightly-report', T));
    now = at(T, 3_600_000);

    const rerun = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun') });

    assert.equal(misjudged.body.outcome, 'processed');
    assert.deepEqual([rerun.status, rerun.body.outcome], [200, 'processed'], rerun.body.message);
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['forced', 'rerun'],
    );
  });

  it('counts it as the slot (completed, kind slot) and a genuine Force run long before its slot not', async () => {
    const { jobs } = counted({ id: 'nightly-report', schedule: '*/10 * * * *' });
    const job = jobs[0] as (typeof jobs)[number];
    const tolerance = forcedRunToleranceMs(job, 60_000);
    const TEN_MINUTES = 600_000;
    const real = (await serveJobs(jobs).ledger.serverTime()).getTime();
    // The slot just past, delivered on time; and the first slot Force run may send now, early by
    // more than the tolerance.
    const onTime = new Date(Math.floor(real / TEN_MINUTES) * TEN_MINUTES);
    const future = new Date((Math.floor((real + tolerance) / TEN_MINUTES) + 1) * TEN_MINUTES);
    // An instance whose estimate of Firestore's time is 5 minutes behind, and one that is right.
    const behind = serveJobs(jobs, {}, { clock: async () => new Date(onTime.getTime() - 300_000) });
    const right = serveJobs(jobs, { collection: behind.collection });
    const headersOf = (slot: Date) =>
      schedulerHeaders('nightly-report', slot.toISOString().replace('.000Z', 'Z'));

    const misjudged = await behind.request.post('/').set(headersOf(onTime));
    const forceRun = await right.request.post('/').set(headersOf(future));
    const judgedAt = new Date(future.getTime() + 3_600_000);
    const { rows } = await readHistory(
      behind.history,
      job,
      [onTime, future],
      [],
      judgedAt,
      tolerance,
    );

    assert.equal((await storedRecord(behind.collection, misjudged.body.runId)).run_kind, 'forced');
    assert.equal((await storedRecord(behind.collection, forceRun.body.runId)).run_kind, 'forced');
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
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    const { request, collection } = serveJobs(jobs);
    const id = randomUUID();

    const manual = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('manual', id) });
    const retry = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('manual', id) });
    const slot = await request.post('/').set(schedulerHeaders('nightly-report', T));

    assert.deepEqual(
      [manual.body.outcome, retry.body.outcome, slot.body.outcome],
      ['processed', 'duplicate', 'processed'],
    );
    assert.equal((await storedRecord(collection, manual.body.runId)).run_kind, 'manual');
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['manual', 'slot'],
    );
  });

  it('one trigger id sent with schedule times 1 s apart is one manual run: the second delivery is its duplicate', async () => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    const { request } = serveJobs(jobs);
    const id = randomUUID();
    const manualAt = (ms: number) =>
      request.post('/').set({
        ...schedulerHeaders('nightly-report', at(T, ms).toISOString()),
        ...trigger('manual', id),
      });

    const first = await manualAt(5_000);
    const second = await manualAt(6_000);

    assert.deepEqual([first.body.outcome, second.body.outcome], ['processed', 'duplicate']);
    assert.equal(second.body.runId, first.body.runId);
    assert.equal(calls.length, 1);
  });

  it('a trigger id reused for a re-run of a slot is the manual run’s duplicate, never a second run', async () => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    const { request, collection } = serveJobs(jobs);
    const id = randomUUID();
    await request.post('/').set(schedulerHeaders('nightly-report', T));
    const manual = await request.post('/').set({
      ...schedulerHeaders('nightly-report', at(T, 90_000).toISOString()),
      ...trigger('manual', id),
    });

    const rerun = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun', id) });

    assert.equal(rerun.body.outcome, 'duplicate');
    assert.equal(rerun.body.runId, manual.body.runId);
    assert.deepEqual(
      calls.map((c) => c.kind),
      ['slot', 'manual'],
    );
    const record = await storedRecord(collection, manual.body.runId);
    assert.equal(record.run_kind, 'manual', 'the record keeps the first delivery’s details');
  });

  it('the same trigger id in two key scopes is two runs', async () => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    const { request } = serveJobs(jobs, { env: { RUN_KEY_SCOPE_HEADERS: 'x-tenant' } });
    const id = randomUUID();
    const manualFor = (tenant: string) =>
      request.post('/').set({
        ...schedulerHeaders('nightly-report', T),
        ...trigger('manual', id),
        'X-Tenant': tenant,
      });

    const answers = [await manualFor('a'), await manualFor('b'), await manualFor('a')];

    assert.deepEqual(
      answers.map((r) => r.body.outcome),
      ['processed', 'processed', 'duplicate'],
    );
    assert.equal(calls.length, 2);
  });

  it('a re-run is a run of its own keyed by its trigger id: trigger ids A, B, A, B, A run twice, each with a new run id', async () => {
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    const { request, collection } = serveJobs(jobs);
    const [a, b] = [randomUUID() as string, randomUUID() as string];
    const rerun = (id: string) =>
      request.post('/').set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun', id) });
    const first = await request.post('/').set(schedulerHeaders('nightly-report', T));

    const answers = [];
    for (const id of [a, b, a, b, a]) answers.push(await rerun(id));
    const schedulerRetry = await request.post('/').set(schedulerHeaders('nightly-report', T));

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
    assert.equal(new Set([slotRunId, runA, runB]).size, 3, 'three idempotency keys');
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
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
    let now = at(T, -10 * 60_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const early = await request
      .post('/')
      .set({ ...schedulerHeaders('nightly-report', T), ...trigger('rerun') });
    now = at(T, 1000);
    const scheduled = await request.post('/').set(schedulerHeaders('nightly-report', T));

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
    ['an off-schedule time', '2026-10-16T12:01:00Z', /is not a slot of nightly-report/],
    ['year 9999', '9999-12-31T12:00:00Z', /is in the future|after the job's next slot/],
    ['a time before 2000', '1999-12-31T12:00:00Z', /before 2000/],
    [
      'a slot with no record',
      '2026-10-15T12:00:00Z',
      /has no record.*--slot 2026-10-15T12:00:00Z \(without --rerun\)/,
    ],
  ];
  for (const [what, time, message] of refused) {
    it(`refuses a re-run of ${what} with 400 and runs nothing`, async () => {
      const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' });
      const { request } = serveJobs(jobs);

      const answer = await request
        .post('/')
        .set({ ...schedulerHeaders('nightly-report', time), ...trigger('rerun') });

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
    const { jobs, calls } = counted({ id: 'nightly-report', schedule: '0 12 * * *' }, async () => {
      if (fail) throw new Error('downstream answered 503');
      await gate;
    });
    const { request } = serveJobs(jobs);
    const failed = await request.post('/').set(schedulerHeaders('nightly-report', T));

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
    assert.match(whileRunning.body.message, /running now; re-run it after it finishes/);
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
        if (ctx.scheduleTime.toISOString() === '2026-10-16T12:00:00.000Z') await gate;
      },
    );
    return { jobs, calls, release: () => release() };
  }

  it('skip: a slot arriving while the previous one runs is answered 200 skipped, recorded, and never runs', async () => {
    const { jobs, calls, release } = slowJob('skip');
    const a = serveJobs(jobs);
    const b = serveJobs(jobs, { collection: a.collection });
    const slot = (time: string) => schedulerHeaders('every-five', `2026-10-16T${time}:00Z`);
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
    const slot = (time: string) => schedulerHeaders('every-five', `2026-10-16T${time}:00Z`);
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
    assert.match(waiting.body.message, /still running \(overlap policy "wait"\); retry later/);
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
        if (!gated.includes(hhmm)) return;
        return new Promise<void>((resolve) => gates.set(hhmm, resolve));
      },
    );
    return { jobs, calls, release: (hhmm: string) => gates.get(hhmm)?.() };
  }
  const slot = (time: string) => schedulerHeaders('every-minute', `2026-10-16T${time}:00Z`);
  const ran = (calls: JobContext[]) => calls.map((c) => c.scheduleTime.toISOString().slice(11, 16));

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
        if (hhmm !== '12:01') return Promise.resolve();
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

    const answers = Promise.all([
      a.request
        .post('/')
        .set(slot('12:01'))
        .then((r) => r),
      b.request
        .post('/')
        .set(slot('12:02'))
        .then((r) => r),
    ]);
    await until(() => calls.length === 1);
    // The loser answered 409 while the winner still runs; only then is the winner released.
    const [runningSlot] = ran(calls);
    const loser = runningSlot === '12:01' ? '12:02' : '12:01';
    const again = await (loser === '12:01' ? a : b).request.post('/').set(slot(loser));
    release(runningSlot as string);
    const results = await answers;

    assert.equal(again.body.outcome, 'waiting');
    assert.deepEqual(results.map((r) => r.body.outcome).sort(), ['processed', 'waiting']);
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

    const lock = await storedRecord(`${a.collection}_jobs`, 'every-minute~overlap');
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
      await storedRecord(`${a.collection}_jobs`, 'every-minute~overlap').catch(() => undefined),
      undefined,
    );
  });
});
