/**
 * The schedule times the handler accepts, and the per-job forced-run tolerance, through the
 * handler on the emulator with a driven clock standing for Firestore's:
 * every delivery is sent at its own time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cron } from 'croner';
import { computeRunId } from '../src/core/run-key.ts';
import { defineJob, validateJobs } from '../src/policy/job-declaration.ts';
import {
  PAST_NOON_MS,
  rfc3339,
  schedulerHeaders,
  serveJobs,
  storedRecord,
} from './helpers.ts';

const at = (iso: string, ms: number) => new Date(Date.parse(iso) + ms);
/** `ms` after noon yesterday (the driven clocks start there), as Scheduler sends it. */
const afterNoon = (ms: number) => rfc3339(PAST_NOON_MS + ms);

/** The first 29 February after `ms`, midnight UTC. */
function nextLeapDay(ms: number): string {
  for (let year = new Date(ms).getUTCFullYear(); ; year++) {
    const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
    if (leap && Date.UTC(year, 1, 29) > ms) {
      return rfc3339(Date.UTC(year, 1, 29));
    }
  }
}

function counted(id: string, schedule: string) {
  const kinds: string[] = [];
  const jobs = validateJobs([
    defineJob({ id, schedule, run: async (ctx) => void kinds.push(ctx.kind) }),
  ]);
  return { jobs, kinds };
}

describe('a force run of a per-minute job (tolerance: half its one-minute gap)', () => {
  for (const early of [59, 31]) {
    it(`is a run of its own ${early} s before the slot, and the slot still runs at its time`, async () => {
      const slot = afterNoon(60_000);
      const { jobs, kinds } = counted('every-minute', '* * * * *');
      let now = at(slot, -early * 1000);
      const { request } = serveJobs(jobs, {}, { clock: async () => now });

      const forced = await request
        .post('/')
        .set(schedulerHeaders('every-minute', slot));
      now = at(slot, 0);
      const scheduled = await request
        .post('/')
        .set(schedulerHeaders('every-minute', slot));

      assert.deepEqual(
        [forced, scheduled].map((r) => [r.status, r.body.outcome]),
        [
          [200, 'processed'],
          [200, 'processed'],
        ],
      );
      assert.equal(
        scheduled.body.runId,
        computeRunId({
          jobName: 'every-minute',
          scheduleTime: slot,
          scope: [],
        }),
      );
      assert.notEqual(forced.body.runId, scheduled.body.runId);
      assert.deepEqual(kinds, ['forced', 'slot']);
    });
  }

  it('29 s before the slot is the slot’s own run, early: its delivery is then a duplicate', async () => {
    const slot = afterNoon(60_000);
    const { jobs, kinds } = counted('every-minute', '* * * * *');
    let now = at(slot, -29_000);
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const forced = await request
      .post('/')
      .set(schedulerHeaders('every-minute', slot));
    now = at(slot, 0);
    const scheduled = await request
      .post('/')
      .set(schedulerHeaders('every-minute', slot));

    assert.deepEqual(
      [forced.body.outcome, scheduled.body.outcome],
      ['processed', 'duplicate'],
    );
    assert.deepEqual(kinds, ['slot'], 'the slot ran once');
  });

  it('a job with slots five minutes apart keeps FORCED_RUN_TOLERANCE_SECONDS (59 s early is its slot)', async () => {
    const slot = afterNoon(5 * 60_000);
    const { jobs, kinds } = counted('five', '*/5 * * * *');
    const { request } = serveJobs(
      jobs,
      {},
      { clock: async () => at(slot, -59_000) },
    );

    const res = await request.post('/').set(schedulerHeaders('five', slot));

    assert.equal(res.body.outcome, 'processed');
    assert.deepEqual(kinds, ['slot']);
  });
});

describe('schedule times Scheduler cannot send are refused with 400, nothing written', () => {
  const now = new Date(PAST_NOON_MS + 20_000);
  const cases = [
    {
      name: 'year 1 (slot arithmetic there used to stall the instance)',
      time: '0001-01-01T00:00:00Z',
      message: /before 2000-01-01/,
    },
    {
      name: 'ten minutes ahead (a future slot run early)',
      time: afterNoon(10 * 60_000),
      message: new RegExp(
        `after the job's next slot \\(${afterNoon(60_000)}\\)`,
      ),
    },
    {
      name: 'year 9999',
      time: '9999-12-31T23:59:00Z',
      message: /after the job's next slot/,
    },
    {
      name: 'older than RETENTION_SECONDS (its record may be gone)',
      time: afterNoon(-45 * 86_400_000),
      message: /older than RETENTION_SECONDS \(2592000 s/,
    },
  ];
  for (const c of cases) {
    it(`refuses ${c.name}`, async () => {
      const { jobs, kinds } = counted('every-minute', '* * * * *');
      const env = { RETENTION_SECONDS: '2592000' };
      const { request, collection } = serveJobs(
        jobs,
        { env },
        { clock: async () => now },
      );

      const res = await request
        .post('/')
        .set(schedulerHeaders('every-minute', c.time));

      assert.equal(res.status, 400);
      assert.equal(res.body.outcome, 'invalid_request');
      assert.match(res.body.message, c.message);
      assert.deepEqual(kinds, []);
      const runId = computeRunId({
        jobName: 'every-minute',
        scheduleTime: new Date(c.time).toISOString().replace('.000', ''),
        scope: [],
      });
      await assert.rejects(storedRecord(collection, runId), /no document/);
    });
  }

  it('accepts "Force run" of a leap-day job, whose next slot is years away', async () => {
    const { jobs, kinds } = counted('leap', '0 0 29 2 *');
    const { request } = serveJobs(jobs, {}, { clock: async () => now });

    const res = await request
      .post('/')
      .set(schedulerHeaders('leap', nextLeapDay(now.getTime())));

    assert.equal(res.body.outcome, 'processed');
    assert.deepEqual(kinds, ['forced']);
  });
});

describe('the forced-run tolerance on the request path (cold start, issue 28)', () => {
  /** How many slots croner looks up (`nextRun`) while `fn` runs, counted on croner itself. */
  async function slotLookups(fn: () => Promise<unknown>): Promise<number> {
    const { nextRun } = Cron.prototype;
    let lookups = 0;
    Cron.prototype.nextRun = function (this: Cron, ...args) {
      lookups++;
      return nextRun.apply(this, args);
    };
    try {
      await fn();
    } finally {
      Cron.prototype.nextRun = nextRun;
    }
    return lookups;
  }

  // Schedules no other test of this process uses: a job's exact tolerance is computed once per
  // process (1,000 slots from 2000 on, `shortestGapMs`), then remembered.
  it("is never computed for a slot's on-time delivery or a backfill's, only for one that may be a forced run", async () => {
    const onTime = counted('on-time', '17 */2 * * *');
    const early = counted('early', '23 */2 * * *');
    const backfill = counted('backfill', '29 */2 * * *');
    const slot = (minute: number) => afterNoon(minute * 60_000);
    let now = at(slot(17), 2_000);
    const clock = { clock: async () => now };
    const a = serveJobs(
      onTime.jobs,
      { env: { MISSED_RUN_CHECK: 'off' } },
      clock,
    );
    const b = serveJobs(
      early.jobs,
      { env: { MISSED_RUN_CHECK: 'off' } },
      clock,
    );
    const c = serveJobs(
      backfill.jobs,
      { env: { MISSED_RUN_CHECK: 'off' } },
      clock,
    );

    const seenOnTime = await slotLookups(() =>
      a.request.post('/').set(schedulerHeaders('on-time', slot(17))),
    );
    now = at(slot(23), -45_000);
    const seenEarly = await slotLookups(() =>
      b.request.post('/').set(schedulerHeaders('early', slot(23))),
    );

    // A day late, far past the retry window: the verdict is the same at both ends of the band.
    now = at(slot(29), 86_400_000);
    const seenLate = await slotLookups(() =>
      c.request
        .post('/')
        .set(schedulerHeaders('backfill', slot(29)))
        .set('X-Run-Once-Backfill', 'true'),
    );

    assert.deepEqual(
      [onTime.kinds, early.kinds, backfill.kinds],
      [['slot'], ['slot'], ['slot']],
    );
    assert.ok(
      seenOnTime < 100,
      `${seenOnTime} slot look-ups for an on-time delivery`,
    );
    assert.ok(
      seenLate < 100,
      `${seenLate} slot look-ups for a delivery a day late`,
    );
    assert.ok(
      seenEarly >= 999,
      `${seenEarly} slot look-ups for a delivery 45 s early`,
    );
  });
});
