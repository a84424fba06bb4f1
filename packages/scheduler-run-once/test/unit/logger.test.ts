/**
 * Trace correlation (`logger.ts`): reading W3C and Cloud Trace headers; and which part of the
 * logging client a logger loads (`logging-client.ts`). No Firestore.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { traceFields } from '../../src/function/logger.ts';

const LOGGER = new URL('../../src/function/logger.ts', import.meta.url).href;

/** In a fresh process: two lines logged, their severities, and whether the logging client loaded. */
function logInFreshProcess(projectId: string | undefined) {
  const script = `
    import { createRequire } from 'node:module';
    const { createLogger } = await import(${JSON.stringify(LOGGER)});
    const lines = [];
    const config = { logLevel: 'info', projectId: ${JSON.stringify(projectId)}, serviceName: 'svc' };
    const logger = createLogger(config, { write: (line) => lines.push(JSON.parse(line)) });
    logger.info('hello');
    logger.error({ err: new Error('boom') }, 'failed');
    const cache = createRequire(import.meta.url).cache;
    const clientLoaded = Object.keys(cache).some((k) => k.endsWith('@google-cloud/logging/build/src/log.js'));
    console.log(JSON.stringify({ severities: lines.map((l) => l.severity), clientLoaded }));`;
  const out = execFileSync(
    process.execPath,
    ['--input-type=module', '-e', script],
    {
      encoding: 'utf8',
      env: { ...process.env, METADATA_SERVER_DETECTION: 'none' },
    },
  );
  return JSON.parse(out) as { severities: string[]; clientLoaded: boolean };
}

describe('the logging client behind the GCP config', () => {
  it('is not loaded by a logger whose project id is configured, which still logs for Cloud Logging', () => {
    assert.deepEqual(logInFreshProcess('demo-project'), {
      severities: ['INFO', 'ERROR'],
      clientLoaded: false,
    });
  });

  it('is loaded on first use, where the GCP config detects the project id', () => {
    assert.deepEqual(logInFreshProcess(undefined), {
      severities: ['INFO', 'ERROR'],
      clientLoaded: true,
    });
  });

  it("is whole to a job that imports it, by ESM or CommonJS, after the logger's stand-in", () => {
    // A job's own use of @google-cloud/logging (its writes to Cloud Logging) in the same process.
    const script = `
      import { createRequire } from 'node:module';
      await import(${JSON.stringify(LOGGER)});
      const esm = await import('@google-cloud/logging');
      const cjs = createRequire(${JSON.stringify(LOGGER)})('@google-cloud/logging');
      console.log(JSON.stringify({
        esmNamed: typeof esm.Logging,
        esmDefault: typeof esm.default.Logging,
        cjsKeys: Object.keys(cjs).includes('Logging'),
        cjsSpread: typeof { ...cjs }.Logging,
      }));`;
    const out = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', script],
      {
        encoding: 'utf8',
        env: { ...process.env, METADATA_SERVER_DETECTION: 'none' },
      },
    );
    assert.deepEqual(JSON.parse(out), {
      esmNamed: 'function',
      esmDefault: 'function',
      cjsKeys: true,
      cjsSpread: 'function',
    });
  });
});

describe('traceFields', () => {
  it('reads W3C traceparent', () => {
    assert.deepEqual(
      traceFields({
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      }),
      {
        trace_id: '0af7651916cd43dd8448eb211c80319c',
        span_id: 'b7ad6b7169203331',
        trace_flags: '01',
      },
    );
  });

  it('reads X-Cloud-Trace-Context, converting the decimal span id to hex', () => {
    assert.deepEqual(
      traceFields({
        'x-cloud-trace-context': '105445aa7843bc8bf206b12000100000/1;o=1',
      }),
      {
        trace_id: '105445aa7843bc8bf206b12000100000',
        span_id: '0000000000000001',
        trace_flags: '01',
      },
    );
  });

  it('ignores malformed trace headers', () => {
    assert.deepEqual(
      traceFields({ traceparent: 'garbage', 'x-cloud-trace-context': 'nope' }),
      {},
    );
  });
});
