/**
 * Whether this process is in development: the one place that decides it, so a deployed function is
 * never talked into a development behaviour by a `NODE_ENV` typo or a missing variable.
 */

export type Env = Readonly<Record<string, string | undefined>>;

/** The `NODE_ENV` values of development; unset counts as development too (`npm run dev`, tests). */
export const DEVELOPMENT_NODE_ENVS = ['development', 'test'] as const;

/**
 * Variables Cloud Run sets in every service instance or job task, and no development process does
 * (https://cloud.google.com/run/docs/container-contract). Not `FUNCTION_TARGET`: functions-framework
 * also reads it locally.
 */
export const CLOUD_RUN_VARIABLES = [
  'K_SERVICE',
  'K_REVISION',
  'K_CONFIGURATION',
  'CLOUD_RUN_JOB',
  'CLOUD_RUN_EXECUTION',
] as const;

/**
 * Why `env` is not development (a phrase naming the variable that decided), or `undefined` when it
 * is: a development `NODE_ENV` (or none) off Cloud Run.
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
