/**
 * Figures through function processes over HTTP: storms of duplicates, throughput of distinct runs,
 * cold starts. Each function is `functions-framework` as Cloud Run starts it, run by this process's
 * Node, on 127.0.0.1.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import {
  ROOT,
  spawnGroup,
  startFunctionOnOwnPort,
} from '../src/dev/local-processes.ts';
import {
  fire,
  type Storm,
  type Summary,
  stormFigures,
  summarise,
} from './figures.ts';
import type { WireCounter } from './wire-counter.ts';

export { ROOT };

/** A function process. */
export interface FunctionProcess {
  readonly url: string;
  /** `performance.now()` at spawn, and ms from then until it said it listens. */
  readonly spawnedAt: number;
  readonly listenMs: number;
  /** CPU time its process used so far, ms (NaN where the system does not say). */
  cpuMs(): number;
  /** The job's executions so far: the `job started` lines it logged. */
  jobStarts(): number;
  output(): string;
  /** SIGKILL of its process group; resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Starts `functions-framework --target=TARGET [--source=SOURCE]` in the repository root (without a
 * source: the project's `package.json` `main`, as deployed) on a port it picks, and resolves once it
 * says it listens there (`startFunctionOnOwnPort`).
 *
 * @param timeoutMs - how long it may take to listen (30 s unless given).
 * @throws if it exits first or does not listen within `timeoutMs` (it is then stopped).
 */
export async function startFunction(
  target: string,
  source?: string,
  env: Readonly<Record<string, string>> = {},
  timeoutMs = 30_000,
): Promise<FunctionProcess> {
  const spawnedAt = performance.now();
  // On a port of its own choosing, which it names once it listens: a port picked free beforehand
  // could be another process's by then, and that process's server would answer the deliveries.
  const { child, port } = await startFunctionOnOwnPort(
    { target, env, ...(source === undefined ? {} : { source }) },
    { timeoutMs, intervalMs: 2 },
  );
  const stop = async () => {
    child.signalGroup('SIGKILL');
    await child.exited;
  };
  return {
    url: `http://127.0.0.1:${port}/`,
    spawnedAt,
    listenMs: performance.now() - spawnedAt,
    cpuMs: () => cpuMsOf(child.pid),
    jobStarts: () => child.output().split('"message":"job started"').length - 1,
    output: child.output,
    stop,
  };
}

let clockTicks: number | undefined;
/**
 * The CPU time (user + system, ms) process `pid` used so far, from `/proc/PID/stat` (fields 14
 * and 15, in clock ticks: `getconf CLK_TCK`, 100 on Linux); NaN where there is no `/proc`. Unlike
 * wall time it barely grows when other work shares the machine.
 */
function cpuMsOf(pid: number | undefined): number {
  try {
    clockTicks ??= Number(
      execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim(),
    );
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks;
  } catch {
    return Number.NaN;
  }
}

/** The job ids the bench delivers; its fixtures declare them. */
export const BENCH_JOB_IDS = ['bench', 'storm', 'load'] as const;

let slotSeq = 0;
let fineSeq = 0;
/**
 * The first slot the bench delivers: a week ago, on the minute. Past slots are slot runs, as
 * Scheduler delivers them (a schedule time well ahead of Firestore's clock would be a forced run,
 * which skips missed-run detection), and a week holds more runs than the bench's single runs.
 */
const FIRST_SLOT_MS = Math.floor(Date.now() / 60_000) * 60_000 - 7 * 86_400_000;
/**
 * Storms and the load runs need tens of thousands of distinct runs: schedule times 10 ms apart
 * from an hour ago, past and within any retention (the function refuses times after the job's
 * next slot or older than RETENTION_SECONDS), accepted as ordinary deliveries though no slot.
 */
const FINE_BASE_MS = Date.now() - 3_600_000;
/**
 * The Scheduler headers of a run no other delivery of this bench named: the job `bench`'s next
 * minute slot, or for the storms and the load a time of its own.
 */
function newRun(jobName: string) {
  const at =
    jobName === 'bench'
      ? FIRST_SLOT_MS + 60_000 * slotSeq++
      : FINE_BASE_MS + 10 * fineSeq++;
  const scheduleTime = new Date(at).toISOString();
  return {
    'X-CloudScheduler-JobName': jobName,
    'X-CloudScheduler-ScheduleTime': scheduleTime,
  };
}

/**
 * Delivers a run (a new one unless given); resolves with the status and the body's outcome.
 *
 * @throws if no answer comes within `timeoutMs` (30 s unless given).
 */
export async function deliver(
  url: string,
  headers = newRun('bench'),
  timeoutMs = 30_000,
) {
  const res = await fetch(url, {
    method: 'POST',
    headers,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = await res.text();
  return {
    status: res.status,
    outcome: /"outcome":"(\w+)"/.exec(body)?.[1] ?? body.slice(0, 20),
  };
}

/** Fires `size` concurrent deliveries of one new run at `fn`, whose Firestore is behind `counter`. */
export async function stormOverHttp(
  fn: FunctionProcess,
  ledger: string,
  size: number,
  counter: WireCounter,
): Promise<Storm> {
  const run = newRun('storm');
  const startsBefore = fn.jobStarts();
  counter.reset();
  const answers = await fire(size, async () => {
    const { status, outcome } = await deliver(fn.url, run);
    return { answer: `${status} ${outcome}`, error: status >= 500 };
  });
  await new Promise((resolve) => setTimeout(resolve, 100)); // the last log lines through the pipe
  const storm = {
    where: 'HTTP',
    ledger,
    executions: fn.jobStarts() - startsBefore,
  } as const;
  return stormFigures({ ...storm, calls: counter.calls() }, answers);
}

/** One function's processed runs over HTTP, one at a time: ms from request to answer. */
export interface ProcessedRuns {
  readonly fn: string;
  readonly perRun: Summary;
  /** Answers other than 200. */
  readonly errors: number;
}

/**
 * Delivers a new run to each of `fns` in turn, `warmup` untimed rounds then `runs` timed ones,
 * one request at a time, so the functions are measured side by side under the same load of the
 * machine (interleaved, not one after the other). Each answer must be a 200: a processed run.
 */
export async function measureProcessedRuns(
  fns: readonly (readonly [string, FunctionProcess])[],
  runs: number,
  warmup: number,
): Promise<ProcessedRuns[]> {
  const samples = fns.map(() => [] as number[]);
  const errors = fns.map(() => 0);
  for (let i = -warmup; i < runs; i++) {
    for (const [k, [, fn]] of fns.entries()) {
      const started = performance.now();
      const { status } = await deliver(fn.url);
      const elapsed = performance.now() - started;
      if (i < 0) {
        continue;
      }
      samples[k]?.push(elapsed);
      if (status !== 200) {
        errors[k] = (errors[k] ?? 0) + 1;
      }
    }
  }
  return fns.map(([name], k) => ({
    fn: name,
    perRun: summarise(samples[k] ?? []),
    errors: errors[k] ?? 0,
  }));
}

/**
 * Drives `fn` with autocannon for `seconds` at `concurrency` connections, a new run per request:
 * each 2xx is a processed run. `errors` counts non-2xx answers and failed requests.
 */
export async function measureThroughput(
  [name, fn]: readonly [string, FunctionProcess],
  concurrency: number,
  seconds: number,
) {
  const result = await autocannon({
    url: fn.url,
    method: 'POST',
    connections: concurrency,
    duration: seconds,
    requests: [
      {
        setupRequest: (r) => ({
          ...r,
          headers: { ...r.headers, ...newRun('load') },
        }),
      },
    ],
  });
  return {
    fn: name,
    concurrency,
    runsPerSecond: Math.round((10 * result['2xx']) / result.duration) / 10,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    errors: result.non2xx + result.errors,
  };
}
export type Throughput = Awaited<ReturnType<typeof measureThroughput>>;

/** The cold-start variants, by key: `hello` and `floor` are what the others are compared with. */
export const COLD_STARTS = {
  hello: 'hello world',
  floor: 'floor: functions-framework + Firestore client + one create()',
  floorPlatformCache: 'floor, NODE_COMPILE_CACHE (platform)',
  project: 'project, no compile cache',
  projectCache: 'project, compile cache from gcp-build (as deployed)',
  projectPlatformCache: 'project, NODE_COMPILE_CACHE (platform)',
  projectManyJobs: 'project, many declared jobs, compile cache (as deployed)',
} as const;
export type ColdStartKey = keyof typeof COLD_STARTS;

/** One way to start a function: what functions-framework loads, and its environment. */
export interface ColdStartVariant {
  readonly key: ColdStartKey;
  /** What the tables call it; `COLD_STARTS[key]` unless given. */
  readonly label?: string;
  readonly target: string;
  readonly source: string;
  readonly env?: Readonly<Record<string, string>>;
  /** At most this many starts (every round of `measureColdStarts` unless given). */
  readonly starts?: number;
  /**
   * A bound, ms from spawn, on one start's first 200: a start that misses it is recorded as a
   * miss (`timedOut`) and the variant is not started again, so a slow variant costs one bound.
   * Without it, a start may take 30 s to listen and 30 s more to answer, then the bench fails.
   */
  readonly timeoutMs?: number;
}

/**
 * Fills a module compile cache in `dir` the way a build does, before any start is timed: one Node
 * process turns the cache on, loads `source` (repository-relative) once and writes what it compiled.
 * Like `gcp-build` (`node build/main.cjs`) and the buildpack's generator
 * (GoogleCloudPlatform/buildpacks, cmd/nodejs/functions_framework/bytecode_cache/main.js), it loads
 * the function's module, not functions-framework's server, and needs no Firestore.
 *
 * @throws if that process fails.
 */
export async function fillCompileCache(
  dir: string,
  source: string,
  env: Readonly<Record<string, string>> = {},
): Promise<void> {
  const fill = [
    "const m = require('node:module');",
    'm.enableCompileCache(process.argv[1]);',
    'require(process.argv[2]);',
    'm.flushCompileCache();',
  ].join(' ');
  const child = spawnGroup(
    process.execPath,
    ['-e', fill, dir, join(ROOT, source)],
    {
      cwd: ROOT,
      env: { ...process.env, ...env },
    },
  );
  await child.exited;
  if (child.exitCode !== 0) {
    throw new Error(
      `filling the compile cache from ${source} failed:\n${child.output()}`,
    );
  }
}

/**
 * Starts each variant `reps` times (or its own `starts`), interleaved with the order rotating, and
 * times (ms) from spawn until it listens and until its first delivery, a new run, is answered 200,
 * with the CPU time its process used until then. Functions are stopped with SIGKILL, so no start
 * writes to a compile cache: each one meets the cache as it was filled.
 *
 * @throws if a first delivery is not answered 200, or a start without a `timeoutMs` fails.
 */
export async function measureColdStarts(
  variants: readonly ColdStartVariant[],
  reps: number,
) {
  const samples = variants.map(() => ({
    listening: [] as number[],
    first200: [] as number[],
    cpu: [] as number[],
    timedOut: false,
  }));
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < variants.length; k++) {
      const index = (rep + k) % variants.length;
      const variant = variants[index] as ColdStartVariant;
      const sample = samples[index];
      if (
        sample === undefined ||
        sample.timedOut ||
        rep >= (variant.starts ?? reps)
      ) {
        continue;
      }
      const started = await coldStart(variant);
      if (started === 'timed out') {
        sample.timedOut = true;
      } else {
        sample.listening.push(started.listening);
        sample.first200.push(started.first200);
        sample.cpu.push(started.cpu);
      }
    }
  }
  return variants.map(({ key, label, timeoutMs }, i) => ({
    key,
    label: label ?? COLD_STARTS[key],
    listening: summarise(samples[i]?.listening ?? []),
    first200: summarise(samples[i]?.first200 ?? []),
    /** CPU time of the function's process from spawn to its first 200, ms. */
    cpu: summarise(samples[i]?.cpu ?? []),
    /** The bound a start missed, ms; absent when every start made it. */
    ...(samples[i]?.timedOut ? { timedOutMs: timeoutMs } : {}),
  }));
}
export type ColdStart = Awaited<ReturnType<typeof measureColdStarts>>[number];

/** One start of `variant` to its first 200, or `'timed out'` if it missed its `timeoutMs`. */
async function coldStart({
  key,
  target,
  source,
  env,
  timeoutMs,
}: ColdStartVariant) {
  const bound = timeoutMs ?? 30_000;
  let fn: FunctionProcess;
  try {
    fn = await startFunction(target, source, env, bound);
  } catch (err) {
    if (timeoutMs === undefined || !String(err).includes('timed out after')) {
      throw err;
    }
    return 'timed out';
  }
  try {
    const elapsed = performance.now() - fn.spawnedAt;
    const left =
      timeoutMs === undefined
        ? 30_000
        : Math.max(1, Math.ceil(bound - elapsed));
    const answer = await deliver(fn.url, undefined, left).catch(
      (err: unknown) => {
        if (
          timeoutMs === undefined ||
          !(err instanceof Error && err.name === 'TimeoutError')
        ) {
          throw err;
        }
        return 'timed out' as const;
      },
    );
    if (answer === 'timed out') {
      return answer;
    }
    const first200 = performance.now() - fn.spawnedAt;
    const cpu = fn.cpuMs();
    if (answer.status !== 200) {
      throw new Error(
        `${COLD_STARTS[key]}: first delivery got ${answer.status}\n${fn.output()}`,
      );
    }
    return { listening: fn.listenMs, first200, cpu };
  } finally {
    await fn.stop();
  }
}
