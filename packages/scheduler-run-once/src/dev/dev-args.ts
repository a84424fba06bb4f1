/**
 * `run-once dev`'s arguments and the environment variables it reads as arguments (`PORT`), checked
 * before anything starts. `run-once` checks them in its own process before it starts `dev.ts`, so
 * a mistyped flag is answered at once, not after a second Node has loaded the emulator's and the
 * function's tooling; `dev.ts` reads them again with the same rules.
 */
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { parseRate } from '../ops/scheduler-settings.ts';
import { LOCAL_HOST } from './local-processes.ts';

/** `run-once dev`'s usage line, printed under every bad argument. */
export const DEV_USAGE =
  'usage: run-once dev [--drop-answers RATE] [--duplicates RATE] [--keep-data [--data-dir DIR]] [--fire JOB [--without-schedule-time]] [--no-scheduler] [--no-watch] [--no-build] [--source FILE --target NAME] [--host ADDRESS]';

/** The port the function listens on unless `PORT` says otherwise. */
const DEFAULT_PORT = 8080;
/** The highest TCP port. */
const MAX_PORT = 65_535;

/** The flags as `parseArgs` read them. */
export interface DevOptions {
  readonly 'drop-answers'?: string;
  readonly duplicates?: string;
  readonly 'keep-data'?: boolean;
  readonly 'data-dir'?: string;
  readonly fire?: string;
  readonly 'without-schedule-time'?: boolean;
  readonly 'no-scheduler'?: boolean;
  readonly 'no-watch'?: boolean;
  readonly 'no-build'?: boolean;
  readonly source?: string;
  readonly target?: string;
  readonly host?: string;
  readonly help?: boolean;
}

/** What `run-once dev` was asked for, checked. */
export interface DevArguments {
  readonly options: DevOptions;
  /** `PORT`, else 8080: the function's port. */
  readonly port: number;
  /** `--host`, else 127.0.0.1: where the function and the history page listen. */
  readonly host: string;
  /** `--drop-answers` and `--duplicates`, from 0 to 1 (0 when not given). */
  readonly dropAnswers: number;
  readonly duplicates: number;
}

/** A bad argument: its message says what to fix; `run-once` exits 2 with the usage. */
export class DevArgumentError extends Error {
  override name = 'DevArgumentError';
}

/** The flags `run-once dev` takes, as `parseArgs` reads them. */
const OPTIONS = {
  'drop-answers': { type: 'string' },
  duplicates: { type: 'string' },
  'keep-data': { type: 'boolean' },
  'data-dir': { type: 'string' },
  fire: { type: 'string' },
  'without-schedule-time': { type: 'boolean' },
  'no-scheduler': { type: 'boolean' },
  'no-watch': { type: 'boolean' },
  'no-build': { type: 'boolean' },
  source: { type: 'string' },
  target: { type: 'string' },
  host: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The flags in `args`; throws {@link DevArgumentError} for an unknown or malformed one. */
function readOptions(args: readonly string[]): DevOptions {
  try {
    return parseArgs({ args: [...args], options: OPTIONS }).values;
  } catch (err) {
    throw new DevArgumentError((err as Error).message);
  }
}

/** A host name: letters, digits, dots and hyphens, neither first nor last a dot or hyphen. */
const HOST_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$/;

/** A port as `PORT` may give it: decimal digits only. */
const DECIMAL = /^[0-9]+$/;

/** Flags that only go with another, and `--fire`'s job id. */
function checkPairs(options: DevOptions): void {
  if (options.fire === '') {
    throw new DevArgumentError('--fire needs the id of a declared job');
  }
  if (options['without-schedule-time'] && options.fire === undefined) {
    throw new DevArgumentError('--without-schedule-time goes with --fire JOB');
  }
  if ((options.source === undefined) !== (options.target === undefined)) {
    throw new DevArgumentError('--source and --target go together');
  }
}

/** `PORT` as a port number; 8080 when unset or empty. */
function portOf(raw: string | undefined): number {
  const port = Number(raw || String(DEFAULT_PORT));
  if ((raw && !DECIMAL.test(raw)) || port < 1 || port > MAX_PORT) {
    throw new DevArgumentError(
      `PORT=${JSON.stringify(raw)} is not a port: set it to a whole number from 1 to ${MAX_PORT}, or unset it for ${DEFAULT_PORT}`,
    );
  }
  return port;
}

/**
 * `--host`, or 127.0.0.1: an IP address (IPv6 without brackets) or a host name; anything else (a
 * URL, a port, brackets, white space) is refused before the function is told to listen there.
 */
function hostOf(raw: string | undefined): string {
  const host = raw ?? LOCAL_HOST;
  if (isIP(host) === 0 && !HOST_NAME.test(host)) {
    throw new DevArgumentError(
      `--host ${JSON.stringify(host)} is not an address: give an IP address or a host name, without brackets, scheme or port (e.g. 0.0.0.0 or ::)`,
    );
  }
  return host;
}

/** A rate flag from 0 to 1 (`parseRate`), its error as a bad argument. */
function rateOf(option: string, raw: string | undefined): number {
  try {
    return parseRate(option, raw);
  } catch (err) {
    throw new DevArgumentError((err as Error).message);
  }
}

/**
 * Reads and checks `run-once dev`'s arguments and its `PORT`.
 *
 * @param args the arguments after `dev`
 * @param env the environment (`PORT`)
 * @returns the flags, port, host and rates; with `--help`, nothing else is checked (the defaults)
 * @throws {DevArgumentError} naming the first bad argument and what to fix
 */
export function readDevArguments(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): DevArguments {
  const options = readOptions(args);
  if (options.help) {
    // Help asked for is help given, whatever else is wrong.
    return {
      options,
      port: DEFAULT_PORT,
      host: LOCAL_HOST,
      dropAnswers: 0,
      duplicates: 0,
    };
  }
  checkPairs(options);
  return {
    options,
    port: portOf(env.PORT),
    host: hostOf(options.host),
    dropAnswers: rateOf('--drop-answers', options['drop-answers']),
    duplicates: rateOf('--duplicates', options.duplicates),
  };
}
