/**
 * Reads the job declarations the operations commands work on: `src/jobs.ts`, or the module named by
 * `JOBS_MODULE` (a path relative to the current directory that exports `jobs`). Node loads it from
 * the TypeScript sources by type stripping: no build needed.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../src/errors.ts';
import type { JobDeclaration } from '../src/job-declaration.ts';

/**
 * The `jobs` export of `module` (a path from the current directory), or of `src/jobs.ts` when
 * `module` is unset or empty. Not validated: pass the result to `validateJobs`.
 *
 * @throws {ConfigError} if the module does not export an array `jobs`.
 * @example
 * const jobs = validateJobs(await loadDeclarations(process.env.JOBS_MODULE));
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
