/**
 * `npm run pause -- JOB [--until T] [--note TEXT]` and `npm run resume -- JOB`
 * (`node ops/pause.ts pause|resume …`): pauses a declared job for maintenance, and resumes it.
 *
 * A pause is recorded on the job's check document (per job and key scope, `src/policy/pauses.ts`)
 * and the Cloud Scheduler job is paused with `gcloud scheduler jobs pause JOB --location=REGION
 * --project=P` (resumed with `… resume`). Where gcloud is missing or refuses (no account, no
 * permission), the command it would have run is printed, to run by someone who may. Against the
 * emulator (`FIRESTORE_EMULATOR_HOST`) only the record is written: `npm run dev`'s local Scheduler
 * reads it and fires nothing inside the pause. `--record-only` skips gcloud anywhere.
 *
 * Slots inside a pause with no record show as `paused` in `npm run runs` and are never reported
 * missed; a pause past `--until` (or a week without it) is reported once, and fails `runs --check`.
 *
 *   node ops/pause.ts pause JOB [--until RFC3339|DURATION] [--note TEXT] [--record-only]
 *   node ops/pause.ts resume JOB [--record-only]
 *     [--location REGION] [--scope VALUE] [--scope-header NAME=VALUE]… [--scope-param NAME=VALUE]…
 *     [--collection NAME] [--database ID] [--project ID]
 *
 * `--until` is a time (RFC 3339) or a duration from the pause's start (`90m`, `2h`, `3d`): at least a minute and
 * at most 30 days ahead. `--note` is at most 500 characters, on one line. Exit 0 when recorded (even
 * if the gcloud command was only printed: it says so), 1 when refused (already paused, not paused)
 * or Firestore fails, 2 on bad arguments.
 */
import { parseArgs } from 'node:util';
import type { Firestore, Settings } from '@google-cloud/firestore';
import { RunDocuments } from '../core/run-documents.ts';
import type { Config } from '../function/config.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { isJobId, JOB_ID_RULE } from '../policy/job-id.ts';
import { jobStateCollection } from '../policy/job-state.ts';
import { checkDocumentId } from '../policy/missed-run-cursor.ts';
import { type Pause, pauseBound } from '../policy/pauses.ts';
import { toUtcRfc3339 } from '../policy/schedule.ts';
import {
  CommandError,
  configWithFlags,
  isEntryPoint,
  namedPairs,
  runCommand,
  UsageError,
} from './command.ts';
import { loadJobs, selectJob } from './declarations.ts';
import { resolveTarget } from './deliver.ts';
import { parseDuration } from './format-runs.ts';
import {
  PauseRefused,
  type PauseUntil,
  PauseUntilRefused,
  pauseNoteProblem,
  recordPause,
  recordResume,
} from './pause-records.ts';
import { deliverResumeCatchUp, resumeCatchUp } from './resume-catch-up.ts';
import { withFirestore } from './run-queries.ts';
import {
  runSchedulerCommand,
  schedulerPauseArgs,
  shellLine,
} from './scheduler-pause.ts';
import { scopeOf, scopeRequest } from './scope-args.ts';

/** What the command prints with a bad argument (exit 2) and for `--help`. */
export const USAGE = `usage: run-once pause JOB [--until RFC3339|DURATION] [--note TEXT] [--record-only]
       run-once resume JOB [--record-only] [--catch-up [--url URL] [--invoker SA_EMAIL] [--token TOKEN]]
       [--location REGION] [--scope VALUE] [--scope-header NAME=VALUE]... [--scope-param NAME=VALUE]...
       [--collection NAME] [--database ID] [--project ID]
exit status: 0 recorded; 1 refused (already paused, not paused), Firestore failed, or a caught-up slot
             did not run; 2 bad arguments;
             4 recorded, but the Cloud Scheduler job was not changed (gcloud failed: the command is printed)`;

/** The pause or resume is recorded, but the Cloud Scheduler job was not changed. */
const EXIT_RECORDED_NOT_CARRIED_OUT = 4;

/** The project `npm run dev` gives the emulator. */
const EMULATOR_PROJECT = 'demo-scheduler-run-once';

/**
 * `--until` as the end of a pause from its start: RFC 3339, or a duration after the start. Parsed
 * before Firestore is opened, so that a malformed one is exit 2 at once; its bounds are checked by
 * `recordPause` against the start it records.
 *
 * @throws {UsageError} for text that is neither.
 */
function untilArg(text: string): PauseUntil {
  if (/^\d+[smhd]$/.test(text)) {
    let durationMs: number;
    try {
      durationMs = parseDuration(text);
    } catch (err) {
      throw new UsageError(`--until: ${(err as Error).message}`);
    }
    return (pausedAt) => new Date(pausedAt.getTime() + durationMs);
  }
  const at = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(at.getTime())) {
    throw new UsageError(
      `--until "${text}" is neither an RFC 3339 time (2026-12-01T18:00:00Z) nor a duration (2h)`,
    );
  }
  return () => at;
}

/**
 * `npm run pause` and `npm run resume`, for {@link runCommand} and in-process tests: `argv` after
 * the script (`pause|resume JOB …`), the environment `env`; resolves to the exit status.
 */
export function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return withFirestore((open) => pauseOrResume(argv, env, open));
}

/** {@link main}, with its Firestore client made by `open`. */
async function pauseOrResume(
  argv: string[],
  env: NodeJS.ProcessEnv,
  open: (settings: Settings) => Firestore,
): Promise<number> {
  const { values: args, positionals } = parsePauseArgs(argv);
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  const { verb, id } = verbAndJob(positionals, args);
  const request = await pauseRequest(verb, id, args, env);
  const jobDocuments = new RunDocuments(
    open({
      projectId: request.config.projectId ?? EMULATOR_PROJECT,
      databaseId: request.config.firestoreDatabase,
    }),
    {
      collection: jobStateCollection(request.config.runsCollection),
      retentionMs: request.config.retentionMs,
      timeoutMs: request.config.firestoreTimeoutMs,
    },
  );
  const pause = await recordPauseOrResume(request, jobDocuments);
  const status = pauseSchedulerJob(request);
  if (request.verb !== 'resume' || request.args['catch-up'] !== true) {
    return status;
  }
  const failed = await catchUpPausedSlots(request, pause, env);
  return failed > 0 ? 1 : status;
}

/** `resume --catch-up`: the paused range's slots, by the job's policy, each delivered in turn. */
async function catchUpPausedSlots(
  request: PauseRequest,
  pause: Pause,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { job, config, args } = request;
  const now = pause.resumedAt ?? new Date();
  const plan = resumeCatchUp(job, pause, now);
  const values = {
    headers: namedPairs(args['scope-header'], 'scope-header'),
    params: namedPairs(args['scope-param'], 'scope-param'),
  };
  const target = resolveTarget(args, env);
  const scope = scopeRequest(config, values);
  return deliverResumeCatchUp(job, plan, { target, scope });
}

/** `npm run pause`'s and `npm run resume`'s flags and words, parsed. */
function parsePauseArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      until: { type: 'string' },
      note: { type: 'string' },
      'record-only': { type: 'boolean' },
      'catch-up': { type: 'boolean' },
      url: { type: 'string' },
      invoker: { type: 'string' },
      token: { type: 'string' },
      location: { type: 'string' },
      scope: { type: 'string' },
      'scope-header': { type: 'string', multiple: true },
      'scope-param': { type: 'string', multiple: true },
      collection: { type: 'string' },
      database: { type: 'string' },
      project: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** The command's flags. */
type PauseArgs = ReturnType<typeof parsePauseArgs>['values'];

/** The verb (`pause` or `resume`) and the one job id the words name. */
function verbAndJob(
  positionals: readonly string[],
  args: PauseArgs,
): { verb: 'pause' | 'resume'; id: string } {
  const [verb, id, ...rest] = positionals;
  if (verb !== 'pause' && verb !== 'resume') {
    throw new UsageError(
      'the first word is pause or resume (npm run pause / npm run resume)',
    );
  }
  if (id === undefined) {
    throw new UsageError('name the job: JOB');
  }
  if (rest.length > 0) {
    throw new UsageError(`one job at a time; also got ${rest.join(' ')}`);
  }
  if (!isJobId(id)) {
    throw new UsageError(`"${id}" is not a job id (${JOB_ID_RULE})`);
  }
  if (
    verb === 'resume' &&
    (args.until !== undefined || args.note !== undefined)
  ) {
    throw new UsageError('--until and --note go with pause');
  }
  const delivers = ['catch-up', 'url', 'invoker', 'token'] as const;
  if (verb === 'pause' && delivers.some((flag) => args[flag] !== undefined)) {
    throw new UsageError(
      '--catch-up, --url, --invoker and --token go with resume',
    );
  }
  if (
    args['catch-up'] !== true &&
    (args.url ?? args.invoker ?? args.token) !== undefined
  ) {
    throw new UsageError('--url, --invoker and --token go with --catch-up');
  }
  return { verb, id };
}

/** A pause or resume to record, checked: its job, document, bounds and Scheduler job. */
interface PauseRequest {
  readonly verb: 'pause' | 'resume';
  readonly args: PauseArgs;
  readonly config: Config;
  readonly job: DeclaredJob;
  /** The job's check document, per key scope. */
  readonly docId: string;
  readonly until: PauseUntil | undefined;
  /** Against the emulator: only the record is written. */
  readonly local: boolean;
  /** Where the Cloud Scheduler job lives. */
  readonly location: string | undefined;
}

/** The checked request: configuration, job, scope and bounds, each refused with exit 2. */
async function pauseRequest(
  verb: 'pause' | 'resume',
  id: string,
  args: PauseArgs,
  env: NodeJS.ProcessEnv,
): Promise<PauseRequest> {
  const config = configWithFlags(env, args);
  const job = selectJob(await loadJobs(env), id);
  const scope = scopeOf(config, {
    headers: namedPairs(args['scope-header'], 'scope-header'),
    params: namedPairs(args['scope-param'], 'scope-param'),
  });
  const local = Boolean(env.FIRESTORE_EMULATOR_HOST);
  const location = args.location ?? env.REGION;
  if (!local && config.projectId === undefined) {
    throw new UsageError(
      'set GOOGLE_CLOUD_PROJECT or --project (or FIRESTORE_EMULATOR_HOST)',
    );
  }
  if (!local && !args['record-only'] && location === undefined) {
    throw new UsageError(
      'set REGION or --location: where the Cloud Scheduler job lives',
    );
  }
  if (local) {
    env.METADATA_SERVER_DETECTION ??= 'none';
    process.env.METADATA_SERVER_DETECTION ??= 'none';
  }
  const docId = checkDocumentId(job.id, scope);
  // The bounds the function holds stored pauses to, checked first so that a typo is exit 2; the
  // bounds of --until are checked once, against the start the pause records (its read's time).
  const noteProblem = pauseNoteProblem(args.note ?? '');
  if (noteProblem !== undefined) {
    throw new UsageError(`--note: ${noteProblem}`);
  }
  const until = args.until === undefined ? undefined : untilArg(args.until);
  return { verb, args, config, job, docId, until, local, location };
}

/**
 * Records the pause (or the resume) on the job's document, and prints it.
 *
 * @throws {UsageError} for an `--until` out of bounds; {@link CommandError} when refused.
 */
async function recordPauseOrResume(
  request: PauseRequest,
  jobDocuments: RunDocuments,
): Promise<Pause> {
  const { verb, job, docId, until, args } = request;
  try {
    if (verb === 'pause') {
      const pause = await recordPause(jobDocuments, docId, job.id, {
        until,
        note: args.note ?? '',
      });
      console.log(
        `pause: ${job.id} paused since ${toUtcRfc3339(pause.pausedAt)}${pause.note === '' ? '' : ` (${pause.note})`}; reported if still paused at ${toUtcRfc3339(pauseBound(pause))}${pause.until === undefined ? ' (a week: give --until to say when it ends)' : ''}`,
      );
      return pause;
    } else {
      const pause = await recordResume(jobDocuments, docId, job.id);
      console.log(
        `resume: ${job.id} resumed at ${toUtcRfc3339(pause.resumedAt ?? pause.pausedAt)} (paused since ${toUtcRfc3339(pause.pausedAt)})`,
      );
      return pause;
    }
  } catch (err) {
    if (err instanceof PauseUntilRefused) {
      throw new UsageError(err.message);
    }
    if (err instanceof PauseRefused) {
      throw new CommandError(err.message);
    }
    throw err;
  }
}

/**
 * Pauses (or resumes) the Cloud Scheduler job with gcloud, or prints the command: with
 * `--record-only`, or where gcloud refuses. Against the emulator, says the record is enough.
 */
function pauseSchedulerJob(request: PauseRequest): number {
  const { verb, job, config, location, args } = request;
  if (request.local) {
    console.log(
      `${verb}: recorded in the emulator: npm run dev's local Scheduler honours it`,
    );
    return 0;
  }
  const gcloudArgs = schedulerPauseArgs(verb, {
    jobId: job.id,
    location: location ?? 'REGION',
    project: config.projectId ?? '',
  });
  if (args['record-only']) {
    console.log(
      `${verb}: recorded only (--record-only); the Cloud Scheduler job is unchanged:\n  ${shellLine(['gcloud', ...gcloudArgs])}`,
    );
    return 0;
  }
  const scheduler = runSchedulerCommand(verb, gcloudArgs);
  if (!scheduler.changed) {
    console.error(scheduler.message);
    return EXIT_RECORDED_NOT_CARRIED_OUT;
  }
  console.log(scheduler.message);
  return 0;
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('pause', USAGE, main);
}
