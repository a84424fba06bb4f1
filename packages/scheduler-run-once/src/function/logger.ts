/** Logging for Cloud Logging: pino, Google's GCP config, and the request's trace correlation. */
import './logging-client.ts'; // first: it defers what the GCP config requires
import { createGcpLoggingPinoConfig } from '@google-cloud/pino-logging-gcp-config';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { Config } from './config.ts';

/** Masked in every log call: a user's job might log a request or its options, token and all. */
const REDACT = ['', 'headers.', '*.', '*.headers.'].flatMap((at) =>
  ['authorization', 'Authorization'].map((h) => `${at}${h}`),
);

/** Creates the process's logger, writing JSON lines to `destination` (stdout unless given). */
export function createLogger(
  config: Pick<Config, 'logLevel' | 'projectId' | 'serviceName'>,
  destination?: DestinationStream,
): Logger {
  const options = createGcpLoggingPinoConfig(
    {
      serviceContext: { service: config.serviceName },
      // Unset: detected from the environment (the metadata server on Cloud Run).
      traceGoogleCloudProjectId: config.projectId,
      inihibitDiagnosticMessage: true,
    },
    {
      level: config.logLevel,
      redact: { paths: REDACT, censor: '[redacted]' },
      // The GCP config rewrites trace fields only in a call's own object, not in child bindings:
      // merge the request's trace into every call of its logger (a fresh object: pino mutates it).
      mixin: (_object, _level, logger) => ({
        ...(logger as TracedLogger)[TRACE],
      }),
    },
  );
  return pino(options, destination);
}

const TRACE = Symbol('trace');
type TracedLogger = Logger & { [TRACE]?: TraceFields };
type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** A child of `logger` whose lines, and its children's, carry the request's trace context. */
export function withTrace(logger: Logger, headers: Headers): Logger {
  return withTraceFields(logger, traceFields(headers));
}

/** A child of `logger` whose lines, and its children's, carry `fields` (a delivery's own span's). */
export function withTraceFields(logger: Logger, fields: TraceFields): Logger {
  return Object.assign(logger.child({}), { [TRACE]: fields });
}

/** Trace fields in OpenTelemetry's names, which the GCP config turns into Cloud Logging's. */
export type TraceFields = Readonly<{
  trace_id?: string;
  span_id?: string;
  trace_flags?: string;
}>;

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const CLOUD_TRACE = /^([0-9a-fA-F]{32})(?:\/(\d{1,20}))?(?:;o=([01]))?$/;

/**
 * The trace context of a request's (lowercased) headers: W3C `traceparent` first, else
 * `X-Cloud-Trace-Context: TRACE_ID/SPAN_ID;o=1` (decimal span id → 16 hex digits); `{}` if neither.
 */
export function traceFields(headers: Headers): TraceFields {
  const traceparent = headers.traceparent;
  const w3c =
    typeof traceparent === 'string'
      ? TRACEPARENT.exec(traceparent.trim())
      : null;
  if (w3c !== null) {
    return { trace_id: w3c[1], span_id: w3c[2], trace_flags: w3c[3] };
  }
  const cloud = headers['x-cloud-trace-context'];
  const gcp = typeof cloud === 'string' ? CLOUD_TRACE.exec(cloud.trim()) : null;
  if (gcp === null) {
    return {};
  }
  const span = gcp[2] === undefined ? 0n : BigInt(gcp[2]);
  return {
    trace_id: (gcp[1] as string).toLowerCase(),
    ...(span > 0n && span < 2n ** 64n
      ? { span_id: span.toString(16).padStart(16, '0') }
      : {}),
    ...(gcp[3] === undefined
      ? {}
      : { trace_flags: gcp[3] === '1' ? '01' : '00' }),
  };
}
