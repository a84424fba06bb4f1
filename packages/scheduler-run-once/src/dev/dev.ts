/**
 * `npm run dev`: the Firestore emulator, the function built from `src/`, and a local Cloud
 * Scheduler firing the declared jobs at it, in one terminal; Ctrl-C stops all of them.
 *
 *   node scripts/dev.ts [--drop-answers RATE] [--duplicates RATE] [--keep-data [--data-dir DIR]]
 *                       [--fire JOB [--without-schedule-time]] [--no-scheduler] [--no-watch] [--no-build]
 *                       [--source FILE --target NAME] [--host ADDRESS]
 *
 * - The function runs as deployed (`functions-framework --target=handleScheduledJob`, the built
 *   project: its package.json `main` and `build/`; `--source FILE --target NAME` serves another
 *   module's function instead, as functions-framework's own flags do, e.g. a test's with jobs of its own) on `PORT` (8080), with Node's source maps on, so stack traces name
 *   `src/*.ts` lines, and with `EXPOSE_ERRORS=true`, so answers carry the error text. Its JSON log
 *   lines are shown readable (`scripts/pretty-logs.ts`).
 * - Watch mode: a change under `src/`, in any subfolder, and under the library's `src/` when it
 *   runs from its sources (a workspace checkout), rebuilds (`tsc -p tsconfig.build.json`) and
 *   restarts the function (`watch-sources.ts`: recursive, debounced, ignoring `node_modules/`,
 *   build output and dev's state); the emulator and the Scheduler keep running, and the Scheduler re-reads the
 *   declarations. A build that fails keeps the running function. `--no-watch` turns it off;
 *   `--no-build` skips the first build and serves `build/` as it is.
 * - The Scheduler (`ops/local-scheduler.ts`, also `npm run scheduler`) prints one line per
 *   delivery; `--drop-answers` and `--duplicates` are its options; `--fire JOB` also fires JOB
 *   once at start, as a forced run (no waiting for its slot), without `X-CloudScheduler-ScheduleTime`
 *   with `--without-schedule-time` (the console's Force run may omit it); `--no-scheduler` leaves it out.
 *   With `AUTH_MODE=verify-oidc` it signs each delivery's token with a local key, and the function
 *   gets `OIDC_CERTS_URL` pointing at that key's certificates (`OIDC_AUDIENCE` defaults to the
 *   function's URL, `OIDC_INVOKERS` to a made-up invoker).
 * - Everything listens on 127.0.0.1 only: the function (functions-framework alone would listen on
 *   every interface, `scripts/listen-host.ts`), the history page, the OIDC issuer, the emulator.
 *   `--host ADDRESS` (e.g. `0.0.0.0`) serves the function and the history page there instead, with
 *   a warning line: anyone who can reach it can run the jobs, unauthenticated unless
 *   `AUTH_MODE=verify-oidc`. The emulator and the OIDC issuer stay on 127.0.0.1.
 * - A history page on another port (printed at start; `HISTORY_PORT`, else a free one): each GET
 *   renders `npm run runs -- --html -` against this emulator afresh (`?since=24h&job=ID` pass on
 *   as `--since` and `--job`), the page `--html FILE` writes.
 * - The emulator starts empty each time, unless `--keep-data` (in `--data-dir`, `.emulator/` unless given):
 *   then its data is loaded at start (`--import-data`) and exported on Ctrl-C through the
 *   emulator's export endpoint. (The emulator's `--export-on-exit` flag, which gcloud passes on,
 *   exported nothing in the emulator of gcloud 528: "Failed during export".) With
 *   `FIRESTORE_EMULATOR_HOST` set, that emulator is used and its data is yours to keep.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join, resolve, sep } from 'node:path';
import { ConfigError } from '../core/errors.ts';
import { firingList, formatEvent } from '../ops/format-events.ts';
import { parseDeployLines } from '../ops/format-jobs.ts';
import { emulatorPauses } from '../ops/local-pauses.ts';
import { LocalScheduler, type SchedulerJob } from '../ops/local-scheduler.ts';
import { type OidcIssuer, startOidcIssuer } from '../ops/oidc-issuer.ts';
import {
  deliveryOptions,
  schedulerSettings,
} from '../ops/scheduler-settings.ts';
import {
  DEV_USAGE,
  DevArgumentError,
  type DevArguments,
  readDevArguments,
} from './dev-args.ts';
import {
  commandLineOf,
  describeEarlierDev,
  type RecordedProcess,
  readLock,
  reclaimEarlierDev,
  removeLock,
  schedulerStateFile,
  stateDir,
  writeLock,
} from './dev-state.ts';
import {
  acceptsConnections,
  binPath,
  freePort,
  type GroupProcess,
  LOCAL_HOST,
  libraryModule,
  PROJECT_DIR,
  ROOT,
  spawnFunction,
  startFirestoreEmulator,
  waitFor,
  waitForPort,
} from './local-processes.ts';
import { colorWanted, prettyLogLines } from './pretty-logs.ts';
import { type WatchedDir, watchSources } from './watch-sources.ts';

const EMULATOR_START_MS = 90_000;
const FUNCTION_START_MS = 60_000;
/** How long a stopping function may drain its jobs before it is killed (Cloud Run's 10 s). */
const FUNCTION_STOP_MS = 10_000;
/** Edits arrive in bursts (an editor writes, renames, touches): build once they stop. */
const WATCH_QUIET_MS = 300;
const EXPORT_NAME = 'firestore';
/** The export kept while the next one is moved in, so a crash then still leaves one. */
const PREVIOUS_EXPORT_NAME = `${EXPORT_NAME}.previous`;
/**
 * How often `--keep-data` exports the emulator's data, ms: a crash (kill -9, no Ctrl-C) loses at
 * most the writes of this long. `RUN_ONCE_DEV_EXPORT_SECONDS` sets it (the tests use 1 s).
 */
const EXPORT_INTERVAL_MS =
  Number(process.env.RUN_ONCE_DEV_EXPORT_SECONDS || '60') * 1000;
/** How long the processes an earlier, crashed dev left running may take to exit once killed. */
const LEFTOVERS_STOP_MS = 10_000;

function say(text: string): void {
  console.log(`dev: ${text}`);
}

function fail(text: string): never {
  console.error(`dev: ${text}`);
  process.exit(1);
}

/**
 * TypeScript's `tsc`, which builds the project (and the library from its sources): a project that
 * installed the package but not TypeScript is told what to install, in one line.
 */
function tscPath(): string {
  try {
    return binPath('tsc');
  } catch {
    return fail(
      'npm run dev builds src/ with TypeScript, which is not installed here: npm install --save-dev typescript',
    );
  }
}
const TSC = tscPath();

/** Exit status for a bad argument, as every `run-once` command has it (docs/operations.md). */
const EXIT_BAD_ARGUMENT = 2;

/** Refuses a bad argument: `text` and the usage, exit 2. */
function badArgument(text: string): never {
  console.error(`dev: ${text}\n${DEV_USAGE}`);
  process.exit(EXIT_BAD_ARGUMENT);
}

/** The arguments and `PORT`, checked (`dev-args.ts`, as `run-once` checked them already). */
function readArguments(): DevArguments {
  try {
    return readDevArguments(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof DevArgumentError) {
      badArgument(err.message);
    }
    throw err;
  }
}
const { options, port, host, dropAnswers, duplicates } = readArguments();
if (options.help) {
  console.log(DEV_USAGE);
  process.exit(0);
}

// Outside a project nothing below can work: say so before the emulator starts.
const jobsModule = process.env.JOBS_MODULE || 'src/jobs.ts';
if (!existsSync(resolve(PROJECT_DIR, jobsModule))) {
  fail(
    `no ${jobsModule} in ${PROJECT_DIR}: run npm run dev in your project's directory (the one with package.json and src/jobs.ts)`,
  );
}

// Ctrl-C or SIGTERM while starting exits at once, and exiting kills every process group started
// here (scripts/local-processes.ts): the emulator and the function lead groups of their own, so a
// terminal's Ctrl-C never reaches them. Once started, shutDown stops each part in turn.
let started = false;
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (!started) {
      say('stopping (interrupted while starting)');
    }
    // A second Ctrl-C does not wait either.
    if (!started || stopping) {
      process.exit(130);
    }
    void shutDown();
  });
}

/** Where the Scheduler and the page reach what listens on `host`: this machine for a wildcard. */
const reachHost = ['0.0.0.0', '::', '[::]'].includes(host) ? LOCAL_HOST : host;
const urlHost = reachHost.includes(':') ? `[${reachHost}]` : reachHost;
const functionUrl = `http://${urlHost}:${port}/`;
const project = process.env.GOOGLE_CLOUD_PROJECT || 'demo-scheduler-run-once';
const verifyOidc = process.env.AUTH_MODE === 'verify-oidc';
// This process reads the emulator too (the local Scheduler's pauses): no Google metadata server.
process.env.METADATA_SERVER_DETECTION ||= 'none';
/** The function's environment, and the Scheduler's: one environment, as the README says. */
const env: Record<string, string | undefined> = {
  ...process.env,
  GOOGLE_CLOUD_PROJECT: project,
  METADATA_SERVER_DETECTION: process.env.METADATA_SERVER_DETECTION || 'none',
  // Development: answers carry the error text and the declared job ids (config.ts, whyNotDevelopment).
  EXPOSE_ERRORS: process.env.EXPOSE_ERRORS || 'true',
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --enable-source-maps`.trim(),
  ...(verifyOidc
    ? {
        OIDC_AUDIENCE: process.env.OIDC_AUDIENCE || functionUrl,
        OIDC_INVOKERS:
          process.env.OIDC_INVOKERS || 'local-scheduler@dev.invalid',
      }
    : {}),
};

// An earlier dev in this project: refused while it runs; after its crash, what it left running
// (the function on this port, the emulator) is stopped first (`dev-state.ts`).
const devStateDir = stateDir(PROJECT_DIR);
const earlier = reclaimEarlierDev(devStateDir);
if (earlier.kind === 'running') {
  fail(describeEarlierDev(earlier, devStateDir));
}
if (earlier.kind === 'crashed') {
  say(describeEarlierDev(earlier, devStateDir));
  const gone = async (child: RecordedProcess) =>
    commandLineOf(child.pid) === undefined &&
    (child.port === undefined || !(await acceptsConnections(child.port)));
  await waitFor(
    "the earlier dev's processes to exit and free their ports",
    async () =>
      (await Promise.all(earlier.stopped.map(gone))).every(Boolean)
        ? true
        : undefined,
    LEFTOVERS_STOP_MS,
  ).catch(() => say('some of them have not exited yet'));
}
const startedAt = new Date().toISOString();
/** The processes this dev started, by role (`emulator`, `function`), as the lock records them. */
const recorded = new Map<string, RecordedProcess>();
/**
 * Writes the lock: this dev's pid and the processes it started; with `role`, first records (or,
 * without a pid, forgets) that process.
 */
function recordLock(
  role?: string,
  child?: GroupProcess,
  childPort?: number,
): void {
  const command =
    child?.pid === undefined ? undefined : commandLineOf(child.pid);
  if (role !== undefined && child?.pid !== undefined && command !== undefined) {
    recorded.set(role, {
      role,
      pid: child.pid,
      command,
      ...(childPort === undefined ? {} : { port: childPort }),
    });
  }
  writeLock(devStateDir, {
    pid: process.pid,
    command: commandLineOf(process.pid) ?? '',
    startedAt,
    children: [...recorded.values()],
  });
}
recordLock();
// A clean exit, however it comes, removes the lock; a crash leaves it for the next start to find.
process.on('exit', () => {
  if (readLock(devStateDir)?.pid === process.pid) {
    removeLock(devStateDir);
  }
});

if (await acceptsConnections(port, reachHost)) {
  fail(
    `port ${port} is taken: stop what listens there, or set PORT to another port`,
  );
}

/**
 * Whether the library runs from its sources (a checkout, such as the starter's workspace), not from
 * a published package: then its `dist/`, which the project's build reads the types from, is built
 * first.
 */
const LIBRARY_FROM_SOURCES =
  existsSync(join(ROOT, 'src/index.ts')) &&
  !ROOT.split(sep).includes('node_modules');

/** Runs `tsc -p tsconfig.build.json` in `dir`; prints its errors and returns false when it fails. */
function compile(dir: string): boolean {
  const result = spawnSync(
    process.execPath,
    [TSC, '-p', 'tsconfig.build.json'],
    {
      cwd: dir,
      encoding: 'utf8',
    },
  );
  if (result.status !== 0) {
    process.stdout.write(result.stdout);
    process.stderr.write(result.stderr);
    return false;
  }
  return true;
}

/** Builds the library (from its sources) and the project; false, with the errors, when one fails. */
function build(): boolean {
  const started = performance.now();
  const built =
    (!LIBRARY_FROM_SOURCES || compile(ROOT)) && compile(PROJECT_DIR);
  if (!built) {
    say('the build failed (above); the function keeps running the last build');
    return false;
  }
  const what = LIBRARY_FROM_SOURCES ? 'the library and src/' : 'src/';
  say(
    `built ${what} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  return true;
}

/** The declared jobs' settings, as `deploy.sh` reads them (`ops/jobs.ts --deploy`), or undefined. */
function readJobs(): SchedulerJob[] | undefined {
  const result = spawnSync(
    process.execPath,
    [libraryModule('ops/jobs'), '--deploy'],
    {
      cwd: PROJECT_DIR,
      encoding: 'utf8',
      env: process.env,
    },
  );
  if (result.status !== 0) {
    process.stderr.write(result.stderr);
    say(
      'the job declarations are invalid (above); the Scheduler keeps the previous ones',
    );
    return undefined;
  }
  return parseDeployLines(result.stdout);
}

/** Passes `stream`'s lines to `write`, whole lines only. */
function eachLine(
  stream: NodeJS.ReadableStream | null,
  write: (line: string) => void,
): void {
  let pending = '';
  stream?.on('data', (chunk: Buffer) => {
    const lines = (pending + chunk.toString()).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      write(line);
    }
  });
  stream?.on('end', () => {
    if (pending !== '') {
      write(pending);
    }
  });
}

// `--no-build` serves build/ as it is (the tests do, after `npm test` built it once).
if (!options['no-build'] && !build()) {
  process.exit(1);
}

// The emulator, with the data kept by an earlier run.
let emulator: GroupProcess | undefined;
let emulatorPort: number | undefined;
/** The periodic export of `--keep-data`. */
let exportTimer: NodeJS.Timeout | undefined;
/** The export under way, if any: a periodic one and the one at Ctrl-C never overlap. */
let saving: Promise<void> = Promise.resolve();
let emulatorHost = process.env.FIRESTORE_EMULATOR_HOST;
const dataDir = options['keep-data']
  ? resolve(PROJECT_DIR, options['data-dir'] ?? '.emulator')
  : undefined;
if (emulatorHost) {
  say(
    `using the Firestore emulator at ${emulatorHost} (FIRESTORE_EMULATOR_HOST)`,
  );
  if (dataDir !== undefined) {
    say('--keep-data ignored: that emulator keeps its own data');
  }
} else {
  emulatorPort = await freePort();
  emulatorHost = `127.0.0.1:${emulatorPort}`;
  const importData = dataDir === undefined ? undefined : keptExport(dataDir);
  emulator = await startFirestoreEmulator(emulatorPort, EMULATOR_START_MS, {
    ...(importData === undefined ? {} : { importData }),
  }).catch((err: Error) => fail(err.message));
  recordLock('emulator', emulator, emulatorPort);
  say(
    `Firestore emulator on ${emulatorHost}${
      dataDir === undefined
        ? ' (empty; --keep-data keeps data across runs)'
        : importData === undefined
          ? `; its data is saved to ${dataDir} every ${EXPORT_INTERVAL_MS / 1000} s and on Ctrl-C`
          : `, with the data saved in ${dataDir} (saved again every ${EXPORT_INTERVAL_MS / 1000} s and on Ctrl-C)`
    }`,
  );
  if (dataDir !== undefined) {
    exportTimer = setInterval(() => {
      void saveData({ quiet: true });
    }, EXPORT_INTERVAL_MS);
    exportTimer.unref();
  }
}
env.FIRESTORE_EMULATOR_HOST = emulatorHost;
say(
  `in another terminal, npm run runs / trigger read this emulator with: FIRESTORE_EMULATOR_HOST=${emulatorHost} GOOGLE_CLOUD_PROJECT=${project}`,
);

let issuer: OidcIssuer | undefined;
if (verifyOidc) {
  issuer = await startOidcIssuer();
  env.OIDC_CERTS_URL = issuer.certsUrl;
  say(
    `AUTH_MODE=verify-oidc: tokens signed locally, certificates at ${issuer.certsUrl}`,
  );
}

// The function, restarted on every successful build.
const pretty = prettyLogLines({
  colorize: colorWanted(process.stdout.isTTY === true, process.env),
});
let fn: GroupProcess | undefined;

async function startFunction(): Promise<void> {
  const child = spawnFunction({
    target: options.target ?? 'handleScheduledJob',
    ...(options.source === undefined ? {} : { source: options.source }),
    port,
    host,
    env,
    keep: 20_000,
  });
  fn = child;
  recordLock('function', child, port);
  eachLine(child.stdout, (line) => process.stdout.write(pretty(line)));
  eachLine(child.stderr, (line) => process.stderr.write(`${line}\n`));
  void child.exited.then(() => {
    if (fn === child && !stopping) {
      say(
        `the function exited (${child.exitCode ?? child.signalCode}); save a file under src/ to restart it`,
      );
    }
  });
  await waitForPort(port, {
    timeoutMs: FUNCTION_START_MS,
    process: child,
    host: reachHost,
  }).catch(() => {
    say('the function did not start (its output is above)');
  });
}

async function stopFunction(): Promise<void> {
  const child = fn;
  fn = undefined;
  if (child === undefined || !child.running()) {
    return;
  }
  child.signalGroup('SIGTERM');
  const killer = setTimeout(
    () => child.signalGroup('SIGKILL'),
    FUNCTION_STOP_MS,
  );
  await child.exited;
  clearTimeout(killer);
}

await startFunction();
if (!['127.0.0.1', 'localhost', '::1'].includes(host)) {
  say(
    `WARNING: --host ${host}: the function and the history page listen beyond this machine; anyone who can reach ${host}:${port} can run your jobs${verifyOidc ? '' : ' unauthenticated (set AUTH_MODE=verify-oidc to require a token)'}`,
  );
}
say(
  `function handleScheduledJob on ${functionUrl}${options['no-watch'] ? '' : ' (a change under src/ rebuilds and restarts it)'}`,
);

// The Scheduler.
let scheduler: LocalScheduler | undefined;
if (!options['no-scheduler']) {
  let settings: ReturnType<typeof schedulerSettings>;
  try {
    settings = schedulerSettings(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) {
      throw err;
    }
    fail(err.message);
  }
  const jobs =
    readJobs() ??
    fail('cannot start the Scheduler without valid job declarations');
  const idWidth = () =>
    Math.max(...(scheduler?.jobs ?? jobs).map((j) => j.id.length));
  scheduler = new LocalScheduler({
    url: functionUrl,
    jobs,
    ...deliveryOptions(settings, issuer),
    pauseOf: emulatorPauses(env, deliveryOptions(settings, issuer)),
    dropAnswers,
    duplicates,
    // What it owes (retries in back-off, each job's last slot) outlives a crash of this process.
    state: schedulerStateFile(devStateDir),
    onEvent: (event) =>
      console.log(`scheduler  ${formatEvent(event, idWidth())}`),
  });
  scheduler.start();
  say(
    `local Cloud Scheduler firing ${firingList(jobs, new Date())}${dropAnswers > 0 ? `, dropping ${dropAnswers * 100}% of answers` : ''}${
      duplicates > 0 ? `, duplicating ${duplicates * 100}% of deliveries` : ''
    }`,
  );
  if (options.fire !== undefined) {
    try {
      void scheduler.fire(options.fire, {
        withoutScheduleTime: options['without-schedule-time'] === true,
      });
    } catch (err) {
      say(`--fire: ${(err as Error).message}`);
    }
  }
}

// The history page: `ops/runs.ts --html -` per request, in a process of its own, as readJobs() does,
// so the page always reflects the current declarations (Node caches imported modules).
/** Renders the history page for `url`'s query; the status is 400 for arguments runs refuses. */
function historyPage(
  url: URL,
): Promise<{ status: number; type: string; body: string }> {
  const args = [libraryModule('ops/runs'), '--html', '-'];
  const since = url.searchParams.get('since');
  if (since) {
    args.push('--since', since);
  }
  for (const job of url.searchParams.getAll('job')) {
    args.push('--job', job);
  }
  return new Promise((done) => {
    const child = spawn(process.execPath, args, { cwd: PROJECT_DIR, env });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('close', (code) => {
      if (code === 0) {
        done({ status: 200, type: 'text/html; charset=utf-8', body: out });
      } else {
        done({
          status: code === 2 ? 400 : 500,
          type: 'text/plain; charset=utf-8',
          body: err,
        });
      }
    });
  });
}
const history: Server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (req.method !== 'GET' || url.pathname !== '/') {
    res
      .writeHead(404, { 'Content-Type': 'text/plain' })
      .end('GET / (?since=24h&job=ID)\n');
    return;
  }
  void historyPage(url).then(({ status, type, body }) => {
    res
      .writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' })
      .end(body);
  });
});
const historyPort = Number(process.env.HISTORY_PORT || (await freePort()));
await new Promise<void>((listening) =>
  history.listen(historyPort, host, listening),
);
say(
  `run history page: http://${urlHost}:${historyPort}/ (?since=24h&job=ID; the page npm run runs -- --html FILE writes)`,
);

// Watch mode: src/ with its subfolders, and the library's src/ when it runs from its sources.
let stopWatching: (() => void) | undefined;
if (!options['no-watch']) {
  let rebuilding = Promise.resolve();
  const rebuild = async (changed: string) => {
    say(`${changed} changed`);
    if (!build()) {
      return;
    }
    await stopFunction();
    await startFunction();
    const jobs = readJobs();
    if (jobs !== undefined && scheduler !== undefined) {
      scheduler.setJobs(jobs);
      say(
        `reloaded: the local Cloud Scheduler now fires ${firingList(jobs, new Date())}`,
      );
    }
  };
  const watched: WatchedDir[] = [
    { dir: join(PROJECT_DIR, 'src'), label: 'src/' },
  ];
  if (LIBRARY_FROM_SOURCES && resolve(ROOT) !== resolve(PROJECT_DIR)) {
    watched.push({ dir: join(ROOT, 'src'), label: "the library's src/" });
  }
  stopWatching = watchSources(
    watched,
    (changed) => {
      rebuilding = rebuilding.then(() =>
        stopping ? undefined : rebuild(changed),
      );
    },
    WATCH_QUIET_MS,
  );
}

/**
 * The export to import from `dir`: its `.overall_export_metadata` file, or the previous export's
 * when a crash came between moving the previous one aside and moving the new one in.
 */
function keptExport(dir: string): string | undefined {
  for (const name of [EXPORT_NAME, PREVIOUS_EXPORT_NAME]) {
    const metadata = join(dir, name, `${EXPORT_NAME}.overall_export_metadata`);
    if (existsSync(metadata)) {
      return metadata;
    }
  }
  return undefined;
}

/** Exports the emulator's data into `dataDir` (`quiet`: says nothing unless it fails). */
function saveData(how: { quiet: boolean } = { quiet: false }): Promise<void> {
  saving = saving.then(() => exportData(how.quiet));
  return saving;
}

/** Exports the emulator's data into `dataDir` through its export endpoint, replacing the last. */
async function exportData(quiet: boolean): Promise<void> {
  if (dataDir === undefined || emulator === undefined) {
    return;
  }
  const staging = join(dataDir, `.staging-${process.pid}`);
  mkdirSync(staging, { recursive: true });
  const database = process.env.FIRESTORE_DATABASE || '(default)';
  try {
    const res = await fetch(
      `http://${emulatorHost}/emulator/v1/projects/${project}:export`,
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          database: `projects/${project}/databases/${database}`,
          export_directory: staging,
          export_name: EXPORT_NAME,
        }),
        signal: AbortSignal.timeout(30_000),
      },
    );
    if (!res.ok) {
      throw new Error(`${res.status} ${await res.text()}`);
    }
    // The last export stays whole until the new one is in place (keptExport reads either).
    const current = join(dataDir, EXPORT_NAME);
    const previous = join(dataDir, PREVIOUS_EXPORT_NAME);
    rmSync(previous, { recursive: true, force: true });
    if (existsSync(current)) {
      renameSync(current, previous);
    }
    renameSync(join(staging, EXPORT_NAME), current);
    rmSync(previous, { recursive: true, force: true });
    if (!quiet) {
      say(`emulator data saved to ${dataDir}`);
    }
  } catch (err) {
    say(`could not save the emulator's data: ${(err as Error).message}`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

async function shutDown(): Promise<void> {
  if (stopping) {
    return;
  }
  stopping = true;
  say('stopping');
  stopWatching?.();
  history.close();
  await scheduler?.stop();
  await stopFunction();
  clearInterval(exportTimer);
  await saveData();
  emulator?.signalGroup('SIGKILL');
  await issuer?.close();
  process.exit(0);
}
started = true;
