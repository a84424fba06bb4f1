/**
 * What every operations command (`jobs`, `runs`, `trigger`, `scheduler`, `alerts`) does the same
 * way: its exit status and how it reports an error. 0 success, 1 a failure it names (invalid
 * declarations or configuration, Firestore unavailable, a function it cannot reach), 2 a bad
 * argument, printed with the usage.
 */
import { RunOnceError } from '../src/core/errors.ts';
import { ConfigError } from '../src/policy/errors.ts';

/** A bad argument or setting: the command prints it with its usage and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure the command expects and names (a function it cannot reach): printed, exit 1. */
export class CommandError extends Error {
  override name = 'CommandError';
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
    if (at <= 0) throw new UsageError(`--${what} takes NAME=VALUE, got "${value}"`);
    out[value.slice(0, at).toLowerCase()] = value.slice(at + 1);
  }
  return out;
}

/**
 * Runs a command's `main` on `process.argv` and sets `process.exitCode`: `main`'s number, else
 * 2 with `usage` for a {@link UsageError} or a `parseArgs` error, 1 for a {@link CommandError} or an
 * error of `src/errors.ts`. A `ConfigError` is printed as it is (it starts "Invalid
 * configuration:"), the others after `name: `. Anything else is a bug: rethrown, with its stack.
 *
 * @example await runCommand('jobs', USAGE, main);
 */
export async function runCommand(
  name: string,
  usage: string,
  main: (argv: string[], env: NodeJS.ProcessEnv) => Promise<number>,
): Promise<void> {
  try {
    process.exitCode = await main(process.argv.slice(2), process.env);
  } catch (err) {
    if (
      err instanceof UsageError ||
      (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      console.error(`${name}: ${(err as Error).message}\n${usage}`);
      process.exitCode = 2;
    } else if (err instanceof ConfigError) {
      console.error(err.message);
      process.exitCode = 1;
    } else if (err instanceof CommandError || err instanceof RunOnceError) {
      console.error(`${name}: ${err.message}`);
      process.exitCode = 1;
    } else {
      throw err;
    }
  }
}
