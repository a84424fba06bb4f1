/**
 * The library's whole suite (`npm run test:all`) in lanes that run at once, on the emulator that
 * `scripts/with-emulator.ts` names in `FIRESTORE_EMULATOR_HOST`:
 *
 * - **shared**: the unit tests and the emulator tests that start no process of their own, dealt to
 *   {@link SHARED_PROCESSES} processes that each run their files one after another
 *   (`--experimental-test-isolation=none`). Each of these files would otherwise pay about a
 *   second of CPU to load Node, the library and the Firestore client for a few seconds of tests,
 *   most of them waiting on leases and timers.
 * - **deploy.sh**: the tests of `deploy.sh` ({@link DEPLOY_TESTS}), one after another in one
 *   process, where they share the dry runs of the deploy harness.
 * - **isolated**: every other test file, a process each, {@link CONCURRENCY} at a time, the
 *   longest first ({@link LONGEST_FIRST}) so that no long file starts last and runs alone.
 *
 * The isolated lane reports as it goes; each shared process's report is printed whole when it
 * ends, and the failures of every failed lane are printed again at the very end, where a log's
 * tail shows them. Exits 1 if a test of any lane failed, if a lane's report did not come whole, or
 * if a lane ran past {@link LANE_LIMIT_MS}. A new test file runs in the isolated lane unless
 * listed in {@link SHARED}: a file there must start no process and leave no state another file
 * could see.
 *
 * No lane forces its processes to exit (`--test-force-exit`): with files run at once, a forced
 * exit can cut a file's report short, and the tests it cut are then missing from the report while
 * the lane passes (nodejs/node#64833; seen here as a lane 4 tests short). A file that leaves a
 * handle open is caught by {@link LANE_LIMIT_MS} instead.
 *
 *   node scripts/test-lanes.ts   (TEST_TIMEOUT_MS: each test's timeout, default 120000)
 */
import { spawn } from 'node:child_process';
import { existsSync, globSync } from 'node:fs';
import { setPriority } from 'node:os';
import path from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

const ROOT = path.resolve(import.meta.dirname, '..');

/** Test files a process each may run at once (the isolated lane). */
const CONCURRENCY = 3;

/** Processes the shared lane's files are dealt to, one file after another in each. */
const SHARED_PROCESSES = 2;

/** Each test's timeout, ms: a hung test fails in bounded time (`--test-timeout`). */
const TIMEOUT_MS = Number(process.env.TEST_TIMEOUT_MS ?? 120_000);

/**
 * Longest a lane may run, ms: then it is stopped and fails, naming what had not ended. A test that
 * hangs fails at {@link TIMEOUT_MS}; this catches a file whose tests ended but whose process did
 * not (a server, a timer or a client left open). About twice the longest lane on 2 cores.
 */
const LANE_LIMIT_MS = 10 * 60_000;

/** Where the test files are; `test/fixtures` holds none. */
const TEST_GLOBS = [
  'test/unit/**/*.test.ts',
  'test/*.test.ts',
  'test/integration/**/*.test.ts',
  'test/sim/**/*.test.ts',
];

/**
 * The emulator tests run in the shared processes (besides every unit test). Those that start
 * processes (`catch-up-race`, `late-answers`) mostly wait on them; their `after` hooks, as every
 * top-level hook of a shared process, run once all its files have run.
 */
const SHARED = [
  'test/auth.test.ts',
  'test/catch-up-faults.test.ts',
  'test/catch-up-warnings.test.ts',
  'test/catch-up.test.ts',
  'test/force-run.test.ts',
  'test/handler.test.ts',
  'test/lease-heartbeat.test.ts',
  'test/ledger.test.ts',
  'test/local-scheduler.test.ts',
  'test/missed-runs.test.ts',
  'test/notes.test.ts',
  'test/pauses.test.ts',
  'test/run-documents.test.ts',
  'test/run-once.test.ts',
  'test/run-plan.test.ts',
  'test/schedule-time.test.ts',
  'test/integration/catch-up-race.test.ts',
  'test/integration/cloud-build-example.test.ts',
  'test/integration/cloud-run-job-example.test.ts',
  'test/integration/late-answers.test.ts',
  'test/integration/proxy-blind-spots.test.ts',
  'test/integration/runs-html.test.ts',
  'test/integration/workflows-example.test.ts',
  'test/sim/memory-firestore.test.ts',
];

/**
 * The tests of `deploy.sh`, in one process of their own: there they share one instance of
 * `test/fixtures/deploy-harness.ts`, so a dry run one file makes is reused by the others (its
 * inputs, arguments and the files it names unchanged) instead of run again, each about a second.
 */
const DEPLOY_TESTS = [
  'test/integration/deploy-dry-run.test.ts',
  'test/integration/deploy-gcloud-parser.test.ts',
  'test/integration/deploy-inputs.test.ts',
  'test/integration/deploy-project.test.ts',
  'test/integration/deploy-run-path.test.ts',
];

/** The isolated lane's longest files (measured on 2 cores), started first, longest first. */
const LONGEST_FIRST = [
  'test/integration/faults.test.ts',
  'test/sim/simulation.test.ts',
  'test/detection.test.ts',
  'test/integration/clock-skew.test.ts',
  'test/integration/runs-cli.test.ts',
  'test/integration/dev.test.ts',
  'test/integration/bench-smoke.test.ts',
  'test/integration/upload-build.test.ts',
  'test/integration/run-once-cli.test.ts',
  'test/integration/pack.test.ts',
  'test/integration/trigger-cli.test.ts',
  'test/integration/demo-warnings.test.ts',
];

/** The outcome of one lane. */
interface LaneResult {
  readonly name: string;
  readonly failed: boolean;
  readonly seconds: number;
  /** What to print again at the end when it failed: its failing tests, or why its report is not whole. */
  readonly failures: string;
}

/** Where the spec reporter's closing list of failed tests begins. */
const FAILURES_HEADING = '✖ failing tests:';

/** The spec reporter's closing list of failed tests in `report`, or '' if it has none. */
function failuresIn(report: string): string {
  const at = report.lastIndexOf(FAILURES_HEADING);
  return at === -1 ? '' : report.slice(at);
}

/** Every test file, relative to the package, sorted. */
function testFiles(): string[] {
  const found = TEST_GLOBS.flatMap((pattern) =>
    globSync(pattern, { cwd: ROOT }),
  );
  return [...new Set(found)].sort();
}

/** Throws naming a listed file that no longer exists, so that neither list rots unseen. */
function assertListed(files: readonly string[], all: readonly string[]): void {
  for (const file of files) {
    if (!all.includes(file) || !existsSync(path.join(ROOT, file))) {
      throw new Error(
        `scripts/test-lanes.ts lists ${file}, which is not a test file: update the list`,
      );
    }
  }
}

/** Seconds since `started` (`performance.now()`), one decimal. */
function secondsSince(started: number): number {
  return Math.round((performance.now() - started) / 100) / 10;
}

/** The closing summary's count line, which a whole spec report has. */
const SUMMARY_LINE = /^ℹ tests \d+$/m;

/** Runs `files` in one `node --test` process; prints its report whole once it has ended. */
function runShared(
  name: string,
  files: readonly string[],
): Promise<LaneResult> {
  const started = performance.now();
  const args = [
    '--test',
    '--experimental-test-isolation=none',
    `--test-timeout=${TIMEOUT_MS}`,
    ...files,
  ];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const report: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => report.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => report.push(chunk));
    let overran = false;
    const limit = setTimeout(() => {
      overran = true;
      child.kill('SIGKILL');
    }, LANE_LIMIT_MS);
    child.on('close', (code) => {
      clearTimeout(limit);
      const text = Buffer.concat(report).toString('utf8');
      process.stdout.write(
        `\n── ${name} lane: ${files.length} test files in one process ──\n${text}`,
      );
      const whole = SUMMARY_LINE.test(text);
      let failures = failuresIn(text);
      if (overran) {
        failures += `\n${name} lane: stopped after ${LANE_LIMIT_MS / 60_000} min: one of its files left a handle open (a server, a timer, a client) or its tests took far longer than usual\n`;
      } else if (!whole) {
        failures += `\n${name} lane: its report has no closing summary (ℹ tests): the process ended before it finished reporting, so some tests' results are missing\n`;
      }
      resolve({
        name,
        failed: code !== 0 || overran || !whole,
        seconds: secondsSince(started),
        failures,
      });
    });
  });
}

/**
 * Runs `files` a process each, in the order given, reporting as it goes. Each file's process
 * reports a summary of its own as it ends (`test:summary` with its `file`): a file without one
 * ended before its report was whole, and fails the lane.
 */
function runIsolated(files: readonly string[]): Promise<LaneResult> {
  const started = performance.now();
  const paths = files.map((file) => path.join(ROOT, file));
  const stopped = new AbortController();
  const limit = setTimeout(() => stopped.abort(), LANE_LIMIT_MS);
  let failures = 0;
  const summarised = new Set<string>();
  const stream = run({
    files: paths,
    concurrency: CONCURRENCY,
    timeout: TIMEOUT_MS,
    cwd: ROOT,
    signal: stopped.signal,
  });
  stream.on('test:fail', () => {
    failures += 1;
  });
  stream.on('test:summary', (summary) => {
    if (summary.file !== undefined) {
      summarised.add(summary.file);
    }
  });
  const report = stream.compose(spec);
  const kept: Buffer[] = [];
  report.on('data', (chunk: Buffer | string) => kept.push(Buffer.from(chunk)));
  report.pipe(process.stdout, { end: false });
  return new Promise((resolve) => {
    report.on('end', () => {
      clearTimeout(limit);
      const unreported = files.filter(
        (_, i) => !summarised.has(paths[i] as string),
      );
      let text = failuresIn(Buffer.concat(kept).toString('utf8'));
      if (stopped.signal.aborted) {
        text += `\nisolated lane: stopped after ${LANE_LIMIT_MS / 60_000} min\n`;
      }
      if (unreported.length > 0) {
        text += `\nisolated lane: no whole report from ${unreported.join(', ')}: its process ended before it finished reporting, or never ended (a handle left open), so some tests' results are missing\n`;
      }
      resolve({
        name: 'isolated',
        failed: failures > 0 || unreported.length > 0,
        seconds: secondsSince(started),
        failures: text,
      });
    });
  });
}

/**
 * The niceness of this process and of every test process it starts: below the emulator's, which
 * `with-emulator.ts` started before this script. Every test waits on that one emulator, so when
 * the tests' processes take both cores it falls behind, and every test waiting on it with it.
 */
const TESTS_NICENESS = 5;

/** Splits the suite into its lanes and runs both at once; resolves to the exit status. */
async function main(): Promise<number> {
  setPriority(TESTS_NICENESS);
  const all = testFiles();
  const listed = [...SHARED, ...DEPLOY_TESTS, ...LONGEST_FIRST];
  assertListed(listed, all);
  const twice = listed.filter((file, i) => listed.indexOf(file) !== i);
  if (twice.length > 0) {
    throw new Error(
      `scripts/test-lanes.ts lists ${twice.join(', ')} in two lanes: keep each file in one`,
    );
  }
  const shared = all.filter(
    (file) => file.startsWith('test/unit/') || SHARED.includes(file),
  );
  const rest = all.filter(
    (file) => !shared.includes(file) && !DEPLOY_TESTS.includes(file),
  );
  const isolated = [
    ...LONGEST_FIRST,
    ...rest.filter((file) => !LONGEST_FIRST.includes(file)),
  ];
  const sharedLanes = Array.from({ length: SHARED_PROCESSES }, (_, lane) =>
    runShared(
      `shared ${lane + 1}`,
      shared.filter((_, i) => i % SHARED_PROCESSES === lane),
    ),
  );
  const deployLane = runShared('deploy.sh', DEPLOY_TESTS);
  const results = await Promise.all([
    ...sharedLanes,
    deployLane,
    runIsolated(isolated),
  ]);
  for (const lane of results.filter((result) => result.failed)) {
    console.log(
      `\n── what failed in the ${lane.name} lane ──\n${lane.failures}`,
    );
  }
  for (const lane of results) {
    const verdict = lane.failed ? 'FAILED' : 'passed';
    console.log(
      `test-lanes: ${lane.name} lane ${verdict} in ${lane.seconds} s`,
    );
  }
  return results.some((lane) => lane.failed) ? 1 : 0;
}

process.exitCode = await main();
