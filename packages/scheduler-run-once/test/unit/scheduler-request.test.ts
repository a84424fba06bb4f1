/**
 * Reading a delivery (`scheduler-request.ts`), in-process: the job name, the schedule time and the
 * scope, and every malformed header refused with a message saying what to fix. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type DeliveryLike,
  InvalidRequestError,
  normaliseScheduleTime,
  readDeliveryHeaders,
  SCHEDULE_TIME_HEADER,
} from '../../src/function/scheduler-request.ts';
import type { ScheduledRun } from '../../src/policy/run-plan.ts';

const NO_SCOPE = { keyScope: '', keyScopeHeaders: [], keyScopeParams: [] };

/**
 * The run a delivery names when it must carry its schedule time (moved here from
 * `scheduler-request.ts`, which only tests used): {@link readDeliveryHeaders}, and a missing
 * schedule time refused.
 */
function readScheduledRun(
  req: DeliveryLike,
  config: Parameters<typeof readDeliveryHeaders>[1],
): ScheduledRun {
  const { scheduleTime, scheduledAt, ...rest } = readDeliveryHeaders(
    req,
    config,
  );
  if (scheduleTime === undefined || scheduledAt === undefined) {
    throw new InvalidRequestError(
      `${SCHEDULE_TIME_HEADER} is missing. Use a unix-cron schedule such as "*/5 * * * *": App Engine-style schedules ("every 5 minutes") send no ScheduleTime. ` +
        'To run a job by hand, use `npm run trigger -- JOB` (it sends a ScheduleTime and runs the job as a manual run).',
    );
  }
  return { ...rest, scheduleTime, scheduledAt };
}

function delivery(headers: [string, string][], url = '/') {
  return { rawHeaders: headers.flat(), url };
}

describe('normaliseScheduleTime', () => {
  const same: [string, string][] = [
    ['2026-10-16T12:00:00Z', '2026-10-16T12:00:00Z'],
    ['2026-10-16T05:00:00-07:00', '2026-10-16T12:00:00Z'],
    ['2026-10-16t12:00:00z', '2026-10-16T12:00:00Z'],
    ['2026-10-16T12:00:00.000Z', '2026-10-16T12:00:00Z'],
    ['2026-10-16T12:00:00.120000Z', '2026-10-16T12:00:00.12Z'],
    ['2026-10-16T12:00:00.123456789+00:00', '2026-10-16T12:00:00.123456789Z'],
    ['2026-10-17T00:30:00+12:30', '2026-10-16T12:00:00Z'],
    ['2024-02-29T23:00:00-02:00', '2024-03-01T01:00:00Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00Z'],
  ];
  for (const [input, expected] of same) {
    it(`normalises ${input} to ${expected}`, () => {
      assert.equal(normaliseScheduleTime(input), expected);
    });
  }

  const bad = [
    '2026-10-16 12:00:00Z',
    '2026-10-16T12:00Z',
    '2026-13-01T00:00:00Z',
    '2025-02-29T00:00:00Z',
    '2026-10-16T24:00:00Z',
    '2026-10-16T12:00:00+24:00',
    '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:00:00-01:00',
    '２０２６-10-16T12:00:00Z',
    '2026-10-16T12:00:00Z\u0000',
    '',
  ];
  for (const input of bad) {
    it(`refuses ${JSON.stringify(input)}`, () => {
      assert.throws(() => normaliseScheduleTime(input), InvalidRequestError);
    });
  }
});

describe('readScheduledRun', () => {
  it('accepts the full projects/P/locations/L/jobs/ID job name', () => {
    const run = readScheduledRun(
      delivery([
        [
          'X-CloudScheduler-JobName',
          'projects/my-proj/locations/us-central1/jobs/nightly_1',
        ],
        ['X-CloudScheduler-ScheduleTime', '2026-10-16T12:00:00Z'],
      ]),
      NO_SCOPE,
    );

    assert.equal(
      run.jobNameSent,
      'projects/my-proj/locations/us-central1/jobs/nightly_1',
    );
  });

  it('refuses a JobName sent twice, even if both copies agree', () => {
    const req = delivery([
      ['X-CloudScheduler-JobName', 'a'],
      ['x-cloudscheduler-jobname', 'a'],
      ['X-CloudScheduler-ScheduleTime', '2026-10-16T12:00:00Z'],
    ]);

    assert.throws(
      () => readScheduledRun(req, NO_SCOPE),
      /JobName was sent 2 times/,
    );
  });

  it('puts the fixed scope first, then headers, then query parameters', () => {
    const run = readScheduledRun(
      delivery(
        [
          ['X-CloudScheduler-JobName', 'a'],
          ['X-CloudScheduler-ScheduleTime', '2026-10-16T12:00:00Z'],
          ['X-Region', 'eu'],
        ],
        '/?env=prod',
      ),
      {
        keyScope: 'p1',
        keyScopeHeaders: ['x-region'],
        keyScopeParams: ['env'],
      },
    );

    assert.deepEqual(run.scope, [
      ['config', 'p1'],
      ['header:x-region', 'eu'],
      ['query:env', 'prod'],
    ]);
  });
});

const JOB = 'bad_input';
const TIME = '2026-10-16T12:00:00Z';
const jobName = (value: string) => ({
  'X-CloudScheduler-JobName': value,
  'X-CloudScheduler-ScheduleTime': TIME,
});
const scheduleTime = (value: string) => ({
  'X-CloudScheduler-JobName': JOB,
  'X-CloudScheduler-ScheduleTime': value,
});
const NOT_A_JOB = /X-CloudScheduler-JobName ".*" is not a job id/;
const NOT_RFC3339 =
  /X-CloudScheduler-ScheduleTime ".*" is not an RFC 3339 date-time; use RFC 3339 with an offset/;
const NOT_REAL = /X-CloudScheduler-ScheduleTime ".*" is not a real instant/;
const OUT_OF_RANGE = /falls outside years 0001-9999 in UTC/;
const TOO_LONG = /X-CloudScheduler-ScheduleTime is longer than 40 characters/;

/** Bad header values: each refused before any I/O with a message saying what to fix. */
const BAD_HEADERS: readonly {
  name: string;
  headers: Record<string, string>;
  expect: RegExp;
}[] = [
  {
    name: 'no JobName',
    headers: { 'X-CloudScheduler-ScheduleTime': TIME },
    expect: /X-CloudScheduler-JobName is missing/,
  },
  {
    name: 'no ScheduleTime (a groc "every 5 minutes" job sends none)',
    headers: { 'X-CloudScheduler-JobName': JOB },
    expect:
      /X-CloudScheduler-ScheduleTime is missing\. Use a unix-cron schedule/,
  },
  {
    name: 'an empty JobName',
    headers: jobName(''),
    expect: /X-CloudScheduler-JobName is empty/,
  },
  {
    name: 'an empty ScheduleTime',
    headers: scheduleTime(''),
    expect: /X-CloudScheduler-ScheduleTime is empty/,
  },
  {
    name: 'a JobName with a slash',
    headers: jobName('reports/nightly'),
    expect: NOT_A_JOB,
  },
  {
    name: 'a JobName with dots',
    headers: jobName('nightly.report'),
    expect: NOT_A_JOB,
  },
  { name: 'a JobName "../.."', headers: jobName('../..'), expect: NOT_A_JOB },
  {
    name: 'a full job name with a path after the id',
    headers: jobName('projects/p/locations/us-central1/jobs/nightly/runs'),
    expect: NOT_A_JOB,
  },
  {
    name: 'a full job name without an id',
    headers: jobName('projects/p/locations/us-central1/jobs/'),
    expect: NOT_A_JOB,
  },
  {
    name: 'a JobName of 501 characters',
    headers: jobName('a'.repeat(501)),
    expect: NOT_A_JOB,
  },
  {
    name: 'a JobName of 10 KB',
    headers: jobName('a'.repeat(10_240)),
    expect: NOT_A_JOB,
  },
  {
    name: 'a JobName with a space',
    headers: jobName('nightly report'),
    expect: NOT_A_JOB,
  },
  {
    name: 'a percent-encoded JobName',
    headers: jobName('reports%2Fnightly'),
    expect: NOT_A_JOB,
  },
  {
    name: 'a ScheduleTime without an offset',
    headers: scheduleTime('2026-10-16T12:00:00'),
    expect: NOT_RFC3339,
  },
  {
    name: 'an offset without a colon',
    headers: scheduleTime('2026-10-16T12:00:00+0000'),
    expect: NOT_RFC3339,
  },
  {
    name: 'a space instead of T',
    headers: scheduleTime('2026-10-16 12:00:00Z'),
    expect: NOT_RFC3339,
  },
  {
    name: 'a date only',
    headers: scheduleTime('2026-10-16'),
    expect: NOT_RFC3339,
  },
  {
    name: 'no seconds',
    headers: scheduleTime('2026-10-16T12:00Z'),
    expect: NOT_RFC3339,
  },
  {
    name: 'trailing junk',
    headers: scheduleTime('2026-10-16T12:00:00Zjunk'),
    expect: NOT_RFC3339,
  },
  {
    name: 'epoch seconds',
    headers: scheduleTime('1792152000'),
    expect: NOT_RFC3339,
  },
  {
    name: 'epoch milliseconds',
    headers: scheduleTime('1792152000000'),
    expect: NOT_RFC3339,
  },
  {
    name: 'ten fraction digits',
    headers: scheduleTime('2026-10-16T12:00:00.1234567890Z'),
    expect: NOT_RFC3339,
  },
  {
    name: 'an expanded year',
    headers: scheduleTime('+002026-10-16T12:00:00Z'),
    expect: NOT_RFC3339,
  },
  {
    name: 'February 30',
    headers: scheduleTime('2026-02-30T12:00:00Z'),
    expect: NOT_REAL,
  },
  {
    name: 'February 29 of a common year',
    headers: scheduleTime('2025-02-29T12:00:00Z'),
    expect: NOT_REAL,
  },
  {
    name: 'hour 24',
    headers: scheduleTime('2026-10-16T24:00:00Z'),
    expect: NOT_REAL,
  },
  {
    name: 'a leap second',
    headers: scheduleTime('2016-12-31T23:59:60Z'),
    expect: NOT_REAL,
  },
  {
    name: 'year 0000',
    headers: scheduleTime('0000-01-01T00:00:00Z'),
    expect: NOT_REAL,
  },
  {
    name: 'an offset of +24:00',
    headers: scheduleTime('2026-10-16T12:00:00+24:00'),
    expect: NOT_REAL,
  },
  {
    name: 'year 0 once converted to UTC',
    headers: scheduleTime('0001-01-01T00:30:00+01:00'),
    expect: OUT_OF_RANGE,
  },
  {
    name: 'year 10000 once converted to UTC',
    headers: scheduleTime('9999-12-31T23:30:00-01:00'),
    expect: OUT_OF_RANGE,
  },
  {
    name: 'two schedule times joined by a comma (a merging proxy)',
    headers: scheduleTime('2026-10-16T12:00:00Z, 2026-10-16T12:05:00Z'),
    expect: TOO_LONG,
  },
  {
    name: 'a ScheduleTime of 10 KB',
    headers: scheduleTime('2'.repeat(10_240)),
    expect: TOO_LONG,
  },
];

describe('readScheduledRun refuses bad header values', () => {
  for (const { name, headers, expect } of BAD_HEADERS) {
    it(`refuses ${name}`, () => {
      assert.throws(
        () => readScheduledRun(delivery(Object.entries(headers)), NO_SCOPE),
        (err: Error) => {
          assert.ok(err instanceof InvalidRequestError);
          assert.match(err.message, expect);
          assert.ok(
            err.message.length < 400,
            'the message quotes at most a prefix',
          );
          return true;
        },
      );
    });
  }
});

describe('readScheduledRun: the overlap and backfill flags', () => {
  const slot: [string, string][] = [
    ['X-CloudScheduler-JobName', 'nightly'],
    ['X-CloudScheduler-ScheduleTime', '2026-10-16T12:00:00Z'],
  ];
  const manual: [string, string][] = [
    ['X-Run-Once-Mode', 'manual'],
    ['X-Run-Once-Trigger-Id', 'trigger-0001'],
  ];

  it('a manual run may ask to overlap; a backfilled slot is marked as one', () => {
    const asked = readScheduledRun(
      delivery([...slot, ...manual, ['x-run-once-allow-overlap', 'true']]),
      NO_SCOPE,
    );
    const backfill = readScheduledRun(
      delivery([...slot, ['X-Run-Once-Backfill', 'TRUE']]),
      NO_SCOPE,
    );

    assert.equal(asked.trigger?.allowOverlap, true);
    assert.equal(backfill.backfill, true);
    assert.equal(
      readScheduledRun(delivery(slot), NO_SCOPE).backfill,
      undefined,
    );
  });

  const refused: [string, [string, string][], RegExp][] = [
    [
      'allow-overlap on a slot',
      [...slot, ['X-Run-Once-Allow-Overlap', 'true']],
      /manual runs and re-runs only/,
    ],
    [
      'allow-overlap other than true',
      [...slot, ...manual, ['X-Run-Once-Allow-Overlap', 'yes']],
      /must be "true"/,
    ],
    [
      'backfill on a manual run',
      [...slot, ...manual, ['X-Run-Once-Backfill', 'true']],
      /a manual run or re-run is not one/,
    ],
  ];
  for (const [what, headers, message] of refused) {
    it(`refuses ${what} with a message saying what to fix`, () => {
      assert.throws(
        () => readScheduledRun(delivery(headers), NO_SCOPE),
        (err: unknown) => {
          assert.ok(err instanceof InvalidRequestError);
          assert.match(err.message, message);
          return true;
        },
      );
    });
  }
});
