/**
 * What the handler and the OpenTelemetry tracer share (docs/tracing.md): the tracer's interface and
 * the tracing settings. A module of its own, with no OpenTelemetry import, so `tracing.ts` (which
 * loads `otel-tracing.ts`) and `otel-tracing.ts` both read it without importing each other.
 */
import type { TraceFields } from './logger.ts';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** Attribute values a span takes (OpenTelemetry's primitive `AttributeValue`s). */
export type SpanAttributes = Readonly<
  Record<string, string | number | boolean>
>;

/** The span of one delivery, as the handler sees it. */
export interface DeliverySpan {
  /** Sets (or replaces) attributes of the span. */
  set(attributes: SpanAttributes): void;
  /** Marks the span failed (status ERROR) with `message`. */
  fail(message: string): void;
  /** The span's ids for the delivery's log lines, or `undefined` when it is not sampled. */
  readonly traceFields: TraceFields | undefined;
}

/** Makes spans of deliveries and of their steps; {@link NO_TRACING} when tracing is off. */
export interface DeliveryTracer {
  /**
   * Runs `handle` in the span of one delivery, a child of the request's trace context (`headers`:
   * W3C `traceparent`, else `X-Cloud-Trace-Context`); ends the span when `handle` settles and
   * exports it, with its children, before returning (CPU is throttled once the answer is written).
   */
  delivery<T>(
    headers: Headers,
    handle: (span: DeliverySpan) => Promise<T>,
  ): Promise<T>;
  /**
   * Runs `step` in a span `name`, a child of the current one; `describe` gives attributes of its
   * result. A throw marks the span failed and is rethrown.
   */
  step<T>(
    name: string,
    step: () => Promise<T>,
    describe?: (result: T) => SpanAttributes,
  ): Promise<T>;
}

/** How spans are sent: the OTLP protocols of `OTEL_EXPORTER_OTLP_PROTOCOL`. */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The samplers of `OTEL_TRACES_SAMPLER` (the OpenTelemetry SDK environment variables' names). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** Tracing settings read from the OpenTelemetry SDK's standard variables. */
export interface TracingConfig {
  readonly protocol: OtlpProtocol;
  readonly sampler: TraceSampler;
  /** The ratio of the `traceidratio` samplers (`OTEL_TRACES_SAMPLER_ARG`), 0 to 1. */
  readonly ratio: number;
  /** Whether spans go to {@link GOOGLE_OTLP_HOST}, so requests are signed with Google credentials. */
  readonly toGoogle: boolean;
}

/** What the OpenTelemetry tracer names its instance by. */
export interface TracedInstance {
  /** `service.name` unless `OTEL_SERVICE_NAME` says otherwise (`K_SERVICE` on Cloud Run). */
  readonly serviceName: string;
  /** `gcp.project_id` of the spans, if known (`GOOGLE_CLOUD_PROJECT`). */
  readonly projectId: string | undefined;
}
