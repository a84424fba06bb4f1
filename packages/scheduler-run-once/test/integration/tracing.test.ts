/**
 * OpenTelemetry, opt-in (docs/tracing.md), in the built function as a process: with the standard
 * variables set, a local OTLP receiver (OTLP/HTTP with JSON bodies) gets the spans of a processed run
 * and of a duplicate, before each answer; with them unset, the process loads no OpenTelemetry
 * module beyond the one the Firestore client itself always loads.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  freePort,
  type GroupProcess,
  ROOT,
  spawnFunction,
  waitForPort,
} from '../../src/dev/local-processes.ts';
import { freshCollection, schedulerHeaders } from '../helpers.ts';

/** One span as OTLP/JSON carries it, with its scope's name and its attributes as strings. */
interface ReceivedSpan {
  readonly scope: string;
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly attributes: Readonly<Record<string, string>>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
};
type OtlpJson = {
  resourceSpans?: {
    scopeSpans?: {
      scope?: { name?: string };
      spans?: {
        name: string;
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        attributes?: { key: string; value: AnyValue }[];
      }[];
    }[];
  }[];
};

/** An OTLP/HTTP receiver of JSON trace exports on 127.0.0.1, keeping every span it got. */
async function startReceiver(): Promise<{
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  readonly server: Server;
}> {
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as OtlpJson;
        spans.push(...spansOf(body));
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) =>
    server.listen(port, '127.0.0.1', resolve),
  );
  return { endpoint: `http://127.0.0.1:${port}`, spans, server };
}

function spansOf(body: OtlpJson): ReceivedSpan[] {
  const text = (v: AnyValue) =>
    String(v.stringValue ?? v.intValue ?? v.boolValue);
  return (body.resourceSpans ?? []).flatMap((r) =>
    (r.scopeSpans ?? []).flatMap((s) =>
      (s.spans ?? []).map((span) => ({
        scope: s.scope?.name ?? '',
        name: span.name,
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        attributes: Object.fromEntries(
          (span.attributes ?? []).map((a) => [a.key, text(a.value)]),
        ),
      })),
    ),
  );
}

/** The OpenTelemetry packages the probed process loaded so far, by name, sorted. */
function loadedPackages(probeFile: string): string[] {
  const urls = existsSync(probeFile)
    ? readFileSync(probeFile, 'utf8').split('\n')
    : [];
  const names = urls
    .map((url) => /\/node_modules\/(@opentelemetry\/[^/]+)\//.exec(url)?.[1])
    .filter((name) => name !== undefined);
  return [...new Set(names)].sort();
}

const PROBE = join(ROOT, 'test/fixtures/module-probe.ts');
const scratch = mkdtempSync(join(tmpdir(), 'tracing-test-'));

/** The compiled package's function (`bench/fixtures/noop.js`, a no-op job `bench`), probed. */
function startFunction(
  port: number,
  probeFile: string,
  env: Record<string, string>,
): GroupProcess {
  return spawnFunction({
    source: 'bench/fixtures/noop.js',
    target: 'handleScheduledJob',
    port,
    env: {
      MISSED_RUN_CHECK: 'off',
      RETENTION_SECONDS: '31536000',
      RUNS_COLLECTION: freshCollection('tracing'),
      BENCH_JOB_SILENT: '1',
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${PROBE}`,
      MODULE_PROBE_FILE: probeFile,
      ...env,
    },
  });
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

describe('OpenTelemetry tracing of deliveries', {
  skip: !existsSync(`${ROOT}dist/index.js`) && 'run `npm run build` first',
}, () => {
  const children: GroupProcess[] = [];
  const servers: Server[] = [];
  after(() => {
    for (const child of children) {
      child.signalGroup('SIGKILL');
    }
    for (const server of servers) {
      server.close();
    }
    rmSync(scratch, { recursive: true, force: true });
  });

  it('exports the spans of a processed run and of a duplicate over OTLP before each answer, under the request trace', async () => {
    const receiver = await startReceiver();
    servers.push(receiver.server);
    const port = await freePort();
    const probeFile = join(scratch, 'traced.txt');
    const fn = startFunction(port, probeFile, {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    });
    children.push(fn);
    await waitForPort(port, { timeoutMs: 30_000, process: fn });
    const url = `http://127.0.0.1:${port}/`;
    // An hour ago, on the minute, as Scheduler writes it (no fraction of a second).
    const scheduleTime = new Date(
      Math.floor(Date.now() / 60_000) * 60_000 - 3_600_000,
    )
      .toISOString()
      .replace('.000Z', 'Z');
    // Cloud Run's traceparent, not sampled (as for most requests): the default sampler traces anyway.
    const first = { traceId: hex(16), spanId: hex(8) };
    const processed = await fetch(url, {
      method: 'POST',
      headers: {
        ...schedulerHeaders('bench', scheduleTime),
        traceparent: `00-${first.traceId}-${first.spanId}-00`,
      },
    });
    // Exported before the answer was written: no wait here.
    const processedSpans = [...receiver.spans];
    assert.equal(processed.status, 200, fn.output());
    const { runId } = (await processed.json()) as { runId: string };
    const second = { traceId: hex(16), spanId: 123456789n };
    const duplicate = await fetch(url, {
      method: 'POST',
      headers: {
        ...schedulerHeaders('bench', scheduleTime),
        'X-Cloud-Trace-Context': `${second.traceId}/${second.spanId};o=0`,
      },
    });
    assert.equal(duplicate.status, 200, fn.output());
    const duplicateSpans = receiver.spans.slice(processedSpans.length);

    const delivery = processedSpans.find(
      (s) => s.name === 'scheduled delivery',
    );
    assert.ok(
      delivery,
      `no delivery span in ${JSON.stringify(processedSpans)}`,
    );
    const { attributes } = delivery;
    assert.equal(attributes['run_once.job'], 'bench');
    assert.equal(attributes['run_once.slot'], scheduleTime);
    assert.equal(attributes['run_once.kind'], 'slot');
    assert.equal(attributes['run_once.outcome'], 'processed');
    assert.equal(attributes['http.response.status_code'], '200');
    assert.equal(attributes['run_once.run_id'], runId);
    assert.equal(delivery.traceId, first.traceId);
    assert.equal(delivery.parentSpanId, first.spanId);
    const ownChildren = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
      spans
        .filter(
          (s) =>
            s.parentSpanId === parent.spanId &&
            s.scope === 'scheduler-run-once',
        )
        .map((s) =>
          `${s.name} ${s.attributes['run_once.claim'] ?? s.attributes['run_once.fence'] ?? ''}`.trim(),
        );
    assert.deepEqual(ownChildren(processedSpans, delivery).sort(), [
      'claim claimed',
      'completion recorded',
      'job',
    ]);
    const claim = processedSpans.find((s) => s.name === 'claim');
    const firestoreUnderClaim = processedSpans.filter(
      (s) =>
        s.scope === '@google-cloud/firestore' &&
        s.parentSpanId === claim?.spanId,
    );
    assert.ok(
      firestoreUnderClaim.length > 0,
      `the Firestore client's spans nest under the claim: ${JSON.stringify(processedSpans.map((s) => [s.scope, s.name]))}`,
    );
    // Outside the request's trace only the instance's warm-up read at start (`documents.connect`),
    // a trace of its own, exported with the first delivery's spans.
    const outside = processedSpans.filter((s) => s.traceId !== first.traceId);
    const warmUps = new Set(
      outside
        .filter(
          (s) => s.parentSpanId === '' && s.name === 'DocumentReference.Get',
        )
        .map((s) => s.traceId),
    );
    assert.deepEqual(
      outside.filter((s) => !warmUps.has(s.traceId)),
      [],
      'every span of the delivery is in the request trace',
    );

    const duplicateDelivery = duplicateSpans.find(
      (s) => s.name === 'scheduled delivery',
    );
    assert.ok(
      duplicateDelivery,
      `no delivery span in ${JSON.stringify(duplicateSpans)}`,
    );
    assert.equal(duplicateDelivery.attributes['run_once.outcome'], 'duplicate');
    assert.equal(duplicateDelivery.attributes['run_once.run_id'], runId);
    assert.equal(duplicateDelivery.traceId, second.traceId);
    assert.equal(
      duplicateDelivery.parentSpanId,
      second.spanId.toString(16).padStart(16, '0'),
    );
    assert.deepEqual(ownChildren(duplicateSpans, duplicateDelivery), [
      'claim completed',
    ]);
    // The probe sees the SDK and the exporter loaded: it would see them if they were loaded unset.
    assert.deepEqual(
      loadedPackages(probeFile).filter((name) =>
        [
          '@opentelemetry/sdk-trace',
          '@opentelemetry/exporter-trace-otlp-http',
        ].includes(name),
      ),
      ['@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/sdk-trace'],
    );
  });

  it('with the variables unset loads no OpenTelemetry package but the API the Firestore client loads itself', async () => {
    const port = await freePort();
    const probeFile = join(scratch, 'untraced.txt');
    const fn = startFunction(port, probeFile, {
      OTEL_TRACES_EXPORTER: '',
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
    });
    children.push(fn);
    await waitForPort(port, { timeoutMs: 30_000, process: fn });

    const res = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: schedulerHeaders('bench'),
    });

    assert.equal(res.status, 200, fn.output());
    // @google-cloud/firestore requires @opentelemetry/api at load (build/src/telemetry/
    // enabled-trace-util.js), traced or not; the SDK and the exporters are this library's to load.
    assert.deepEqual(loadedPackages(probeFile), ['@opentelemetry/api']);
  });
});
