/**
 * `npm run runs` (`node ops/runs.ts`): the history of each declared job — every slot its schedule
 * says should exist in a window, looked up by run id (batched reads, no query, no index), with what
 * became of it: completed, failed, in_progress, missed or pending.
 *
 *   node ops/runs.ts [--since 24h|RFC3339] [--job ID] [--json | --html FILE] [--check] [--now RFC3339]
 *                    [--scope NAME=VALUE]… [--scope VALUE] [--scope-header NAME=VALUE]… [--scope-param NAME=VALUE]…
 *                    [--collection NAME] [--database ID] [--project ID]
 *                    [--backfill [--dry-run | --yes] [--include-before-first-record]
 *                                [--url URL] [--invoker SA_EMAIL] [--token TOKEN]]
 *
 * `--since`: a length back from now, or the RFC 3339 time the window starts at (what every command
 * it suggests names: run later, it covers the same slots); when it starts the window right after
 * missed slots, a line on stderr says so (`warnOfCutOff`). Slots before a job's first record are
 * one story everywhere: `not judged (before first record)`, one count (`noRunRows`).
 * Without `--since`: the last 10 slots of every job. `--html FILE` writes the same rows as one
 * static page instead of the table (`ops/format-html.ts`; `-` for stdout). The run ids use the deployed function's scope:
 * `RUN_KEY_SCOPE`, `RUN_KEY_SCOPE_HEADERS`, `RUN_KEY_SCOPE_PARAMS`, `RUNS_COLLECTION`,
 * `FIRESTORE_DATABASE` and `GOOGLE_CLOUD_PROJECT` from the environment, or the flags; each scope
 * header's or parameter's value from `--scope NAME=VALUE` (`ops/scope-args.ts`; `--scope VALUE`
 * alone is `RUN_KEY_SCOPE`), every one configured required. `--backfill` sends them with each
 * delivery as the function reads them, and checks that the function's run id is the one listed. Against the
 * emulator with `FIRESTORE_EMULATOR_HOST` set; against a project with Application Default
 * Credentials. `--check` exits 1 when a slot in the window is missed (one before the job's oldest
 * record in the window does not count), failed past its retry window, or unreadable; each line it
 * prints ends with the command that fixes it (`checkLines`). A window of more than `MAX_SLOTS`
 * (10,000) slots of a job shows its newest slots, never the oldest, and `--check` then exits 3
 * ({@link EXIT_TOO_LARGE}) if it found nothing else: a window it cannot judge is never green.
 * `--backfill` lists the missed slots it may deliver (within `RETENTION_SECONDS`, after the job's
 * oldest record in the window, at most 100), asks (a terminal; `--yes` for scripts; `--dry-run`
 * only lists), and delivers them oldest first, one at a time, as Scheduler would (to the local
 * function, or `--url` with an ID token: `ops/deliver.ts`): `ops/backfill.ts`. It exits 1 if any
 * answer was not 2xx, or if nothing was delivered for want of a confirmation. Bad arguments exit 2; invalid declarations or configuration,
 * or an unreachable Firestore or function, exit 1 (`ops/command.ts`).
 */

import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Firestore, Settings } from '@google-cloud/firestore';
import { ConfigError } from '../core/errors.ts';
import { RunDocuments } from '../core/run-documents.ts';
import type { Scope } from '../core/run-key.ts';
import type { StoredRecord } from '../core/run-record.ts';
import type { Config } from '../function/config.ts';
import {
  type DeclaredJob,
  defineJob,
  validateJobs,
} from '../policy/job-declaration.ts';
import { isJobId, JOB_ID_RULE } from '../policy/job-id.ts';
import { jobStateCollection } from '../policy/job-state.ts';
import { checkDocumentId } from '../policy/missed-run-cursor.ts';
import { isUnreadable } from '../policy/missed-run-rules.ts';
import { type Pause, pauseBound, readPauses } from '../policy/pauses.ts';
import { RunHistory } from '../policy/run-history.ts';
import {
  MAX_SLOTS,
  nextSlots,
  slotsBetween,
  toUtcRfc3339,
} from '../policy/schedule.ts';
import {
  forcedRunToleranceMs,
  retentionProblems,
} from '../policy/schedule-time.ts';
import { planBackfill, runBackfill } from './backfill.ts';
import {
  type CheckRead,
  checkCursorOf,
  claimsOf,
  isJudgedSlot,
  olderRulesSlots,
  rulesInForce,
} from './check-rules.ts';
import {
  configWithFlags,
  isEntryPoint,
  namedPairs,
  runCommand,
  UsageError,
} from './command.ts';
import { loadJobs, selectJobs } from './declarations.ts';
import { resolveTarget } from './deliver.ts';
import { runsHtml } from './format-html.ts';
import {
  BEFORE_FIRST_RECORD,
  beforeFirstRecordLine,
  checkFailures,
  checkLines,
  countedRows,
  noRunRows,
  parseSince,
  runsJson,
  runsTable,
} from './format-runs.ts';
import {
  MAX_LISTED,
  type RunsCollection,
  recordsOfJob,
  runsOutsideSlots,
  withFirestore,
} from './run-queries.ts';
import {
  type ScopeArgs,
  scopeArgs,
  scopeOf,
  scopeRequest,
} from './scope-args.ts';
import {
  pausedRow,
  readHistory,
  type SlotRow,
  slotRow,
} from './slot-history.ts';
import { previousSlots } from './slots.ts';

/** What the command prints with a bad argument (exit 2) and for `--help`. */
export const USAGE = `usage: run-once runs [--since 24h|RFC3339] [--job ID] [--json | --html FILE] [--check] [--now RFC3339]
       [--scope NAME=VALUE]... [--scope VALUE] [--scope-header NAME=VALUE]... [--scope-param NAME=VALUE]...
       [--collection NAME] [--database ID] [--project ID]
       [--backfill [--dry-run | --yes] [--include-before-first-record]
                   [--url URL] [--invoker SA_EMAIL] [--token TOKEN]]
exit status: 0 fine; 1 a problem found (--check: missed, finally failed or unreadable slots,
             a job whose check cursor the function cannot read; --backfill: an answer not 2xx,
             nothing delivered for want of a confirmation, or such a cursor);
             2 bad arguments; 3 --check found none, but a window held more than 10000 slots of a job
             (only its newest were judged: narrow --since)`;
const DEFAULT_SLOTS = 10;

/** The project `npm run dev` and `scripts/with-emulator.ts` give the emulator by default. */
const EMULATOR_PROJECT = 'demo-scheduler-run-once';

/**
 * Against the emulator there are no credentials to find, but google-gax still asks
 * google-auth-library for a client (`GrpcClient.createStub` → `getUniverseDomain`), which probes
 * the GCE metadata server and, off Google Cloud, prints `MetadataLookupWarning: … 403, ENOTFOUND`
 * on every call. gcp-metadata reads `METADATA_SERVER_DETECTION` from `process.env` when it probes,
 * so this sets it (unless the user did) before the first Firestore call; against a real project
 * nothing changes.
 */
function quietAgainstEmulator(env: NodeJS.ProcessEnv): void {
  env.METADATA_SERVER_DETECTION ??= 'none';
  process.env.METADATA_SERVER_DETECTION ??= 'none';
}

/** `--since`: a window length, or an RFC 3339 time where it starts, as ms before `now`. */
function sinceArg(text: string, now: Date): number {
  try {
    return parseSince(text, now);
  } catch (err) {
    throw new UsageError(`--since: ${(err as Error).message}`);
  }
}

/**
 * A stand-in declaration for an id that is no longer declared, to judge its records: Scheduler's
 * default retry settings (its own are unknown now), a schedule that is never consulted.
 */
function undeclaredJob(id: string): DeclaredJob {
  return validateJobs([
    defineJob({ id, schedule: '0 0 1 1 *', run: () => undefined }),
  ])[0] as DeclaredJob;
}

/**
 * Refuses `--job ID` for an id that is neither declared nor has any record (a typo, most often):
 * a renamed job's old id keeps its history readable; an id with nothing is a bad argument.
 *
 * @throws {UsageError} naming the declared ids, when no record of `id` exists at all.
 */
async function refuseUnknownJob(
  runs: Parameters<typeof recordsOfJob>[0],
  id: string,
  scope: Parameters<typeof recordsOfJob>[2],
  now: Date,
  declared: readonly DeclaredJob[],
): Promise<void> {
  const any = await recordsOfJob(runs, id, scope, undefined, now, { max: 1 });
  if (any.records.length === 0) {
    const ids = declared.map((job) => job.id).join(', ');
    throw new UsageError(
      `no declared job ${id}, and no record of it (declared: ${ids})`,
    );
  }
}

/** The rows of records found by a query, each at its own schedule time (records without one are left out). */
function rowsOf(
  job: DeclaredJob,
  records: readonly { runId: string; record: StoredRecord }[],
  now: Date,
  horizon: Date = now,
): SlotRow[] {
  return records.flatMap(({ runId, record }) => {
    const when =
      record.status === 'unreadable' ? undefined : record.scheduleTime;
    return when === undefined || when > horizon
      ? []
      : [slotRow(job, when, runId, record, now)];
  });
}

/**
 * The latest schedule time a run of `job` outside its slots can carry now: a forced run ("Force
 * run") carries the job's next slot, so its record is listed from the moment it exists, not once
 * that slot has come. The next slot plus a minute, the most forced-run tolerance deploy.sh leaves.
 */
function forcedRunHorizon(job: DeclaredJob, now: Date): Date {
  const next = nextSlots(job, now, 1)[0] ?? now;
  return new Date(next.getTime() + 60_000);
}

function listingCut(id: string): void {
  console.error(
    `runs: ${id}: more than ${MAX_LISTED} records outside its slots in the window; showing the newest (narrow --since)`,
  );
}

/** The job's active pause once past its bound, reported or not: a problem until resumed. */
function overdueAt(pauses: readonly Pause[], now: Date): Pause | undefined {
  const last = pauses.at(-1);
  if (last === undefined || last.resumedAt !== undefined) {
    return undefined;
  }
  return now >= pauseBound(last) ? last : undefined;
}

/** Exit status of `--check` when a window holds more slots than it judges ({@link MAX_SLOTS}). */
const EXIT_TOO_LARGE = 3;

/**
 * The slots of `job` to show: those in [now − since, now], or its last {@link DEFAULT_SLOTS}. A
 * window of more than {@link MAX_SLOTS} slots keeps the *newest* ones (the slots a monitor must
 * see), and says so with `truncated`. `from`: where the window starts, for the runs that are not
 * slots (now − since; the oldest slot shown if truncated or without `--since`; else now).
 */
function slotsOf(
  job: DeclaredJob,
  now: Date,
  sinceMs: number | undefined,
): { slots: Date[]; truncated: boolean; from: Date } {
  const end = new Date(now.getTime() + 1);
  if (sinceMs === undefined) {
    const slots = previousSlots(job, end, DEFAULT_SLOTS);
    return { slots, truncated: false, from: slots[0] ?? now };
  }
  const from = new Date(now.getTime() - sinceMs);
  const range = slotsBetween(job, from, end);
  if (!range.truncated) {
    return { slots: [...range.slots], truncated: false, from };
  }
  const slots = newestSlots(job, range.slots, end);
  return { slots, truncated: true, from: slots[0] ?? from };
}

/**
 * The newest slots of `job` in [from, to), at most {@link MAX_SLOTS}, oldest first, given the
 * oldest `first` of them (a truncated range from `from`). Walking back thousands of slots is slow
 * (croner walks back one at a time), so this starts as far before `to` as `first` spans and moves
 * the start later until the range fits: every slot after the start is there, none skipped.
 */
function newestSlots(
  job: DeclaredJob,
  first: readonly Date[],
  to: Date,
): Date[] {
  const oldest = first[0]?.getTime() ?? to.getTime();
  const newest = first.at(-1)?.getTime() ?? to.getTime();
  let span = Math.max(newest - oldest + 1, 1000);
  for (;;) {
    const range = slotsBetween(job, new Date(to.getTime() - span), to);
    if (!range.truncated) {
      return [...range.slots];
    }
    span = Math.floor(span * 0.9);
  }
}

/**
 * `npm run runs`, for {@link runCommand} and in-process tests: `argv` after the script, the
 * environment `env`; resolves to the exit status.
 */
export function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return withFirestore((open) => listRuns(argv, env, open));
}

/** {@link main}, with its Firestore client made by `open`. */
async function listRuns(
  argv: string[],
  env: NodeJS.ProcessEnv,
  open: (settings: Settings) => Firestore,
): Promise<number> {
  const args = parseRunsArgs(argv);
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  checkFlagPairs(args);
  const settings = runsSettings(args, env);
  const declared = await loadJobs(env);
  const { jobs, undeclared } = selectedJobs(args, settings.config, declared);
  const listing = openListing(settings, env, open);
  for (const job of jobs) {
    await listJob(listing, job);
  }
  for (const id of undeclared) {
    await listUndeclared(listing, id, declared);
  }
  const seenBefore = await jobsSeenBefore(listing, jobs);
  printListing(listing, seenBefore);
  const judged = await judgedRows(listing, jobs);
  if (args.backfill) {
    const status = await backfillMissed(listing, judged, jobs, seenBefore, env);
    // The backfill judged by the declared rules; a job whose check is off is still a problem.
    const off = cursorsOffLines(listing.cursorsOff, 'runs --backfill');
    for (const line of off) {
      console.error(line);
    }
    return status === 0 && off.length > 0 ? 1 : status;
  }
  if (!args.check) {
    return 0;
  }
  return reportCheck(listing, judged, jobs, seenBefore);
}

/** `npm run runs`'s flags, parsed. */
function parseRunsArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      since: { type: 'string' },
      job: { type: 'string', multiple: true },
      json: { type: 'boolean' },
      html: { type: 'string' },
      check: { type: 'boolean' },
      now: { type: 'string' },
      scope: { type: 'string', multiple: true },
      'scope-header': { type: 'string', multiple: true },
      'scope-param': { type: 'string', multiple: true },
      collection: { type: 'string' },
      database: { type: 'string' },
      project: { type: 'string' },
      backfill: { type: 'boolean' },
      'dry-run': { type: 'boolean' },
      yes: { type: 'boolean' },
      'include-before-first-record': { type: 'boolean' },
      url: { type: 'string' },
      invoker: { type: 'string' },
      token: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  }).values;
}

/** `npm run runs`'s flags. */
type RunsArgs = ReturnType<typeof parseRunsArgs>;

/** Refuses flags that do not go together. */
function checkFlagPairs(args: RunsArgs): void {
  if (args.json && args.html !== undefined) {
    throw new UsageError('--json and --html are two outputs; choose one');
  }
  const backfillOnly = (
    ['dry-run', 'yes', 'include-before-first-record'] as const
  ).filter((flag) => args[flag] === true);
  if (backfillOnly.length > 0 && !args.backfill) {
    throw new UsageError(`--${backfillOnly[0]} goes with --backfill`);
  }
  if (args['dry-run'] && args.yes) {
    throw new UsageError('--dry-run and --yes: choose one');
  }
}

/** What the listing reads by: the window, the time, the configuration and the key scope. */
interface RunsSettings {
  readonly args: RunsArgs;
  readonly config: Config;
  readonly scopeValues: ScopeArgs['values'];
  readonly scope: Scope;
  /** `--since`, ms; the last {@link DEFAULT_SLOTS} slots when not given. */
  readonly sinceMs: number | undefined;
  readonly now: Date;
  /** `--now`, when given: slots are judged at it, not at Firestore's time of each read. */
  readonly at: Date | undefined;
}

/** The window, the time, the configuration (the environment, then the flags) and the scope. */
function runsSettings(args: RunsArgs, env: NodeJS.ProcessEnv): RunsSettings {
  const now = args.now === undefined ? new Date() : new Date(args.now);
  if (Number.isNaN(now.getTime())) {
    throw new UsageError(`--now "${args.now}" is not a date-time`);
  }
  const sinceMs =
    args.since === undefined ? undefined : sinceArg(args.since, now);
  const fixedScope = (args.scope ?? []).filter((flag) => !flag.includes('='));
  if (fixedScope.length > 1) {
    throw new UsageError('--scope VALUE (RUN_KEY_SCOPE) given twice');
  }
  const config = configWithFlags(env, { ...args, scope: fixedScope[0] });
  const scopeValues = scopeArgs(config, args.scope ?? [], {
    allowFixed: true,
    headers: namedPairs(args['scope-header'], 'scope-header'),
    params: namedPairs(args['scope-param'], 'scope-param'),
  }).values;
  const scope = scopeOf(config, scopeValues);
  const at = args.now === undefined ? undefined : now;
  return { args, config, scopeValues, scope, sinceMs, now, at };
}

/**
 * The declared jobs `--job` selects (all without it), and the ids it names that are no longer
 * declared, whose history is read from their records. Refuses a retention that misses slots.
 */
function selectedJobs(
  args: RunsArgs,
  config: Config,
  declared: readonly DeclaredJob[],
): { jobs: readonly DeclaredJob[]; undeclared: readonly string[] } {
  const mismatch = retentionProblems(
    declared,
    config.retentionMs,
    config.forcedRunToleranceMs,
  );
  if (mismatch.length > 0) {
    throw new ConfigError(mismatch);
  }
  const undeclared = (args.job ?? []).filter(
    (id) => !declared.some((job) => job.id === id),
  );
  for (const id of undeclared) {
    if (!isJobId(id)) {
      throw new UsageError(`--job "${id}" is not a job id (${JOB_ID_RULE})`);
    }
  }
  if (undeclared.length > 0 && (args.check || args.backfill)) {
    throw new UsageError(
      `--check and --backfill judge declared jobs; ${undeclared.join(', ')} is not declared (declared: ${declared.map((j) => j.id).join(', ')})`,
    );
  }
  const jobs = selectJobs(
    declared,
    args.job?.filter((id) => !undeclared.includes(id)) ?? undefined,
  );
  return { jobs, undeclared };
}

/** The listing under way: where it reads, and the rows, marks and problems found so far. */
interface RunsListing {
  readonly settings: RunsSettings;
  readonly runs: RunsCollection;
  readonly documents: RunDocuments;
  readonly jobDocuments: RunDocuments;
  readonly history: RunHistory;
  readonly rows: SlotRow[];
  /** Rows to mark: a record of an id no longer declared, or of a time no slot of the schedule has. */
  readonly marks: Map<SlotRow, string>;
  /** Each declared job's active pause past its bound: a problem for `--check`. */
  readonly overdue: { job: string; pause: Pause }[];
  /** Jobs whose window held more slots than one call judges. */
  readonly tooLarge: string[];
  /**
   * Each declared job whose check cursor the function cannot read, and why: its check judges no
   * slot of the job, so no `missed run` comes until the cursor is repaired. A problem for `--check`.
   */
  readonly cursorsOff: CursorOff[];
  /** Whether the warning that the window reaches past the retention was printed. */
  warned: boolean;
}

/**
 * A job whose check cursor the function cannot read: the document, why, and, where it reads again
 * by itself (a cursor of a shorter retry window), when (ms).
 */
interface CursorOff {
  readonly job: string;
  readonly document: string;
  readonly reason: string;
  readonly readsAgainAt: number | undefined;
}

/** Opens the run records and job documents of the project (or the emulator's), empty-handed. */
function openListing(
  settings: RunsSettings,
  env: NodeJS.ProcessEnv,
  open: (settings: Settings) => Firestore,
): RunsListing {
  const { config } = settings;
  if (config.projectId === undefined && !env.FIRESTORE_EMULATOR_HOST) {
    throw new UsageError(
      'set GOOGLE_CLOUD_PROJECT or --project (or FIRESTORE_EMULATOR_HOST)',
    );
  }
  if (env.FIRESTORE_EMULATOR_HOST) {
    quietAgainstEmulator(env);
  }
  const db = open({
    // The emulator keeps each project's data apart: without a project, read the one `npm run
    // dev` and `scripts/with-emulator.ts` use rather than fail to detect one.
    projectId: config.projectId ?? EMULATOR_PROJECT,
    databaseId: config.firestoreDatabase,
  });
  const documents = new RunDocuments(db, {
    collection: config.runsCollection,
    retentionMs: config.retentionMs,
    timeoutMs: config.firestoreTimeoutMs,
  });
  const jobDocuments = new RunDocuments(db, {
    collection: jobStateCollection(config.runsCollection),
    retentionMs: config.retentionMs,
    timeoutMs: config.firestoreTimeoutMs,
  });
  return {
    settings,
    runs: {
      db,
      collection: config.runsCollection,
      timeoutMs: config.firestoreTimeoutMs,
    },
    documents,
    jobDocuments,
    history: new RunHistory(documents),
    rows: [],
    marks: new Map(),
    overdue: [],
    tooLarge: [],
    cursorsOff: [],
    warned: false,
  };
}

/** The slots of `declared` and `older` in time order. */
function sortedSlots(
  declared: readonly Date[],
  older: readonly Date[],
): Date[] {
  return [...declared, ...older].sort((a, b) => a.getTime() - b.getTime());
}

/** Lists a declared job's slots in the window, and its runs beside them, oldest first. */
async function listJob(listing: RunsListing, job: DeclaredJob): Promise<void> {
  const { config, now, at, scope, sinceMs } = listing.settings;
  const declared = slotsOf(job, now, sinceMs);
  const { truncated, from } = declared;
  // The job's check document: its pauses, and the rules its slots were judged by.
  const checkRead = await listing.jobDocuments.readData(
    checkDocumentId(job.id, scope),
  );
  const tolerance = () =>
    forcedRunToleranceMs(job, config.forcedRunToleranceMs);
  const readSlots = (slots: readonly Date[]) =>
    readHistory(listing.history, job, slots, scope, at, tolerance);
  noteCursorOff(listing, job, checkRead);
  let rules = rulesInForce(checkRead, job, now);
  let older = olderRulesSlots(rules, job, from, now, MAX_SLOTS);
  let read = await readSlots(sortedSlots(declared.slots, older));
  const judgedAt = at ?? read.readTime;
  const slotIdsOf = (rows: readonly SlotRow[]) =>
    new Set(rows.map((row) => row.runId));
  let extra = await runsBesideSlots(
    listing,
    job,
    from,
    slotIdsOf(read.rows),
    judgedAt,
  );
  // The rules the listed records stamped, an old schedule's beside the slots included; the slots
  // of a rule learned are then read too, and its records are no longer listed beside them.
  const claims = claimsOf([...read.rows, ...extra], job.id);
  const learned = rulesInForce(checkRead, job, now, claims);
  if (JSON.stringify(learned) !== JSON.stringify(rules)) {
    rules = learned;
    older = olderRulesSlots(rules, job, from, now, MAX_SLOTS);
    read = await readSlots(sortedSlots(declared.slots, older));
    const slotIds = slotIdsOf(read.rows);
    extra = extra.filter((row) => !slotIds.has(row.runId));
  }
  warnOfWindow(
    listing,
    job,
    read.rows.map((row) => row.slot),
    truncated,
  );
  const pauses = jobPauses(listing, job, checkRead, judgedAt);
  if (sinceMs !== undefined && !truncated) {
    const judging = { rules, pauses, tolerance };
    await warnOfCutOff(listing, job, from, judging);
  }
  const olderTimes = new Set(older.map((slot) => slot.getTime()));
  const slotRows = read.rows.map((row) => pausedRow(row, pauses));
  for (const row of slotRows) {
    if (olderTimes.has(row.slot.getTime())) {
      listing.marks.set(row, 'old schedule');
    }
  }
  const sorted = [...slotRows, ...extra].sort(
    (a, b) => a.slot.getTime() - b.slot.getTime(),
  );
  listing.rows.push(...sorted);
}

/** The most slots before a `--since` window {@link warnOfCutOff} reads: one batched read. */
const CUT_OFF_LOOKBACK = 100;

/** How a job's slots are judged in a listing: its rules, its pauses, its forced-run tolerance. */
interface SlotJudging {
  readonly rules: ReturnType<typeof rulesInForce>;
  readonly pauses: readonly Pause[];
  readonly tolerance: () => number;
}

/**
 * Says when the user's `--since` starts the window right after missed slots: the slots right before the
 * window that are missed too (judged as `--check` would: by the rules in force, after a record of
 * the job), which the listing, `--check` and `--backfill` then leave out. Names the oldest of them
 * (of the last {@link CUT_OFF_LOOKBACK} slots) as the `--since` that takes them in. Costs one
 * document read when the slot right before the window is not missed (most often).
 */
async function warnOfCutOff(
  listing: RunsListing,
  job: DeclaredJob,
  from: Date,
  judging: SlotJudging,
): Promise<void> {
  const { args, scope } = listing.settings;
  // The slot right before the window first (one read, most often the end of it), then the rest.
  const last = await rowsBefore(listing, job, from, 1, judging);
  if (missedRunBefore(last, judging.rules).length === 0) {
    return;
  }
  const rows = await rowsBefore(listing, job, from, CUT_OFF_LOOKBACK, judging);
  const cut = missedRunBefore(rows, judging.rules);
  const oldest = cut[0];
  if (oldest === undefined) {
    return;
  }
  // Slots before the job's first record are not missed for the check: a record before them, then.
  const earlier = await recordsOfJob(
    listing.runs,
    job.id,
    scope,
    undefined,
    new Date(oldest.slot.getTime() - 1),
    { pageSize: 20, max: 1 },
  );
  if (earlier.records.length === 0) {
    return;
  }
  const count = `${cut.length === rows.length ? 'at least ' : ''}${cut.length}`;
  const start = toUtcRfc3339(oldest.slot);
  console.error(
    `runs: ${job.id}: --since ${args.since} starts the window at ${toUtcRfc3339(from)}, after ${count} missed slot(s) of the job, the oldest ${start}: they are left out of this listing, --check and --backfill; --since ${start} takes them in`,
  );
}

/** The rows of the `count` slots of `job` right before `from`, oldest first, as the listing judges them. */
async function rowsBefore(
  listing: RunsListing,
  job: DeclaredJob,
  from: Date,
  count: number,
  judging: SlotJudging,
): Promise<SlotRow[]> {
  const { scope, at } = listing.settings;
  const slots = previousSlots(job, from, count);
  if (slots.length === 0) {
    return [];
  }
  const read = await readHistory(
    listing.history,
    job,
    slots,
    scope,
    at,
    judging.tolerance,
  );
  return read.rows.map((row) => pausedRow(row, judging.pauses));
}

/**
 * The run of missed slots at the end of `rows` (a job's slots, oldest first, right before a
 * window), oldest first: every slot after the last one that is not missed, or not judged by `rules`.
 */
function missedRunBefore(
  rows: readonly SlotRow[],
  rules: SlotJudging['rules'],
): SlotRow[] {
  const run: SlotRow[] = [];
  for (const row of [...rows].reverse()) {
    if (row.state !== 'missed' || !isJudgedSlot(rules, row.slot)) {
      break;
    }
    run.unshift(row);
  }
  return run;
}

/** Warns when a job's window holds too many slots, or (once) reaches past the retention. */
function warnOfWindow(
  listing: RunsListing,
  job: DeclaredJob,
  slots: readonly Date[],
  truncated: boolean,
): void {
  const { config, now } = listing.settings;
  const oldest = slots[0];
  if (truncated) {
    listing.tooLarge.push(job.id);
    console.error(
      `runs: ${job.id}: the window holds more than ${MAX_SLOTS} slots; showing the newest ${slots.length}, from ${oldest === undefined ? '-' : toUtcRfc3339(oldest)} (narrow --since, or check older slots with --now)`,
    );
  }
  const pastRetention =
    oldest !== undefined &&
    now.getTime() - oldest.getTime() > config.retentionMs;
  if (!listing.warned && pastRetention) {
    listing.warned = true;
    console.error(
      `runs: the window reaches past RETENTION_SECONDS (${config.retentionMs / 1000} s): a TTL policy may have deleted older records, which then show as missed`,
    );
  }
}

/**
 * Says when the function's missed-run check is off for `job`: its check cursor, read as the
 * function reads it (`checkCursorOf`), holds what this version never writes. The listing still
 * judges the job's slots by its declared rule; `--check` and `--backfill` fail.
 */
function noteCursorOff(
  listing: RunsListing,
  job: DeclaredJob,
  checkRead: CheckRead,
): void {
  const cursor = checkCursorOf(checkRead, job, listing.settings.now);
  if (!isUnreadable(cursor)) {
    return;
  }
  const document = checkDocumentId(job.id, listing.settings.scope);
  const { unreadable: reason, readsAgainAt } = cursor;
  const off = { job: job.id, document, reason, readsAgainAt };
  listing.cursorsOff.push(off);
  console.error(
    `runs: ${job.id}: its check cursor ${document} is unreadable (${reason}): the function reports no missed run of it ${offUntil(off)} (docs/limits.md, "Unreadable records")`,
  );
}

/** Until when the function's check of a job is off: until repaired, or until it reads again. */
function offUntil(off: CursorOff): string {
  return off.readsAgainAt === undefined
    ? 'until the cursor is repaired'
    : `until ${toUtcRfc3339(new Date(Math.ceil(off.readsAgainAt / 1000) * 1000))}, when it reads the cursor again by itself (nothing to repair)`;
}

/**
 * A line for each job whose check is off ({@link noteCursorOff}), headed `command`: what to do,
 * repair its cursor or wait until it reads again by itself.
 */
function cursorsOffLines(
  cursorsOff: readonly CursorOff[],
  command: string,
): string[] {
  return cursorsOff.map((off) =>
    off.readsAgainAt === undefined
      ? `${command}: ${off.job}: the function's missed-run check is off: repair or delete its cursor ${off.document} (docs/limits.md, "Unreadable records")`
      : `${command}: ${off.job}: the function's missed-run check is off ${offUntil(off)}`,
  );
}

/**
 * The job's pauses (`npm run pause`): a slot inside one with no record is `paused`, not missed.
 * Read against Firestore's time of the read, not `--now`: a pause time after it is not ours.
 * Notes a pause past its bound at `judgedAt` as overdue.
 */
function jobPauses(
  listing: RunsListing,
  job: DeclaredJob,
  checkRead: Awaited<ReturnType<RunDocuments['readData']>>,
  judgedAt: Date,
): readonly Pause[] {
  const stored = readPauses(checkRead.data, checkRead.readTime);
  if (stored === 'unreadable') {
    console.error(
      `runs: ${job.id}: the pauses on its document ${checkDocumentId(job.id, listing.settings.scope)} hold fields this version never writes; no slot shows as paused (docs/operations.md, "Pause and resume")`,
    );
  }
  const pauses = stored === 'unreadable' ? [] : stored;
  const late = overdueAt(pauses, judgedAt);
  if (late !== undefined) {
    listing.overdue.push({ job: job.id, pause: late });
  }
  return pauses;
}

/**
 * The job's runs in the window that are not its slots: manual and forced runs and re-runs, and
 * records at times no slot of today's schedule has (an old schedule, marked so).
 */
async function runsBesideSlots(
  listing: RunsListing,
  job: DeclaredJob,
  from: Date,
  slotIds: ReadonlySet<string>,
  judgedAt: Date,
): Promise<SlotRow[]> {
  const { runs } = listing;
  const { now, scope } = listing.settings;
  // Manual and forced runs and re-runs of the job in the window: they are not slots, so they are listed by
  // a query of this job's runs, newest first, every page followed.
  const horizon = forcedRunHorizon(job, now);
  const outside = await runsOutsideSlots(runs, job.id, scope, from, horizon);
  if (outside.truncated) {
    listingCut(job.id);
  }
  // A forced run that was a slot's own delivery is listed as that slot, not again beside it.
  const besides = outside.records.filter(({ runId }) => !slotIds.has(runId));
  const extra = rowsOf(job, besides, judgedAt, horizon);
  // Records of the id at times no slot of today's schedule has (an old schedule): `runs` and
  // `runs --job` show the same slots.
  const own = await recordsOfJob(runs, job.id, scope, from, now);
  if (own.truncated) {
    listingCut(job.id);
  }
  const oldSchedule = own.records.filter(
    ({ runId, record }) =>
      record.status !== 'unreadable' &&
      record.kind === 'slot' &&
      !slotIds.has(runId),
  );
  for (const row of rowsOf(job, oldSchedule, judgedAt)) {
    listing.marks.set(row, 'old schedule');
    extra.push(row);
  }
  return extra;
}

/** Lists an id no longer declared (renamed or removed): its records, from their own job_name. */
async function listUndeclared(
  listing: RunsListing,
  id: string,
  declared: readonly DeclaredJob[],
): Promise<void> {
  const { now, at, scope, sinceMs } = listing.settings;
  const job = undeclaredJob(id);
  const from =
    sinceMs === undefined ? undefined : new Date(now.getTime() - sinceMs);
  const own = await recordsOfJob(listing.runs, id, scope, from, now, {
    max: sinceMs === undefined ? DEFAULT_SLOTS : undefined,
  });
  if (own.truncated && sinceMs !== undefined) {
    listingCut(id);
  }
  const found = rowsOf(
    job,
    own.records,
    at ?? (await listing.documents.serverTime()),
  );
  for (const row of found) {
    listing.marks.set(row, 'undeclared');
  }
  if (found.length === 0) {
    await refuseUnknownJob(listing.runs, id, scope, now, declared);
    console.error(
      `runs: ${id}: not declared, and no record of it in the window`,
    );
  }
  listing.rows.push(
    ...found.sort((a, b) => a.slot.getTime() - b.slot.getTime()),
  );
}

/**
 * The jobs with a record before their window. A job whose window starts with slots before its
 * first record there may simply be new; one with any record before the window existed all
 * along, and those slots count (one query each).
 */
async function jobsSeenBefore(
  listing: RunsListing,
  jobs: readonly DeclaredJob[],
): Promise<Set<string>> {
  const { rows } = listing;
  const seenBefore = new Set<string>();
  const counted = countedRows(rows);
  const uncounted = new Set(
    rows
      .filter((row) => row.kind === 'slot' && !counted.has(row))
      .map((row) => row.job),
  );
  for (const job of jobs) {
    const oldest = rows.find(
      (row) => row.job === job.id && row.kind === 'slot',
    )?.slot;
    if (!uncounted.has(job.id) || oldest === undefined) {
      continue;
    }
    // Pages of more than one: another scope's records are skipped, never taken for this one's.
    const before = await recordsOfJob(
      listing.runs,
      job.id,
      listing.settings.scope,
      undefined,
      new Date(oldest.getTime() - 1),
      { pageSize: 20, max: 1 },
    );
    if (before.records.length > 0) {
      seenBefore.add(job.id);
    }
  }
  return seenBefore;
}

/** Prints the rows: an HTML page (`--html`), JSON (`--json`), or the table (not with `--check`). */
function printListing(
  listing: RunsListing,
  seenBefore: ReadonlySet<string>,
): void {
  const { rows, marks } = listing;
  const { args, now, sinceMs } = listing.settings;
  if (args.html !== undefined) {
    const page = runsHtml(
      rows,
      {
        generatedAt: now,
        window:
          sinceMs === undefined
            ? `the last ${DEFAULT_SLOTS} slots`
            : `--since ${args.since}`,
      },
      { url: args.url },
      marks,
      seenBefore,
    );
    if (args.html === '-') {
      process.stdout.write(page);
    } else {
      writeFileSync(args.html, page);
      console.error(
        `runs: wrote ${args.html} (${rows.length} rows); open it in a browser`,
      );
    }
  } else if (args.json) {
    const checksOff = new Map(
      listing.cursorsOff.map((off) => [off.job, off.reason]),
    );
    console.log(runsJson(rows, marks, seenBefore, checksOff));
  } else if (!args.check) {
    // `--check` prints only the problems; the table is `runs` without it.
    console.log(runsTable(rows, marks, seenBefore));
    printBeforeFirstRecord(listing, seenBefore);
  }
}

/**
 * Under the table, how many slots it shows {@link BEFORE_FIRST_RECORD} and why (stderr, beside
 * the table's other notes); `--backfill` says it in its own summary, with the same count.
 */
function printBeforeFirstRecord(
  listing: RunsListing,
  seenBefore: ReadonlySet<string>,
): void {
  const line = beforeFirstRecordLine(listing.rows, seenBefore);
  if (line !== undefined && !listing.settings.args.backfill) {
    console.error(line);
  }
}

/**
 * The rows `--check` and `--backfill` judge: a slot is judged as the function does, by the
 * schedule in force when it was due (the rules its check cursor recorded), so the slots of
 * another rule are no misses.
 */
async function judgedRows(
  listing: RunsListing,
  jobs: readonly DeclaredJob[],
): Promise<SlotRow[]> {
  const { args, now, scope } = listing.settings;
  const outOfForce = new Set<SlotRow>();
  for (const job of args.check || args.backfill ? jobs : []) {
    const checkRead = await listing.jobDocuments.readData(
      checkDocumentId(job.id, scope),
    );
    const claims = claimsOf(listing.rows, job.id);
    const rules = rulesInForce(checkRead, job, now, claims);
    for (const row of listing.rows) {
      if (
        row.job === job.id &&
        row.state === 'missed' &&
        !isJudgedSlot(rules, row.slot)
      ) {
        outOfForce.add(row);
      }
    }
  }
  return listing.rows.filter((row) => !outOfForce.has(row));
}

/** `--backfill`: plans the missed slots' deliveries and sends them (or shows them). */
function backfillMissed(
  listing: RunsListing,
  judged: readonly SlotRow[],
  jobs: readonly DeclaredJob[],
  seenBefore: ReadonlySet<string>,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { args, config, now, scopeValues } = listing.settings;
  const plan = planBackfill(judged, jobs, {
    now,
    retentionMs: config.retentionMs,
    forcedRunToleranceMs: config.forcedRunToleranceMs,
    includeBeforeFirstRecord: args['include-before-first-record'] === true,
    seenBefore,
  });
  return runBackfill(plan, config.retentionMs, () => resolveTarget(args, env), {
    scope: scopeRequest(config, scopeValues),
    dryRun: args['dry-run'],
    yes: args.yes,
    interactive: process.stdin.isTTY === true && process.stderr.isTTY === true,
  });
}

/** `--check`: prints the problems (or that there is none); the exit status says which. */
function reportCheck(
  listing: RunsListing,
  judged: readonly SlotRow[],
  jobs: readonly DeclaredJob[],
  seenBefore: ReadonlySet<string>,
): number {
  const { rows, overdue, tooLarge, cursorsOff } = listing;
  const { args } = listing.settings;
  const failures = checkFailures(judged, seenBefore);
  for (const line of checkLines(failures, { url: args.url })) {
    console.error(line);
  }
  for (const line of cursorsOffLines(cursorsOff, 'runs --check')) {
    console.error(line);
  }
  for (const { job, pause } of overdue) {
    console.error(
      `runs --check: ${job} paused since ${toUtcRfc3339(pause.pausedAt)}${pause.note === '' ? '' : ` (${pause.note})`}, past its bound ${toUtcRfc3339(pauseBound(pause))}: npm run resume -- ${job}`,
    );
  }
  if (failures.length > 0 || overdue.length > 0 || cursorsOff.length > 0) {
    return 1;
  }
  if (tooLarge.length > 0) {
    console.error(
      `runs --check: ${tooLarge.join(', ')}: the window is too large to judge (more than ${MAX_SLOTS} slots); only the newest were checked: narrow --since, or check older slots with --now (exit ${EXIT_TOO_LARGE})`,
    );
    return EXIT_TOO_LARGE;
  }
  const paused = rows.filter((row) => row.state === 'paused').length;
  // The slots the table shows before their job's first record: the same count, never judged.
  const early = noRunRows(rows, countedRows(rows, seenBefore)).size;
  const apart = [
    ...(paused > 0 ? [`${paused} paused`] : []),
    ...(early > 0 ? [`${early} ${BEFORE_FIRST_RECORD}`] : []),
  ];
  console.error(
    `runs --check: no problem in ${rows.length} slots and runs of ${jobs.length} ${jobs.length === 1 ? 'job' : 'jobs'}${apart.length > 0 ? ` (${apart.join('; ')})` : ''}`,
  );
  return 0;
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('runs', USAGE, main);
}
