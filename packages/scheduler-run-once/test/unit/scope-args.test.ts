/**
 * `--scope NAME=VALUE` of the operations commands (`src/ops/scope-args.ts`), read against the
 * function's scope configuration. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/function/config.ts';
import { UsageError } from '../../src/ops/command.ts';
import { scopeArgs, scopeOf, scopeRequest } from '../../src/ops/scope-args.ts';

const config = loadConfig({
  RUN_KEY_SCOPE: 'p1/prod',
  RUN_KEY_SCOPE_HEADERS: 'X-Tenant',
  RUN_KEY_SCOPE_PARAMS: 'region',
});

describe('scopeArgs', () => {
  it('sends a header name in any case as the configured header, and a parameter as the parameter', () => {
    const { values } = scopeArgs(config, ['x-TENANT=acme', 'region=eu']);

    assert.deepEqual(scopeRequest(config, values), {
      headers: { 'x-tenant': 'acme' },
      query: { region: 'eu' },
    });
    assert.deepEqual(scopeOf(config, values), [
      ['config', 'p1/prod'],
      ['header:x-tenant', 'acme'],
      ['query:region', 'eu'],
    ]);
  });

  for (const [what, flags, message] of [
    [
      'a missing value',
      ['region=eu'],
      /--scope x-tenant=VALUE is missing \(scope header\)/,
    ],
    [
      'every missing value at once',
      [],
      /x-tenant=VALUE is missing .*region=VALUE is missing/,
    ],
    [
      'a name not configured',
      ['tenant=acme'],
      /no scope header or parameter tenant \(RUN_KEY_SCOPE_HEADERS: x-tenant; RUN_KEY_SCOPE_PARAMS: region\)/,
    ],
    [
      'a parameter in another case (query names are case-sensitive)',
      ['x-tenant=a', 'Region=eu'],
      /no scope header or parameter Region/,
    ],
    [
      'a name given twice',
      ['x-tenant=a', 'X-Tenant=b', 'region=eu'],
      /--scope X-Tenant given twice/,
    ],
    [
      'a value the function refuses',
      ['x-tenant=a b', 'region=eu'],
      /"a b" is not 1-200 printable ASCII characters without spaces/,
    ],
    [
      'a bare value (RUN_KEY_SCOPE is never sent)',
      ['prod', 'x-tenant=a', 'region=eu'],
      /--scope takes NAME=VALUE, got "prod"/,
    ],
  ] as const) {
    it(`refuses ${what} with a UsageError saying what to fix`, () => {
      assert.throws(
        () => scopeArgs(config, flags),
        (err: Error) => err instanceof UsageError && message.test(err.message),
      );
    });
  }

  it('takes a bare value as RUN_KEY_SCOPE where the command allows it (runs)', () => {
    assert.equal(
      scopeArgs(config, ['staging', 'x-tenant=a', 'region=eu'], {
        allowFixed: true,
      }).fixed,
      'staging',
    );
  });

  it('needs nothing for a configuration without scope headers or parameters', () => {
    assert.deepEqual(
      scopeRequest(loadConfig({}), scopeArgs(loadConfig({}), []).values),
      {
        headers: {},
        query: {},
      },
    );
  });
});
