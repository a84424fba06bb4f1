/**
 * What the local Scheduler takes from the environment and the command line, shared by
 * `npm run scheduler` (`ops/scheduler.ts`) and `npm run dev` (`scripts/dev.ts`): the headers and
 * query every job sends, as `deploy.sh` reads them (`JOB_HEADERS`, `JOB_QUERY`), and, with
 * `AUTH_MODE=verify-oidc`, the token audience and invoker, from the function's own configuration
 * (`src/config.ts`), so one environment serves both.
 */

import { ConfigError } from '../core/errors.ts';
import { loadConfig } from '../function/config.ts';
import type { LocalSchedulerOptions } from './local-scheduler.ts';
import type { OidcIssuer } from './oidc-issuer.ts';

/** The OIDC token every delivery carries with `AUTH_MODE=verify-oidc`. */
export interface OidcSettings {
  /** `OIDC_AUDIENCE`: the audience the function requires (Scheduler's `--oidc-token-audience`). */
  readonly audience: string;
  /** The first of `OIDC_INVOKERS`: the service account the token names. */
  readonly email: string;
  /** `OIDC_CERTS_URL`, if set: where the function fetches the certificates. */
  readonly certsUrl: string | undefined;
}

/** Everything the Scheduler reads from the environment. */
export interface SchedulerSettings {
  readonly headers: Readonly<Record<string, string>>;
  /** Without `?`; empty for none. */
  readonly query: string;
  /** Absent with `AUTH_MODE=platform`: locally nothing checks tokens then, so none is sent. */
  readonly oidc: OidcSettings | undefined;
}

/**
 * Parses `JOB_HEADERS` as `deploy.sh` takes it, `Name=value,Name2=value2` (values without commas).
 *
 * @throws {Error} naming the variable and the form it takes.
 * @example parseJobHeaders('X-Env=prod,X-Region=eu') // { 'X-Env': 'prod', 'X-Region': 'eu' }
 */
export function parseJobHeaders(raw: string): Record<string, string> {
  if (!/^([A-Za-z0-9-]+=[^,]*(,[A-Za-z0-9-]+=[^,]*)*)?$/.test(raw)) {
    throw new Error(
      `JOB_HEADERS=${JSON.stringify(raw)} must be Name=value,Name2=value2`,
    );
  }
  if (raw === '') {
    return {};
  }
  return Object.fromEntries(
    raw.split(',').map((pair) => {
      const at = pair.indexOf('=');
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

/**
 * Reads the Scheduler's settings from `env`.
 *
 * @throws {ConfigError} listing every problem at once: a malformed `JOB_HEADERS` or `JOB_QUERY`,
 *   and any problem `loadConfig` finds (e.g. `AUTH_MODE=verify-oidc` without `OIDC_AUDIENCE`).
 * @example
 * const { headers, query, oidc } = schedulerSettings(process.env);
 */
export function schedulerSettings(
  env: Readonly<Record<string, string | undefined>>,
): SchedulerSettings {
  const problems: string[] = [];
  let headers: Record<string, string> = {};
  try {
    headers = parseJobHeaders(env.JOB_HEADERS ?? '');
  } catch (err) {
    problems.push((err as Error).message);
  }
  const query = env.JOB_QUERY ?? '';
  if (!/^[A-Za-z0-9_.~%=&+-]*$/.test(query)) {
    problems.push(
      `JOB_QUERY=${JSON.stringify(query)} must be a URL query string without "?", e.g. env=prod&tenant=acme`,
    );
  }
  let oidc: OidcSettings | undefined;
  try {
    const config = loadConfig(env);
    if (config.authMode === 'verify-oidc') {
      oidc = {
        audience: config.oidcAudience,
        email: config.oidcInvokers[0] ?? '',
        certsUrl: config.oidcCertsUrl,
      };
    }
  } catch (err) {
    if (!(err instanceof ConfigError)) {
      throw err;
    }
    problems.push(...err.problems);
  }
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return { headers, query, oidc };
}

/**
 * What every delivery of the local Scheduler carries, as {@link LocalSchedulerOptions}: the jobs'
 * headers and query, and with `AUTH_MODE=verify-oidc` an ID token that `issuer` signs.
 *
 * @example new LocalScheduler({ url, jobs, ...deliveryOptions(schedulerSettings(env), issuer) })
 */
export function deliveryOptions(
  settings: SchedulerSettings,
  issuer: OidcIssuer | undefined,
): Pick<LocalSchedulerOptions, 'headers' | 'query' | 'tokens'> {
  const { oidc } = settings;
  return {
    headers: settings.headers,
    query: settings.query,
    ...(issuer === undefined || oidc === undefined
      ? {}
      : {
          tokens: {
            audience: oidc.audience,
            email: oidc.email,
            token: issuer.token,
          },
        }),
  };
}

/** A rate as the options take it: a decimal number, such as 0, 1, 0.25 or .5 (no sign, no exponent). */
const DECIMAL_FRACTION = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/;

/**
 * Parses a rate option (`--drop-answers`, `--duplicates`): a number from 0 to 1.
 *
 * @throws {Error} naming the option.
 * @example parseRate('--drop-answers', '0.5') // 0.5
 */
export function parseRate(option: string, raw: string | undefined): number {
  if (raw === undefined) {
    return 0;
  }
  const rate = Number(raw);
  if (!DECIMAL_FRACTION.test(raw) || rate > 1) {
    throw new Error(
      `${option} must be a number from 0 to 1, e.g. 0.5, not ${JSON.stringify(raw)}`,
    );
  }
  return rate;
}
