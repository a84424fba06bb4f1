/** Configuration, the only reader of the environment; each option: docs/configuration.md. */
import { ConfigError } from '../core/errors.ts';
import { MAX_LEASE_MS } from '../core/lease-limit.ts';

/** pino's level names, accepted by `LOG_LEVEL`. */
export const LOG_LEVELS = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
] as const;
/** Methods a Cloud Scheduler HTTP target can use (`gcloud scheduler jobs create http --http-method`). */
export const HTTP_METHODS = [
  'POST',
  'GET',
  'PUT',
  'PATCH',
  'DELETE',
  'HEAD',
  'OPTIONS',
] as const;

type Env = Readonly<Record<string, string | undefined>>;

/** The `NODE_ENV` values of development; unset counts as development too (`npm run dev`, tests). */
const DEVELOPMENT_NODE_ENVS = ['development', 'test'];

/**
 * Variables Cloud Run sets in every service instance or job task, and no development process does
 * (https://cloud.google.com/run/docs/container-contract); not `FUNCTION_TARGET`, also set locally.
 */
export const CLOUD_RUN_VARIABLES =
  'K_SERVICE K_REVISION K_CONFIGURATION CLOUD_RUN_JOB CLOUD_RUN_EXECUTION'.split(
    ' ',
  );

/**
 * Why `env` is not development (a phrase naming the variable that decided), or `undefined` when it
 * is: a development `NODE_ENV` (or none) off Cloud Run; a `NODE_ENV` typo is never development.
 */
export function whyNotDevelopment(env: Env): string | undefined {
  const onCloudRun = CLOUD_RUN_VARIABLES.find(
    (name) => (env[name] ?? '') !== '',
  );
  if (onCloudRun !== undefined) {
    return `${onCloudRun} is set: this runs on Cloud Run`;
  }
  const nodeEnv = (env.NODE_ENV ?? '').trim();
  if (nodeEnv === '' || DEVELOPMENT_NODE_ENVS.includes(nodeEnv)) {
    return undefined;
  }
  return `NODE_ENV is ${JSON.stringify(nodeEnv)}, not ${DEVELOPMENT_NODE_ENVS.join(' or ')}`;
}

/** An option: its variable, its default as written, a parser throwing an Error saying what to fix. */
function option<T>(
  env: string,
  defaultValue: string,
  parse: (raw: string) => T,
) {
  return { env, default: defaultValue, parse } as const;
}

const RESERVED_HEADERS =
  'authorization x-cloudscheduler-jobname x-cloudscheduler-scheduletime'.split(
    ' ',
  );
const lower = (raw: string) => raw.toLowerCase();
const upper = (raw: string) => raw.toUpperCase();

/** A parser of whole seconds from `min` to `max` (`why`: its source, quoted), returning ms. */
function seconds(
  min: number,
  max: number,
  why: string,
): (raw: string) => number {
  return (raw) => {
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new Error(
        `must be a whole number of seconds from ${min} to ${max} (${why})`,
      );
    }
    return Number(raw) * 1000;
  };
}

/** A parser of a comma-separated list (raw is trimmed) of `pattern`s, transformed, no repeats. */
function list(pattern: RegExp, what: string, transform = (s: string) => s) {
  return (raw: string): readonly string[] => {
    const items = raw.split(/\s*,\s*/).filter((s) => s !== '');
    const bad = items.filter((s) => !pattern.test(s));
    if (bad.length > 0) {
      throw new Error(`${bad.map((b) => `"${b}"`).join(', ')} not ${what}`);
    }
    return Object.freeze([...new Set(items.map(transform))]);
  };
}

function oneOf<T extends string>(
  values: readonly T[],
  normalise = (raw: string) => raw,
) {
  return (raw: string): T => {
    const value = values.find((v) => v === normalise(raw));
    if (value === undefined) {
      throw new Error(`must be one of ${values.join(', ')}`);
    }
    return value;
  };
}

function flag(on: string, off: string): (raw: string) => boolean {
  return (raw) => oneOf([on, off], lower)(raw) === on;
}

function text(
  valid: RegExp | ((raw: string) => boolean),
  must: string,
): (raw: string) => string {
  return (raw) => {
    if (!(typeof valid === 'function' ? valid(raw) : valid.test(raw))) {
      throw new Error(must);
    }
    return raw;
  };
}

const LEASE_MAX_WHY =
  "a day: far above the longest function timeout (3600 s) a lease must outlast, and its heartbeat, every third of it, stays within Node's timer limit";
const FIRESTORE_WHY =
  "a third of Cloud Scheduler's longest attempt deadline (1800 s): a claim, the job and its completion share one attempt";
const JOB_TIMEOUT_WHY =
  'the longest timeout of a Cloud Run functions HTTP function';
const GRACE_WHY =
  'Cloud Run sends SIGKILL 10 s after SIGTERM, so a longer drain is cut short';

/** Every option, in the README's order; the reference of each is docs/configuration.md. */
export const OPTIONS = {
  /** Claim length, ms (`LEASE_SECONDS`): outlasts the function timeout and the attempt deadline. */
  leaseMs: option(
    'LEASE_SECONDS',
    '300',
    seconds(1, MAX_LEASE_MS / 1000, LEASE_MAX_WHY),
  ),
  /** Record TTL after its last write, ms (`RETENTION_SECONDS`, not a timer); older slots refused. */
  retentionMs: option(
    'RETENTION_SECONDS',
    '2592000',
    seconds(1, 31_536_000, 'a year'),
  ),
  runsCollection: option(
    'RUNS_COLLECTION',
    'scheduler_runs',
    text(
      (raw) => /^[A-Za-z0-9_-]{1,100}$/.test(raw) && !/^__.*__$/.test(raw),
      'must be 1-100 letters, digits, "_" or "-" (a Firestore collection id)',
    ),
  ),
  firestoreDatabase: option(
    'FIRESTORE_DATABASE',
    '(default)',
    text(
      (raw) =>
        raw === '(default)' || /^[a-z][a-z0-9-]{2,61}[a-z0-9]$/.test(raw),
      'must be "(default)" or a database id (4-63 of a-z, 0-9, "-")',
    ),
  ),
  /** Longest wait for one Firestore operation, ms (`FIRESTORE_TIMEOUT_SECONDS`). */
  firestoreTimeoutMs: option(
    'FIRESTORE_TIMEOUT_SECONDS',
    '10',
    seconds(1, 600, FIRESTORE_WHY),
  ),
  /** Fixed scope mixed into every run id. */
  keyScope: option(
    'RUN_KEY_SCOPE',
    '',
    text(
      /^[\x21-\x7e]{0,200}$/,
      'must be at most 200 printable ASCII characters without spaces',
    ),
  ),
  /** Request headers whose values join the run id's scope, lowercase (`RUN_KEY_SCOPE_HEADERS`). */
  keyScopeHeaders: option('RUN_KEY_SCOPE_HEADERS', '', (raw) => {
    const names = list(
      /^[A-Za-z0-9-]{1,100}$/,
      'header names (letters, digits, "-")',
      lower,
    )(raw);
    const reserved = names.filter((n) => RESERVED_HEADERS.includes(n));
    if (reserved.length > 0) {
      throw new Error(`${reserved.join(', ')} cannot be a scope header`);
    }
    return names;
  }),
  keyScopeParams: option(
    'RUN_KEY_SCOPE_PARAMS',
    '',
    list(
      /^[A-Za-z0-9_.-]{1,100}$/,
      'query parameter names (letters, digits, "_", ".", "-")',
    ),
  ),
  logLevel: option('LOG_LEVEL', 'info', oneOf(LOG_LEVELS, lower)),
  /** Project id for the Firestore client and trace links (`GOOGLE_CLOUD_PROJECT`); detected if unset. */
  projectId: option('GOOGLE_CLOUD_PROJECT', '', (raw) =>
    raw === '' ? undefined : raw,
  ),
  serviceName: option('K_SERVICE', 'scheduled-job', (raw) => raw),
  /** Development only (`EXPOSE_ERRORS`): error text and job ids in bodies, for any caller. */
  exposeErrors: option('EXPOSE_ERRORS', 'false', flag('true', 'false')),
  /** Longest a job may run, ms (`JOB_TIMEOUT_SECONDS`): then its signal aborts. */
  jobTimeoutMs: option(
    'JOB_TIMEOUT_SECONDS',
    '3600',
    seconds(1, 3600, JOB_TIMEOUT_WHY),
  ),
  /** How long SIGTERM waits for running jobs to release their claims, ms (`SHUTDOWN_GRACE_SECONDS`). */
  shutdownGraceMs: option(
    'SHUTDOWN_GRACE_SECONDS',
    '8',
    seconds(0, 10, GRACE_WHY),
  ),
  /** `platform` (Cloud Run's IAM invoker check) or `verify-oidc` (this function checks it). */
  authMode: option(
    'AUTH_MODE',
    'platform',
    oneOf(['platform', 'verify-oidc'] as const),
  ),
  oidcAudience: option('OIDC_AUDIENCE', '', (raw) => raw),
  oidcInvokers: option(
    'OIDC_INVOKERS',
    '',
    list(/^[^\s@,]+@[^\s@,]+$/, 'email addresses', lower),
  ),
  /** How early a delivery may be yet its slot's run, ms (`FORCED_RUN_TOLERANCE_SECONDS`). */
  forcedRunToleranceMs: option(
    'FORCED_RUN_TOLERANCE_SECONDS',
    '60',
    seconds(1, 3600, 'an hour: a delivery earlier than that is never its slot'),
  ),
  /** Whether a due slot's run checks for missed and finally failed runs (`MISSED_RUN_CHECK`). */
  missedRunCheck: option('MISSED_RUN_CHECK', 'on', flag('on', 'off')),
  /** The one HTTP method that runs a job (`HTTP_METHOD`): the Scheduler job's; others get 405. */
  httpMethod: option('HTTP_METHOD', 'POST', oneOf(HTTP_METHODS, upper)),
  /** Development only (`OIDC_CERTS_URL`): `verify-oidc`'s certificates; their server mints tokens. */
  oidcCertsUrl: option('OIDC_CERTS_URL', '', (raw) => {
    if (raw === '') {
      return undefined;
    }
    const url = URL.parse(raw);
    if (
      url?.protocol !== 'http:' ||
      !['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname)
    ) {
      throw new Error(
        "must be an http:// URL on 127.0.0.1, [::1] or localhost: the local Scheduler's certificates, for development only",
      );
    }
    return raw;
  }),
};

/** The resolved, frozen configuration of one function instance: each option's parsed value. */
export type Config = {
  readonly [K in keyof typeof OPTIONS]: ReturnType<
    (typeof OPTIONS)[K]['parse']
  >;
};

/**
 * Reads and validates `env` (tests pass a plain object): a frozen {@link Config}, durations in ms.
 * @throws {ConfigError} listing every invalid variable and every broken cross-variable rule at once.
 */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const [key, option] of Object.entries(OPTIONS)) {
    const raw = (env[option.env] ?? '').trim() || option.default;
    try {
      values[key] = option.parse(raw);
    } catch (err) {
      problems.push(
        `${option.env}=${JSON.stringify(raw)}: ${(err as Error).message}`,
      );
    }
  }
  const config = values as unknown as Config;
  // A TTL sweep must never delete a claim whose lease is still live (a retry would run beside it).
  if (config.retentionMs <= config.leaseMs) {
    problems.push(
      `RETENTION_SECONDS (${config.retentionMs / 1000}) must exceed LEASE_SECONDS (${config.leaseMs / 1000})`,
    );
  }
  if (config.authMode === 'verify-oidc') {
    if (config.oidcAudience === '') {
      problems.push('AUTH_MODE=verify-oidc needs OIDC_AUDIENCE');
    }
    // Undefined when unreadable: that problem is listed already.
    if (config.oidcInvokers?.length === 0) {
      problems.push('AUTH_MODE=verify-oidc needs OIDC_INVOKERS');
    }
  }
  const notDevelopment = whyNotDevelopment(env);
  const devOnly = (what: string) =>
    problems.push(`${what} is for development only, and ${notDevelopment}`);
  if (notDevelopment !== undefined && config.oidcCertsUrl !== undefined) {
    devOnly('OIDC_CERTS_URL');
  }
  if (notDevelopment !== undefined && config.exposeErrors) {
    devOnly('EXPOSE_ERRORS=true');
  }
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return Object.freeze(config);
}
