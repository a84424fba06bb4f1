/**
 * Whether this process is in development: the one place that decides it. Everything that differs in
 * development (`EXPOSE_ERRORS`, `OIDC_CERTS_URL`, the declared job ids in a 404) asks here, so a
 * deployed function can never be talked into a development behaviour by a `NODE_ENV` typo or a
 * missing variable.
 */

type Env = Readonly<Record<string, string | undefined>>;

/** The `NODE_ENV` values of development; unset counts as development too (`npm run dev`, tests). */
export const DEVELOPMENT_NODE_ENVS = ['development', 'test'] as const;

/**
 * Variables Cloud Run sets in every instance, and that no development process sets: `K_SERVICE`,
 * `K_REVISION`, `K_CONFIGURATION` in a service, which is what a Cloud Run function runs as (the
 * container runtime contract, https://cloud.google.com/run/docs/container-contract), and
 * `CLOUD_RUN_JOB`, `CLOUD_RUN_EXECUTION` in a job's task. `FUNCTION_TARGET` is not one of them:
 * functions-framework also reads it locally instead of `--target`, and a deployed function has
 * `K_SERVICE` anyway.
 */
export const CLOUD_RUN_VARIABLES = [
  'K_SERVICE',
  'K_REVISION',
  'K_CONFIGURATION',
  'CLOUD_RUN_JOB',
  'CLOUD_RUN_EXECUTION',
] as const;

/**
 * Why `env` is not development, or `undefined` when it is: development is a known development
 * `NODE_ENV` (or none) on a machine that is not Cloud Run. Any other `NODE_ENV` (`production`,
 * `Production`, `staging`) is not development, and neither is any process on Cloud Run, whatever
 * its `NODE_ENV`.
 *
 * @param env - the environment (`process.env` as `loadConfig` got it).
 * @returns a phrase naming the variable that decided, for a `ConfigError` line.
 * @example
 * whyNotDevelopment({ NODE_ENV: 'production' }); // 'NODE_ENV is "production", not development or test'
 * whyNotDevelopment({ K_SERVICE: 'fn' }); // 'K_SERVICE is set: this runs on Cloud Run'
 * whyNotDevelopment({}); // undefined
 */
export function whyNotDevelopment(env: Env): string | undefined {
  const onCloudRun = CLOUD_RUN_VARIABLES.find((name) => (env[name] ?? '') !== '');
  if (onCloudRun !== undefined) return `${onCloudRun} is set: this runs on Cloud Run`;
  const nodeEnv = (env.NODE_ENV ?? '').trim();
  if (nodeEnv !== '' && !(DEVELOPMENT_NODE_ENVS as readonly string[]).includes(nodeEnv)) {
    return `NODE_ENV is ${JSON.stringify(nodeEnv)}, not ${DEVELOPMENT_NODE_ENVS.join(' or ')}`;
  }
  return undefined;
}
