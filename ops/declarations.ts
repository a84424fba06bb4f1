/**
 * The declared jobs, for the operations commands: `src/jobs.ts`, or the module `JOBS_MODULE` names.
 * Imported directly (Node ≥ 22.18 strips the types): no build, no Firestore, no function.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../src/errors.ts';
import type { JobDeclaration } from '../src/job-declaration.ts';

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
