/**
 * `npm run bench:tracing`: what tracing costs (docs/tracing.md), against the Firestore emulator.
 * The compiled function (`bench/fixtures/noop.js`, a no-op job) with tracing off and on
 * (`OTEL_TRACES_EXPORTER=otlp`, http/protobuf, the default) to a local OTLP receiver that answers
 * every export at once: cold starts (spawn to the first 200) and processed runs over HTTP, one at a
 * time, off and on interleaved. Traced, each answer waits for its spans' export (the flush before
 * the answer), so the difference of the medians is the SDK's work plus one export's round trip to
 * a receiver on this machine; on Cloud Run add the round trip to the endpoint.
 *
 *   node scripts/with-emulator.ts -- node bench/tracing.ts [--smoke]
 */
import { createServer } from 'node:http';
import { freePort } from '../src/dev/local-processes.ts';
import { type Summary, summarise } from './figures.ts';
import { freshCollection } from './in-process.ts';
import { deliver, type FunctionProcess, startFunction } from './over-http.ts';

const SMOKE = process.argv.includes('--smoke');
const PLAN = SMOKE
  ? { coldStarts: 1, runs: 5, warmup: 2 }
  : { coldStarts: 8, runs: 200, warmup: 20 };

/** An OTLP/HTTP receiver on 127.0.0.1 that accepts every export; counts the exports. */
async function startReceiver() {
  let exports = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) =>
    server.listen(port, '127.0.0.1', resolve),
  );
  return {
    endpoint: `http://127.0.0.1:${port}`,
    exports: () => exports,
    close: () => server.close(),
  };
}

type Variant = readonly [string, Readonly<Record<string, string>>];

/** Cold starts of each variant, interleaved: ms from spawn to the first 200 on a new run. */
async function coldStarts(variants: readonly Variant[]) {
  const samples = variants.map(() => [] as number[]);
  for (let rep = 0; rep < PLAN.coldStarts; rep++) {
    for (const [k, [, env]] of variants.entries()) {
      const fn = await startFunction(
        'handleScheduledJob',
        'bench/fixtures/noop.js',
        env,
      );
      try {
        const { status } = await deliver(fn.url);
        if (status !== 200) {
          throw new Error(`a first delivery got ${status}:\n${fn.output()}`);
        }
        samples[k]?.push(performance.now() - fn.spawnedAt);
      } finally {
        await fn.stop();
      }
    }
  }
  return variants.map(([name], k) => ({
    name,
    first200: summarise(samples[k] ?? []),
  }));
}

/** Processed runs of each running function, one at a time, interleaved: ms from request to answer. */
async function processedRuns(
  fns: readonly (readonly [string, FunctionProcess])[],
) {
  const samples = fns.map(() => [] as number[]);
  for (let i = -PLAN.warmup; i < PLAN.runs; i++) {
    for (const [k, [, fn]] of fns.entries()) {
      const started = performance.now();
      const { status } = await deliver(fn.url);
      const elapsed = performance.now() - started;
      if (status !== 200) {
        throw new Error(`a run got ${status}:\n${fn.output()}`);
      }
      if (i >= 0) {
        samples[k]?.push(elapsed);
      }
    }
  }
  return fns.map(([name], k) => ({
    name,
    perRun: summarise(samples[k] ?? []),
  }));
}

const ms = (s: Summary) => `${s.median} ms (p95 ${s.p95} ms, n ${s.n})`;

async function main(): Promise<void> {
  if (!process.env.FIRESTORE_EMULATOR_HOST) {
    console.error(
      'bench:tracing: FIRESTORE_EMULATOR_HOST is not set; run `npm run bench:tracing`.',
    );
    process.exit(2);
  }
  const receiver = await startReceiver();
  const base = {
    RUNS_COLLECTION: freshCollection('tracing'),
    BENCH_JOB_SILENT: '1',
    BENCH_JOBS: '1',
  };
  const variants: Variant[] = [
    ['tracing off', base],
    [
      'tracing on (otlp, http/protobuf)',
      {
        ...base,
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      },
    ],
  ];
  try {
    const starts = await coldStarts(variants);
    const fns = await Promise.all(
      variants.map(
        async ([name, env]) =>
          [
            name,
            await startFunction(
              'handleScheduledJob',
              'bench/fixtures/noop.js',
              env,
            ),
          ] as const,
      ),
    );
    let runs: Awaited<ReturnType<typeof processedRuns>>;
    try {
      runs = await processedRuns(fns);
    } finally {
      await Promise.all(fns.map(([, fn]) => fn.stop()));
    }
    console.log('Cold start, spawn to the first 200 (median)');
    for (const { name, first200 } of starts) {
      console.log(`  ${name}: ${ms(first200)}`);
    }
    console.log('Processed run over HTTP, one at a time (median)');
    for (const { name, perRun } of runs) {
      console.log(`  ${name}: ${ms(perRun)}`);
    }
    const [off, on] = runs.map((r) => r.perRun.median);
    console.log(
      `Tracing adds ${Math.round(((on ?? 0) - (off ?? 0)) * 10) / 10} ms to a processed run's answer (${receiver.exports()} exports received)`,
    );
  } finally {
    receiver.close();
  }
}

await main();
