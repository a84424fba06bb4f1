/**
 * Slot arithmetic is bounded whatever the input: it covers SLOT_RANGE only, and
 * each search makes a bounded number of croner look-ups (counted, not timed). The forced-run
 * tolerance stays under each job's shortest gap (item 10), and the schedule times a delivery may
 * carry are bounded by the range Scheduler can send and by the retention (items 3 and 9). Pure.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cron } from 'croner';
import { previousSlots } from '../../src/ops/slots.ts';
import {
  type DeclaredJob,
  defineJob,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import {
  nextSlots,
  previousSlot,
  SLOT_RANGE,
  slotsBetween,
  toUtcRfc3339,
} from '../../src/policy/schedule.ts';
import {
  forcedRunToleranceMs,
  newestAcceptedTime,
  retentionProblems,
  scheduleTimeProblem,
  shortestGapMs,
} from '../../src/policy/schedule-time.ts';

const perMinute = { schedule: '* * * * *', timeZone: 'Etc/UTC' };
const leapDay = { schedule: '0 0 29 2 *', timeZone: 'Etc/UTC' };

/** How many croner look-ups (`nextRun`, `previousRuns`) `fn` makes, counted on croner itself. */
function cronerLookups(fn: () => unknown): number {
  const { nextRun, previousRuns } = Cron.prototype;
  let n = 0;
  Cron.prototype.nextRun = function (this: Cron, ...args) {
    n++;
    return nextRun.apply(this, args);
  };
  Cron.prototype.previousRuns = function (this: Cron, ...args) {
    n++;
    return previousRuns.apply(this, args);
  };
  try {
    fn();
  } finally {
    Cron.prototype.nextRun = nextRun;
    Cron.prototype.previousRuns = previousRuns;
  }
  return n;
}

/** How many croner look-ups `fn` makes. */
function stepsOf(fn: () => unknown): number {
  return cronerLookups(fn);
}

describe('slot arithmetic is bounded', () => {
  it('finds no slot before 2000 (a forged year-1 time used to search for seconds)', () => {
    const yearOne = new Date('0001-01-01T00:10:00Z');
    let slot: Date | undefined = new Date(0);
    const steps = stepsOf(() => {
      slot = previousSlot(
        { schedule: '*/5 * * * *', timeZone: 'Europe/Berlin' },
        yearOne,
      );
    });
    assert.equal(slot, undefined);
    assert.ok(steps <= 1, `${steps} look-ups`);
  });

  it('stops at the start of the range: the slot before 2000-01-01T00:05Z is 00:00Z, then none', () => {
    const slots = previousSlots(perMinute, new Date('2000-01-01T00:02:00Z'), 5);
    assert.deepEqual(slots.map(toUtcRfc3339), [
      '2000-01-01T00:00:00Z',
      '2000-01-01T00:01:00Z',
    ]);
  });

  it('returns no slot past 2200, even from the last representable instant', () => {
    assert.deepEqual(nextSlots(perMinute, new Date(8.64e15), 5), []);
    assert.deepEqual(
      nextSlots(leapDay, new Date('9998-01-01T00:00:00Z'), 2),
      [],
    );
    const last = nextSlots(
      perMinute,
      new Date(SLOT_RANGE.to.getTime() - 90_000),
      5,
    );
    assert.deepEqual(last.map(toUtcRfc3339), ['2199-12-31T23:59:00Z']);
  });

  it('answers a previous slot from far beyond the range with the range’s last one, in few look-ups', () => {
    let slot: Date | undefined;
    const steps = stepsOf(() => {
      slot = previousSlot(leapDay, new Date(8.64e15));
    });
    assert.equal(slot && toUtcRfc3339(slot), '2196-02-29T00:00:00Z');
    assert.ok(steps <= 3, `${steps} look-ups`);
  });

  it('makes a bounded number of look-ups per slot, across a fall-back transition', () => {
    const berlin = { schedule: '* * * * *', timeZone: 'Europe/Berlin' };
    let count = 0;
    const steps = stepsOf(() => {
      count = slotsBetween(
        berlin,
        new Date('2026-10-25T00:00:00Z'),
        new Date('2026-10-25T03:00:00Z'),
      ).slots.length;
    });
    assert.equal(count, 180);
    assert.ok(steps <= 2 * count, `${steps} look-ups for ${count} slots`);
  });
});

describe('the forced-run tolerance of a job', () => {
  it('is half the shortest gap when that is below FORCED_RUN_TOLERANCE_SECONDS', () => {
    assert.equal(forcedRunToleranceMs(perMinute, 60_000), 30_000);
    assert.equal(
      forcedRunToleranceMs(
        { schedule: '0,1 9 * * *', timeZone: 'Etc/UTC' },
        60_000,
      ),
      30_000,
    );
  });

  it('is FORCED_RUN_TOLERANCE_SECONDS for a job whose slots are far apart', () => {
    assert.equal(
      forcedRunToleranceMs(
        { schedule: '*/5 * * * *', timeZone: 'Etc/UTC' },
        60_000,
      ),
      60_000,
    );
    assert.equal(forcedRunToleranceMs(leapDay, 3_600_000), 3_600_000);
  });

  it('counts the hour a fall-back transition repeats as a gap', () => {
    const daily = { schedule: '30 2 * * *', timeZone: 'Europe/Berlin' };
    assert.equal(shortestGapMs(daily), 3_600_000);
    assert.equal(forcedRunToleranceMs(daily, 3_600_000), 1_800_000);
  });
});

describe('the schedule times a delivery may carry', () => {
  const now = new Date('2026-10-16T12:00:20Z');
  const limits = { now, retentionMs: 2_592_000_000, toleranceMs: 30_000 };

  const cases: {
    name: string;
    job: typeof perMinute;
    time: string;
    refused?: RegExp;
  }[] = [
    {
      name: 'a slot that has come',
      job: perMinute,
      time: '2026-10-16T12:00:00Z',
    },
    {
      name: 'a time between slots (a schedule change)',
      job: perMinute,
      time: '2026-10-16T11:59:30Z',
    },
    {
      name: 'the next slot ("Force run")',
      job: perMinute,
      time: '2026-10-16T12:01:00Z',
    },
    {
      name: 'the leap day years away, for "Force run" of 0 0 29 2 *',
      job: leapDay,
      time: '2028-02-29T00:00:00Z',
    },
    {
      name: 'a slot 29 days back',
      job: perMinute,
      time: '2026-09-17T12:00:00Z',
    },
    {
      name: 'year 1',
      job: perMinute,
      time: '0001-01-01T00:00:00Z',
      refused: /before 2000-01-01T00:00:00Z/,
    },
    {
      name: '1999',
      job: perMinute,
      time: '1999-12-31T23:59:00Z',
      refused: /before 2000/,
    },
    {
      name: 'a slot older than the retention',
      job: perMinute,
      time: '2026-09-16T12:00:00Z',
      refused: /older than RETENTION_SECONDS \(2592000 s/,
    },
    {
      name: 'the slot after the next',
      job: perMinute,
      time: '2026-10-16T12:02:00Z',
      refused: /after the job's next slot \(2026-10-16T12:01:00Z\)/,
    },
    {
      name: 'year 9999',
      job: perMinute,
      time: '9999-12-31T23:59:00Z',
      refused: /after the job's next slot/,
    },
    {
      name: 'the leap day after the next',
      job: leapDay,
      time: '2032-02-29T00:00:00Z',
      refused: /after the job's next slot \(2028-02-29/,
    },
  ];
  for (const c of cases) {
    it(`${c.refused ? 'refuses' : 'accepts'} ${c.name}`, () => {
      const problem = scheduleTimeProblem(c.job, new Date(c.time), limits);
      if (c.refused) {
        assert.match(problem ?? '', c.refused);
      } else {
        assert.equal(problem, undefined);
      }
    });
  }

  it('lets the next slot come from a Scheduler clock ahead by up to the tolerance', () => {
    const justBefore = new Date('2026-10-16T12:00:50Z');
    assert.equal(
      toUtcRfc3339(newestAcceptedTime(perMinute, justBefore, 30_000)),
      '2026-10-16T12:02:00Z',
    );
  });
});

describe('the retention against the jobs’ retry windows', () => {
  const [job] = validateJobs([
    defineJob({ id: 'nightly', schedule: '0 2 * * *', run: async () => {} }),
  ]);
  const jobs = job ? [job] : [];

  it('accepts the defaults: 30 days against a window of 3570 s', () => {
    assert.deepEqual(retentionProblems(jobs, 2_592_000_000, 60_000), []);
  });

  it('refuses a retention within the retry window plus the tolerance, naming both', () => {
    const [problem] = retentionProblems(jobs, 3_600_000, 60_000);
    assert.match(
      problem ?? '',
      /RETENTION_SECONDS \(3600\) must exceed the retry window of job nightly \(3570 s.*tolerance \(60 s\)/,
    );
  });
});

describe('the cold start with 2,000 declared jobs', () => {
  const zones = Intl.supportedValuesOf('timeZone').filter((z) =>
    z.includes('/'),
  );
  const declarations = Array.from({ length: 2000 }, (_, i) =>
    defineJob({
      id: `job-${i}`,
      schedule: `${i % 60} ${Math.floor(i / 60) % 24} ${1 + Math.floor(i / 1440)} * *`,
      timeZone: zones[i % zones.length] as string,
      run: async () => {},
    }),
  );

  it('validates the jobs and checks the retention with one croner look-up per job', () => {
    let jobs: readonly DeclaredJob[] = [];
    let problems: string[] = [];

    const lookups = cronerLookups(() => {
      jobs = validateJobs(declarations);
      problems = retentionProblems(jobs, 2_592_000_000, 60_000);
    });

    assert.equal(
      new Set(jobs.map((j) => `${j.schedule} ${j.timeZone}`)).size,
      2000,
    );
    assert.deepEqual(problems, []);
    // The forced-run tolerance (1,000 slots per schedule and zone) waits until a job needs it.
    assert.ok(
      lookups <= jobs.length,
      `${lookups} croner look-ups for ${jobs.length} jobs`,
    );
  });
});
