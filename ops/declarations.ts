/**
 * The declared jobs, for the operations commands: `src/jobs.ts`, or the module `JOBS_MODULE` names.
 * Imported directly (Node ≥ 22.18 strips the types): no build, no Firestore, no function.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../src/errors.ts';
import { type DeclaredJob, type JobDeclaration, validateJobs } from '../src/job-declaration.ts';

/**
 * Imports the declarations: `src/jobs.ts`, or `module` (a path relative to the current directory
 * that exports `jobs`).
 *
 * @throws {ConfigError} if the module exports no `jobs` array.
 * @example const jobs = validateJobs(await loadDeclarations(process.env.JOBS_MODULE));
 */
export async function loadDeclarations(
  module: string | undefined,
): Promise<readonly JobDeclaration[]> {
  const url =
    module === undefined || module === ''
      ? new URL('../src/jobs.ts', import.meta.url)
      : pathToFileURL(path.resolve(module));
  const exported = (await import(url.href)) as { jobs?: unknown };
  if (!Array.isArray(exported.jobs)) {
    throw new ConfigError([`${url.pathname} must export \`jobs\`, an array of job declarations`]);
  }
  return exported.jobs as readonly JobDeclaration[];
}

/**
 * The validated declarations of `env.JOBS_MODULE` (or `src/jobs.ts`), or `undefined` after printing
 * every problem on stderr: the command then exits 1.
 *
 * @example const jobs = await loadJobs(process.env); if (jobs === undefined) return 1;
 */
export async function loadJobs(
  env: NodeJS.ProcessEnv,
): Promise<readonly DeclaredJob[] | undefined> {
  try {
    return validateJobs(await loadDeclarations(env.JOBS_MODULE));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    return undefined;
  }
}
