/**
 * Whether a process is in development, in-process: `whyNotDevelopment` takes plain objects.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CLOUD_RUN_VARIABLES,
  whyNotDevelopment,
} from '../../src/function/config.ts';

/** Whether `env` is development (moved here from `environment.ts`, which only tests used). */
const isDevelopment = (env: Readonly<Record<string, string | undefined>>) =>
  whyNotDevelopment(env) === undefined;

describe('isDevelopment', () => {
  it('is true with NODE_ENV unset, development or test, off Cloud Run', () => {
    for (const env of [
      {},
      { NODE_ENV: '' },
      { NODE_ENV: 'development' },
      { NODE_ENV: 'test' },
    ]) {
      assert.equal(isDevelopment(env), true, JSON.stringify(env));
    }
  });

  it('is false for any other NODE_ENV, however it is spelt', () => {
    for (const nodeEnv of [
      'production',
      'Production',
      'prod',
      'staging',
      'Development',
    ]) {
      assert.equal(isDevelopment({ NODE_ENV: nodeEnv }), false, nodeEnv);
    }
  });

  it('is false on Cloud Run whatever NODE_ENV says', () => {
    for (const name of CLOUD_RUN_VARIABLES) {
      assert.equal(isDevelopment({ [name]: 'x' }), false, name);
      assert.equal(
        isDevelopment({ [name]: 'x', NODE_ENV: 'development' }),
        false,
        name,
      );
    }
  });

  it('is not decided by FUNCTION_TARGET, which functions-framework also reads locally', () => {
    assert.equal(
      isDevelopment({ FUNCTION_TARGET: 'handleScheduledJob' }),
      true,
    );
  });
});

describe('whyNotDevelopment', () => {
  it('names the variable that decided, Cloud Run first', () => {
    assert.equal(
      whyNotDevelopment({ NODE_ENV: 'staging', K_REVISION: 'fn-00001' }),
      'K_REVISION is set: this runs on Cloud Run',
    );
    assert.equal(
      whyNotDevelopment({ NODE_ENV: 'staging' }),
      'NODE_ENV is "staging", not development or test',
    );
    assert.equal(whyNotDevelopment({ NODE_ENV: 'test' }), undefined);
  });
});
