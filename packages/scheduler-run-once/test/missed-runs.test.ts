/**
 * Missed-run detection (`missed-runs.ts`) through the handler on the emulator, live: each slot is
 * delivered at its own time on a driven clock (the handler's `clock`, Firestore's time in
 * production), as Cloud Scheduler delivers it. A slot is reported once its retry window and margin
 * have closed, by the first due delivery after that (the first slot of an hour).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import type { JobDeclaration } from '../src/policy/job-declaration.ts';
import { defineJob, validateJobs } from '../src/policy/job-declaration.ts';
import { jobStateCollection } from '../src/policy/job-state.ts';
import { checkDocumentId } from '../src/policy/missed-run-cursor.ts';
import { retryWindowMs } from '../src/policy/retry-policy.ts';
import { defineAuditJob } from '../src/policy/run-audit.ts';
import { slotRunId } from '../src/policy/run-history.ts';
import { closedAfterMs } from '../src/policy/slot-verdict.ts';
import { assertErrorReportingEvent } from './fixtures/error-reporting.ts';
import { firestore, schedulerHeaders, serveJobs } from './helpers.ts';

const MINUTE = 60_000;
const HOUR = 3_600_000;
/**
 * The driven clock's 12:00 of "day 0": a whole hour ahead of the real clock, so the times Firestore
 * stamps on records (claims, completions) come before every delivery, as they do in production.
 */
const NOON = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;

/** The instant `hh:mm:ss` on day `day` (-1, 0 or 1) of the driven clock, as RFC 3339. */
function T(hhmmss: string, day = 0): string {
  const [h, m, sec] = hhmmss.split(':').map(Number) as [number, number, number];
  return new Date(
    NOON + day * 24 * HOUR + ((h - 12) * 60 + m) * MINUTE + sec * 1000,
  ).toISOString();
}
const ON = { MISSED_RUN_CHECK: 'on' };
const REPORTS = ['missed run', 'run failed after retries'];

/** A driven clock, shared by the instances of one test. */
function drivenClock(start: string) {
  let now = new Date(start);
  return {
    clock: async () => now,
    now: () => now,
    set: (at: Date) => {
      now = at;
    },
  };
}

type Served = ReturnType<typeof serveJobs>;

/** Delivers `jobId`'s slot at `slot` to `fn` at `at` (5 s after the slot unless given). */
async function deliverAt(
  fn: Served,
  time: ReturnType<typeof drivenClock>,
  jobId: string,
  slot: Date,
  at = new Date(slot.getTime() + 5000),
) {
  time.set(at);
  const res = await fn.request
    .post('/')
    .set(schedulerHeaders(jobId, slot.toISOString()));
  return res.body.outcome as string;
}

/** Every slot of a `step`-minute job in [from, to), oldest first. */
function slots(from: string, to: string, stepMinutes: number): Date[] {
  const out: Date[] = [];
  for (
    let t = Date.parse(from);
    t < Date.parse(to);
    t += stepMinutes * MINUTE
  ) {
    out.push(new Date(t));
  }
  return out;
}

function reportsOf(...fns: Served[]) {
  return fns
    .flatMap((fn) => fn.logs.lines())
    .filter((l) => REPORTS.includes(String(l.message)))
    .map((l) => ({
      message: l.message,
      slot: l.slot,
      jobName: l.jobName,
      severity: l.severity,
    }));
}

function declare(...declarations: JobDeclaration[]) {
  return validateJobs(declarations);
}

describe('missed-run detection, live', () => {
  it('reports a slot never delivered once, after its window closes, with the shipped defaults', async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const closesAt =
      Date.parse(T('12:05:00')) + closedAfterMs(jobs[0] as never);
    let reportedAt: number | undefined;

    for (const slot of slots(T('12:00:00'), T('15:05:00'), 5)) {
      if (slot.toISOString() === T('12:05:00')) {
        continue; // never delivered
      }
      assert.equal(await deliverAt(fn, time, 'five', slot), 'processed');
      if (reportedAt === undefined && reportsOf(fn).length > 0) {
        reportedAt = slot.getTime();
      }
    }

    assert.deepEqual(reportsOf(fn), [
      {
        message: 'missed run',
        slot: T('12:05:00'),
        jobName: 'five',
        severity: 'ERROR',
      },
    ]);
    assert.ok(
      reportedAt !== undefined && reportedAt >= closesAt,
      'never before its window closed',
    );
    assert.equal(
      reportedAt,
      Date.parse(T('14:00:00')),
      'by the first due delivery after',
    );
    const line = fn.logs.lines().find((l) => l.message === 'missed run');
    assertErrorReportingEvent(line, 'missed run');
    assert.equal(
      line?.fix,
      `npm run runs -- --job five --since ${T('12:05:00')} --backfill`,
    );
  });

  it('never reports a slot whose on-time delivery a clock 5 minutes behind took for a forced run: that run is the slot’s', async () => {
    // A day behind the real clock: Firestore stamps the misjudged claim at its own time, after the
    // slot, as it stamps a delivery that came on time (the instance's estimate was what lagged).
    const time = drivenClock(T('12:00:00', -1));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const outcomes: string[] = [];

    for (const slot of slots(T('12:00:00', -1), T('15:05:00', -1), 5)) {
      // 12:05 arrives on time, but this instance's estimate of Firestore's time says 12:00.
      const at =
        slot.toISOString() === T('12:05:00', -1)
          ? new Date(slot.getTime() - 5 * MINUTE)
          : undefined;
      outcomes.push(await deliverAt(fn, time, 'five', slot, at));
    }

    assert.ok(
      outcomes.every((o) => o === 'processed'),
      outcomes.join(' '),
    );
    const forced = fn.logs.lines().filter((l) => l.runKind === 'forced');
    assert.ok(
      forced.length > 0,
      'the 12:05 delivery was taken for a forced run',
    );
    assert.deepEqual(reportsOf(fn), [], 'no slot reported missed');
  });

  it('reads nothing beyond the claim and the completion but on the one due delivery of an hour', async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const calls: string[] = [];
    const { jobDocuments, history } = fn;
    const readData = jobDocuments.readData.bind(jobDocuments);
    const getMany = history.getMany.bind(history);
    jobDocuments.readData = (id) => {
      calls.push(`cursor ${time.now().toISOString().slice(11, 16)}`);
      return readData(id);
    };
    history.getMany = (ids) => {
      calls.push(`slots ${time.now().toISOString().slice(11, 16)}`);
      return getMany(ids);
    };

    for (const slot of slots(T('12:05:00'), T('14:05:00'), 5)) {
      assert.equal(await deliverAt(fn, time, 'five', slot), 'processed');
    }

    // Each check reads its slots, then the forced runs of those without a record (one was the
    // slot's run if a clock misjudged its delivery): 12:00 and the slot before it were never delivered.
    const hhmm = (t: string) => t.slice(11, 16);
    assert.deepEqual(calls, [
      `cursor ${hhmm(T('13:00:00'))}`,
      `slots ${hhmm(T('13:00:00'))}`,
      `slots ${hhmm(T('13:00:00'))}`,
      `cursor ${hhmm(T('14:00:00'))}`,
      `slots ${hhmm(T('14:00:00'))}`,
      `slots ${hhmm(T('14:00:00'))}`,
    ]);
  });

  it('reports a slot never delivered when the window is longer than the slots before a delivery', async () => {
    // Per-minute job, window 300 s + margin 60 s: six slots and more close behind each delivery.
    const time = drivenClock(T('12:00:00'));
    const settings = {
      attemptDeadlineSeconds: 60,
      retryCount: 2,
      maxRetryDurationSeconds: 0,
      minBackoffSeconds: 60,
      maxBackoffSeconds: 60,
    };
    const jobs = declare(
      defineJob({
        id: 'minutely',
        schedule: '* * * * *',
        ...settings,
        run: () => {},
      }),
    );
    assert.ok(closedAfterMs(jobs[0] as never) > 5 * MINUTE);
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });

    for (const slot of slots(T('12:50:00'), T('14:01:00'), 1)) {
      if (slot.toISOString() === T('13:30:00')) {
        continue;
      }
      assert.equal(await deliverAt(fn, time, 'minutely', slot), 'processed');
    }

    assert.deepEqual(
      reportsOf(fn).map((r) => [r.message, r.slot]),
      [['missed run', T('13:30:00')]],
    );
  });

  it("reports a job's first-ever slot that failed finally, and nothing before it", async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({
        id: 'first',
        schedule: '*/5 * * * *',
        run: (ctx) => {
          if (ctx.scheduleTime.toISOString() === T('12:10:00')) {
            throw new Error('downstream refused');
          }
        },
      }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });

    assert.equal(
      await deliverAt(fn, time, 'first', new Date(T('12:10:00'))),
      'failed',
    );
    // The slot before it left no record: Scheduler's execution of it may have retried a whole
    // window, and 12:10's first claim may be a Force run's retry (issue 40), so 12:10 closes up to
    // two windows and an attempt deadline after its time (14:12): the 15:00 slot's check reports it.
    for (const slot of slots(T('12:15:00'), T('15:05:00'), 5)) {
      assert.equal(await deliverAt(fn, time, 'first', slot), 'processed');
    }

    assert.deepEqual(
      reportsOf(fn).map((r) => [r.message, r.slot]),
      [['run failed after retries', T('12:10:00')]],
    );
  });

  it('never reports a slot whose delivery is in flight: a late retry, a job running past its window', async (t) => {
    const time = drivenClock(T('12:00:00'));
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const jobs = declare(
      defineJob({
        id: 'racing',
        schedule: '*/5 * * * *',
        run: async (ctx) => {
          const slot = ctx.scheduleTime.toISOString();
          if (slot === T('12:05:00') && !retried) {
            retried = true;
            throw new Error('first attempt fails');
          }
          if (slot === T('12:10:00')) {
            // The heartbeat's first beat widens a claim's short lease; on the driven clock no beat
            // runs, so a note (a fenced renewal) widens it to LEASE_SECONDS instead.
            await ctx.note('running', true);
            await held; // runs past its window
          }
        },
      }),
    );
    let retried = false;
    t.after(() => release()); // a failed assertion must not leave the request open
    // A day's lease: Firestore stamps it on the real clock, and it must stay live on the driven one.
    const fn = serveJobs(
      jobs,
      { env: { ...ON, LEASE_SECONDS: '86400' } },
      { clock: time.clock },
    );
    const window = retryWindowMs(jobs[0] as never);

    await deliverAt(fn, time, 'racing', new Date(T('12:00:00')));
    assert.equal(
      await deliverAt(fn, time, 'racing', new Date(T('12:05:00'))),
      'failed',
    );
    time.set(new Date(T('12:10:05')));
    const long = fn.request
      .post('/')
      .set(schedulerHeaders('racing', T('12:10:00')))
      .then((r) => r.body.outcome as string);
    for (const slot of slots(T('12:15:00'), T('13:00:00'), 5)) {
      await deliverAt(fn, time, 'racing', slot);
    }
    // 13:00 delivered late, past 12:05's retry window but inside its margin; 12:10 still runs.
    const late = new Date(Date.parse(T('12:05:00')) + window + 30_000);
    assert.equal(
      await deliverAt(fn, time, 'racing', new Date(T('13:00:00')), late),
      'processed',
    );
    // Then 12:05's last retry arrives, and succeeds.
    assert.equal(
      await deliverAt(
        fn,
        time,
        'racing',
        new Date(T('12:05:00')),
        new Date(late.getTime() + 10_000),
      ),
      'processed',
    );
    for (const slot of slots(T('13:05:00'), T('14:05:00'), 5)) {
      await deliverAt(fn, time, 'racing', slot);
    }
    assert.deepEqual(reportsOf(fn), [], 'nothing reported while 12:10 runs');
    release();
    assert.equal(await long, 'processed');
    for (const slot of slots(T('14:05:00'), T('15:05:00'), 5)) {
      await deliverAt(fn, time, 'racing', slot);
    }

    assert.deepEqual(
      reportsOf(fn),
      [],
      'a retry and a long run are no false alarms',
    );
  });

  it('reports each slot once across two instances checking the same job at once', async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      defineAuditJob({ id: 'run-audit', schedule: '0 * * * *' }),
    );
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    const never = [T('12:05:00'), T('12:40:00')];

    for (const [i, slot] of slots(T('12:00:00'), T('15:05:00'), 5).entries()) {
      if (never.includes(slot.toISOString())) {
        continue;
      }
      if (slot.getUTCMinutes() !== 0 || slot.getTime() === NOON) {
        assert.equal(
          await deliverAt(i % 2 === 0 ? a : b, time, 'five', slot),
          'processed',
        );
        continue;
      }
      // A due delivery on one instance and the audit on the other, at the same time.
      time.set(new Date(slot.getTime() + 5000));
      const answers = await Promise.all([
        a.request.post('/').set(schedulerHeaders('five', slot.toISOString())),
        b.request
          .post('/')
          .set(schedulerHeaders('run-audit', slot.toISOString())),
      ]);
      assert.deepEqual(
        answers.map((r) => r.body.outcome),
        ['processed', 'processed'],
      );
    }

    assert.deepEqual(
      reportsOf(a, b)
        .map((r) => [r.message, r.slot])
        .sort(),
      never.map((slot) => ['missed run', slot]),
      'each missed slot reported once',
    );
  });

  it('a run audit reports the slots of a job whose deliveries stopped, once each', async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' }),
    );
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );

    // 'five' is delivered until 12:20, then never again (its Scheduler job paused).
    for (const slot of slots(T('12:00:00'), T('12:25:00'), 5)) {
      assert.equal(await deliverAt(a, time, 'five', slot), 'processed');
    }
    for (const [i, slot] of slots(T('12:30:00'), T('15:30:00'), 30).entries()) {
      assert.equal(
        await deliverAt(i % 2 === 0 ? a : b, time, 'run-audit', slot),
        'processed',
      );
    }

    // By 15:00:05, 12:25 closed (66 min after it: 12:20 had completed); each later slot may have
    // waited a whole longest execution (63 min: its last retry sent within maxRetryDuration, run
    // to its deadline) behind the one before (Scheduler runs one execution of a job at a time),
    // so it closes 2 × 63 min + 3 min after its time: those up to 12:50.
    const expected = slots(T('12:25:00'), T('12:55:00'), 5).map((s) => [
      'missed run',
      s.toISOString(),
      'five',
    ]);
    assert.deepEqual(
      reportsOf(a, b)
        .map((r) => [r.message, r.slot, r.jobName])
        .sort(),
      expected,
    );
  });

  it('never fails the run when the check cannot read Firestore', async () => {
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const broken = {
      getMany: () => Promise.reject(new Error('14 UNAVAILABLE')),
      reportMissed: () => Promise.reject(new Error('unused')),
      markReported: () => Promise.reject(new Error('unused')),
      claimRelog: () => Promise.reject(new Error('unused')),
      acknowledgeReport: () => Promise.reject(new Error('unused')),
      recordSkipped: () => Promise.reject(new Error('unused')),
    };
    const time = drivenClock(T('14:00:05'));
    const fn = serveJobs(
      jobs,
      { env: ON, history: broken },
      { clock: time.clock },
    );

    const res = await fn.request
      .post('/')
      .set(schedulerHeaders('five', T('14:00:00')));

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    const warning = fn.logs
      .lines()
      .find((l) => /missed-run check .* failed/.test(String(l.message)));
    assert.equal(warning?.severity, 'WARNING');
  });

  it('reports a missed slot of a weekly job: its first check writes a cursor though no slot closed in a day', async () => {
    // Mondays 09:00 UTC from the first one more than a day ahead of the real clock.
    const DAY = 24 * HOUR;
    let monday = Math.ceil((Date.now() + DAY) / DAY) * DAY + 9 * HOUR;
    while (new Date(monday).getUTCDay() !== 1) {
      monday += DAY;
    }
    const week = (n: number) => new Date(monday + n * 7 * DAY);
    const time = drivenClock(week(0).toISOString());
    const jobs = declare(
      defineJob({ id: 'weekly', schedule: '0 9 * * MON', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });

    for (const n of [0, 2, 3]) {
      assert.equal(await deliverAt(fn, time, 'weekly', week(n)), 'processed');
    }

    assert.deepEqual(
      reportsOf(fn).map((r) => [r.message, r.slot]),
      [['missed run', week(1).toISOString()]],
    );
  });

  /**
   * An every-5-minutes job whose 12:05 slot is never delivered, each other slot delivered on time until `to`.
   * The first missed-run report lands but answers `first` (`lost`: it throws, as a lost answer;
   * `refused`: `exists`, as the client's retry of the landed create), and the `failReads` read-backs
   * after it fail.
   */
  async function playWithReportFaults(
    first: 'lost' | 'refused',
    failReads: number,
    to: string,
  ) {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const reportMissed = fn.history.reportMissed.bind(fn.history);
    const getMany = fn.history.getMany.bind(fn.history);
    let injected = false;
    let failedReads = 0;
    fn.history.reportMissed = async (...args) => {
      const result = await reportMissed(...args);
      if (injected) {
        return result;
      }
      injected = true;
      if (first === 'lost') {
        throw new Error('14 UNAVAILABLE: the answer was lost');
      }
      return 'exists';
    };
    fn.history.getMany = async (ids) => {
      if (injected && failedReads < failReads) {
        failedReads++;
        throw new Error('14 UNAVAILABLE: Firestore is unreachable');
      }
      return getMany(ids);
    };
    for (const slot of slots(T('12:00:00'), to, 5)) {
      if (slot.toISOString() === T('12:05:00')) {
        continue; // never delivered
      }
      assert.equal(await deliverAt(fn, time, 'five', slot), 'processed');
    }
    assert.ok(injected, 'the fault was injected');
    assert.equal(failedReads, failReads, 'the read-backs failed as injected');
    return fn;
  }

  it('logs a report whose write landed but whose answer was lost, once, at the next check', async () => {
    const fn = await playWithReportFaults('lost', 0, T('14:05:00'));

    assert.deepEqual(
      reportsOf(fn).map((r) => [r.message, r.slot]),
      [['missed run', T('12:05:00')]],
    );
  });

  it('logs a report whose write landed but whose retry the client sent was refused, once', async () => {
    const fn = await playWithReportFaults('refused', 0, T('14:05:00'));

    assert.deepEqual(
      reportsOf(fn).map((r) => [r.message, r.slot]),
      [['missed run', T('12:05:00')]],
    );
  });

  for (const [first, how] of [
    ['lost', 'whose write failed while no read could tell whether it landed'],
    [
      'refused',
      'whose landed write the client retried and was refused while no read could tell whose it was',
    ],
  ] as const) {
    it(`logs, unconfirmed, a report ${how}; the next check does not log it again`, async () => {
      const fn = await playWithReportFaults(first, 2, T('15:05:00'));

      const reports = fn.logs.lines().filter((l) => l.message === 'missed run');
      assert.deepEqual(
        reports.map((r) => [r.slot, r.unconfirmed]),
        [[T('12:05:00'), true]],
      );
    });
  }

  it('reports a backfilled slot once: its backfill failing finally adds no report of its own, and the slot keeps its report', async () => {
    const time = drivenClock(T('12:00:00'));
    let backfilling = false;
    const jobs = declare(
      defineJob({
        id: 'five',
        schedule: '*/5 * * * *',
        retryCount: 0,
        maxRetryDurationSeconds: 0,
        run: () => {
          if (backfilling) {
            throw new Error('the backfill failed too');
          }
        },
      }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    for (const slot of slots(T('12:00:00'), T('13:05:00'), 5)) {
      if (slot.toISOString() === T('12:05:00')) {
        continue; // never delivered
      }
      assert.equal(await deliverAt(fn, time, 'five', slot), 'processed');
    }
    const reports = () => reportsOf(fn).map((r) => [r.message, r.slot]);
    assert.deepEqual(
      reports(),
      [['missed run', T('12:05:00')]],
      'reported missed first',
    );

    backfilling = true;
    time.set(new Date(T('13:06:00')));
    const res = await fn.request.post('/').set({
      ...schedulerHeaders('five', T('12:05:00')),
      'X-Run-Once-Backfill': 'true',
    });

    assert.equal(res.body.outcome, 'failed');
    assert.deepEqual(reports(), [['missed run', T('12:05:00')]]);
    const { record } = await fn.ledger.documents.read(res.body.runId);
    assert.ok(
      record?.status === 'failed' && record.reportedAt !== undefined,
      'still reported',
    );
  });

  it('reports a closed slot whose record has a status this version does not know: an ERROR naming the run id, the field and the repair', async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const foreign = new Date(T('12:05:00'));
    const runId = slotRunId('five', foreign, []);

    for (const slot of slots(T('12:00:00'), T('14:05:00'), 5)) {
      if (slot.getTime() === foreign.getTime()) {
        // Another version's record (or one written by hand), where this slot's run would be.
        await firestore.collection(fn.collection).doc(runId).set({
          status: 'done',
          job_name: 'five',
          schedule_time: foreign.toISOString(),
        });
        continue;
      }
      assert.equal(await deliverAt(fn, time, 'five', slot), 'processed');
    }

    const said = fn.logs
      .lines()
      .filter((l) => /record cannot be read/.test(String(l.message)));
    assert.deepEqual(
      said.map((l) => [l.severity, l.runId, l.slot, l.field]),
      [['ERROR', runId, T('12:05:00'), 'status']],
    );
    assert.match(String(said[0]?.message), /delete the document/);
  });

  it('takes a cursor whose rule starts ahead of now for unreadable, said at each check, and reports the slot once it is deleted (an attack, stop 71)', async () => {
    const time = drivenClock(T('12:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const id = checkDocumentId('five', []);
    const document = firestore
      .collection(jobStateCollection(fn.collection))
      .doc(id);
    const unreadable = () =>
      fn.logs
        .lines()
        .filter((l) => /cursor document holds values/.test(String(l.message)));
    for (const slot of slots(T('12:00:00'), T('13:05:00'), 5)) {
      await deliverAt(fn, time, 'five', slot);
    }
    // Another version (or a hand) says the job moved to */5 a month from now, hourly before.
    const monthAhead = Date.parse(T('13:05:00')) + 30 * 24 * HOUR;
    await document.update({
      run_seen: true,
      rules: [
        {
          schedule: '0 * * * *',
          time_zone: 'Etc/UTC',
          until: Timestamp.fromDate(new Date(T('12:05:00'))),
        },
        {
          schedule: '*/5 * * * *',
          time_zone: 'Etc/UTC',
          since: Timestamp.fromMillis(monthAhead),
        },
      ],
    });
    for (const slot of slots(T('13:05:00'), T('16:05:00'), 5)) {
      if (slot.toISOString() !== T('13:30:00')) {
        await deliverAt(fn, time, 'five', slot);
      }
    }
    const beforeRepair = reportsOf(fn).map((r) => r.slot);
    const errors = unreadable().length;
    const reasons = new Set(unreadable().map((l) => l.reason));
    await document.delete();
    for (const slot of slots(T('16:05:00'), T('17:05:00'), 5)) {
      await deliverAt(fn, time, 'five', slot);
    }

    // Read as written, only the hourly slots were judged for a month: 13:30 lost silently.
    assert.deepEqual(beforeRepair, [], 'no slot judged from it');
    // Every check said so: those at 14:00, 15:00 and 16:00, and those the cursor's lag made due.
    assert.ok(errors >= 3, `${errors} checks said the cursor unreadable`);
    assert.deepEqual(
      [...reasons],
      ["rules[1] has a time ahead of Firestore's now"],
      'each ERROR names what in the cursor is wrong',
    );
    assert.deepEqual(
      reportsOf(fn).map((r) => r.slot),
      [T('13:30:00')],
      'the next check starts over and reports the slot',
    );
  });

  it('trusts no cursor the check would never write: one past now is unreadable, one older than the retention starts over in it', async () => {
    const time = drivenClock(T('14:00:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    );
    const fn = serveJobs(
      jobs,
      { env: { ...ON, RETENTION_SECONDS: '86400' } },
      { clock: time.clock },
    );
    const id = checkDocumentId('five', []);
    const cursor = (at: string, runSeen: boolean) =>
      fn.jobDocuments.write(id, 'test', {
        checked_before: Timestamp.fromDate(new Date(at)),
        run_seen: runSeen,
      });

    await cursor('2099-01-01T00:00:00Z', true);
    await deliverAt(fn, time, 'five', new Date(T('14:00:00')));
    const warned = fn.logs
      .lines()
      .some((l) => /cursor document holds values/.test(String(l.message)));
    await firestore
      .collection(jobStateCollection(fn.collection))
      .doc(id)
      .delete();
    await cursor('2000-01-01T00:00:00Z', true);
    await deliverAt(fn, time, 'five', new Date(T('09:00:00', 1)));
    await deliverAt(fn, time, 'five', new Date(T('14:00:00', 1)));

    assert.ok(warned, 'a cursor past now is unreadable, and said so');
    // A cursor older than the retention starts over in the retained range, its first record unseen:
    // nothing before the job's first retained record (14:00 the day before) is reported, though
    // the range reaches back to 09:00:05 then; after it, every undelivered slot closed by then: a
    // slot after an undelivered one may have waited a longest execution (63 min) behind it, so it
    // closes 129 min after its time: those up to 11:50.
    const reported = reportsOf(fn).map((r) => String(r.slot));
    assert.equal(reported[0], T('14:05:00'));
    assert.equal(reported.at(-1), T('11:50:00', 1));
    assert.equal(reported.length, 261);
    assert.ok(!reported.includes(T('09:00:00', 1)));
  });
});
