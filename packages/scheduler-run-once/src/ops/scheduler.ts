/**
 * `npm run scheduler` (`node ops/scheduler.ts`): a local Cloud Scheduler for a function already
 * running (`npm start`, or your own), firing every declared job on its schedule with the requests
 * and retries of Cloud Scheduler (`ops/local-scheduler.ts`), one line per delivery. `npm run dev`
 * runs the same Scheduler beside the emulator and the function.
 *
 *   node ops/scheduler.ts [--url URL] [--drop-answers RATE] [--duplicates RATE] [--certs-port PORT]
 *   node ops/scheduler.ts --fire JOB [--without-schedule-time] [--url URL] …   a forced run, followed to its end
 *
 * - `--url`: the function, `http://127.0.0.1:$PORT/` by default (`PORT` 8080 unless set).
 * - `--drop-answers RATE`: drop that share of answers after they arrive (0 to 1), as a lost
 *   acknowledgement: Scheduler retries, and the retry should be answered `duplicate`.
 * - `--duplicates RATE`: deliver that share of attempts twice at once, as a proxy retry would.
 * - `--fire JOB`: fire JOB now as `gcloud scheduler jobs run` does (its next slot as the schedule
 *   time), follow its retries, and exit: 0 if it ended with a 2xx answer, 1 if Scheduler gave up.
 *   `--without-schedule-time` sends it without `X-CloudScheduler-ScheduleTime`, the other form of
 *   a manual run the Scheduler guide names ("uses the timestamp of the next scheduled execution or
 *   may be omitted").
 * - With `AUTH_MODE=verify-oidc` (and `OIDC_AUDIENCE`, `OIDC_INVOKERS`, as for the function) every
 *   delivery carries an ID token signed by a local key whose certificates are served on
 *   127.0.0.1 (`--certs-port`, else the port of `OIDC_CERTS_URL`, else a free one); start the
 *   function with `OIDC_CERTS_URL` set to the URL printed.
 *
 * The jobs come from `src/jobs.ts`, or the module named by `JOBS_MODULE`, as for `npm run jobs`;
 * `JOB_HEADERS` and `JOB_QUERY` are read as `deploy.sh` reads them. Exit status 2 for bad
 * arguments or settings, 1 for invalid declarations.
 */
import { parseArgs } from 'node:util';
import { isEntryPoint, runCommand, UsageError } from './command.ts';
import { loadJobs } from './declarations.ts';
import { formatEvent } from './format-events.ts';
import { jobsTable, upcoming } from './format-jobs.ts';
import { LocalScheduler } from './local-scheduler.ts';
import { type OidcIssuer, startOidcIssuer } from './oidc-issuer.ts';
import {
  deliveryOptions,
  parseRate,
  schedulerSettings,
} from './scheduler-settings.ts';

/** What the command prints with a bad argument (exit 2) and for `--help`. */
export const USAGE =
  'usage: run-once scheduler [--url URL] [--fire JOB [--without-schedule-time]] [--drop-answers RATE] [--duplicates RATE] [--certs-port PORT]';

/** Resolves on the first SIGINT or SIGTERM. */
function interrupted(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}

/**
 * `npm run scheduler`, for {@link runCommand} and in-process tests: `argv` after the script, the
 * environment `env`; resolves to the exit status.
 */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { values: options } = parseSchedulerArgs(argv);
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  const { dropAnswers, duplicates, settings, url } = schedulerOptions(
    options,
    env,
  );
  const jobs = await loadJobs(env);
  const issuer = await startIssuer(settings, options);
  if (issuer === 'unserved') {
    return 2;
  }
  const idWidth = Math.max(...jobs.map((job) => job.id.length));
  const scheduler = new LocalScheduler({
    url,
    jobs,
    ...deliveryOptions(settings, issuer),
    dropAnswers,
    duplicates,
    onEvent: (event) => console.log(formatEvent(event, idWidth)),
  });

  try {
    if (options.fire !== undefined) {
      const withoutScheduleTime = options['without-schedule-time'] === true;
      const result = await scheduler.fire(options.fire, {
        withoutScheduleTime,
      });
      return result.succeeded ? 0 : 1;
    }
    console.log(`Local Cloud Scheduler → ${url} (Ctrl-C stops)`);
    console.log(jobsTable(upcoming(jobs, new Date(), 1)));
    scheduler.start();
    await interrupted();
    return 0;
  } catch (err) {
    console.error(`scheduler: ${(err as Error).message}`);
    return 2;
  } finally {
    await scheduler.stop();
    await issuer?.close();
  }
}

/** `npm run scheduler`'s flags, parsed. */
function parseSchedulerArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      url: { type: 'string' },
      fire: { type: 'string' },
      'without-schedule-time': { type: 'boolean' },
      'drop-answers': { type: 'string' },
      duplicates: { type: 'string' },
      'certs-port': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** The command's flags. */
type SchedulerArgs = ReturnType<typeof parseSchedulerArgs>['values'];

/**
 * The rates of lost answers and duplicates, the settings from the environment and the function's
 * URL, checked.
 *
 * @throws {UsageError} for a bad rate, setting, URL, or `--without-schedule-time` without `--fire`.
 */
function schedulerOptions(options: SchedulerArgs, env: NodeJS.ProcessEnv) {
  let dropAnswers: number;
  let duplicates: number;
  let settings: ReturnType<typeof schedulerSettings>;
  try {
    dropAnswers = parseRate('--drop-answers', options['drop-answers']);
    duplicates = parseRate('--duplicates', options.duplicates);
    settings = schedulerSettings(env);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (options['without-schedule-time'] && options.fire === undefined) {
    throw new UsageError('--without-schedule-time goes with --fire JOB');
  }
  const url = options.url ?? `http://127.0.0.1:${env.PORT || '8080'}/`;
  if (URL.parse(url) === null) {
    throw new UsageError(`--url ${JSON.stringify(url)} is not a URL`);
  }
  return { dropAnswers, duplicates, settings, url };
}

/**
 * With `AUTH_MODE=verify-oidc`, the local token issuer, serving its certificates; `unserved` when
 * its port cannot be had (said on stderr); undefined without OIDC.
 */
async function startIssuer(
  settings: ReturnType<typeof schedulerSettings>,
  options: SchedulerArgs,
): Promise<OidcIssuer | 'unserved' | undefined> {
  const { oidc } = settings;
  if (oidc === undefined) {
    return undefined;
  }
  const port = Number(
    options['certs-port'] ?? URL.parse(oidc.certsUrl ?? '')?.port ?? '0',
  );
  let issuer: OidcIssuer;
  try {
    issuer = await startOidcIssuer(port);
  } catch (err) {
    console.error(
      `scheduler: cannot serve the token certificates on port ${port}: ${(err as Error).message}`,
    );
    return 'unserved';
  }
  if (issuer.certsUrl !== oidc.certsUrl) {
    console.log(
      `OIDC tokens signed locally: start the function with OIDC_CERTS_URL=${issuer.certsUrl}`,
    );
  }
  return issuer;
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('scheduler', USAGE, main);
}
