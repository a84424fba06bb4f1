/**
 * Local processes for the scripts, the tests and the bench: free ports, child processes in process
 * groups of their own, the Firestore emulator, and waiting until something answers. Importing it
 * starts nothing. Everything listens on and talks to 127.0.0.1 only, the function included
 * ({@link spawnFunction}), unless told otherwise.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The library's root: the directory of its `package.json`, above `src/dev/` (or `dist/dev/`). */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** This module's extension: `.ts` run from the sources, `.js` compiled (the published package). */
const OWN_EXTENSION = extname(fileURLToPath(import.meta.url));

/**
 * The file of the library's module `module` (a path under `src/` without extension, e.g.
 * `ops/jobs`), as this module runs: the source beside it, or the compiled file in `dist/`.
 *
 * @example spawn(process.execPath, [libraryModule('ops/jobs'), '--deploy'])
 */
export function libraryModule(module: string): string {
  return fileURLToPath(
    new URL(`../${module}${OWN_EXTENSION}`, import.meta.url),
  );
}
/**
 * The project the commands serve, which holds `src/jobs.ts` and `build/`: the directory they run
 * in (npm runs a script in the directory of the `package.json` that declares it).
 */
export const PROJECT_DIR = process.cwd();

/**
 * The nearest `node_modules` at or above the library whose `.bin` has the command `name` (npm
 * installs a workspace's dependencies in the repository's root, a user's in their project's).
 *
 * @throws {Error} naming the command when no `node_modules/.bin` above the library has it.
 */
function nodeModulesWith(name: string): string {
  for (let dir = ROOT; ; dir = dirname(dir)) {
    const nodeModules = join(dir, 'node_modules');
    if (existsSync(join(nodeModules, '.bin', name))) {
      return nodeModules;
    }
    if (dirname(dir) === dir) {
      throw new Error(
        `no node_modules/.bin/${name} above ${ROOT}: run npm install`,
      );
    }
  }
}

/** The script behind the command `name` of the library's `node_modules/.bin` (the link resolved). */
export function binPath(name: string): string {
  return realpathSync(join(nodeModulesWith(name), '.bin', name));
}

/**
 * The `node_modules` directory the library's dev dependencies are installed in (the one with `tsc`),
 * for tests that link it into a scratch project. A function, not a constant: the published
 * package loads this module in projects that have no `tsc`.
 */
export function nodeModulesWithTsc(): string {
  return nodeModulesWith('tsc');
}

/** The preload that gives functions-framework's `listen(port)` a host (`listen-host.ts`). */
const LISTEN_HOST = pathToFileURL(libraryModule('dev/listen-host')).href;
/** Where a local function listens unless told otherwise: this machine only. */
export const LOCAL_HOST = '127.0.0.1';

/** A Firestore collection name no other test or bench run uses: `<prefix>_<random>`. */
export function freshCollection(prefix = 'runs'): string {
  return `${prefix}_${randomUUID().replaceAll('-', '')}`;
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` every `intervalMs` until it returns a value other than `undefined`.
 *
 * @throws after `timeoutMs`, or whatever `check` throws.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 50,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) {
      return value;
    }
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    }
    await sleep(intervalMs);
  }
}

/**
 * Resolves as `promise` does, or rejects naming `what` it waited for once `timeoutMs` passed: a
 * wait on a process (its exit, an answer) that fails with a message instead of hanging.
 *
 * @example await within(child.exited, 10_000, 'the function to exit on SIGTERM');
 */
export async function within<T>(
  promise: Promise<T>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${timeoutMs} ms: ${what}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Where Linux keeps the range of ports it gives outgoing connections ("ip_local_port_range"). */
const EPHEMERAL_RANGE_FILE = '/proc/sys/net/ipv4/ip_local_port_range';

/** The lowest port {@link freePort} picks: above the registered services most machines run. */
const LOWEST_PICKED_PORT = 10_000;

/** How many random ports {@link freePort} tries before it lets the kernel choose. */
const PORT_PICKS = 20;

/** The first port of the range the kernel gives outgoing connections, where Linux tells it. */
function ephemeralRangeStart(): number | undefined {
  try {
    const start = Number(
      readFileSync(EPHEMERAL_RANGE_FILE, 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(start) ? start : undefined;
  } catch {
    return undefined;
  }
}

/** Listens on `port` of 127.0.0.1 (0: one the kernel chooses) and closes; resolves to the port, or undefined if taken. */
function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        resolve(
          typeof address === 'object' && address ? address.port : undefined,
        ),
      );
    });
  });
}

/**
 * A TCP port free on 127.0.0.1 right now, for a process started next to listen on. Picked at random
 * below the range the kernel gives outgoing connections (Linux's `ip_local_port_range`, from 32768
 * by default): a port the kernel chooses comes from that range, where any outgoing connection
 * (a Firestore client's, say) may take it before the process listens, which then fails with the
 * port taken. Where that range is not known, or no pick is free, the kernel chooses.
 *
 * @throws {Error} if 127.0.0.1 takes no listener at all.
 */
export async function freePort(): Promise<number> {
  const rangeStart = ephemeralRangeStart();
  if (rangeStart !== undefined && rangeStart > LOWEST_PICKED_PORT) {
    for (let pick = 0; pick < PORT_PICKS; pick += 1) {
      const port =
        LOWEST_PICKED_PORT + randomInt(rangeStart - LOWEST_PICKED_PORT);
      if ((await listenOnce(port)) !== undefined) {
        return port;
      }
    }
  }
  const chosen = await listenOnce(0);
  if (chosen === undefined) {
    throw new Error('no TCP port could be listened on at 127.0.0.1');
  }
  return chosen;
}

/** Whether something accepts TCP connections on `host`:`port` (127.0.0.1 unless given). */
export function acceptsConnections(
  port: number,
  host = LOCAL_HOST,
): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A child process leading a process group of its own, with its output kept. */
export interface GroupProcess extends ChildProcess {
  /** What it wrote to stdout and stderr (the last `keep` characters). */
  output(): string;
  /** Resolves once it exited and its output was read, or it could not start. */
  readonly exited: Promise<void>;
  /** Whether it is running (it may be paused). */
  running(): boolean;
  /** Sends `signal` to every process of its group; nothing once they are gone. */
  signalGroup(signal: NodeJS.Signals): void;
}

/** Groups started here whose leader has not exited: killed when this process exits. */
const groups = new Set<number>();

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

function killGroups(): void {
  for (const pgid of groups) {
    signalGroup(pgid, 'SIGKILL');
  }
}

/** Signals that end a process without its `exit` event: Ctrl-C, `kill`, a closed terminal. */
const ENDING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * On a signal this process does not handle otherwise (a test file on Ctrl-C of `npm test`), kills
 * the groups and then dies of the signal as it would have; a process with a handler of its own
 * (npm run dev stops its parts in turn, with-emulator passes the signal on) keeps its own way.
 */
function killGroupsOnSignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) > 1) {
    return;
  }
  killGroups();
  watchExit(false);
  process.kill(process.pid, signal);
}

/** Kills the groups when this process exits or dies of a signal (`on`), or no longer (`!on`). */
function watchExit(on: boolean): void {
  if (on) {
    process.once('exit', killGroups);
  } else {
    process.off('exit', killGroups);
  }
  for (const signal of ENDING_SIGNALS) {
    // First, so it counts every other listener, a `once` one included, before that one runs.
    if (on) {
      process.prependListener(signal, killGroupsOnSignal);
    } else {
      process.off(signal, killGroupsOnSignal);
    }
  }
}

/**
 * Starts `command` leading a process group of its own, so a signal reaches every process it forks
 * (gcloud starts the emulator's java, functions-framework may fork). A group still running when this
 * process exits, or dies of SIGINT, SIGTERM or SIGHUP it has no handler for, is killed with it.
 *
 * @param options.keep - how many characters of output to keep (all unless given).
 */
export function spawnGroup(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; keep?: number } = {},
): GroupProcess {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pgid = child.pid;
  if (pgid !== undefined) {
    if (groups.size === 0) {
      watchExit(true);
    }
    groups.add(pgid);
  }
  const keep = options.keep ?? Number.POSITIVE_INFINITY;
  let output = '';
  const append = (text: string) => {
    output += text;
    if (output.length > keep) {
      output = output.slice(-keep);
    }
  };
  child.stdout?.on('data', (chunk: Buffer) => append(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => append(chunk.toString()));
  const exited = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      append(`\ncould not run ${command}: ${err.message}`);
      resolve();
    });
    child.once('exit', () => {
      if (pgid !== undefined) {
        groups.delete(pgid);
      }
      if (groups.size === 0) {
        watchExit(false);
      }
      // Its last output may still be in the pipes: wait for them to close, unless a process it
      // forked holds them open (then 1 s at most).
      setTimeout(resolve, 1_000).unref();
    });
    child.once('close', () => resolve());
  });
  return Object.assign(child, {
    output: () => output,
    exited,
    running: () => child.exitCode === null && child.signalCode === null,
    signalGroup: (signal: NodeJS.Signals) => {
      if (pgid !== undefined) {
        signalGroup(pgid, signal);
      }
    },
  });
}

function stillRunning(child: GroupProcess | undefined): void {
  if (child !== undefined && !child.running()) {
    throw new Error(
      `it exited (${child.exitCode ?? child.signalCode}):\n${child.output()}`,
    );
  }
}

/**
 * Resolves once `url` answers with a 2xx status.
 *
 * @param options.process - the process that should answer: its exit ends the wait with its output.
 * @throws when `process` exits first, or after `timeoutMs`.
 */
export async function waitForHttp(
  url: string,
  options: { timeoutMs: number; process?: GroupProcess },
): Promise<void> {
  const { timeoutMs, process: child } = options;
  await waitFor(
    `${url} to answer`,
    async () => {
      stillRunning(child);
      try {
        return (await fetch(url)).ok || undefined;
      } catch {
        return undefined; // not listening yet
      }
    },
    timeoutMs,
    250,
  );
}

/**
 * Resolves once something accepts connections on `options.host` (127.0.0.1 unless given):`port`.
 *
 * @param options.process - the process that should listen: its exit ends the wait with its output.
 * @param options.intervalMs - how often to try (50 ms unless given).
 * @throws when `process` exits first, or after `timeoutMs`.
 */
export async function waitForPort(
  port: number,
  options: {
    timeoutMs: number;
    process?: GroupProcess;
    intervalMs?: number;
    host?: string;
  },
): Promise<void> {
  const {
    timeoutMs,
    process: child,
    intervalMs = 50,
    host = LOCAL_HOST,
  } = options;
  await waitFor(
    `port ${port} to accept connections`,
    async () => {
      stillRunning(child);
      return (await acceptsConnections(port, host)) || undefined;
    },
    timeoutMs,
    intervalMs,
  );
}

/** How to install what {@link startFirestoreEmulator} runs. */
const EMULATOR_INSTALL_HINT =
  'Install the emulator: `gcloud components install cloud-firestore-emulator` (or the Debian/RPM ' +
  'package google-cloud-cli-firestore-emulator) with Java 17+, or set FIRESTORE_EMULATOR_JAR to ' +
  'the emulator jar, or FIRESTORE_EMULATOR_HOST to a running emulator.';

/**
 * The emulator's JVM flags unless `JAVA_TOOL_OPTIONS` is set: the client compiler only and the
 * serial collector. An emulator lives minutes and keeps a small heap, so the optimising compiler's
 * and the parallel collector's threads cost more CPU than they win back: on 2 cores the JVM took
 * 9 s of CPU for four emulator test files instead of 22 s (docs/tests.md).
 */
const EMULATOR_JVM = '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC';

/**
 * Starts a Firestore emulator on 127.0.0.1:`port` in a process group of its own and resolves once
 * it answers: `java -cp $FIRESTORE_EMULATOR_JAR … CloudFirestore start` if that variable is set,
 * else `gcloud emulators firestore start` (the gcloud `cloud-firestore-emulator` component).
 *
 * @param options.importData - an export's `.overall_export_metadata` file to load at start
 *   (`--import-data`, taken by both the jar and gcloud's command), as `npm run dev --keep-data` does.
 * @throws if it cannot start (with {@link EMULATOR_INSTALL_HINT}), exits, or does not answer in
 *   `timeoutMs`; it is stopped then.
 */
export async function startFirestoreEmulator(
  port: number,
  timeoutMs: number,
  options: { importData?: string } = {},
): Promise<GroupProcess> {
  const jar = process.env.FIRESTORE_EMULATOR_JAR;
  const emulatorClass =
    'com.google.cloud.datastore.emulator.firestore.CloudFirestore';
  const extra =
    options.importData === undefined
      ? []
      : [`--import-data=${options.importData}`];
  const env = {
    ...process.env,
    JAVA_TOOL_OPTIONS: process.env.JAVA_TOOL_OPTIONS ?? EMULATOR_JVM,
  };
  const child = jar
    ? spawnGroup(
        'java',
        [
          '-Duser.language=en',
          '-cp',
          jar,
          emulatorClass,
          'start',
          '--host=127.0.0.1',
          `--port=${port}`,
          ...extra,
        ],
        { keep: 4000, env },
      )
    : spawnGroup(
        'gcloud',
        [
          'emulators',
          'firestore',
          'start',
          `--host-port=127.0.0.1:${port}`,
          '--quiet',
          ...extra,
        ],
        { keep: 4000, env },
      );
  try {
    await waitForHttp(`http://127.0.0.1:${port}/`, {
      timeoutMs,
      process: child,
    });
  } catch (err) {
    child.signalGroup('SIGKILL');
    const notFound = child.pid === undefined;
    throw new Error(
      notFound
        ? `could not start ${child.spawnfile}. ${EMULATOR_INSTALL_HINT}`
        : `the Firestore emulator on 127.0.0.1:${port} did not start: ${(err as Error).message}`,
    );
  }
  return child;
}

/** What {@link spawnFunction} starts. */
export interface FunctionSpec {
  /** functions-framework's `--target`. */
  readonly target: string;
  /**
   * `--source`, relative to the library's root; without it the project's `package.json` `main`
   * ({@link PROJECT_DIR}), as deployed.
   */
  readonly source?: string;
  readonly port: number;
  /**
   * The address it listens on, {@link LOCAL_HOST} unless given (`0.0.0.0`: every interface, as
   * functions-framework alone does and Cloud Run needs).
   */
  readonly host?: string;
  /** Variables on top of this process's environment. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** A command prefix, e.g. `['faketime', '-f', '-90s']`. */
  readonly wrapper?: readonly string[];
  /** How many characters of output to keep (all unless given; a long-running process wants few). */
  readonly keep?: number;
}

/**
 * Spawns `functions-framework --target=… [--source=…] --port=…` in the library's root (in the
 * project's without a source), in a process
 * group of its own, with the Node running this process (type stripping loads `.ts` sources; the
 * `.bin` script's shebang could pick another Node from PATH), listening on `spec.host`
 * (127.0.0.1 unless given: `scripts/listen-host.ts`). Does not wait: see {@link waitForPort}.
 */
export function spawnFunction(spec: FunctionSpec): GroupProcess {
  const args = [
    '--import',
    LISTEN_HOST,
    binPath('functions-framework'),
    `--target=${spec.target}`,
    `--port=${spec.port}`,
  ];
  if (spec.source !== undefined) {
    args.push(`--source=${spec.source}`);
  }
  const [command, ...prefix] = [...(spec.wrapper ?? []), process.execPath];
  return spawnGroup(command as string, [...prefix, ...args], {
    cwd: spec.source === undefined ? PROJECT_DIR : ROOT,
    env: {
      // A local function has no metadata server to find: without this, its Firestore client's
      // probe prints `MetadataLookupWarning: … ENOTFOUND`. A variable set by the caller wins.
      METADATA_SERVER_DETECTION: 'none',
      ...process.env,
      ...spec.env,
      RUN_ONCE_LISTEN_HOST: spec.host ?? LOCAL_HOST,
    },
    ...(spec.keep === undefined ? {} : { keep: spec.keep }),
  });
}

/** The line `listen-host.ts` writes to stderr once a function listens, when asked to. */
const LISTEN_REPORT = /^run-once listen-host: listening on [\d.]+:(\d+)$/m;

/**
 * Spawns a function as {@link spawnFunction} does, but on a port the system picks when it listens
 * (`--port=0`), and resolves with that port once the function says it listens (`listen-host.ts`,
 * `RUN_ONCE_LISTEN_REPORT`). A port chosen free before the spawn ({@link freePort}) may be taken
 * by another process before the function binds it; polling it ({@link waitForPort}) then finds
 * that process's server, and the function's first delivery gets that server's answer.
 *
 * @param options.intervalMs - how often to look at its output (50 ms unless given).
 * @throws with its output when it exits first or does not listen within `timeoutMs` (it is then
 *   killed).
 */
export async function startFunctionOnOwnPort(
  spec: Omit<FunctionSpec, 'port'>,
  options: { timeoutMs: number; intervalMs?: number },
): Promise<{ child: GroupProcess; port: number }> {
  const child = spawnFunction({
    ...spec,
    port: 0,
    env: { ...spec.env, RUN_ONCE_LISTEN_REPORT: '1' },
  });
  try {
    const port = await waitFor(
      'the function to say on which port it listens',
      () => {
        stillRunning(child);
        const reported = LISTEN_REPORT.exec(child.output())?.[1];
        return reported === undefined ? undefined : Number(reported);
      },
      options.timeoutMs,
      options.intervalMs,
    );
    return { child, port };
  } catch (err) {
    child.signalGroup('SIGKILL');
    throw err;
  }
}
