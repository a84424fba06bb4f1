/**
 * `npm run jobs` (`node ops/jobs.ts`): lists the declared jobs with their next fire times.
 *
 *   node ops/jobs.ts [--json] [--after=2026-10-25T00:00:00Z] [--count N]
 *                                              the next N (3; at most 1000) times of each job,
 *                                              in UTC and in the job's zone with its offset
 *   node ops/jobs.ts --deploy                                   the lines deploy.sh reads
 *
 * With `--deploy` it also refuses (exit status 1, a `ConfigError`) declarations that import a
 * package `package.json` lists only in devDependencies (`ops/dependencies.ts`): a deploy would not
 * install it, so `deploy.sh` and its dry run refuse too.
 *
 * It imports the declarations directly (`src/jobs.ts`, or the module named by `JOBS_MODULE`, a path
 * relative to the current directory that exports `jobs`): no build, no Firestore, no function. Node
 * runs it as TypeScript by type stripping (Node ≥ 22.18). Invalid declarations: the `ConfigError`
 * message on stderr and exit status 1; bad arguments: exit status 2.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError } from '../core/errors.ts';
import { isEntryPoint, runCommand, UsageError } from './command.ts';
import { loadJobs } from './declarations.ts';
import {
  devOnlyImports,
  devOnlyProblems,
  type PackageLists,
} from './dependencies.ts';
import {
  COUNT,
  deployLines,
  jobsJson,
  jobsTable,
  parseCount,
  upcoming,
} from './format-jobs.ts';

/** What the command prints with a bad argument (exit 2) and for `--help`. */
export const USAGE =
  'usage: run-once jobs [--json | --deploy] [--after=RFC3339] [--count N]';

/** The project whose jobs these are: the directory the command runs in. */
const PROJECT_DIR = process.cwd();

/**
 * Refuses declarations that load a package only in devDependencies (`ops/dependencies.ts`).
 *
 * @throws {ConfigError} with one problem per package.
 */
function checkDependencies(env: NodeJS.ProcessEnv): void {
  const entry = env.JOBS_MODULE
    ? path.resolve(env.JOBS_MODULE)
    : path.join(PROJECT_DIR, 'src/jobs.ts');
  const packageJson = path.join(PROJECT_DIR, 'package.json');
  const lists = JSON.parse(readFileSync(packageJson, 'utf8')) as PackageLists;
  const problems = devOnlyProblems(devOnlyImports(entry, PROJECT_DIR, lists));
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
}

/**
 * `npm run jobs`, for {@link runCommand} and in-process tests: `argv` after the script, the
 * environment `env`; resolves to the exit status.
 */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { values: options } = parseArgs({
    args: argv,
    options: {
      json: { type: 'boolean' },
      deploy: { type: 'boolean' },
      after: { type: 'string' },
      count: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  const after =
    options.after === undefined ? new Date() : new Date(options.after);
  if (Number.isNaN(after.getTime())) {
    throw new UsageError(
      `--after ${JSON.stringify(options.after)} is not a date-time, e.g. 2026-10-25T00:00:00Z`,
    );
  }
  if (options.json && options.deploy) {
    throw new UsageError('--json and --deploy are two outputs; choose one');
  }
  let count: number = COUNT.default;
  try {
    if (options.count !== undefined) {
      count = parseCount(options.count);
    }
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const jobs = await loadJobs(env);
  if (options.deploy) {
    checkDependencies(env);
  }
  if (options.deploy) {
    console.log(deployLines(jobs));
  } else if (options.json) {
    console.log(jobsJson(upcoming(jobs, after, count)));
  } else {
    console.log(jobsTable(upcoming(jobs, after, count)));
    // This command reads the declarations only; Cloud Scheduler's side needs gcloud and a project.
    console.error(
      "jobs: this lists the declarations; Cloud Scheduler's side: gcloud scheduler jobs list --location=REGION. ./deploy.sh names a Scheduler job that calls the function but is not declared (a rename), and --prune deletes it",
    );
  }
  return 0;
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('jobs', USAGE, main);
}
