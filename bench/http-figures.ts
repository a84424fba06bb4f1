/**
 * Figures through real function processes over HTTP on 127.0.0.1: duplicate storms, throughput
 * of distinct runs, and cold starts.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type FunctionProcess, ROOT, startFunction } from './processes.ts';
import { histogram, quantile, round, type Summary, summarise } from './report.ts';
import type { WireCounter, WireCounts } from './wire-counter.ts';

const JOB_NAME = 'X-CloudScheduler-JobName';
const SCHEDULE_TIME = 'X-CloudScheduler-ScheduleTime';
/**
 * Longest wait for a storm's answers, in process and over HTTP; a caller still unanswered counts as
 * an error ("no answer"). It bounds (a)'s 200-storm, whose contended transactions took 6-32 s to
 * settle here (sometimes all 199 losers fail "ABORTED: Transaction lock timeout").
 */
export const STORM_DEADLINE_MS = 15_000;

let scheduleSeq = 0;
/** A schedule time no other request of this bench used (one minute apart, from 2031). */
function freshScheduleTime(): string {
  return new Date(Date.UTC(2031, 0, 1) + 60_000 * scheduleSeq++).toISOString();
}

/** Delivers one new run; resolves with the response status and outcome. */
export async function deliver(
  fn: Pick<FunctionProcess, 'url'>,
  jobName: string,
  scheduleTime = freshScheduleTime(),
): Promise<{ status: number; outcome: string }> {
  const res = await fetch(fn.url, {
    method: 'POST',
    headers: { [JOB_NAME]: jobName, [SCHEDULE_TIME]: scheduleTime },
    signal: AbortSignal.timeout(STORM_DEADLINE_MS),
  });
  const text = await res.text();
  let outcome = 'non-json';
  try {
    outcome = String((JSON.parse(text) as { outcome?: unknown }).outcome);
  } catch {
    if (res.ok) outcome = 'ok';
  }
  return { status: res.status, outcome };
}

/** One storm through the function. */
export interface HttpStorm {
  readonly size: number;
  /** `job started` lines the function logged: must be 1. */
  readonly executions: number;
  /** 5xx answers and requests without an answer. */
  readonly errors: number;
  readonly statuses: Record<string, number>;
  readonly outcomes: Record<string, number>;
  readonly allAnsweredMs: number;
  readonly medianAnsweredMs: number;
  /** Firestore calls the function made during the storm, counted at the proxy. */
  readonly roundTrips: number;
  readonly roundTripsByMethod: WireCounts;
}

/**
 * Fires `size` concurrent deliveries of one new run at `fn` (whose Firestore is behind `counter`).
 */
export async function stormOverHttp(
  fn: FunctionProcess,
  size: number,
  counter: WireCounter,
): Promise<HttpStorm> {
  const jobName = `storm-http-${size}`;
  const scheduleTime = freshScheduleTime();
  const startsBefore = fn.jobStarts();
  await counter.reset();
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: size }, () =>
      deliver(fn, jobName, scheduleTime).then(
        (a) => ({ ...a, at: performance.now() - started }),
        () => ({
          status: 0,
          outcome: `no answer in ${STORM_DEADLINE_MS / 1000} s`,
          at: performance.now() - started,
        }),
      ),
    ),
  );
  await new Promise((resolve) => setTimeout(resolve, 100)); // the last log lines through the pipe
  const wire = await counter.counts();
  const times = answers.map((a) => a.at).sort((a, b) => a - b);
  return {
    size,
    executions: fn.jobStarts() - startsBefore,
    errors: answers.filter((a) => a.status === 0 || a.status >= 500).length,
    statuses: histogram(answers.map((a) => (a.status === 0 ? 'none' : String(a.status)))),
    outcomes: histogram(answers.map((a) => a.outcome)),
    allAnsweredMs: Math.round(times.at(-1) ?? Number.NaN),
    medianAnsweredMs: Math.round(times[Math.floor(times.length / 2)] ?? Number.NaN),
    roundTrips: wire.total,
    roundTripsByMethod: wire.byMethod,
  };
}

/** Distinct runs per second at one concurrency. */
export interface Throughput {
  readonly concurrency: number;
  /** 2xx answers per second: each request names a distinct run, so each 2xx is a processed run. */
  readonly runsPerSecond: number;
  /** 2xx answers in all. */
  readonly answered2xx: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
}

/**
 * Drives `fn` with autocannon for `seconds` at `concurrency` connections; every request carries
 * its own schedule time, so every one is a new run.
 */
export async function measureThroughput(
  fn: FunctionProcess,
  concurrency: number,
  seconds: number,
): Promise<Throughput> {
  const jobName = `throughput-${concurrency}-${randomUUID().slice(0, 8)}`;
  const result = await autocannon({
    url: fn.url,
    method: 'POST',
    connections: concurrency,
    duration: seconds,
    timeout: 10,
    requests: [
      {
        method: 'POST',
        setupRequest: (request) => ({
          ...request,
          headers: {
            ...request.headers,
            [JOB_NAME]: jobName,
            [SCHEDULE_TIME]: freshScheduleTime(),
          },
        }),
      },
    ],
  });
  return {
    concurrency,
    runsPerSecond: round(result['2xx'] / result.duration, 1),
    answered2xx: result['2xx'],
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/** A cold-start variant: what to start and what to call. */
export interface ColdStartVariant {
  readonly key: string;
  readonly label: string;
  readonly target: string;
  /** `--source`; the repository root (`build/index.js`) if absent. */
  readonly source?: string;
  /** Extra environment for this variant. */
  readonly env?: Readonly<Record<string, string>>;
  /** Starts of this variant, if fewer than the others'. */
  readonly reps?: number;
}

/** Cold-start times of one variant, ms from spawn. */
export interface ColdStart {
  readonly key: string;
  readonly label: string;
  /** Until the port accepted a connection. */
  readonly listen: Summary;
  /** Until the first delivery (a new run) was answered 200. */
  readonly first200: Summary;
  /**
   * The first request alone (first 200 minus listening, per start): where a Firestore client's
   * settings show, without the boot's noise.
   */
  readonly firstRequest: Summary;
}

/**
 * Starts each variant `reps` times (variants interleaved, the order rotating) and times spawn →
 * listening → first 200 on a new run.
 *
 * @throws if a first delivery is not answered 200.
 */
export async function measureColdStarts(
  variants: readonly ColdStartVariant[],
  reps: number,
  env: Readonly<Record<string, string>>,
): Promise<ColdStart[]> {
  const listen = Object.fromEntries(variants.map((v) => [v.key, [] as number[]]));
  const first200 = Object.fromEntries(variants.map((v) => [v.key, [] as number[]]));
  const firstRequest = Object.fromEntries(variants.map((v) => [v.key, [] as number[]]));
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(rep + k) % variants.length] as ColdStartVariant;
      if (rep >= (variant.reps ?? reps)) continue;
      const fn = await startFunction({
        target: variant.target,
        source: variant.source,
        env: { ...env, ...variant.env },
      });
      try {
        listen[variant.key]?.push(fn.listenMs);
        const answer = await deliver(fn, `cold-${variant.key}`);
        if (answer.status !== 200) {
          throw new Error(`${variant.label}: first delivery got ${answer.status}\n${fn.output()}`);
        }
        const answeredAt = fn.sinceSpawn();
        first200[variant.key]?.push(answeredAt);
        firstRequest[variant.key]?.push(answeredAt - fn.listenMs);
      } finally {
        await fn.stop();
      }
    }
  }
  return variants.map((v) => ({
    key: v.key,
    label: v.label,
    listen: summarise(listen[v.key] ?? []),
    first200: summarise(first200[v.key] ?? []),
    firstRequest: summarise(firstRequest[v.key] ?? []),
  }));
}

/**
 * Fills a V8 compile cache (`NODE_COMPILE_CACHE=dir`) the way a build step could: one start, one
 * delivery, then SIGTERM, so Node writes the cache as it exits.
 */
export async function fillCompileCache(
  source: string,
  dir: string,
  env: Readonly<Record<string, string>>,
): Promise<void> {
  const fn = await startFunction({
    target: 'handleScheduledJob',
    source,
    env: { ...env, NODE_COMPILE_CACHE: dir },
  });
  await deliver(fn, 'fill-compile-cache');
  await fn.stop('SIGTERM');
}

/** Packages whose import alone is timed, each in a fresh process. */
const IMPORTED_ALONE: Readonly<Record<string, readonly string[]>> = {
  '@google-cloud/firestore': ['@google-cloud/firestore'],
  'pino + @google-cloud/pino-logging-gcp-config': ['pino', '@google-cloud/pino-logging-gcp-config'],
  pino: ['pino'],
  'google-auth-library': ['google-auth-library'],
};

/** Medians, ms, of `bench/fixtures/cold-breakdown.ts`'s steps. */
export interface ColdBreakdown {
  /** Step by step, in `build/index.js`'s order, per Firestore transport. */
  readonly sequence: Record<'grpc' | 'rest', Record<string, number>>;
  /** Import of each package of {@link IMPORTED_ALONE} in a process that loaded nothing else. */
  readonly alone: Record<string, number>;
}

/** Runs the breakdown script with `args`; resolves with the steps it printed. */
function runBreakdown(
  script: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    child.stdout.on('data', (c: Buffer) => {
      text += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      text += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      const line = text.split('\n').find((l) => l.startsWith('{"steps"'));
      if (code !== 0 || line === undefined) {
        reject(new Error(`cold-breakdown ${args[0]} exited ${code}:\n${text}`));
      } else {
        resolve((JSON.parse(line) as { steps: Record<string, number> }).steps);
      }
    });
  });
}

/**
 * Runs the cold-start breakdown `reps` times per transport and per package imported alone, each in
 * a fresh process, and takes medians.
 *
 * @param script - the breakdown fixture as JavaScript (see `emitJavaScript`).
 */
export async function measureColdBreakdown(
  script: string,
  reps: number,
  env: Readonly<Record<string, string>>,
): Promise<ColdBreakdown> {
  const framework = fileURLToPath(import.meta.resolve('@google-cloud/functions-framework'));
  const sequence: Record<string, Record<string, number[]>> = { grpc: {}, rest: {} };
  const alone: Record<string, number[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const transport of ['grpc', 'rest'] as const) {
      const steps = await runBreakdown(script, [transport, framework], env);
      const bucket = sequence[transport] as Record<string, number[]>;
      for (const [name, ms] of Object.entries(steps)) bucket[name] = [...(bucket[name] ?? []), ms];
    }
    for (const [label, packages] of Object.entries(IMPORTED_ALONE)) {
      const urls = packages.map((p) => import.meta.resolve(p));
      const steps = await runBreakdown(script, ['alone', ...urls], env);
      alone[label] = [...(alone[label] ?? []), steps.importAlone ?? Number.NaN];
    }
  }
  const medians = (bucket: Record<string, number[]> = {}) =>
    Object.fromEntries(Object.entries(bucket).map(([k, v]) => [k, round(quantile(v, 0.5), 1)]));
  return {
    sequence: { grpc: medians(sequence.grpc), rest: medians(sequence.rest) },
    alone: medians(alone),
  };
}
