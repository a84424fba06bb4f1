/**
 * What every operations command (`jobs`, `runs`, `trigger`, `pause`, `scheduler`, `alerts`) does
 * the same way: its exit status and how it reports an error. 0 success, 1 a failure it names
 * (invalid declarations or configuration, Firestore unavailable, a function it cannot reach), 2 a
 * bad argument, printed with the usage.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ConfigError, RunOnceError } from '../core/errors.ts';
import { type Config, loadConfig } from '../function/config.ts';

/** A bad argument or setting: the command prints it with its usage and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure the command expects and names (a function it cannot reach): printed, exit 1. */
export class CommandError extends Error {
  override name = 'CommandError';
}

/**
 * The starts of google-auth-library's errors about credentials (its `build/src/auth/googleauth.js`;
 * `GoogleAuthExceptionMessages.NO_ADC_FOUND`, which its index does not export, and the error of a
 * key file it cannot use): the Firestore client meets them on a command's first call when
 * `FIRESTORE_EMULATOR_HOST` is not set.
 */
const NO_CREDENTIALS = 'Could not load the default credentials';
const BAD_KEY_FILE =
  'Unable to read the credential file specified by the GOOGLE_APPLICATION_CREDENTIALS environment variable: ';

/** What a command says when google-auth-library finds no credentials, and what to do about it. */
export const NO_CREDENTIALS_HELP =
  'no Google credentials found (google-auth-library: "Could not load the default credentials"). Against the emulator, set FIRESTORE_EMULATOR_HOST (`npm run dev` starts one and prints it); against a project, run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS';

/** What a command says when the key file GOOGLE_APPLICATION_CREDENTIALS names cannot be used. */
export const BAD_KEY_FILE_HELP =
  'GOOGLE_APPLICATION_CREDENTIALS names a key file google-auth-library cannot use: fix the file or unset the variable (against the emulator, set FIRESTORE_EMULATOR_HOST instead)';

/**
 * The one line a command prints for google-auth-library's credentials error `err` (a setting, not
 * a bug), or `undefined` for any other error.
 */
export function credentialsProblem(err: unknown): string | undefined {
  if (!(err instanceof Error)) {
    return undefined;
  }
  if (err.message.startsWith(NO_CREDENTIALS)) {
    return NO_CREDENTIALS_HELP;
  }
  if (err.message.startsWith(BAD_KEY_FILE)) {
    const why = err.message.slice(BAD_KEY_FILE.length).split('\n')[0];
    return `${BAD_KEY_FILE_HELP}: ${why}`;
  }
  return undefined;
}

/**
 * `NAME=VALUE` flags (`--scope-header`, `--scope-param`) as a record, names lower-cased.
 *
 * @throws {UsageError} for a value without a name.
 * @example namedPairs(['X-Tenant=acme'], 'scope-header') // { 'x-tenant': 'acme' }
 */
export function namedPairs(
  values: readonly string[] | undefined,
  what: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const value of values ?? []) {
    const at = value.indexOf('=');
    if (at <= 0) {
      throw new UsageError(`--${what} takes NAME=VALUE, got "${value}"`);
    }
    out[value.slice(0, at).toLowerCase()] = value.slice(at + 1);
  }
  return out;
}

/** A command's `main`: its arguments (after the script) and environment, to its exit status. */
export type CommandMain = (
  argv: string[],
  env: NodeJS.ProcessEnv,
) => Promise<number>;

/** The flags every operations command takes to say where its records are. */
export interface WhereFlags {
  readonly scope?: string | undefined;
  readonly collection?: string | undefined;
  readonly database?: string | undefined;
  readonly project?: string | undefined;
}

/**
 * The function's configuration from `env`, each where-flag given replacing its variable:
 * `--scope` RUN_KEY_SCOPE, `--collection` RUNS_COLLECTION, `--database` FIRESTORE_DATABASE,
 * `--project` GOOGLE_CLOUD_PROJECT. @throws {ConfigError} as `loadConfig` does.
 */
export function configWithFlags(
  env: NodeJS.ProcessEnv,
  flags: WhereFlags,
): Config {
  const given = (name: string, value: string | undefined) =>
    value === undefined ? {} : { [name]: value };
  return loadConfig({
    ...env,
    ...given('RUN_KEY_SCOPE', flags.scope),
    ...given('RUNS_COLLECTION', flags.collection),
    ...given('FIRESTORE_DATABASE', flags.database),
    ...given('GOOGLE_CLOUD_PROJECT', flags.project),
  });
}

/**
 * Runs a command's `main` on `argv` and `env` and answers its exit status: `main`'s number, else
 * 2 with `usage` for a {@link UsageError} or a `parseArgs` error, 1 for a {@link CommandError}, an
 * error of `src/errors.ts` or Google credentials missing or unusable ({@link credentialsProblem}). A
 * `ConfigError` is printed as it is (it starts "Invalid configuration:"), the others after
 * `name: `. Anything else is a bug: rethrown, with its stack.
 * It sets no `process.exitCode`: tests call it in-process (`test/fixtures/in-process-command.ts`).
 *
 * @example const status = await commandStatus('jobs', USAGE, main, ['--json'], env);
 */
export async function commandStatus(
  name: string,
  usage: string,
  main: CommandMain,
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  try {
    return await main(argv, env);
  } catch (err) {
    if (
      err instanceof UsageError ||
      (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      console.error(`${name}: ${(err as Error).message}\n${usage}`);
      return 2;
    }
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 1;
    }
    if (err instanceof CommandError || err instanceof RunOnceError) {
      console.error(`${name}: ${err.message}`);
      return 1;
    }
    const credentials = credentialsProblem(err);
    if (credentials !== undefined) {
      console.error(`${name}: ${credentials}`);
      return 1;
    }
    throw err;
  }
}

/**
 * Runs a command's `main` on `process.argv` and `process.env` and sets `process.exitCode` to its
 * {@link commandStatus}; a bug is rethrown, so the process exits 1 with its stack.
 *
 * @example if (isEntryPoint(import.meta.url)) await runCommand('jobs', USAGE, main);
 */
export async function runCommand(
  name: string,
  usage: string,
  main: CommandMain,
): Promise<void> {
  process.exitCode = await commandStatus(
    name,
    usage,
    main,
    process.argv.slice(2),
    process.env,
  );
}

/**
 * Whether the module at `moduleUrl` (its `import.meta.url`) is the script Node was started with
 * (`node ops/jobs.ts`), rather than imported (by a test). Node loads its entry point by its real
 * path, so `process.argv[1]` is compared after resolving symbolic links.
 *
 * @example if (isEntryPoint(import.meta.url)) await runCommand('jobs', USAGE, main);
 */
export function isEntryPoint(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (script === undefined) {
    return false;
  }
  let real: string;
  try {
    real = realpathSync(script);
  } catch {
    real = script;
  }
  return moduleUrl === pathToFileURL(real).href;
}
