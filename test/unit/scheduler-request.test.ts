/**
 * Reading a delivery (`scheduler-request.ts`), in-process: the job name, the schedule time and the
 * scope, and every malformed header refused with a message saying what to fix. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidRequestError } from '../../src/errors.ts';
import { normaliseScheduleTime, readScheduledRun } from '../../src/scheduler-request.ts';

const NO_SCOPE = { keyScope: '', keyScopeHeaders: [], keyScopeParams: [] };

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
        ['X-CloudScheduler-JobName', 'projects/my-proj/locations/us-central1/jobs/nightly_1'],
        ['X-CloudScheduler-ScheduleTime', '2026-10-16T12:00:00Z'],
      ]),
      NO_SCOPE,
    );

    assert.equal(run.jobName, 'projects/my-proj/locations/us-central1/jobs/nightly_1');
  });

  it('refuses a JobName sent twice, even if both copies agree', () => {
    const req = delivery([
      ['X-CloudScheduler-JobName', 'a'],
      ['x-cloudscheduler-jobname', 'a'],
      ['X-CloudScheduler-ScheduleTime', '2026-10-16T12:00:00Z'],
    ]);

    assert.throws(() => readScheduledRun(req, NO_SCOPE), /JobName was sent 2 times/);
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
      { keyScope: 'p1', keyScopeHeaders: ['x-region'], keyScopeParams: ['env'] },
    );

    assert.deepEqual(run.scope, [
      ['config', 'p1'],
      ['header:x-region', 'eu'],
      ['query:env', 'prod'],
    ]);
  });
});
