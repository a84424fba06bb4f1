/** Job declarations in code (id, schedule, zone, Scheduler settings, the work), and their check. */
import { ConfigError } from '../core/errors.ts';
import type { JobInfo, JobRun } from '../core/job-context.ts';
import {
  type CatchUpDeclaration,
  type CatchUpPolicy,
  catchUpPolicyOf,
} from './catch-up.ts';
import { isJobId, JOB_ID_RULE, jobIdOf } from './job-id.ts';
import {
  normaliseSchedule,
  scheduleProblem,
  timeZoneProblem,
} from './schedule.ts';

/** One job as declared: `id`, `schedule`, `run`, the rest {@link JOB_DEFAULTS}; durations in s. */
export interface JobDeclaration {
  /** The Cloud Scheduler job id: 1-500 letters, digits, `-`, `_`; part of every run id. */
  readonly id: string;
  /** When it runs: unix-cron, five fields, read in `timeZone` (the syntax: `scheduleProblem`). */
  readonly schedule: string;
  /** The tz database zone the schedule is read in, e.g. `Europe/Berlin`; default `Etc/UTC`. */
  readonly timeZone?: string;
  /** How long Scheduler waits for one attempt, 15-1800 s (HTTP targets); default 180. */
  readonly attemptDeadlineSeconds?: number;
  /** How many times Scheduler retries a failed attempt, 0-5; default 3. */
  readonly retryCount?: number;
  /** Retry time limit from the first attempt, s (0: only `retryCount` limits); default 3600. */
  readonly maxRetryDurationSeconds?: number;
  /** Shortest wait before a retry, s; default 30. */
  readonly minBackoffSeconds?: number;
  /** Longest wait before a retry, s, at least `minBackoffSeconds`; default 600. */
  readonly maxBackoffSeconds?: number;
  /** How many times the wait between retries doubles before it grows linearly, 0-999; default 5. */
  readonly maxDoublings?: number;
  /** What a slot does while an earlier run of the job still runs; default `allow`. */
  readonly overlap?: OverlapPolicy;
  /**
   * Whether the run audit runs a slot Scheduler never delivered, and which (`catch-up.ts`);
   * off unless declared.
   */
  readonly catchUp?: CatchUpDeclaration;
  /** The work: called at most once per scheduled run while each attempt holds its lease. */
  readonly run: JobRun;
}

/** Overlap policies, each with its answer and cost: docs/operations.md, "Overlap policy". */
export const OVERLAP_POLICIES = ['allow', 'skip', 'wait'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/** A validated declaration, every default filled in, frozen; fields as in {@link JobDeclaration}. */
export interface DeclaredJob
  extends JobInfo,
    Required<Omit<JobDeclaration, keyof JobInfo | 'catchUp'>> {
  /** The validated catch-up policy; `undefined`: the job is not caught up. */
  readonly catchUp?: CatchUpPolicy;
}

/** A job's Scheduler settings: its attempt deadline and retry config, all numbers. */
export type JobSettings = Omit<
  DeclaredJob,
  keyof JobInfo | 'run' | 'overlap' | 'catchUp'
>;

/** Defaults of the optional settings: `deploy.sh`'s before jobs were declared in code. */
export const JOB_DEFAULTS = Object.freeze({
  timeZone: 'Etc/UTC',
  attemptDeadlineSeconds: 180,
  retryCount: 3,
  maxRetryDurationSeconds: 3600,
  minBackoffSeconds: 30,
  maxBackoffSeconds: 600,
  maxDoublings: 5,
  overlap: 'allow' as OverlapPolicy,
} as const);

/** One year, in s: the longest duration `deploy.sh` and `config.ts` take. */
const MAX_SECONDS = 31_536_000;
/** Each setting's range: Scheduler's (sources: docs/jobs.md), durations capped at a year. */
export const SETTING_RANGES: {
  readonly [K in keyof JobSettings]: readonly [number, number];
} = {
  attemptDeadlineSeconds: [15, 1800],
  retryCount: [0, 5],
  maxRetryDurationSeconds: [0, MAX_SECONDS],
  minBackoffSeconds: [0, MAX_SECONDS],
  maxBackoffSeconds: [0, MAX_SECONDS],
  maxDoublings: [0, 999],
};

/**
 * Declares a job: returns `declaration` unchanged, for the type; {@link validateJobs} validates.
 * @example export const nightly = defineJob({ id: 'nightly', schedule: '0 2 * * *', run: report });
 */
export function defineJob(declaration: JobDeclaration): JobDeclaration {
  return declaration;
}

/**
 * Validates declarations and fills in defaults: the jobs in order, each frozen, in a frozen array.
 * @throws {ConfigError} listing every problem of every job at once, or of an empty list.
 */
export function validateJobs(
  declarations: readonly JobDeclaration[],
): readonly DeclaredJob[] {
  const problems: string[] = [];
  if (!Array.isArray(declarations) || declarations.length === 0) {
    throw new ConfigError([
      'no jobs are declared: src/jobs.ts must export at least one in `jobs`',
    ]);
  }
  const firstIndexOf = new Map<string, number>();
  const jobs: DeclaredJob[] = [];
  for (const [index, declaration] of declarations.entries()) {
    const what = jobLabel(declaration, index);
    const problem = (text: string) => problems.push(`${what}: ${text}`);
    if (typeof declaration !== 'object' || declaration === null) {
      problem(
        'is not a job declaration (use defineJob({ id, schedule, run }))',
      );
      continue;
    }
    checkJobId(declaration.id, index, firstIndexOf, problem);
    jobs.push(declaredJob(declaration, problem));
  }
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return Object.freeze(jobs);
}

/** What a problem says of a schedule that is neither a string nor missing. */
const SCHEDULE_NOT_A_STRING = 'must be a unix-cron string, e.g. "*/5 * * * *"';

/** How problems name the declaration at `index`: by its id where it has one, and its place. */
function jobLabel(declaration: JobDeclaration, index: number): string {
  const named = (declaration as { id?: unknown } | null)?.id;
  const at = `jobs[${index}]`;
  return typeof named === 'string' && named !== ''
    ? `job ${JSON.stringify(named)} (${at})`
    : at;
}

/** Tells `problem` of an id that is not a Scheduler job id or was declared before; notes it. */
function checkJobId(
  id: string,
  index: number,
  firstIndexOf: Map<string, number>,
  problem: (text: string) => void,
): void {
  const first = firstIndexOf.get(id);
  if (!isJobId(id)) {
    problem(
      `id ${JSON.stringify(id)} must be ${JOB_ID_RULE} (a Scheduler job id)`,
    );
  } else if (first !== undefined) {
    problem(
      `id "${id}" is already declared by jobs[${first}]; job ids must be unique`,
    );
  } else {
    firstIndexOf.set(id, index);
  }
}

/**
 * A declaration as a frozen job, defaults filled in and its schedule normalised; each problem of
 * its schedule, time zone, run, overlap and settings told to `problem`.
 */
function declaredJob(
  declaration: JobDeclaration,
  problem: (text: string) => void,
): DeclaredJob {
  const { id, schedule, run } = declaration;
  if (schedule === undefined) {
    problem('schedule is required');
  }
  const scheduleText =
    typeof schedule === 'string'
      ? scheduleProblem(schedule)
      : SCHEDULE_NOT_A_STRING;
  if (schedule !== undefined && scheduleText !== undefined) {
    problem(`schedule ${JSON.stringify(schedule)} ${scheduleText}`);
  }
  const timeZone = declaration.timeZone ?? JOB_DEFAULTS.timeZone;
  const zoneText =
    typeof timeZone === 'string'
      ? timeZoneProblem(timeZone)
      : 'must be a string';
  if (zoneText !== undefined) {
    problem(`timeZone ${JSON.stringify(timeZone)} ${zoneText}`);
  }
  if (typeof run !== 'function') {
    problem('run must be the job function, (ctx) => …');
  }
  const overlap = declaration.overlap ?? JOB_DEFAULTS.overlap;
  if (!OVERLAP_POLICIES.includes(overlap)) {
    problem(
      `overlap ${JSON.stringify(overlap)} must be one of ${OVERLAP_POLICIES.join(', ')}`,
    );
  }
  const settings = settingsOf(declaration, problem);
  const catchUp = catchUpPolicyOf(declaration.catchUp, problem);
  const normalised =
    typeof schedule === 'string' ? normaliseSchedule(schedule) : schedule;
  return Object.freeze({
    id,
    schedule: normalised,
    timeZone,
    ...settings,
    overlap,
    ...(catchUp === undefined ? {} : { catchUp }),
    run,
  });
}

/**
 * A declaration's retry and deadline settings, defaults filled in; each out of its range, and a
 * back-off whose minimum exceeds its maximum, told to `problem`.
 */
function settingsOf(
  declaration: JobDeclaration,
  problem: (text: string) => void,
): Record<keyof JobSettings, number> {
  const settings = {} as Record<keyof JobSettings, number>;
  for (const key of Object.keys(SETTING_RANGES) as (keyof JobSettings)[]) {
    const [min, max] = SETTING_RANGES[key];
    const value = declaration[key] ?? JOB_DEFAULTS[key];
    if (!Number.isInteger(value) || value < min || value > max) {
      problem(
        `${key} ${JSON.stringify(value)} must be a whole number from ${min} to ${max}`,
      );
    }
    settings[key] = value;
  }
  const { minBackoffSeconds: from, maxBackoffSeconds: to } = settings;
  if (from > to) {
    problem(
      `minBackoffSeconds (${from}) must not exceed maxBackoffSeconds (${to})`,
    );
  }
  return settings;
}

/** The declared job `X-CloudScheduler-JobName` names (either form: `jobIdOf`), if any. */
export function findJob(
  jobs: readonly DeclaredJob[],
  jobName: string,
): DeclaredJob | undefined {
  const id = jobIdOf(jobName);
  return id === undefined ? undefined : jobs.find((job) => job.id === id);
}

/** What `ctx.job` carries of a declared job: a new frozen object without `run` or settings. */
export function jobInfoOf(job: DeclaredJob): JobInfo {
  return Object.freeze({
    id: job.id,
    schedule: job.schedule,
    timeZone: job.timeZone,
  });
}
