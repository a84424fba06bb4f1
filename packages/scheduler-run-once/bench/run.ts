/**
 * `npm run bench`: what de-duplication costs, next to (a) a literal port of the Scheduler guide's
 * Python sample and (b) the floor of one create() + one update() per run, against the Firestore
 * emulator. Prints tables and writes the same figures as JSON.
 *
 *   node scripts/with-emulator.ts -- node bench/run.ts [--smoke] [--out=FILE]
 *
 * `--smoke`: few runs, storms of 5, no throughput, one cold start of five of the seven variants
 * (`SMOKE_COLD_STARTS`); for the tests.
 * A full run exits 1 when a target is missed (`bench/report.ts`, `targets`); a smoke run never
 * judges (its figures are a handful of samples).
 * `--out`: where the JSON goes (default `bench/results.json`, git-ignored). In-process figures run
 * `src/`; function processes run the compiled package, `dist/` (built first if missing). Every load is bounded and goes
 * to 127.0.0.1.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Storm } from './figures.ts';
import { measureHistory } from './history.ts';
import {
  firestoreAt,
  freshCollection,
  LEDGERS,
  measureLedgers,
  STORM_LEDGERS,
  stormInProcess,
} from './in-process.ts';
import {
  COLD_STARTS,
  type ColdStart,
  type ColdStartKey,
  type ColdStartVariant,
  deliver,
  fillCompileCache,
  measureColdStarts,
  measureProcessedRuns,
  measureThroughput,
  type ProcessedRuns,
  ROOT,
  startFunction,
  stormOverHttp,
  type Throughput,
} from './over-http.ts';
import { type Results, render, targets } from './report.ts';
import { startWireCounter, type WireCounter } from './wire-counter.ts';

const SMOKE = process.argv.includes('--smoke');
const OUT =
  process.argv.find((a) => a.startsWith('--out='))?.slice('--out='.length) ??
  join(ROOT, 'bench/results.json');

const FULL = {
  /** Timed runs (and a duplicate of each) per ledger, after `warmup` untimed ones. */
  runs: 40,
  warmup: 10,
  /** Timed processed runs over HTTP per function, after `warmup` untimed ones: a median of a few
   * milliseconds each needs more samples than the ledgers' to hold still from run to run. */
  httpRuns: 200,
  /** Runs and duplicates per ledger whose Firestore calls are counted. */
  counted: 20,
  /**
   * Processed runs over HTTP whose Firestore calls are counted, after `warmup` untimed ones that
   * see the instance's first missed-run check (a day back) and its catch-up done.
   */
  httpCalls: { warmup: 70, counted: 60 },
  stormSizes: [20, 50, 200],
  /** Per throughput level. */
  seconds: 2,
  concurrencies: [1, 10, 50],
  /** Per cold-start variant (7 variants, interleaved). */
  coldStarts: 10,
  /**
   * The many-jobs cold start: how many jobs it declares, at most how many starts, and the bound
   * on each (a start past it is recorded as a miss and ends the variant, so it costs one bound).
   */
  manyJobs: { jobs: 2000, starts: 5, timeoutMs: 20_000 },
  /** The cold-start variants started (every one unless a smoke run names fewer). */
  coldStartKeys: Object.keys(COLD_STARTS) as readonly ColdStartKey[],
};
/**
 * The cold-start variants a smoke run starts: each fixture (hello, floor, project) and each kind
 * of compile cache (the entry's, the platform's) once, and the many jobs. The other two are only
 * combinations of these: the floor with the platform's cache (its fixture starts as `floor`, that
 * cache as `projectPlatformCache`), and the project without a cache (its fixture, `noop.js`, serves
 * the storms and the processed runs over HTTP, uncached).
 */
const SMOKE_COLD_STARTS: readonly ColdStartKey[] = [
  'hello',
  'floor',
  'projectCache',
  'projectPlatformCache',
  'projectManyJobs',
];
const PLAN = SMOKE
  ? {
      ...FULL,
      runs: 5,
      httpRuns: 5,
      warmup: 2,
      counted: 3,
      httpCalls: { warmup: 2, counted: 3 },
      stormSizes: [5],
      coldStarts: 1,
      manyJobs: { ...FULL.manyJobs, jobs: 20 },
      coldStartKeys: SMOKE_COLD_STARTS,
    }
  : FULL;

const CLOCK_ZERO = performance.now();
function progress(message: string): void {
  console.error(
    `bench [${((performance.now() - CLOCK_ZERO) / 1000).toFixed(1)} s]: ${message}`,
  );
}

/** The machine, and the emulator's version where the gcloud apt package puts it. */
function machine() {
  const snapshot =
    '/usr/lib/google-cloud-sdk/.install/cloud-firestore-emulator.snapshot.json';
  const version = existsSync(snapshot)
    ? /"version_string": *"([^"]+)"/.exec(readFileSync(snapshot, 'utf8'))?.[1]
    : undefined;
  return {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    emulator: version
      ? `cloud-firestore-emulator ${version}`
      : process.env.FIRESTORE_EMULATOR_JAR,
    loadAverage: os.loadavg().map((l) => Math.round(l * 10) / 10),
  };
}

/** Storms through the built function and through (a)'s fixture, both with a 1 s job. */
async function httpStorms(counter: WireCounter): Promise<Storm[]> {
  const env = {
    FIRESTORE_EMULATOR_HOST: counter.host,
    RUNS_COLLECTION: freshCollection('http'),
  };
  // Started side by side: nothing is timed before both listen.
  const [project, literal] = await Promise.all([
    startFunction('handleScheduledJob', 'bench/fixtures/noop.js', {
      ...env,
      BENCH_JOB_MS: '1000',
    }),
    startFunction('handleScheduledJob', 'bench/fixtures/literal-port.ts', env),
  ]);
  const fns = { [LEDGERS.project]: project, [LEDGERS.literal]: literal };
  try {
    await Promise.all(Object.values(fns).map((fn) => deliver(fn.url)));
    const storms: Storm[] = [];
    for (const size of PLAN.stormSizes) {
      for (const [ledger, fn] of Object.entries(fns)) {
        storms.push(await stormOverHttp(fn, ledger, size, counter));
        progress(
          `  HTTP, ${ledger}, ${size}: all answered in ${storms.at(-1)?.allAnsweredMs} ms`,
        );
      }
    }
    return storms;
  } finally {
    await Promise.all(Object.values(fns).map((fn) => fn.stop()));
  }
}

/**
 * Processed runs over HTTP, one at a time, side by side: the project with a no-op job and the
 * floor of one create() + one update() per request (bench/fixtures/firestore-create-update.js),
 * both against the emulator directly, missed-run detection on as shipped. Issue 20's target
 * compares the two.
 */
async function httpRuns(): Promise<ProcessedRuns[]> {
  // BENCH_JOB_SILENT: the no-op job writes no line of its own; the floor has no job at all.
  const env = {
    RUNS_COLLECTION: freshCollection('http-runs'),
    BENCH_JOB_SILENT: '1',
  };
  // Started side by side: nothing is timed before both listen.
  const [project, floor] = await Promise.all([
    startFunction('handleScheduledJob', 'bench/fixtures/noop.js', env),
    startFunction(
      'firestoreCreateUpdate',
      'bench/fixtures/firestore-create-update.js',
      env,
    ),
  ]);
  const fns = [
    ['project (no-op job)', project],
    ['floor: create() + update()', floor],
  ] as const;
  try {
    return await measureProcessedRuns(fns, PLAN.httpRuns, PLAN.warmup);
  } finally {
    await Promise.all(fns.map(([, fn]) => fn.stop()));
  }
}

/**
 * The Firestore calls of each processed run over HTTP, counted on the wire, missed-run detection
 * on as shipped: a per-minute job's runs, one at a time, after enough untimed ones that the
 * instance's first check (a day back) and its catch-up are done. An hour of slots holds one due
 * delivery.
 *
 * @returns how many runs made each number of calls.
 */
async function httpCalls(
  counter: WireCounter,
): Promise<Record<string, number>> {
  const fn = await startFunction(
    'handleScheduledJob',
    'bench/fixtures/noop.js',
    {
      FIRESTORE_EMULATOR_HOST: counter.host,
      RUNS_COLLECTION: freshCollection('http-calls'),
    },
  );
  try {
    for (let i = 0; i < PLAN.httpCalls.warmup; i++) {
      await deliver(fn.url);
    }
    const runs: Record<string, number> = {};
    for (let i = 0; i < PLAN.httpCalls.counted; i++) {
      counter.reset();
      const { status } = await deliver(fn.url);
      if (status !== 200) {
        throw new Error(`a counted run answered ${status}`);
      }
      const calls = String(counter.calls());
      runs[calls] = (runs[calls] ?? 0) + 1;
    }
    return runs;
  } finally {
    await fn.stop();
  }
}

/** Distinct runs per second through the project (no-op job) and hello world. */
async function throughput(): Promise<Throughput[]> {
  const fns = [
    [
      'project (no-op job)',
      await startFunction('handleScheduledJob', 'bench/fixtures/noop.js', {
        RUNS_COLLECTION: freshCollection('throughput'),
      }),
    ],
    ['hello world', await startFunction('hello', 'bench/fixtures/hello.js')],
  ] as const;
  try {
    for (const fn of fns) {
      await measureThroughput(fn, 10, 1); // warm-up
    }
    const results: Throughput[] = [];
    for (const concurrency of PLAN.concurrencies) {
      for (const fn of fns) {
        results.push(await measureThroughput(fn, concurrency, PLAN.seconds));
      }
    }
    return results;
  } finally {
    await Promise.all(fns.map(([, fn]) => fn.stop()));
  }
}

/**
 * Cold starts of hello world, the floor (functions-framework + Firestore client + one create()) and
 * the project with one job, without a compile cache, with the one its entry turns on (filled as
 * `gcp-build` fills it) and with the buildpack's (NODE_COMPILE_CACHE, filled as its generator fills
 * it); and the project as deployed with `PLAN.manyJobs.jobs` declared jobs of distinct schedules and
 * zones (`bench/fixtures/bench-jobs.js`), from the same cache: the same files, only more jobs.
 */
async function coldStarts(): Promise<ColdStart[]> {
  const caches = mkdtempSync(join(os.tmpdir(), 'bench-compile-cache-'));
  const cache = (name: string) => join(caches, name);
  const env = { RUNS_COLLECTION: freshCollection('coldstart') };
  const floor = {
    target: 'firestoreCreate',
    source: 'bench/fixtures/firestore-create.js',
    env,
  };
  const oneJob = { ...env, BENCH_JOBS: '1' };
  const project = {
    target: 'handleScheduledJob',
    source: 'bench/fixtures/noop.js',
    env: oneJob,
  };
  const { jobs, starts, timeoutMs } = PLAN.manyJobs;
  const started = (key: ColdStartKey) => PLAN.coldStartKeys.includes(key);
  try {
    if (started('floorPlatformCache')) {
      await fillCompileCache(cache('floor-platform'), floor.source, env);
    }
    await fillCompileCache(cache('project'), project.source, oneJob);
    await fillCompileCache(cache('project-platform'), project.source, oneJob);
    const asDeployed = {
      ...project,
      source: 'bench/fixtures/noop-entry.cjs',
      env: { ...oneJob, BENCH_COMPILE_CACHE: cache('project') },
    };
    const variants: ColdStartVariant[] = [
      { key: 'hello', target: 'hello', source: 'bench/fixtures/hello.js' },
      { key: 'floor', ...floor },
      {
        key: 'floorPlatformCache',
        ...floor,
        env: { ...env, NODE_COMPILE_CACHE: cache('floor-platform') },
      },
      { key: 'project', ...project },
      { key: 'projectCache', ...asDeployed },
      {
        key: 'projectPlatformCache',
        ...project,
        env: { ...oneJob, NODE_COMPILE_CACHE: cache('project-platform') },
      },
      {
        key: 'projectManyJobs',
        label: `project, ${jobs} declared jobs (${jobs - 2} distinct schedules and zones), as deployed`,
        ...asDeployed,
        env: { ...asDeployed.env, BENCH_JOBS: String(jobs) },
        starts,
        timeoutMs,
      },
    ];
    return await measureColdStarts(
      variants.filter((variant) => started(variant.key)),
      PLAN.coldStarts,
    );
  } finally {
    rmSync(caches, { recursive: true, force: true });
  }
}

/** Runs the bench against the emulator (`npm run bench`): measures, prints, writes results.json. */
async function main(): Promise<void> {
  const emulator = process.env.FIRESTORE_EMULATOR_HOST;
  if (!emulator) {
    console.error(
      'bench: FIRESTORE_EMULATOR_HOST is not set; run `npm run bench`.',
    );
    process.exit(2);
  }
  if (!existsSync(join(ROOT, 'dist/index.js'))) {
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
  }
  const host = machine();
  const counter = await startWireCounter(emulator);
  const stores: BenchStores = {
    direct: firestoreAt(emulator),
    viaCounter: firestoreAt(counter.host),
    counter,
  };
  try {
    const results = await measureAll(stores);
    reportResults(results, host);
  } finally {
    await Promise.all([
      stores.direct.terminate(),
      stores.viaCounter.terminate(),
    ]);
    counter.close();
  }
}

/** The emulator, straight and through the wire counter, and the counter itself. */
interface BenchStores {
  readonly direct: ReturnType<typeof firestoreAt>;
  readonly viaCounter: ReturnType<typeof firestoreAt>;
  readonly counter: Awaited<ReturnType<typeof startWireCounter>>;
}

/** Every measure of the plan, in order: ledgers, storms, HTTP runs and calls, throughput, cold starts, history. */
async function measureAll(stores: BenchStores): Promise<Results> {
  const { direct, viaCounter, counter } = stores;
  progress(
    `ledgers: ${PLAN.runs} runs and duplicates each, interleaved, then calls counted`,
  );
  const ledgers = await measureLedgers(direct, viaCounter, counter, PLAN);
  progress(
    `storms of ${PLAN.stormSizes.join(', ')} in process, then over HTTP`,
  );
  const storms = await inProcessStorms(stores);
  storms.push(...(await httpStorms(counter)));
  progress(
    `processed runs over HTTP: ${PLAN.httpRuns} each, the project and the floor interleaved`,
  );
  const processed = await httpRuns();
  progress('Firestore calls of processed runs over HTTP, missed-run check on');
  const calls = await httpCalls(counter);
  let rates: Results['throughput'] = [];
  if (!SMOKE) {
    progress(
      `throughput at ${PLAN.concurrencies.join(', ')} connections, ${PLAN.seconds} s each`,
    );
    rates = await throughput();
  }
  progress(
    `cold starts: ${PLAN.coldStarts} per function (${PLAN.manyJobs.jobs} jobs: at most ${PLAN.manyJobs.starts}, ${PLAN.manyJobs.timeoutMs / 1000} s each), interleaved`,
  );
  const starts = await coldStarts();
  const days = SMOKE ? 1 : 30;
  progress(
    `run history: an audit of ${days} days of a */5 job, and a run with its check`,
  );
  const history = await measureHistory(direct, viaCounter, counter, days);
  return {
    ledgers,
    storms,
    httpRuns: processed,
    httpCalls: calls,
    throughput: rates,
    coldStarts: starts,
    history,
  };
}

/** The storms in process: each size, against each ledger. */
async function inProcessStorms(stores: BenchStores): Promise<Storm[]> {
  const storms: Storm[] = [];
  for (const size of PLAN.stormSizes) {
    for (const key of Object.keys(
      STORM_LEDGERS,
    ) as (keyof typeof STORM_LEDGERS)[]) {
      storms.push(
        await stormInProcess(key, size, stores.viaCounter, stores.counter),
      );
      progress(
        `  in process, ${key}, ${size}: all answered in ${storms.at(-1)?.allAnsweredMs} ms`,
      );
    }
  }
  return storms;
}

/**
 * Prints the results, writes them with the targets judged to results.json, and (not in a smoke
 * run) sets exit status 1 when a target is missed.
 */
function reportResults(
  results: Results,
  host: ReturnType<typeof machine>,
): void {
  const wallSeconds = Math.round((performance.now() - CLOCK_ZERO) / 100) / 10;
  const mode = SMOKE ? 'smoke' : 'full';
  const load = `load average ${host.loadAverage[0]} at the start, ${os.loadavg()[0]?.toFixed(1)} at the end`;
  console.log(render(results, `${mode} run, ${wallSeconds} s, ${load}`));
  const json = { mode, wallSeconds, machine: host, plan: PLAN, ...results };
  const judged = targets(results);
  writeFileSync(
    OUT,
    `${JSON.stringify({ ...json, targets: judged }, null, 2)}\n`,
  );
  progress(`wrote ${OUT}`);
  const missed = judged.filter((t) => !t.met);
  // A smoke run's few samples on a busy machine judge nothing: it only shows the bench runs.
  if (missed.length > 0 && !SMOKE) {
    console.error(
      `bench: ${missed.length} of ${judged.length} targets missed: ${missed.map((t) => t.target).join('; ')}`,
    );
    process.exitCode = 1;
  }
}

await main();
