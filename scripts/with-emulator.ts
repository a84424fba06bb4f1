/**
 * Runs a command with a Firestore emulator: `node scripts/with-emulator.ts -- <command> [args…]`.
 *
 * - `FIRESTORE_EMULATOR_HOST` set: uses that emulator, starts nothing.
 * - else `FIRESTORE_EMULATOR_JAR` set: `java -cp $FIRESTORE_EMULATOR_JAR … CloudFirestore start`.
 * - else: `gcloud emulators firestore start` (the gcloud `cloud-firestore-emulator` component).
 *
 * The command gets `FIRESTORE_EMULATOR_HOST`, and `GOOGLE_CLOUD_PROJECT` and
 * `METADATA_SERVER_DETECTION=none` unless already set, so no client library probes the network.
 * The emulator is stopped when the command exits or on Ctrl-C; the command's exit code is kept.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';

const READY_TIMEOUT_MS = 90_000;

function fail(message: string): never {
  console.error(`with-emulator: ${message}`);
  process.exit(2);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function startEmulator(port: number): ChildProcess {
  const jar = process.env.FIRESTORE_EMULATOR_JAR;
  const [command, args] = jar
    ? [
        'java',
        [
          '-Duser.language=en',
          '-cp',
          jar,
          'com.google.cloud.datastore.emulator.firestore.CloudFirestore',
          'start',
          '--host=127.0.0.1',
          `--port=${port}`,
        ],
      ]
    : ['gcloud', ['emulators', 'firestore', 'start', `--host-port=127.0.0.1:${port}`, '--quiet']];
  // Its own process group, so stopping it also stops the java process gcloud starts.
  const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.once('error', (err) =>
    fail(
      `could not start ${command} (${err.message}). Install the emulator: ` +
        '`gcloud components install cloud-firestore-emulator` (or the Debian/RPM package ' +
        'google-cloud-cli-firestore-emulator) with Java 17+, or set FIRESTORE_EMULATOR_JAR to the ' +
        'emulator jar, or FIRESTORE_EMULATOR_HOST to a running emulator.',
    ),
  );
  child.once('exit', (code) => {
    if (!ready) fail(`the emulator exited with code ${code} before it was ready:\n${output}`);
  });
  return child;
}

let ready = false;

async function waitUntilReady(host: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://${host}/`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  fail(`the emulator did not answer on ${host} within ${READY_TIMEOUT_MS / 1000} s`);
}

function stop(emulator: ChildProcess | undefined): void {
  if (emulator?.pid === undefined || emulator.exitCode !== null) return;
  try {
    process.kill(-emulator.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

const separator = process.argv.indexOf('--');
const [command, ...args] = separator === -1 ? [] : process.argv.slice(separator + 1);
if (command === undefined) fail('usage: node scripts/with-emulator.ts -- <command> [args…]');

let emulator: ChildProcess | undefined;
let host = process.env.FIRESTORE_EMULATOR_HOST;
if (!host) {
  host = `127.0.0.1:${await freePort()}`;
  emulator = startEmulator(Number(host.split(':')[1]));
  await waitUntilReady(host);
  console.error(`with-emulator: Firestore emulator ready on ${host}`);
}
ready = true;

const child = spawn(command, args, {
  stdio: 'inherit',
  env: {
    ...process.env,
    FIRESTORE_EMULATOR_HOST: host,
    GOOGLE_CLOUD_PROJECT: process.env.GOOGLE_CLOUD_PROJECT || 'demo-scheduler-run-once',
    METADATA_SERVER_DETECTION: process.env.METADATA_SERVER_DETECTION || 'none',
  },
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => child.kill(signal));
}
child.once('error', (err) => {
  stop(emulator);
  fail(`could not run ${command}: ${err.message}`);
});
child.once('exit', (code, signal) => {
  stop(emulator);
  process.exit(code ?? (signal ? 1 : 0));
});
