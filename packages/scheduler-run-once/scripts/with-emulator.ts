/**
 * Runs a command with a Firestore emulator: `node scripts/with-emulator.ts -- <command> [args…]`.
 *
 * - `FIRESTORE_EMULATOR_HOST` set: uses that emulator, starts nothing.
 * - else `FIRESTORE_EMULATOR_JAR` set: `java -cp $FIRESTORE_EMULATOR_JAR … CloudFirestore start`.
 * - else: `gcloud emulators firestore start` (the gcloud `cloud-firestore-emulator` component).
 *
 * The command gets `FIRESTORE_EMULATOR_HOST`, and `GOOGLE_CLOUD_PROJECT` and
 * `METADATA_SERVER_DETECTION=none` unless already set, so no client library probes the network
 * (nor does this process's own warm-up client).
 * The emulator is stopped when the command exits or on Ctrl-C, SIGTERM or SIGHUP (passed on to the
 * command, which is killed if it has not ended 10 s later); the command's exit code is kept. Only a
 * SIGKILL of this process leaves the emulator running.
 */
import { spawn } from 'node:child_process';
import {
  freePort,
  type GroupProcess,
  startFirestoreEmulator,
} from '../src/dev/local-processes.ts';

const READY_TIMEOUT_MS = 90_000;

// This process opens a Firestore client too (the warm-up): without this, google-auth-library
// probes the metadata server and prints `MetadataLookupWarning: … ENOTFOUND` (issue 43).
process.env.METADATA_SERVER_DETECTION ||= 'none';

function fail(message: string): never {
  console.error(`with-emulator: ${message}`);
  process.exit(2);
}

/**
 * A fresh emulator's first gRPC calls take seconds (its JVM compiles the path), more than a test's
 * Firestore timeout on a loaded machine: a few writes and reads through the client first,
 * bounded, so the first test's calls meet a warm emulator. A failure here is left to the tests.
 */
async function warmUp(emulatorHost: string): Promise<void> {
  const { Firestore } = await import('@google-cloud/firestore');
  const db = new Firestore({
    projectId: 'demo-warm-up',
    host: emulatorHost,
    ssl: false,
  });
  const rounds = async () => {
    for (let i = 0; i < 5; i++) {
      const doc = db.collection('warm-up').doc(String(i));
      await doc.create({ i });
      await doc.update({ i: i + 1 });
      await db.getAll(doc);
      await doc.delete();
    }
  };
  const bound = new Promise((resolve) => setTimeout(resolve, 60_000).unref());
  await Promise.race([rounds(), bound]).catch((err: Error) =>
    console.error(
      `with-emulator: warm-up failed (${err.message}); the tests will say more`,
    ),
  );
  await db.terminate().catch(() => undefined);
}

function stop(emulator: GroupProcess | undefined): void {
  if (emulator?.running()) {
    emulator.signalGroup('SIGKILL');
  }
}

const separator = process.argv.indexOf('--');
const [command, ...args] =
  separator === -1 ? [] : process.argv.slice(separator + 1);
if (command === undefined) {
  fail('usage: node scripts/with-emulator.ts -- <command> [args…]');
}

let emulator: GroupProcess | undefined;
let host = process.env.FIRESTORE_EMULATOR_HOST;
if (!host) {
  const port = await freePort();
  host = `127.0.0.1:${port}`;
  emulator = await startFirestoreEmulator(port, READY_TIMEOUT_MS).catch(
    (err: Error) => fail(err.message),
  );
  console.error(`with-emulator: Firestore emulator ready on ${host}`);
  await warmUp(host);
}

const child = spawn(command, args, {
  stdio: 'inherit',
  env: {
    ...process.env,
    FIRESTORE_EMULATOR_HOST: host,
    GOOGLE_CLOUD_PROJECT:
      process.env.GOOGLE_CLOUD_PROJECT || 'demo-scheduler-run-once',
    METADATA_SERVER_DETECTION: process.env.METADATA_SERVER_DETECTION || 'none',
  },
});
/** How long the command has to end after a signal passed on to it, before it is killed, ms. */
const SIGNAL_GRACE_MS = 10_000;

// Ctrl-C, a CI runner's SIGTERM or a closed terminal: passed on to the command; a command that
// does not end (a hung test) is killed, so that the emulator is stopped either way.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    child.kill(signal);
    setTimeout(() => child.kill('SIGKILL'), SIGNAL_GRACE_MS).unref();
  });
}
// However this process ends short of a SIGKILL (a throw included), the emulator goes with it.
process.once('exit', () => stop(emulator));
child.once('error', (err) => {
  stop(emulator);
  fail(`could not run ${command}: ${err.message}`);
});
child.once('exit', (code, signal) => {
  stop(emulator);
  process.exit(code ?? (signal ? 1 : 0));
});
