/**
 * Pure parts: reading a delivery, normalising the schedule time, computing the run id, and the
 * configuration. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { ConfigError, InvalidRequestError } from '../src/errors.ts';
import { traceFields } from '../src/logger.ts';
import { computeRunId } from '../src/run-key.ts';
import { normaliseScheduleTime, readScheduledRun } from '../src/scheduler-request.ts';

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

describe('computeRunId', () => {
  const base = {
    jobName: 'a',
    scheduleTime: '2026-10-16T12:00:00Z',
    scope: [] as [string, string][],
  };

  it('is 64 hex characters and the same for the same run', () => {
    assert.match(computeRunId(base), /^[0-9a-f]{64}$/);
    assert.equal(computeRunId(base), computeRunId({ ...base }));
  });

  it('differs when any part differs, including values that contain separators', () => {
    const variants = [
      base,
      { ...base, jobName: 'b' },
      { ...base, scheduleTime: '2026-10-16T12:00:01Z' },
      { ...base, scope: [['config', 'p1']] as [string, string][] },
      { ...base, scope: [['config', 'p1/us']] as [string, string][] },
      {
        ...base,
        scope: [
          ['config', 'p1'],
          ['header:x', 'us'],
        ] as [string, string][],
      },
      { ...base, scope: [['config', 'p1","us']] as [string, string][] },
      {
        ...base,
        scope: [
          ['config', 'p1\\'],
          ['header:x', 'us'],
        ] as [string, string][],
      },
      { ...base, scope: [['header:x', 'p1']] as [string, string][] },
    ];

    const ids = new Set(variants.map(computeRunId));

    assert.equal(ids.size, variants.length);
  });
});

describe('loadConfig', () => {
  it('applies the documented defaults, converting seconds to ms', () => {
    const config = loadConfig({});

    assert.equal(config.leaseMs, 300_000);
    assert.equal(config.retentionMs, 86_400_000);
    assert.equal(config.firestoreTimeoutMs, 10_000);
    assert.equal(config.runsCollection, 'scheduler_runs');
    assert.equal(config.firestoreDatabase, '(default)');
    assert.equal(config.logLevel, 'info');
    assert.equal(config.exposeErrors, true);
    assert.ok(Object.isFrozen(config));
  });

  it('reads scope lists, lowercasing header names and dropping blanks', () => {
    const config = loadConfig({
      RUN_KEY_SCOPE_HEADERS: 'X-Env, X-Region,,',
      RUN_KEY_SCOPE_PARAMS: 'project',
    });

    assert.deepEqual(config.keyScopeHeaders, ['x-env', 'x-region']);
    assert.deepEqual(config.keyScopeParams, ['project']);
  });

  it('reports every invalid variable at once', () => {
    const env = {
      LEASE_SECONDS: '5m',
      RETENTION_SECONDS: '-1',
      RUNS_COLLECTION: 'a/b',
      FIRESTORE_DATABASE: 'Bad_DB',
      LOG_LEVEL: 'loud',
      RUN_KEY_SCOPE_HEADERS: 'Authorization',
    };

    assert.throws(
      () => loadConfig(env),
      (err: ConfigError) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.problems.length, 6);
        for (const name of Object.keys(env)) assert.match(err.message, new RegExp(name));
        return true;
      },
    );
  });

  it('reports a retention that does not outlast the lease alongside other problems', () => {
    assert.throws(
      () => loadConfig({ LEASE_SECONDS: '600', RETENTION_SECONDS: '600', LOG_LEVEL: 'loud' }),
      (err: ConfigError) => {
        assert.equal(err.problems.length, 2);
        assert.match(err.message, /LOG_LEVEL="loud"/);
        assert.match(err.message, /RETENTION_SECONDS \(600\) must exceed LEASE_SECONDS \(600\)/);
        return true;
      },
    );
  });

  it('refuses a retention that does not outlast the lease', () => {
    assert.throws(
      () => loadConfig({ LEASE_SECONDS: '600', RETENTION_SECONDS: '600' }),
      /RETENTION_SECONDS \(600\) must exceed LEASE_SECONDS \(600\)/,
    );
  });
});

describe('traceFields', () => {
  it('reads W3C traceparent', () => {
    assert.deepEqual(
      traceFields({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
      {
        trace_id: '0af7651916cd43dd8448eb211c80319c',
        span_id: 'b7ad6b7169203331',
        trace_flags: '01',
      },
    );
  });

  it('reads X-Cloud-Trace-Context, converting the decimal span id to hex', () => {
    assert.deepEqual(
      traceFields({ 'x-cloud-trace-context': '105445aa7843bc8bf206b12000100000/1;o=1' }),
      {
        trace_id: '105445aa7843bc8bf206b12000100000',
        span_id: '0000000000000001',
        trace_flags: '01',
      },
    );
  });

  it('ignores malformed trace headers', () => {
    assert.deepEqual(traceFields({ traceparent: 'garbage', 'x-cloud-trace-context': 'nope' }), {});
  });
});
