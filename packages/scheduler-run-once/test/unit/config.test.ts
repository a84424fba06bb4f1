/**
 * Configuration bounds, in-process: `loadConfig` takes plain objects, so these tests need neither
 * the emulator nor `process.env` (and so do not import `helpers.ts`).
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/core/errors.ts';
import { type Config, loadConfig } from '../../src/function/config.ts';

/** Node sets a `setTimeout`/`setInterval` delay above this many ms to 1 ms. */
const NODE_TIMER_LIMIT_MS = 2 ** 31 - 1;

/** Every duration option: its variable, config key, bounds in seconds and the reason for the max. */
const DURATIONS: [string, keyof Config, number, number, RegExp][] = [
  [
    'LEASE_SECONDS',
    'leaseMs',
    1,
    86_400,
    /a day: .*function timeout .*heartbeat/,
  ],
  ['RETENTION_SECONDS', 'retentionMs', 1, 31_536_000, /a year/],
  [
    'FIRESTORE_TIMEOUT_SECONDS',
    'firestoreTimeoutMs',
    1,
    600,
    /Cloud Scheduler's longest attempt deadline \(1800 s\)/,
  ],
  [
    'JOB_TIMEOUT_SECONDS',
    'jobTimeoutMs',
    1,
    3600,
    /longest timeout of a Cloud Run functions HTTP/,
  ],
  [
    'SHUTDOWN_GRACE_SECONDS',
    'shutdownGraceMs',
    0,
    10,
    /SIGKILL 10 s after SIGTERM/,
  ],
];

/** The problems `loadConfig(env)` reports; fails if it accepts `env`. */
function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig durations', () => {
  for (const [name, key, min, max, why] of DURATIONS) {
    it(`accepts ${name}=${max}, in ms`, () => {
      // RETENTION_SECONDS must exceed LEASE_SECONDS, so the longest lease needs a long retention.
      const config = loadConfig({
        RETENTION_SECONDS: '31536000',
        [name]: `${max}`,
      });

      assert.equal(config[key], max * 1000);
    });

    it(`refuses ${name}=${max + 1}, naming the variable, the bounds and why`, () => {
      const problems = problemsOf({ [name]: `${max + 1}` });

      assert.equal(problems.length, 1);
      assert.match(
        problems[0] as string,
        new RegExp(
          `^${name}="${max + 1}": must be a whole number of seconds from ${min} to ${max} \\(`,
        ),
      );
      assert.match(problems[0] as string, why);
    });

    if (min > 0) {
      it(`refuses ${name}=${min - 1}`, () => {
        const problems = problemsOf({ [name]: `${min - 1}` });

        assert.deepEqual(
          problems.map((p) => p.split(':')[0]),
          [`${name}="${min - 1}"`],
        );
      });
    }
  }

  it('keeps every timer within Node timer limits at the maxima, the heartbeat included', () => {
    const config = loadConfig(
      Object.fromEntries(DURATIONS.map(([name, , , max]) => [name, `${max}`])),
    );

    const timers = {
      jobTimeout: config.jobTimeoutMs,
      firestoreTimeout: config.firestoreTimeoutMs,
      lease: config.leaseMs,
      heartbeat: config.leaseMs / 3,
      shutdownDrain: config.shutdownGraceMs,
    };

    for (const [timer, ms] of Object.entries(timers)) {
      assert.ok(
        ms <= NODE_TIMER_LIMIT_MS,
        `${timer} (${ms} ms) exceeds Node's timer limit`,
      );
    }
  });

  it('reports every timer-breaking value at once', () => {
    const env = {
      JOB_TIMEOUT_SECONDS: '31536000',
      FIRESTORE_TIMEOUT_SECONDS: '2147484',
      LEASE_SECONDS: '31536000',
      SHUTDOWN_GRACE_SECONDS: '2147484',
    };

    const problems = problemsOf(env);

    assert.deepEqual(
      problems.map((p) => p.split('=')[0]).sort(),
      Object.keys(env).sort(),
    );
  });
});

describe('loadConfig', () => {
  it('applies the documented defaults, converting seconds to ms', () => {
    const config = loadConfig({});

    assert.equal(config.leaseMs, 300_000);
    assert.equal(config.retentionMs, 2_592_000_000);
    assert.equal(config.firestoreTimeoutMs, 10_000);
    assert.equal(config.runsCollection, 'scheduler_runs');
    assert.equal(config.firestoreDatabase, '(default)');
    assert.equal(config.logLevel, 'info');
    assert.equal(config.exposeErrors, false);
    assert.ok(Object.isFrozen(config));
  });

  it('turns missed-run detection on by default, off only when asked, and refuses other values', () => {
    assert.equal(loadConfig({}).missedRunCheck, true);
    assert.equal(loadConfig({ MISSED_RUN_CHECK: 'OFF' }).missedRunCheck, false);
    assert.throws(
      () => loadConfig({ MISSED_RUN_CHECK: '5' }),
      /MISSED_RUN_CHECK/,
    );
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
        for (const name of Object.keys(env)) {
          assert.match(err.message, new RegExp(name));
        }
        return true;
      },
    );
  });

  it('reports a retention that does not outlast the lease alongside other problems', () => {
    assert.throws(
      () =>
        loadConfig({
          LEASE_SECONDS: '600',
          RETENTION_SECONDS: '600',
          LOG_LEVEL: 'loud',
        }),
      (err: ConfigError) => {
        assert.equal(err.problems.length, 2);
        assert.match(err.message, /LOG_LEVEL="loud"/);
        assert.match(
          err.message,
          /RETENTION_SECONDS \(600\) must exceed LEASE_SECONDS \(600\)/,
        );
        return true;
      },
    );
  });

  it('lists an unreadable OIDC_INVOKERS under AUTH_MODE=verify-oidc as a problem, not a crash', () => {
    const env = {
      AUTH_MODE: 'verify-oidc',
      OIDC_AUDIENCE: 'https://f.example',
      OIDC_INVOKERS: 'bad',
    };
    const problems = problemsOf(env);
    assert.equal(problems.length, 1);
    assert.match(problems[0] ?? '', /^OIDC_INVOKERS="bad": /);
  });

  it('refuses a retention that does not outlast the lease', () => {
    assert.throws(
      () => loadConfig({ LEASE_SECONDS: '600', RETENTION_SECONDS: '600' }),
      /RETENTION_SECONDS \(600\) must exceed LEASE_SECONDS \(600\)/,
    );
  });
});

describe('OIDC_CERTS_URL (development only)', () => {
  it('takes a loopback http URL: the local Scheduler serves its certificates there', () => {
    const config = loadConfig({
      OIDC_CERTS_URL: 'http://127.0.0.1:8090/certs',
    });

    assert.equal(config.oidcCertsUrl, 'http://127.0.0.1:8090/certs');
    assert.equal(loadConfig({}).oidcCertsUrl, undefined);
  });

  it('refuses any other host or scheme: whoever serves the certificates can mint tokens', () => {
    for (const url of [
      'https://www.googleapis.com/oauth2/v1/certs',
      'http://10.0.0.5/certs',
      'x',
    ]) {
      const problems = problemsOf({ OIDC_CERTS_URL: url });

      assert.match(
        problems[0] as string,
        /^OIDC_CERTS_URL=.*must be an http:\/\/ URL on 127\.0\.0\.1/,
      );
    }
  });

  it('is refused with NODE_ENV=production', () => {
    const problems = problemsOf({
      NODE_ENV: 'production',
      OIDC_CERTS_URL: 'http://127.0.0.1:8090/certs',
    });

    assert.deepEqual(problems, [
      'OIDC_CERTS_URL is for development only, and NODE_ENV is "production", not development or test',
    ]);
  });

  it('is refused on Cloud Run with NODE_ENV unset: a hand deploy sets no NODE_ENV', () => {
    const problems = problemsOf({
      K_SERVICE: 'scheduled-job',
      OIDC_CERTS_URL: 'http://127.0.0.1:8090/certs',
    });

    assert.deepEqual(problems, [
      'OIDC_CERTS_URL is for development only, and K_SERVICE is set: this runs on Cloud Run',
    ]);
  });
});

describe('EXPOSE_ERRORS (development only)', () => {
  it('is off unless set, even in development', () => {
    assert.equal(loadConfig({ NODE_ENV: 'development' }).exposeErrors, false);
  });

  it('is on where asked in development', () => {
    assert.equal(loadConfig({ EXPOSE_ERRORS: 'true' }).exposeErrors, true);
    assert.equal(
      loadConfig({ NODE_ENV: 'test', EXPOSE_ERRORS: 'TRUE' }).exposeErrors,
      true,
    );
  });

  it('is refused outside development, naming what decided', () => {
    assert.deepEqual(
      problemsOf({ NODE_ENV: 'production', EXPOSE_ERRORS: 'true' }),
      [
        'EXPOSE_ERRORS=true is for development only, and NODE_ENV is "production", not development or test',
      ],
    );
    assert.deepEqual(
      problemsOf({ K_SERVICE: 'scheduled-job', EXPOSE_ERRORS: 'true' }),
      [
        'EXPOSE_ERRORS=true is for development only, and K_SERVICE is set: this runs on Cloud Run',
      ],
    );
  });

  it('takes only true or false', () => {
    assert.match(
      problemsOf({ EXPOSE_ERRORS: 'yes' })[0] as string,
      /^EXPOSE_ERRORS="yes": must be one of true, false/,
    );
  });
});
