/**
 * Tracing's settings from the standard OpenTelemetry variables (`src/function/tracing.ts`), the
 * default sampler against Cloud Run's unsampled `traceparent`, the parent read from each trace
 * header (`src/function/otel-tracing.ts`) and the traced ledger's spans. No Firestore, no exporter.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { trace } from '@opentelemetry/api';
import { SamplingDecision } from '@opentelemetry/sdk-trace';
import { ConfigError } from '../../src/core/errors.ts';
import type { Ledger } from '../../src/core/ledger.ts';
import { parentContext, samplerOf } from '../../src/function/otel-tracing.ts';
import { loadConfigAndJobs } from '../../src/function/register.ts';
import {
  DEFAULT_TRACE_SAMPLER,
  type DeliveryTracer,
  tracedLedger,
  tracingConfigOf,
} from '../../src/function/tracing.ts';
import { defineJob } from '../../src/policy/job-declaration.ts';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';

describe('tracingConfigOf', () => {
  it('is off unless OTEL_TRACES_EXPORTER=otlp, and with OTEL_SDK_DISABLED=true', () => {
    assert.equal(tracingConfigOf({}), undefined);
    assert.equal(tracingConfigOf({ OTEL_TRACES_EXPORTER: ' ' }), undefined);
    assert.equal(tracingConfigOf({ OTEL_TRACES_EXPORTER: 'none' }), undefined);
    assert.equal(
      tracingConfigOf({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_SDK_DISABLED: 'TRUE',
      }),
      undefined,
    );
  });

  it('defaults to http/protobuf and the always_on sampler, ratio 1', () => {
    assert.deepEqual(tracingConfigOf({ OTEL_TRACES_EXPORTER: 'otlp' }), {
      protocol: 'http/protobuf',
      sampler: 'always_on',
      ratio: 1,
      toGoogle: false,
    });
    assert.equal(DEFAULT_TRACE_SAMPLER, 'always_on');
  });

  it('reads the traces protocol before the general one, and the sampler with its ratio', () => {
    const config = tracingConfigOf({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });

    assert.equal(config?.protocol, 'http/json');
    assert.equal(config?.sampler, 'parentbased_traceidratio');
    assert.equal(config?.ratio, 0.25);
  });

  it("signs exports to Google's OTLP endpoint, named by either endpoint variable", () => {
    const general = tracingConfigOf({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://telemetry.googleapis.com',
    });
    const traces = tracingConfigOf({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:
        'https://telemetry.googleapis.com/v1/traces',
    });

    assert.equal(general?.toGoogle, true);
    assert.equal(traces?.toGoogle, true);
  });

  it('lists every variable it cannot honour at once, saying what to set', () => {
    assert.throws(
      () =>
        tracingConfigOf({
          OTEL_TRACES_EXPORTER: 'zipkin',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/xml',
          OTEL_TRACES_SAMPLER: 'sometimes',
          OTEL_TRACES_SAMPLER_ARG: '2',
        }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(
          err.problems.map((p) => p.split(':')[0]),
          [
            'OTEL_TRACES_EXPORTER="zipkin"',
            'OTEL_EXPORTER_OTLP_PROTOCOL="http/xml"',
            'OTEL_TRACES_SAMPLER="sometimes"',
            'OTEL_TRACES_SAMPLER_ARG="2"',
          ],
        );
        assert.match(err.problems[0] ?? '', /must be otlp \(or none/);
        return true;
      },
    );
  });

  it("refuses grpc to Google's endpoint, which only the http exporters sign here", () => {
    assert.throws(
      () =>
        tracingConfigOf({
          OTEL_TRACES_EXPORTER: 'otlp',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
          OTEL_EXPORTER_OTLP_ENDPOINT: 'https://telemetry.googleapis.com',
        }),
      /OTEL_EXPORTER_OTLP_PROTOCOL=grpc: spans to telemetry.googleapis.com go over http\/protobuf/,
    );
  });

  it("joins the configuration's problems at cold start", () => {
    const jobs = [defineJob({ id: 'a', schedule: '* * * * *', run: () => {} })];
    assert.throws(
      () =>
        loadConfigAndJobs(jobs, {
          LOG_LEVEL: 'loud',
          OTEL_TRACES_EXPORTER: 'console',
        }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.problems.length, 2, err.message);
        return true;
      },
    );
    const loaded = loadConfigAndJobs(jobs, { OTEL_TRACES_EXPORTER: 'otlp' });
    assert.equal(loaded.tracing?.protocol, 'http/protobuf');
    assert.equal(loadConfigAndJobs(jobs, {}).tracing, undefined);
  });
});

describe('the samplers', () => {
  /** The decision of `sampler` on a delivery whose request carries `traceparent` flags `flags`. */
  function decide(sampler: string, flags: '00' | '01') {
    const config = {
      protocol: 'http/protobuf',
      sampler,
      ratio: 1,
      toGoogle: false,
    } as const;
    const parent = parentContext({
      traceparent: `00-${TRACE_ID}-${SPAN_ID}-${flags}`,
    });
    return samplerOf({
      ...config,
      sampler: config.sampler as never,
    }).shouldSample(parent, TRACE_ID, 'scheduled delivery', 1, {}, []).decision;
  }

  it('the default traces a delivery whose Cloud Run traceparent is not sampled; parent-based drops it', () => {
    assert.equal(
      decide(DEFAULT_TRACE_SAMPLER, '00'),
      SamplingDecision.RECORD_AND_SAMPLED,
    );
    assert.equal(
      decide('parentbased_always_on', '00'),
      SamplingDecision.NOT_RECORD,
    );
    assert.equal(
      decide('parentbased_always_on', '01'),
      SamplingDecision.RECORD_AND_SAMPLED,
    );
    assert.equal(decide('always_off', '01'), SamplingDecision.NOT_RECORD);
  });
});

describe('parentContext', () => {
  it("takes X-Cloud-Trace-Context's decimal span id as the remote parent, traceparent first", () => {
    const cloud = trace.getSpanContext(
      parentContext({ 'x-cloud-trace-context': `${TRACE_ID}/123456789;o=1` }),
    );
    const both = trace.getSpanContext(
      parentContext({
        traceparent: `00-${TRACE_ID}-${SPAN_ID}-00`,
        'x-cloud-trace-context': `${TRACE_ID}/1;o=1`,
      }),
    );

    assert.deepEqual(cloud, {
      traceId: TRACE_ID,
      spanId: '00000000075bcd15',
      traceFlags: 1,
      isRemote: true,
    });
    assert.equal(both?.spanId, SPAN_ID);
    assert.equal(both?.traceFlags, 0);
  });

  it('has no parent without a span id to name', () => {
    assert.equal(
      trace.getSpanContext(
        parentContext({ 'x-cloud-trace-context': TRACE_ID }),
      ),
      undefined,
    );
    assert.equal(trace.getSpanContext(parentContext({})), undefined);
  });
});

describe('tracedLedger', () => {
  it("runs each ledger call in its step's span, with the call's result as an attribute", async () => {
    const steps: [string, unknown][] = [];
    const tracer: DeliveryTracer = {
      delivery: (_headers, handle) =>
        handle({ set: () => {}, fail: () => {}, traceFields: undefined }),
      step: async (name, step, describe) => {
        const result = await step();
        steps.push([name, describe?.(result)]);
        return result;
      },
    };
    // `this` matters: RunLedger's methods read its private fields.
    const ledger = new (class {
      readonly #fence = 'recorded' as const;
      claim = async () => ({ state: 'completed' as const });
      extend = async () => 'lease_lost' as const;
      note = async () => {};
      complete() {
        return Promise.resolve(this.#fence);
      }
      release() {
        return Promise.resolve(this.#fence);
      }
      holds() {
        return this.#fence === 'recorded';
      }
    })() as unknown as Ledger;
    const traced = tracedLedger(ledger, tracer);
    const claim = {} as Parameters<Ledger['complete']>[0];

    await traced.claim('run', undefined, undefined, {});
    await traced.extend(claim);
    await traced.complete(claim);
    await traced.release(claim, 'failed', undefined);

    assert.deepEqual(steps, [
      ['claim', { 'run_once.claim': 'completed' }],
      ['lease extension', { 'run_once.fence': 'lease_lost' }],
      ['completion', { 'run_once.fence': 'recorded' }],
      ['release', { 'run_once.fence': 'recorded' }],
    ]);
    assert.equal(traced.holds?.('run'), true);
  });
});
