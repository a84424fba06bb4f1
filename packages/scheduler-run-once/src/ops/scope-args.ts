/**
 * `--scope NAME=VALUE` (repeatable) of `npm run trigger` and `npm run runs`: the key scope a
 * delivery by hand names, sent as the function's configuration reads it (a header of
 * `RUN_KEY_SCOPE_HEADERS` or a query parameter of `RUN_KEY_SCOPE_PARAMS`), and used for the run
 * ids the command computes, so they are the function's for that scope. `--scope VALUE` without
 * `=` is `runs`' older form of `RUN_KEY_SCOPE` (the function's own fixed scope, never sent).
 */
import type { Scope } from '../core/run-key.ts';
import type { Config } from '../function/config.ts';
import {
  InvalidRequestError,
  isScopeValue,
  SCOPE_VALUE_RULE,
  scopeFrom,
} from '../function/scheduler-request.ts';
import { UsageError } from './command.ts';

type ScopeConfig = Pick<Config, 'keyScopeHeaders' | 'keyScopeParams'>;

/** Scope values by name: the scope headers' (lowercase names) and query parameters' values. */
export interface ScopeValues {
  readonly headers?: Readonly<Record<string, string>>;
  readonly params?: Readonly<Record<string, string>>;
}

/**
 * The run id's scope of `values` (`scopeFrom`'s order), for the run ids a command computes.
 * @throws {InvalidRequestError} if a configured header or parameter has no value in `values`.
 */
export function scopeOf(
  config: ScopeConfig & Pick<Config, 'keyScope'>,
  values: ScopeValues = {},
): Scope {
  return scopeFrom(config, (kind, name) => {
    const value = (kind === 'header' ? values.headers : values.params)?.[name];
    if (value === undefined) {
      throw new InvalidRequestError(
        `The run id's scope needs a value for ${kind} ${name}.`,
      );
    }
    return value;
  });
}

/** What `--scope` flags named: the fixed scope (`--scope VALUE`), and each header's and parameter's value. */
export interface ScopeArgs {
  /** `RUN_KEY_SCOPE` as `--scope VALUE` gave it, if it did. */
  readonly fixed: string | undefined;
  /** The values by configured name, ready for `scopeOf` and for {@link scopeRequest}. */
  readonly values: Required<ScopeValues>;
}

function configured(config: ScopeConfig): string {
  const list = (names: readonly string[]) =>
    names.length === 0 ? '(none)' : names.join(', ');
  return `RUN_KEY_SCOPE_HEADERS: ${list(config.keyScopeHeaders)}; RUN_KEY_SCOPE_PARAMS: ${list(config.keyScopeParams)}`;
}

/**
 * Reads `--scope` flags against the configuration: `NAME=VALUE` names a scope header (matched
 * case-insensitively, as HTTP does) or a scope query parameter (case-sensitive); `VALUE` alone is the
 * fixed scope, where `allowFixed`. `--scope-header` and `--scope-param` (`runs`' explicit forms)
 * arrive as `headers` and `params`.
 *
 * @throws {UsageError} naming what to fix: a NAME the configuration has no scope header or
 *   parameter of (listing those it has), a name given twice, a value the function would refuse, a
 *   bare VALUE where `allowFixed` is false, or any configured header or parameter left without a
 *   value (all of them at once).
 * @example scopeArgs(config, ['x-tenant=acme']) // { fixed: undefined, values: { headers: { 'x-tenant': 'acme' }, params: {} } }
 */
export function scopeArgs(
  config: ScopeConfig,
  flags: readonly string[],
  options: {
    allowFixed?: boolean;
    headers?: Readonly<Record<string, string>>;
    params?: Readonly<Record<string, string>>;
  } = {},
): ScopeArgs {
  const headers: Record<string, string> = { ...options.headers };
  const params: Record<string, string> = { ...options.params };
  let fixed: string | undefined;
  for (const flag of flags) {
    const at = flag.indexOf('=');
    if (at < 0) {
      if (!options.allowFixed) {
        throw new UsageError(
          `--scope takes NAME=VALUE, got "${flag}" (${configured(config)}; RUN_KEY_SCOPE is the function's own setting and is never sent)`,
        );
      }
      if (fixed !== undefined) {
        throw new UsageError('--scope VALUE (RUN_KEY_SCOPE) given twice');
      }
      fixed = flag;
      continue;
    }
    addNamedScope(
      config,
      flag.slice(0, at),
      flag.slice(at + 1),
      { headers, params },
      options,
    );
  }
  checkEveryScopeValue(config, headers, params);
  return { fixed, values: { headers, params } };
}

/**
 * Adds `--scope NAME=VALUE` to the scope headers or parameters, as the configuration names NAME.
 *
 * @throws {UsageError} for a NAME that is both or neither, or given twice.
 */
function addNamedScope(
  config: ScopeConfig,
  name: string,
  value: string,
  into: { headers: Record<string, string>; params: Record<string, string> },
  options: { allowFixed?: boolean },
): void {
  const header = config.keyScopeHeaders.includes(name.toLowerCase());
  const param = config.keyScopeParams.includes(name);
  if (header && param) {
    throw new UsageError(
      `--scope ${name}: both a scope header and a scope parameter; use --scope-header or --scope-param`,
    );
  }
  if (!header && !param) {
    const fixedHint = options.allowFixed
      ? '; a RUN_KEY_SCOPE containing "=" goes in the environment, not --scope'
      : '';
    throw new UsageError(
      `--scope ${name}: the configuration has no scope header or parameter ${name} (${configured(config)})${fixedHint}`,
    );
  }
  const values = header ? into.headers : into.params;
  const key = header ? name.toLowerCase() : name;
  if (values[key] !== undefined) {
    throw new UsageError(`--scope ${name} given twice`);
  }
  values[key] = value;
}

/**
 * Refuses scope values missing or malformed: every configured header and parameter needs one.
 *
 * @throws {UsageError} listing every problem at once.
 */
function checkEveryScopeValue(
  config: ScopeConfig,
  headers: Readonly<Record<string, string>>,
  params: Readonly<Record<string, string>>,
): void {
  const problems: string[] = [];
  for (const [kind, names, values] of [
    ['header', config.keyScopeHeaders, headers],
    ['parameter', config.keyScopeParams, params],
  ] as const) {
    for (const name of names) {
      const value = values[name];
      if (value === undefined) {
        problems.push(`--scope ${name}=VALUE is missing (scope ${kind})`);
      } else if (!isScopeValue(value)) {
        problems.push(`--scope ${name}: "${value}" is not ${SCOPE_VALUE_RULE}`);
      }
    }
  }
  if (problems.length > 0) {
    throw new UsageError(
      `${problems.join('; ')}: the function's run ids need every scope value (${configured(config)})`,
    );
  }
}

/**
 * The headers and query parameters that carry `values` to the function, as Scheduler's job would
 * send them (the job's HTTP headers and URL).
 *
 * @example scopeRequest(config, values) // { headers: { 'x-tenant': 'acme' }, query: {} }
 */
export function scopeRequest(
  config: ScopeConfig,
  values: Required<ScopeValues>,
): { headers: Record<string, string>; query: Record<string, string> } {
  const pick = (
    names: readonly string[],
    from: Readonly<Record<string, string>>,
  ) =>
    Object.fromEntries(
      names.flatMap((name) =>
        from[name] === undefined ? [] : [[name, from[name]]],
      ),
    );
  return {
    headers: pick(config.keyScopeHeaders, values.headers),
    query: pick(config.keyScopeParams, values.params),
  };
}
