/**
 * The declared jobs, for the operations commands: `src/jobs.ts`, or the module `JOBS_MODULE` names.
 * Imported directly (Node ≥ 22.18 strips the types): no build, no Firestore, no function.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../core/errors.ts';
import {
  type DeclaredJob,
  type JobDeclaration,
  validateJobs,
} from '../policy/job-declaration.ts';
import { UsageError } from './command.ts';

/**
 * Imports the declarations: the project's `src/jobs.ts` (under the current directory), or `module`
 * (a path relative to the current directory that exports `jobs`).
 *
 * @throws {ConfigError} if the module exports no `jobs` array.
 */
async function loadDeclarations(
  module: string | undefined,
): Promise<readonly JobDeclaration[]> {
  const url =
    module === undefined || module === ''
      ? pathToFileURL(path.resolve('src/jobs.ts'))
      : pathToFileURL(path.resolve(module));
  const exported = (await import(url.href)) as { jobs?: unknown };
  if (!Array.isArray(exported.jobs)) {
    throw new ConfigError([
      `${url.pathname} must export \`jobs\`, an array of job declarations`,
    ]);
  }
  return exported.jobs as readonly JobDeclaration[];
}

/**
 * The validated declarations of `env.JOBS_MODULE` (or `src/jobs.ts`).
 *
 * @throws {ConfigError} listing every problem of the declarations (`runCommand` prints it, exit 1).
 * @example const jobs = await loadJobs(process.env);
 */
export async function loadJobs(
  env: NodeJS.ProcessEnv,
): Promise<readonly DeclaredJob[]> {
  return validateJobs(await loadDeclarations(env.JOBS_MODULE));
}

function notDeclared(
  jobs: readonly DeclaredJob[],
  ids: readonly string[],
): UsageError {
  return new UsageError(
    `no declared job ${ids.join(', ')} (declared: ${jobs.map((j) => j.id).join(', ')})`,
  );
}

/**
 * The declared job with the id `id`.
 *
 * @throws {UsageError} naming the declared ids, if none has that id.
 * @example const job = selectJob(await loadJobs(process.env), 'nightly-report');
 */
export function selectJob(
  jobs: readonly DeclaredJob[],
  id: string,
): DeclaredJob {
  const job = jobs.find((j) => j.id === id);
  if (job === undefined) {
    throw notDeclared(jobs, [id]);
  }
  return job;
}

/**
 * The declared jobs with the ids `ids`, in declaration order; all of them when `ids` is undefined.
 *
 * @throws {UsageError} naming the ids that are not declared, and the declared ones.
 * @example const jobs = selectJobs(await loadJobs(process.env), args.job);
 */
export function selectJobs(
  jobs: readonly DeclaredJob[],
  ids: readonly string[] | undefined,
): readonly DeclaredJob[] {
  if (ids === undefined) {
    return jobs;
  }
  const unknown = ids.filter((id) => !jobs.some((job) => job.id === id));
  if (unknown.length > 0) {
    throw notDeclared(jobs, unknown);
  }
  return jobs.filter((job) => ids.includes(job.id));
}
