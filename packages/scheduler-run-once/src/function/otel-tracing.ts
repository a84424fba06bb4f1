/**
 * The OpenTelemetry tracer of deliveries (docs/tracing.md): the only module that imports
 * OpenTelemetry, loaded by `tracing.ts` with a dynamic import only when `OTEL_TRACES_EXPORTER=otlp`.
 * Its packages are optional peer dependencies of the library: a project that traces installs them.
 */
import { createRequire } from 'node:module';
import type { Context, Span, Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type {
  DeliverySpan,
  DeliveryTracer,
  SpanAttributes,
  TracedInstance,
  TracingConfig,
} from './delivery-tracer.ts';
import { type TraceFields, traceFields } from './logger.ts';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/**
 * The API's CommonJS build, the one the Firestore client `require`s: the package ships an ES
 * module build too, and each build keeps its own proxy of the global tracer provider, so a provider
 * registered through the ES module build never reaches the tracer the Firestore client took at
 * construction, and its spans would be dropped.
 */
const api = createRequire(import.meta.url)(
  '@opentelemetry/api',
) as typeof import('@opentelemetry/api');
const { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } =
  api;

/**
 * Longest a delivery's answer waits for its spans' export, ms. Spans still unsent then go with a
 * later export (the batch processor keeps them), or are lost if the instance is stopped first.
 */
export const FLUSH_TIMEOUT_MS = 5000;

/** The scope spans of this library are recorded under (`otel.scope.name`). */
const SCOPE = 'scheduler-run-once';

/** The sampler `config` names (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`). */
export function samplerOf(config: TracingConfig): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(config.ratio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
  }
}

/**
 * The headers of each export to Google's OTLP endpoint: the instance's access token (Application
 * Default Credentials, the metadata server on Cloud Run), fetched and refreshed by
 * google-auth-library, as Google's sample of direct export does
 * (GoogleCloudPlatform/opentelemetry-operations-js, samples/otlptraceexport).
 */
async function googleAuth() {
  const { GoogleAuth } = await import('google-auth-library');
  const auth = new GoogleAuth({
    scopes: 'https://www.googleapis.com/auth/cloud-platform',
  });
  const headers = async () => {
    const client = await auth.getClient();
    const signed = await client.getRequestHeaders();
    return Object.fromEntries(signed.entries());
  };
  return { headers, projectId: () => auth.getProjectId() };
}

/**
 * The OTLP exporter of `config.protocol`, from its own package (only that one need be installed);
 * the endpoint, headers and timeout come from the standard `OTEL_EXPORTER_OTLP_*` variables, which
 * the exporter reads itself.
 */
async function exporterOf(config: TracingConfig): Promise<SpanExporter> {
  const headers = config.toGoogle
    ? { headers: (await googleAuth()).headers }
    : {};
  if (config.protocol === 'grpc') {
    const { OTLPTraceExporter } = await import(
      '@opentelemetry/exporter-trace-otlp-grpc'
    );
    return new OTLPTraceExporter();
  }
  if (config.protocol === 'http/json') {
    const { OTLPTraceExporter } = await import(
      '@opentelemetry/exporter-trace-otlp-http'
    );
    return new OTLPTraceExporter(headers);
  }
  const { OTLPTraceExporter } = await import(
    '@opentelemetry/exporter-trace-otlp-proto'
  );
  return new OTLPTraceExporter(headers);
}

/**
 * The request's trace context (`traceparent`, else `X-Cloud-Trace-Context`, as the logs read it) as
 * a remote parent, or the root context when it names no parent span.
 */
export function parentContext(headers: Headers): Context {
  const fields = traceFields(headers);
  if (fields.trace_id === undefined || fields.span_id === undefined) {
    return ROOT_CONTEXT;
  }
  const flags = Number.parseInt(fields.trace_flags ?? '00', 16);
  const traceFlags =
    (flags & TraceFlags.SAMPLED) === 0 ? TraceFlags.NONE : TraceFlags.SAMPLED;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: fields.trace_id,
    spanId: fields.span_id,
    traceFlags,
    isRemote: true,
  });
}

/** The log fields of `span`, so Cloud Logging links the delivery's lines to it; none unsampled. */
function traceFieldsOf(span: Span): TraceFields | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  if ((traceFlags & TraceFlags.SAMPLED) === 0) {
    return undefined;
  }
  return { trace_id: traceId, span_id: spanId, trace_flags: '01' };
}

/** A throw as a span's failure: its exception event and status ERROR. */
function recordFailure(span: Span, err: unknown): void {
  const exception = err instanceof Error ? err : String(err);
  span.recordException(exception);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: err instanceof Error ? err.message : String(err),
  });
}

/** Waits for `flushing` at most `ms`; an export's failure is the exporter's to report, not the answer's. */
async function boundedFlush(
  flushing: Promise<void>,
  ms: number,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([flushing.catch(() => {}), bound]);
  } finally {
    clearTimeout(timer);
  }
}

/** {@link DeliveryTracer} over an OpenTelemetry tracer whose provider is flushed per delivery. */
class OtelDeliveryTracer implements DeliveryTracer {
  readonly #tracer: Tracer;
  readonly #provider: TracerProvider;

  constructor(provider: TracerProvider) {
    this.#provider = provider;
    this.#tracer = provider.getTracer(SCOPE);
  }

  async delivery<T>(
    headers: Headers,
    handle: (span: DeliverySpan) => Promise<T>,
  ): Promise<T> {
    const parent = parentContext(headers);
    const span = this.#tracer.startSpan(
      'scheduled delivery',
      { kind: SpanKind.SERVER },
      parent,
    );
    const deliverySpan: DeliverySpan = {
      set: (attributes) => span.setAttributes(attributes),
      fail: (message) =>
        span.setStatus({ code: SpanStatusCode.ERROR, message }),
      traceFields: traceFieldsOf(span),
    };
    try {
      return await context.with(trace.setSpan(parent, span), () =>
        handle(deliverySpan),
      );
    } catch (err) {
      recordFailure(span, err);
      throw err;
    } finally {
      span.end();
      // Before the answer: Cloud Run throttles the CPU once it is written (docs/tracing.md).
      await boundedFlush(this.#provider.forceFlush(), FLUSH_TIMEOUT_MS);
    }
  }

  step<T>(
    name: string,
    step: () => Promise<T>,
    describe?: (result: T) => SpanAttributes,
  ): Promise<T> {
    return this.#tracer.startActiveSpan(name, async (span) => {
      try {
        const result = await step();
        if (describe !== undefined) {
          span.setAttributes(describe(result));
        }
        return result;
      } catch (err) {
        recordFailure(span, err);
        throw err;
      } finally {
        span.end();
      }
    });
  }
}

/**
 * The tracer of `config`: a provider with its sampler, a batch processor over the protocol's OTLP
 * exporter and the instance's resource (`service.name`, `gcp.project_id`; `OTEL_SERVICE_NAME` and
 * `OTEL_RESOURCE_ATTRIBUTES` win), registered globally with an AsyncLocalStorage context manager,
 * so the Firestore client's spans (it traces through the global provider) nest under the step that
 * made the call.
 */
export async function createOtelTracer(
  config: TracingConfig,
  instance: TracedInstance,
): Promise<DeliveryTracer> {
  const exporter = await exporterOf(config);
  // Google's endpoint files spans under `gcp.project_id`: the instance's project unless configured.
  const projectId =
    instance.projectId ??
    (config.toGoogle
      ? await (await googleAuth()).projectId().catch(() => undefined)
      : undefined);
  const own = resourceFromAttributes({
    'service.name': instance.serviceName,
    ...(projectId === undefined ? {} : { 'gcp.project_id': projectId }),
  });
  const fromEnv = detectResources({ detectors: [envDetector] });
  const provider = new TracerProvider({
    sampler: samplerOf(config),
    resource: defaultResource().merge(own).merge(fromEnv),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  context.setGlobalContextManager(
    new AsyncLocalStorageContextManager().enable(),
  );
  trace.setGlobalTracerProvider(provider);
  return new OtelDeliveryTracer(provider);
}
