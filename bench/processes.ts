/**
 * Function processes for the HTTP, storm, throughput and cold-start figures: functions-framework
 * started as Cloud Run starts it, one separate process per function, listening on a free port.
 * Requests go to 127.0.0.1 only.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** `node_modules/.bin/functions-framework`, run with this process's Node (24) rather than `env node`. */
const FRAMEWORK = realpathSync(join(ROOT, 'node_modules/.bin/functions-framework'));
const LISTEN_TIMEOUT_MS = 30_000;
/** Where this run writes emitted fixtures and other scratch files; removed by {@link removeScratch}. */
export const SCRATCH_DIR = join(tmpdir(), `scheduler-run-once-bench-${process.pid}`);
const OUTPUT_TAIL = 8_000;

/** A function process. */
export interface FunctionProcess {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  /** ms from spawn until the port accepted a connection. */
  readonly listenMs: number;
  /** ms since spawn, on the same clock as `listenMs`. */
  sinceSpawn(): number;
  /** Lines the job logged as `job started` so far: the job's executions. */
  jobStarts(): number;
  /** The last few KB of stdout and stderr. */
  output(): string;
  /** Signals the process (SIGKILL unless given) and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** What to start. */
export interface FunctionSpec {
  /** `--target`. */
  readonly target: string;
  /** `--source`: a file; the repository root (`package.json` main, `build/index.js`) if absent. */
  readonly source?: string;
  /** Extra environment on top of this process's. */
  readonly env?: Readonly<Record<string, string>>;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Starts functions-framework in the repository root and resolves once its port accepts
 * connections (polled every 2 ms, so `listenMs` is the boot time within a few ms).
 *
 * @throws if the process exits or does not listen within 30 s; the message carries its output.
 */
export async function startFunction(spec: FunctionSpec): Promise<FunctionProcess> {
  const port = await freePort();
  const args = [FRAMEWORK, `--target=${spec.target}`, `--port=${port}`];
  if (spec.source !== undefined) args.push(`--source=${spec.source}`);
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...spec.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  let partial = '';
  let starts = 0;
  child.stdout?.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString();
    const lines = text.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.includes('"message":"job started"')) starts++;
    tail = (tail + chunk.toString()).slice(-OUTPUT_TAIL);
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-OUTPUT_TAIL);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = spawnedAt + LISTEN_TIMEOUT_MS;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || performance.now() > deadline) {
      await stop();
      throw new Error(`${spec.source ?? 'build/index.js'} did not start listening:\n${tail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const listenMs = performance.now() - spawnedAt;
  return {
    port,
    url: `http://127.0.0.1:${port}/`,
    child,
    listenMs,
    sinceSpawn: () => performance.now() - spawnedAt,
    jobStarts: () => starts,
    output: () => tail,
    stop,
  };
}

/**
 * Writes `fixture` (a `.ts` file under `bench/fixtures/`) and the fixtures it imports as plain
 * JavaScript, with Node's own type stripper, and returns the entry's path. Cold starts are compared
 * on JavaScript, as deployed (`build/index.js`): loading any `.ts` file makes Node initialise its
 * type stripper first, which the bench measures separately. Every import specifier becomes an
 * absolute URL, so the copy resolves exactly what the original would.
 */
export function emitJavaScript(fixture: string): string {
  const outDir = SCRATCH_DIR;
  mkdirSync(outDir, { recursive: true });
  const emit = (file: string): string => {
    const out = join(outDir, basename(file).replace(/\.ts$/, '.mjs'));
    const fileUrl = pathToFileURL(file);
    const code = stripTypeScriptTypes(readFileSync(file, 'utf8')).replace(
      /(\bfrom\s*|\bimport\s*\(?\s*)(['"])([^'"]+)\2/g,
      (_match, lead: string, quote: string, specifier: string) => {
        let target: string;
        if (!specifier.startsWith('.')) {
          target = import.meta.resolve(specifier);
        } else {
          const resolved = fileURLToPath(new URL(specifier, fileUrl));
          target =
            resolved.endsWith('.ts') && dirname(resolved) === dirname(file)
              ? pathToFileURL(emit(resolved)).href
              : pathToFileURL(resolved).href;
        }
        return `${lead}${quote}${target}${quote}`;
      },
    );
    writeFileSync(out, code);
    return out;
  };
  return emit(join(ROOT, fixture));
}

/** Removes {@link SCRATCH_DIR}. */
export function removeScratch(): void {
  rmSync(SCRATCH_DIR, { recursive: true, force: true });
}
