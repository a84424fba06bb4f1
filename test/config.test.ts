/**
 * Configuration bounds, in-process: `loadConfig` takes plain objects, so these tests need neither
 * the emulator nor `process.env` (and so do not import `helpers.ts`).
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Config, loadConfig } from '../src/config.ts';
import { ConfigError } from '../src/errors.ts';

/** Node sets a `setTimeout`/`setInterval` delay above this many ms to 1 ms. */
const NODE_TIMER_LIMIT_MS = 2 ** 31 - 1;

/** Every duration option: its variable, config key, bounds in seconds and the reason for the max. */
const DURATIONS: [string, keyof Config, number, number, RegExp][] = [
  ['LEASE_SECONDS', 'leaseMs', 1, 86_400, /a day: .*function timeout .*heartbeat/],
  ['RETENTION_SECONDS', 'retentionMs', 1, 31_536_000, /a year/],
  [
    'FIRESTORE_TIMEOUT_SECONDS',
    'firestoreTimeoutMs',
    1,
    600,
    /Cloud Scheduler's longest attempt deadline \(1800 s\)/,
  ],
  ['JOB_TIMEOUT_SECONDS', 'jobTimeoutMs', 1, 3600, /longest timeout of a Cloud Run functions HTTP/],
  ['SHUTDOWN_GRACE_SECONDS', 'shutdownGraceMs', 0, 10, /SIGKILL 10 s after SIGTERM/],
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
      const config = loadConfig({ RETENTION_SECONDS: '31536000', [name]: `${max}` });

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
      assert.ok(ms <= NODE_TIMER_LIMIT_MS, `${timer} (${ms} ms) exceeds Node's timer limit`);
    }
  });

  it('reports every timer-breaking value of issue 10.3 at once', () => {
    const env = {
      JOB_TIMEOUT_SECONDS: '31536000',
      FIRESTORE_TIMEOUT_SECONDS: '2147484',
      LEASE_SECONDS: '31536000',
      SHUTDOWN_GRACE_SECONDS: '2147484',
    };

    const problems = problemsOf(env);

    assert.deepEqual(problems.map((p) => p.split('=')[0]).sort(), Object.keys(env).sort());
  });
});
