/**
 * The declared jobs, for the operations commands: `src/jobs.ts`, or the module `JOBS_MODULE` names.
 * Imported directly (Node ≥ 22.18 strips the types): no build, no Firestore, no function.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ConfigError, describeThrown } from '../core/errors.ts';
import {
  type DeclaredJob,
  type JobDeclaration,
  validateJobs,
} from '../policy/job-declaration.ts';
import { isJobId } from '../policy/job-id.ts';
import { CommandError, UsageError } from './command.ts';

/**
 * The first place in `stack` inside the project's own files (`file:///…/src/jobs.ts:3:7`), as
 * `src/jobs.ts:3:7`, where the error of a module that failed to load was thrown; undefined when
 * the stack names none (Node's own frames, the library's).
 */
function projectLocation(
  stack: string,
  projectUrl: string,
): string | undefined {
  const prefix = projectUrl.endsWith('/') ? projectUrl : `${projectUrl}/`;
  for (const match of stack.matchAll(/file:\/\/[^\s()]+?:\d+(?::\d+)?/g)) {
    const location = match[0];
    if (location.startsWith(prefix) && !location.includes('/node_modules/')) {
      return location.slice(prefix.length);
    }
  }
  return undefined;
}

/**
 * Imports the module at `url` (the declarations), turning a failure to load it into one line
 * that says what to fix: a module that is not there (commands run in the project's directory), or
 * one that throws, does not parse or imports what is missing (its message and where, and how to
 * see the whole error). The commands print a {@link CommandError} without a stack.
 *
 * @throws {CommandError} when the module cannot be imported.
 */
async function importDeclarations(
  url: URL,
  named: boolean,
): Promise<{ jobs?: unknown }> {
  try {
    return (await import(url.href)) as { jobs?: unknown };
  } catch (err) {
    const file =
      path.relative(process.cwd(), fileURLToPath(url)) || fileURLToPath(url);
    const { code, url: missing } = err as { code?: unknown; url?: unknown };
    if (code === 'ERR_MODULE_NOT_FOUND' && missing === url.href) {
      throw new CommandError(
        named
          ? `JOBS_MODULE names ${file}, which is not there (relative to ${process.cwd()}): name the module that exports \`jobs\``
          : `no ${file} in ${process.cwd()}: run the command in your project's directory (the one with package.json and src/jobs.ts), or set JOBS_MODULE to the module that exports \`jobs\``,
      );
    }
    const projectUrl = pathToFileURL(process.cwd()).href;
    const where = projectLocation(
      String((err as Error)?.stack ?? ''),
      projectUrl,
    );
    const at = where === undefined ? '' : ` (at ${where})`;
    throw new CommandError(
      `${file} failed to load: ${describeThrown(err)}${at}; \`node ${file}\` shows the whole error`,
    );
  }
}

/**
 * Imports the declarations: the project's `src/jobs.ts` (under the current directory), or `module`
 * (a path relative to the current directory that exports `jobs`).
 *
 * @throws {ConfigError} if the module exports no `jobs` array.
 * @throws {CommandError} if the module is missing or fails to load ({@link importDeclarations}).
 */
async function loadDeclarations(
  module: string | undefined,
): Promise<readonly JobDeclaration[]> {
  const named = module !== undefined && module !== '';
  const file = module !== undefined && module !== '' ? module : 'src/jobs.ts';
  const url = pathToFileURL(path.resolve(file));
  const exported = await importDeclarations(url, named);
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

/**
 * An id as an error shows it: as it is when it is a job id, else quoted and escaped, so an empty
 * id shows as `""` and control characters cannot reach the terminal.
 */
function shownId(id: string): string {
  return isJobId(id) ? id : JSON.stringify(id);
}

function notDeclared(
  jobs: readonly DeclaredJob[],
  ids: readonly string[],
): UsageError {
  return new UsageError(
    `no declared job ${ids.map(shownId).join(', ')} (declared: ${jobs.map((j) => j.id).join(', ')})`,
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
