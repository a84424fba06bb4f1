/**
 * Schedules as Cloud Scheduler reads them: which it takes, and when their runs fall, including the
 * days clocks change in Europe/Berlin, America/New_York and Australia/Lord_Howe (a 30-minute
 * change). Pure and in-process: no Firestore, no clock.
 *
 * Expected times were worked out by hand from the zones' rules (2026: Berlin springs forward on
 * 29 March at 01:00Z and falls back on 25 October at 01:00Z; New York on 8 March at 07:00Z and
 * 1 November at 06:00Z; Lord Howe falls back on 5 April at 15:00Z the day before) and the rule in
 * src/schedule.ts: a slot is every instant whose wall-clock time the schedule matches.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { Cron } from 'croner';
import fc from 'fast-check';
import { toZonedRfc3339 } from '../../src/ops/slots.ts';
import {
  MAX_SLOTS,
  nextSlots,
  normaliseSchedule,
  previousSlot,
  SLOT_RANGE,
  scheduleProblem,
  slotsBetween,
  timeZoneProblem,
  toUtcRfc3339,
} from '../../src/policy/schedule.ts';

const utc = (times: readonly Date[]) => times.map(toUtcRfc3339);
const SCHEDULE = new URL('../../src/policy/schedule.ts', import.meta.url).href;
const DECLARATION = new URL(
  '../../src/policy/job-declaration.ts',
  import.meta.url,
).href;

interface FireCase {
  name: string;
  schedule: string;
  timeZone: string;
  after: string;
  expected: string[];
}

const FIRE_TIMES: FireCase[] = [
  {
    name: 'steps in the minute field, strictly after `after`',
    schedule: '*/15 * * * *',
    timeZone: 'Etc/UTC',
    after: '2026-10-16T12:00:00Z',
    expected: [
      '2026-10-16T12:15:00Z',
      '2026-10-16T12:30:00Z',
      '2026-10-16T12:45:00Z',
    ],
  },
  {
    name: 'a range of weekdays skips the weekend',
    schedule: '0 9 * * 1-5',
    timeZone: 'Etc/UTC',
    after: '2026-10-16T10:00:00Z',
    expected: ['2026-10-19T09:00:00Z', '2026-10-20T09:00:00Z'],
  },
  {
    name: 'month and weekday names, ranges of names',
    schedule: '0 9 * JAN-MAR MON-FRI',
    timeZone: 'Etc/UTC',
    after: '2026-03-30T12:00:00Z',
    expected: [
      '2026-03-31T09:00:00Z',
      '2027-01-01T09:00:00Z',
      '2027-01-04T09:00:00Z',
    ],
  },
  {
    name: 'day of month OR day of week when both are restricted (the 13th, and every Friday)',
    schedule: '0 12 13 * FRI',
    timeZone: 'Etc/UTC',
    after: '2026-10-01T00:00:00Z',
    expected: [
      '2026-10-02T12:00:00Z',
      '2026-10-09T12:00:00Z',
      '2026-10-13T12:00:00Z',
      '2026-10-16T12:00:00Z',
    ],
  },
  {
    name: '7 is Sunday, as 0 is',
    schedule: '0 0 * * 7',
    timeZone: 'Etc/UTC',
    after: '2026-10-16T00:00:00Z',
    expected: ['2026-10-18T00:00:00Z', '2026-10-25T00:00:00Z'],
  },
  {
    name: 'stepped ranges in two fields',
    schedule: '10-40/15 8-10/2 * * *',
    timeZone: 'Etc/UTC',
    after: '2026-10-16T00:00:00Z',
    expected: [
      '2026-10-16T08:10:00Z',
      '2026-10-16T08:25:00Z',
      '2026-10-16T08:40:00Z',
      '2026-10-16T10:10:00Z',
      '2026-10-16T10:25:00Z',
      '2026-10-16T10:40:00Z',
      '2026-10-17T08:10:00Z',
    ],
  },
  {
    name: 'a list with a range and a step',
    schedule: '1,2-5/2,*/30 * * * *',
    timeZone: 'Etc/UTC',
    after: '2026-10-16T00:00:00Z',
    expected: [
      '2026-10-16T00:01:00Z',
      '2026-10-16T00:02:00Z',
      '2026-10-16T00:04:00Z',
    ],
  },
  {
    name: 'Europe/Berlin spring forward: 02:30 does not exist on 29 March, so no run that day',
    schedule: '30 2 * * *',
    timeZone: 'Europe/Berlin',
    after: '2026-03-28T00:00:00Z',
    expected: [
      '2026-03-28T01:30:00Z',
      '2026-03-30T00:30:00Z',
      '2026-03-31T00:30:00Z',
    ],
  },
  {
    name: 'Europe/Berlin spring forward: an interval job jumps from 01:30 CET to 03:00 CEST',
    schedule: '*/30 * * * *',
    timeZone: 'Europe/Berlin',
    after: '2026-03-29T00:15:00Z',
    expected: [
      '2026-03-29T00:30:00Z',
      '2026-03-29T01:00:00Z',
      '2026-03-29T01:30:00Z',
    ],
  },
  {
    name: 'Europe/Berlin fall back: 02:30 happens twice on 25 October, once per offset',
    schedule: '30 2 * * *',
    timeZone: 'Europe/Berlin',
    after: '2026-10-24T12:00:00Z',
    expected: [
      '2026-10-25T00:30:00Z',
      '2026-10-25T01:30:00Z',
      '2026-10-26T01:30:00Z',
    ],
  },
  {
    name: 'Europe/Berlin fall back: an interval job runs through both passes of the hour',
    schedule: '*/30 2 * * *',
    timeZone: 'Europe/Berlin',
    after: '2026-10-24T12:00:00Z',
    expected: [
      '2026-10-25T00:00:00Z',
      '2026-10-25T00:30:00Z',
      '2026-10-25T01:00:00Z',
      '2026-10-25T01:30:00Z',
      '2026-10-26T01:00:00Z',
    ],
  },
  {
    name: 'America/New_York spring forward: 02:30 does not exist on 8 March',
    schedule: '30 2 * * *',
    timeZone: 'America/New_York',
    after: '2026-03-07T12:00:00Z',
    expected: ['2026-03-09T06:30:00Z', '2026-03-10T06:30:00Z'],
  },
  {
    name: 'America/New_York spring forward: hourly goes 01:00 EST, 03:00 EDT',
    schedule: '0 * * * *',
    timeZone: 'America/New_York',
    after: '2026-03-08T05:30:00Z',
    expected: [
      '2026-03-08T06:00:00Z',
      '2026-03-08T07:00:00Z',
      '2026-03-08T08:00:00Z',
    ],
  },
  {
    name: 'America/New_York fall back: 01:30 EDT and 01:30 EST on 1 November',
    schedule: '30 1 * * *',
    timeZone: 'America/New_York',
    after: '2026-10-31T12:00:00Z',
    expected: [
      '2026-11-01T05:30:00Z',
      '2026-11-01T06:30:00Z',
      '2026-11-02T06:30:00Z',
    ],
  },
  {
    name: 'America/New_York fall back: from between the two passes, the second comes next',
    schedule: '30 1 * * *',
    timeZone: 'America/New_York',
    after: '2026-11-01T05:45:00Z',
    expected: ['2026-11-01T06:30:00Z', '2026-11-02T06:30:00Z'],
  },
  {
    name: 'America/New_York fall back: hourly shows 01:00 twice, then 02:00 EST',
    schedule: '0 * * * *',
    timeZone: 'America/New_York',
    after: '2026-11-01T04:30:00Z',
    expected: [
      '2026-11-01T05:00:00Z',
      '2026-11-01T06:00:00Z',
      '2026-11-01T07:00:00Z',
    ],
  },
  {
    name: 'Australia/Lord_Howe fall back by 30 minutes: 01:45 happens at +11:00 and +10:30',
    schedule: '45 1 * * *',
    timeZone: 'Australia/Lord_Howe',
    after: '2026-04-04T00:00:00Z',
    expected: [
      '2026-04-04T14:45:00Z',
      '2026-04-04T15:15:00Z',
      '2026-04-05T15:15:00Z',
    ],
  },
];

describe('nextSlots', () => {
  for (const c of FIRE_TIMES) {
    it(`${c.name}: ${c.schedule} in ${c.timeZone}`, () => {
      const slots = nextSlots(c, new Date(c.after), c.expected.length);

      assert.deepEqual(utc(slots), c.expected);
    });
  }

  it('continues from its own last slot without gaps or repeats', () => {
    const job = { schedule: '*/30 2 * * *', timeZone: 'Europe/Berlin' };
    const all = nextSlots(job, new Date('2026-10-24T12:00:00Z'), 6);

    const chained = [...nextSlots(job, new Date('2026-10-24T12:00:00Z'), 2)];
    while (chained.length < 6) {
      chained.push(...nextSlots(job, chained.at(-1) as Date, 1));
    }

    assert.deepEqual(utc(chained), utc(all));
  });

  it('refuses a count of 0 or above MAX_SLOTS, and an invalid date', () => {
    const job = { schedule: '* * * * *', timeZone: 'Etc/UTC' };

    assert.throws(() => nextSlots(job, new Date(), 0), RangeError);
    assert.throws(() => nextSlots(job, new Date(), MAX_SLOTS + 1), RangeError);
    assert.throws(() => nextSlots(job, new Date(Number.NaN), 1), RangeError);
  });
});

describe('previousSlot', () => {
  for (const c of FIRE_TIMES) {
    it(`walks back through the same slots: ${c.name}`, () => {
      const expected = c.expected.map((t) => new Date(t));

      const previous = expected.map((t) => previousSlot(c, t));

      for (const [i, slot] of previous.entries()) {
        if (i > 0) {
          assert.equal(slot?.toISOString(), expected[i - 1]?.toISOString());
        } else {
          assert.ok(
            slot === undefined || slot.getTime() <= new Date(c.after).getTime(),
          );
        }
      }
    });
  }

  it('is strictly before: a slot exactly at `before` is not returned', () => {
    const job = { schedule: '0 * * * *', timeZone: 'Etc/UTC' };

    const slot = previousSlot(job, new Date('2026-10-16T12:00:00Z'));

    assert.equal(slot?.toISOString(), '2026-10-16T11:00:00.000Z');
  });

  it('finds a slot years back (29 February)', () => {
    const job = { schedule: '0 0 29 2 *', timeZone: 'Europe/Berlin' };

    const slot = previousSlot(job, new Date('2026-10-25T00:30:00Z'));

    assert.equal(slot?.toISOString(), '2024-02-28T23:00:00.000Z');
  });
});

describe('slotsBetween', () => {
  const halfHourly = { schedule: '*/30 * * * *', timeZone: 'Europe/Berlin' };

  it('includes a slot at `from` and excludes one at `to`', () => {
    const { slots, truncated } = slotsBetween(
      halfHourly,
      new Date('2026-10-16T12:00:00Z'),
      new Date('2026-10-16T13:00:00Z'),
    );

    assert.deepEqual(utc(slots), [
      '2026-10-16T12:00:00Z',
      '2026-10-16T12:30:00Z',
    ]);
    assert.equal(truncated, false);
  });

  it('counts both passes through the repeated hour', () => {
    const { slots } = slotsBetween(
      halfHourly,
      new Date('2026-10-25T00:00:00Z'),
      new Date('2026-10-25T02:00:00Z'),
    );

    assert.deepEqual(utc(slots), [
      '2026-10-25T00:00:00Z',
      '2026-10-25T00:30:00Z',
      '2026-10-25T01:00:00Z',
      '2026-10-25T01:30:00Z',
    ]);
  });

  it('stops at the limit and says the range held more', () => {
    const { slots, truncated } = slotsBetween(
      halfHourly,
      new Date('2026-10-16T00:00:00Z'),
      new Date('2026-10-17T00:00:00Z'),
      3,
    );

    assert.deepEqual(utc(slots), [
      '2026-10-16T00:00:00Z',
      '2026-10-16T00:30:00Z',
      '2026-10-16T01:00:00Z',
    ]);
    assert.equal(truncated, true);
  });

  it('is not truncated when the range holds exactly the limit', () => {
    const { slots, truncated } = slotsBetween(
      halfHourly,
      new Date('2026-10-16T12:00:00Z'),
      new Date('2026-10-16T13:00:00Z'),
      2,
    );

    assert.equal(slots.length, 2);
    assert.equal(truncated, false);
  });

  it('returns nothing for an empty range', () => {
    const at = new Date('2026-10-16T12:00:00Z');

    assert.deepEqual(slotsBetween(halfHourly, at, at), {
      slots: [],
      truncated: false,
    });
  });

  it('caps the limit at MAX_SLOTS', () => {
    assert.throws(
      () => slotsBetween(halfHourly, new Date(0), new Date(), MAX_SLOTS + 1),
      /limit must be a whole number from 1 to 10000/,
    );
  });
});

describe('scheduleProblem', () => {
  const accepted = [
    '* * * * *',
    '*/5 * * * *',
    '0 9 * * 1-5',
    '0 9 * JAN-MAR MON-FRI',
    '0 9 * jan mon',
    '0 0 1,15 * *',
    '0 0 * * 7',
    '0 0 1-31/2 * MON',
    '0 0 29 2 *',
    ' 0  9 * * * ',
  ];
  for (const schedule of accepted) {
    it(`accepts ${JSON.stringify(schedule)}`, () => {
      assert.equal(scheduleProblem(schedule), undefined);
    });
  }

  const refused: [string, RegExp][] = [
    ['every 5 minutes', /five fields.*groc.*X-CloudScheduler-ScheduleTime/],
    ['every monday 09:00', /five fields.*groc/],
    ['@daily', /write @daily as "0 0 \* \* \*"/],
    ['', /five fields/],
    ['0 0 * * * *', /five fields \(it has 6\)/],
    [
      '0 0 * *',
      /^must be a unix-cron schedule of five fields \(it has 4\), e\.g\. "\*\/5 \* \* \* \*"\.$/,
    ],
    ['0 0 L * *', /day of month field "L".*no L, W, #/],
    ['0 0 15W * *', /day of month field "15W"/],
    ['0 0 * * 5#2', /day of week field "5#2"/],
    ['0 0 ? * *', /day of month field "\?"/],
    ['0 0 * * +MON', /day of week field "\+MON"/],
    ['0 9 * JANUARY *', /month field "JANUARY".*JAN-DEC/],
    ['0 9 * * MON-FRIDAY', /day of week field "MON-FRIDAY".*SUN-SAT/],
    ['0 MON * * *', /hour field "MON"/],
    ['60 * * * *', /minute: 60/],
    ['0 24 * * *', /hour: 24/],
    ['0 0 0 * *', /day/],
    ['0 0 * * 8', /dayOfWeek: 8/],
    ['*/0 * * * *', /stepping/],
    ['5/15 * * * *', /stepping/],
    ['0 22-2 * * *', /larger/],
    ['0 0 31 2 *', /never fires/],
    ['0 0 */2 * MON', /disagree.*"1-31\/2"/],
    ['0 0 1 * */2', /disagree/],
  ];
  for (const [schedule, message] of refused) {
    it(`refuses ${JSON.stringify(schedule)}`, () => {
      assert.match(scheduleProblem(schedule) ?? '(accepted)', message);
    });
  }

  it('normalises whitespace between fields to one space', () => {
    assert.equal(normaliseSchedule(' 0  9\t* * MON-FRI '), '0 9 * * MON-FRI');
  });
});

describe('timeZoneProblem', () => {
  for (const zone of [
    'Etc/UTC',
    'UTC',
    'Europe/Berlin',
    'America/Argentina/Buenos_Aires',
    'Etc/GMT+5',
  ]) {
    it(`accepts ${zone}`, () => {
      assert.equal(timeZoneProblem(zone), undefined);
    });
  }

  const refused: [string, RegExp][] = [
    ['Mars/Base', /not a time zone of the tz database/],
    ['', /not a time zone/],
    ['+01:00', /not a UTC offset/],
    ['europe/berlin', /spelled as in the tz database: "Europe\/Berlin"/],
  ];
  for (const [zone, message] of refused) {
    it(`refuses ${JSON.stringify(zone)}`, () => {
      assert.match(timeZoneProblem(zone) ?? '(accepted)', message);
    });
  }
});

describe('RFC 3339 forms', () => {
  const cases: [string, string, string][] = [
    ['2026-03-29T01:00:00.000Z', 'Europe/Berlin', '2026-03-29T03:00:00+02:00'],
    ['2026-10-25T01:30:00.000Z', 'Europe/Berlin', '2026-10-25T02:30:00+01:00'],
    [
      '2026-11-01T05:30:00.000Z',
      'America/New_York',
      '2026-11-01T01:30:00-04:00',
    ],
    ['2026-03-29T01:00:00.000Z', 'Asia/Kathmandu', '2026-03-29T06:45:00+05:45'],
    ['2026-03-29T01:00:59.999Z', 'Etc/UTC', '2026-03-29T01:00:59+00:00'],
  ];
  for (const [instant, zone, expected] of cases) {
    it(`shows ${instant} in ${zone} as ${expected}`, () => {
      assert.equal(toZonedRfc3339(new Date(instant), zone), expected);
    });
  }

  it('shows UTC to the second with Z, as X-CloudScheduler-ScheduleTime', () => {
    assert.equal(
      toUtcRfc3339(new Date('2026-10-16T12:00:00.000Z')),
      '2026-10-16T12:00:00Z',
    );
  });
});

describe('UTC without the tz database', () => {
  const schedules = [
    '* * * * *',
    '*/7 3-5 * * *',
    '0 0 29 2 *',
    '30 2 * * 1-5',
    '15 */6 1,15 * *',
  ];
  const instant = fc
    .integer({
      min: SLOT_RANGE.from.getTime(),
      max: SLOT_RANGE.to.getTime() - 1,
    })
    .map((t) => new Date(t));

  it("finds the slots croner finds in the tz database's Etc/UTC, and those of Etc/GMT", () => {
    fc.assert(
      fc.property(fc.constantFrom(...schedules), instant, (schedule, after) => {
        const byTzDatabase = new Cron(schedule, {
          timezone: 'Etc/UTC',
          mode: '5-part',
        })
          .nextRuns(3, after)
          .filter((slot) => slot < SLOT_RANGE.to);
        for (const timeZone of ['Etc/UTC', 'UTC', 'Etc/GMT']) {
          assert.deepEqual(
            utc(nextSlots({ schedule, timeZone }, after, 3)),
            utc(byTzDatabase),
          );
        }
      }),
      { numRuns: 200 },
    );
  });

  it('validates and schedules a job in the default zone without building an Intl formatter', () => {
    // A fresh process: this one's formatters are cached by the tests above.
    const script = `
      let formatters = 0;
      const { DateTimeFormat, supportedValuesOf } = Intl;
      Intl.DateTimeFormat = function (...args) { formatters++; return new DateTimeFormat(...args); };
      Intl.supportedValuesOf = (key) => { formatters++; return supportedValuesOf(key); };
      const { defineJob, validateJobs } = await import(${JSON.stringify(DECLARATION)});
      const { nextSlots, previousSlot, slotsBetween } = await import(${JSON.stringify(SCHEDULE)});
      const [job] = validateJobs([defineJob({ id: 'utc', schedule: '*/5 * * * *', run: () => {} })]);
      const now = new Date(Date.UTC(2026, 0, 1));
      const slots = [
        ...nextSlots(job, now, 2),
        ...slotsBetween(job, now, new Date(now.getTime() + 3_600_000)).slots,
        previousSlot(job, now),
      ];
      console.log(JSON.stringify({ zone: job.timeZone, slots: slots.length, formatters }));`;
    const out = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', script],
      {
        encoding: 'utf8',
      },
    );

    assert.deepEqual(JSON.parse(out), {
      zone: 'Etc/UTC',
      slots: 15,
      formatters: 0,
    });
  });
});
