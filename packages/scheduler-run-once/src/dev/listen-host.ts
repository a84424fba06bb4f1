/**
 * A preload (`node --import ./scripts/listen-host.ts functions-framework …`, as `spawnFunction`
 * starts the function locally) that makes a server told to listen on a port without a host listen
 * on `RUN_ONCE_LISTEN_HOST` instead. functions-framework's CLI calls `server.listen(port)`, which
 * Node binds to every interface, and has no host flag
 * (GoogleCloudPlatform/functions-framework-nodejs#104): `npm run dev` would serve the user's jobs,
 * unauthenticated, to the whole network. Delete this module once the framework takes a host.
 *
 * A workaround contained: it patches only `net.Server.prototype.listen`, checks that it exists,
 * and leaves every call that names a host (or a path, or a handle) as it is.
 *
 * With `RUN_ONCE_LISTEN_REPORT=1` it also writes a line with the address to stderr once
 * such a server listens: a function told `--port=0` gets a port from the system and says which
 * (`startFunctionOnOwnPort` in `local-processes.ts`), so no other process can take it between its
 * choice and the listen, and no other process's server can be taken for it.
 */
import net from 'node:net';

const host = process.env.RUN_ONCE_LISTEN_HOST;
const report = process.env.RUN_ONCE_LISTEN_REPORT === '1';
/**
 * The start of the line a reporting server writes to stderr, before `host:port`. Not exported:
 * importing this module patches `listen`; `local-processes.ts` holds the same text.
 */
const LISTEN_REPORT = 'run-once listen-host: listening on ';
const original = net.Server.prototype.listen;
if (typeof original !== 'function') {
  throw new Error(
    'listen-host: net.Server.prototype.listen is gone; this Node cannot be patched',
  );
}

/** A port as `listen` takes it: a number, or a string of digits (a string of other text is a pipe). */
function isPort(value: unknown): boolean {
  return (
    typeof value === 'number' ||
    (typeof value === 'string' && /^\d+$/.test(value))
  );
}

/** Writes where `server` listens, one line to stderr (written at once: stderr is a pipe). */
function reportAddress(server: net.Server): void {
  const address = server.address();
  if (typeof address === 'object' && address !== null) {
    process.stderr.write(
      `${LISTEN_REPORT}${address.address}:${address.port}\n`,
    );
  }
}

if (host !== undefined && host !== '') {
  net.Server.prototype.listen = function listen(
    this: net.Server,
    ...args: unknown[]
  ) {
    const [first, second] = args;
    if (isPort(first) && typeof second !== 'string') {
      args.splice(1, 0, host);
    } else if (
      typeof first === 'object' &&
      first !== null &&
      'port' in first &&
      !('host' in first) &&
      !('path' in first)
    ) {
      args[0] = { ...first, host };
    }
    if (report) {
      this.once('listening', () => reportAddress(this));
    }
    return (original as (...a: unknown[]) => net.Server).apply(this, args);
  } as typeof original;
}
