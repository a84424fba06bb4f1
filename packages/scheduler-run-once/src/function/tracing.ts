/**
 * Tracing of deliveries, opt-in (docs/tracing.md): a span per delivery and one per step (the claim,
 * the job, the completion or release), through a {@link DeliveryTracer}. OpenTelemetry is loaded
 * (`otel-tracing.ts`, a dynamic import) only when `OTEL_TRACES_EXPORTER=otlp`: with it unset this
 * module imports no OpenTelemetry package, and a deploy installs none.
 */
import { ConfigError } from '../core/errors.ts';
import type { Ledger } from '../core/ledger.ts';
import {
  type DeliverySpan,
  type DeliveryTracer,
  OTLP_PROTOCOLS,
  type OtlpProtocol,
  type SpanAttributes,
  TRACE_SAMPLERS,
  type TracedInstance,
  type TraceSampler,
  type TracingConfig,
} from './delivery-tracer.ts';

export type {
  DeliverySpan,
  DeliveryTracer,
  SpanAttributes,
  TracedInstance,
  TracingConfig,
};

type Env = Readonly<Record<string, string | undefined>>;

const NO_SPAN: DeliverySpan = {
  set: () => {},
  fail: () => {},
  traceFields: undefined,
};

/** Tracing off: each delivery and step runs as it is, nothing recorded. */
export const NO_TRACING: DeliveryTracer = {
  delivery: (_headers, handle) => handle(NO_SPAN),
  step: (_name, step) => step(),
};

/**
 * The sampler when `OTEL_TRACES_SAMPLER` is unset: every delivery is traced, in the request's trace.
 * Not the specification's `parentbased_always_on`: Cloud Run's own `traceparent` marks few requests
 * sampled, so a parent-based sampler would drop most deliveries, and a scheduled job's few
 * deliveries a minute cost little to trace (docs/tracing.md, "Sampling").
 */
export const DEFAULT_TRACE_SAMPLER: TraceSampler = 'always_on';

/** The package of each protocol's exporter, which the project installs to turn tracing on. */
export const EXPORTER_PACKAGES: Readonly<Record<OtlpProtocol, string>> = {
  'http/protobuf': '@opentelemetry/exporter-trace-otlp-proto',
  'http/json': '@opentelemetry/exporter-trace-otlp-http',
  grpc: '@opentelemetry/exporter-trace-otlp-grpc',
};

/** What every protocol needs besides its exporter. */
export const SDK_PACKAGES = [
  '@opentelemetry/api',
  '@opentelemetry/sdk-trace',
  '@opentelemetry/context-async-hooks',
  '@opentelemetry/resources',
] as const;

/** Google's OTLP endpoint (Telemetry API): spans sent there carry the instance's credentials. */
export const GOOGLE_OTLP_HOST = 'telemetry.googleapis.com';

/** The first of `names` set to something other than blanks, trimmed. */
function firstSet(env: Env, ...names: string[]): string | undefined {
  for (const name of names) {
    const value = (env[name] ?? '').trim();
    if (value !== '') {
      return value;
    }
  }
  return undefined;
}

/** The traces endpoint's host, as the OTLP exporters resolve it (signal variable first). */
function endpointHost(env: Env): string | undefined {
  const endpoint = firstSet(
    env,
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    'OTEL_EXPORTER_OTLP_ENDPOINT',
  );
  return endpoint === undefined ? undefined : URL.parse(endpoint)?.hostname;
}

/**
 * The tracing settings of `env`, or `undefined` when tracing is off: `OTEL_TRACES_EXPORTER` unset
 * or `none`, or `OTEL_SDK_DISABLED=true` (the specification's variables,
 * https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/).
 * @throws {ConfigError} listing each variable this function cannot honour, and what to set instead.
 */
export function tracingConfigOf(env: Env): TracingConfig | undefined {
  const exporter = firstSet(env, 'OTEL_TRACES_EXPORTER') ?? 'none';
  const disabled = firstSet(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true';
  if (exporter === 'none' || disabled) {
    return undefined;
  }
  const problems: string[] = [];
  if (exporter !== 'otlp') {
    problems.push(
      `OTEL_TRACES_EXPORTER=${JSON.stringify(exporter)}: must be otlp (or none, the default): this function exports spans over OTLP only`,
    );
  }
  const protocol = firstSet(
    env,
    'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
    'OTEL_EXPORTER_OTLP_PROTOCOL',
  );
  const knownProtocol = OTLP_PROTOCOLS.find((p) => p === protocol);
  if (protocol !== undefined && knownProtocol === undefined) {
    problems.push(
      `OTEL_EXPORTER_OTLP_PROTOCOL=${JSON.stringify(protocol)}: must be one of ${OTLP_PROTOCOLS.join(', ')}`,
    );
  }
  const sampler = firstSet(env, 'OTEL_TRACES_SAMPLER');
  const knownSampler = TRACE_SAMPLERS.find((s) => s === sampler);
  if (sampler !== undefined && knownSampler === undefined) {
    problems.push(
      `OTEL_TRACES_SAMPLER=${JSON.stringify(sampler)}: must be one of ${TRACE_SAMPLERS.join(', ')}`,
    );
  }
  const ratioText = firstSet(env, 'OTEL_TRACES_SAMPLER_ARG');
  const ratio = ratioText === undefined ? 1 : Number(ratioText);
  if (!(ratio >= 0 && ratio <= 1)) {
    problems.push(
      `OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(ratioText)}: must be a ratio from 0 to 1`,
    );
  }
  const toGoogle = endpointHost(env) === GOOGLE_OTLP_HOST;
  if (toGoogle && knownProtocol === 'grpc') {
    problems.push(
      `OTEL_EXPORTER_OTLP_PROTOCOL=grpc: spans to ${GOOGLE_OTLP_HOST} go over http/protobuf here (the default), which signs them with the instance's credentials`,
    );
  }
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return {
    protocol: knownProtocol ?? 'http/protobuf',
    sampler: knownSampler ?? DEFAULT_TRACE_SAMPLER,
    ratio,
    toGoogle,
  };
}

/** Loading OpenTelemetry failed: what is missing and the command that installs it. */
export class TracingUnavailableError extends Error {
  override name = 'TracingUnavailableError';
}

/** Whether `err` is Node's failure to find an imported package. */
function isMissingModule(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

/**
 * The OpenTelemetry tracer of `config`: loads the SDK and the protocol's exporter (the only place
 * they are imported), registers its provider and context manager globally (the Firestore client's
 * own spans go to the global provider) and returns the tracer.
 * @throws {TracingUnavailableError} naming the `npm install` that adds what is missing.
 */
export async function loadTracer(
  config: TracingConfig,
  instance: TracedInstance,
): Promise<DeliveryTracer> {
  try {
    const { createOtelTracer } = await import('./otel-tracing.ts');
    return await createOtelTracer(config, instance);
  } catch (err) {
    if (!isMissingModule(err)) {
      throw err;
    }
    const packages = [...SDK_PACKAGES, EXPORTER_PACKAGES[config.protocol]];
    throw new TracingUnavailableError(
      `OTEL_TRACES_EXPORTER=otlp, but OpenTelemetry is not installed (${(err as Error).message}); add it to the project with: npm install ${packages.join(' ')}`,
    );
  }
}

/**
 * A tracer for the time `loading` takes: each call waits for it. Deliveries before it loaded wait,
 * so none goes untraced; a failed load fails them (the instance exits, `registerScheduledJob`).
 */
export function deferredTracer(
  loading: Promise<DeliveryTracer>,
): DeliveryTracer {
  return {
    delivery: async (headers, handle) =>
      (await loading).delivery(headers, handle),
    step: async (name, step, describe) =>
      (await loading).step(name, step, describe),
  };
}

/** A claim's result as an attribute: `claimed`, `completed` (a duplicate), `in_progress`, … */
const claimState = (claimed: { readonly state: string }) => ({
  'run_once.claim': claimed.state,
});
/** A fenced write's result: `recorded` or `lease_lost`. */
const fenceResult = (result: string) => ({ 'run_once.fence': result });

/**
 * `ledger` with each call in a span of `tracer`: `claim`, `completion`, `release`, `lease extension`
 * and `note`, children of the delivery's span; the Firestore client's own spans nest under them.
 */
export function tracedLedger(ledger: Ledger, tracer: DeliveryTracer): Ledger {
  const holds = ledger.holds;
  return {
    claim: (...args) =>
      tracer.step('claim', () => ledger.claim(...args), claimState),
    extend: (claim) =>
      tracer.step(
        'lease extension',
        () => ledger.extend(claim),
        (renewed) =>
          fenceResult(renewed === 'lease_lost' ? renewed : 'recorded'),
      ),
    note: (...args) => tracer.step('note', () => ledger.note(...args)),
    complete: (claim) =>
      tracer.step('completion', () => ledger.complete(claim), fenceResult),
    release: (...args) =>
      tracer.step('release', () => ledger.release(...args), fenceResult),
    ...(holds === undefined
      ? {}
      : { holds: (runId: string) => holds.call(ledger, runId) }),
  };
}
