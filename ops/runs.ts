/**
 * `npm run runs` (`node ops/runs.ts`): the history of each declared job — every slot its schedule
 * says should exist in a window, looked up by run id (batched reads, no query, no index), with what
 * became of it: completed, failed, in_progress, missed or pending.
 *
 *   node ops/runs.ts [--since 24h] [--job ID] [--json | --html FILE] [--check] [--now RFC3339]
 *                    [--scope VALUE] [--scope-header NAME=VALUE]… [--scope-param NAME=VALUE]…
 *                    [--collection NAME] [--database ID] [--project ID]
 *                    [--backfill [--dry-run | --yes] [--include-before-first-record]
 *                                [--url URL] [--invoker SA_EMAIL] [--token TOKEN]]
 *
 * Without `--since`: the last 10 slots of every job. `--html FILE` writes the same rows as one
 * static page instead of the table (`ops/format-html.ts`; `-` for stdout). The run ids use the deployed function's scope:
 * `RUN_KEY_SCOPE`, `RUN_KEY_SCOPE_HEADERS`, `RUN_KEY_SCOPE_PARAMS`, `RUNS_COLLECTION`,
 * `FIRESTORE_DATABASE` and `GOOGLE_CLOUD_PROJECT` from the environment, or the flags. Against the
 * emulator with `FIRESTORE_EMULATOR_HOST` set; against a project with Application Default
 * Credentials. `--check` exits 1 when a slot in the window is missed (one before the job's oldest
 * record in the window does not count), or failed past its retry window; each line it prints ends
 * with the command that fixes it (`checkLines`). `--backfill` then lists the missed slots it may
 * deliver (within `RETENTION_SECONDS`, after the job's oldest record in the window, at most 100),
 * asks (a terminal; `--yes` for scripts; `--dry-run` only lists), and delivers them oldest first,
 * one at a time, as Scheduler would (to the local function, or `--url` with an ID token:
 * `ops/deliver.ts`): `ops/backfill.ts`. It exits 1 if any answer was not 2xx, or if nothing was
 * delivered for want of a confirmation. Bad arguments exit 2; invalid declarations or configuration,
 * or an unreachable Firestore or function, exit 1 (`ops/command.ts`).
 */

import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Firestore } from '@google-cloud/firestore';
import { ConfigError } from '../src/core/errors.ts';
import { RunDocuments } from '../src/core/run-documents.ts';
import { loadConfig } from '../src/function/config.ts';
import { scopeOf } from '../src/function/scheduler-request.ts';
import type { DeclaredJob } from '../src/policy/job-declaration.ts';
import { RunHistory, readHistory, type SlotRow, slotRow } from '../src/policy/run-history.ts';
import { previousSlots, slotsBetween } from '../src/policy/schedule.ts';
import { retentionProblems } from '../src/policy/schedule-time.ts';
import { planBackfill, runBackfill } from './backfill.ts';
import { runCommand, UsageError } from './command.ts';
import { loadJobs, selectJobs } from './declarations.ts';
import { resolveTarget } from './deliver.ts';
import { runsHtml } from './format-html.ts';
import { checkFailures, checkLines, parseDuration, runsJson, runsTable } from './format-runs.ts';
import { runsOutsideSlots } from './run-queries.ts';

const USAGE = `usage: npm run runs -- [--since 24h] [--job ID] [--json | --html FILE] [--check] [--now RFC3339]
       [--scope VALUE] [--scope-header NAME=VALUE]... [--scope-param NAME=VALUE]...
       [--collection NAME] [--database ID] [--project ID]
       [--backfill [--dry-run | --yes] [--include-before-first-record]
                   [--url URL] [--invoker SA_EMAIL] [--token TOKEN]]`;
const DEFAULT_SLOTS = 10;

function pairs(values: readonly string[] | undefined, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const value of values ?? []) {
    const at = value.indexOf('=');
    if (at <= 0) throw new UsageError(`--${what} takes NAME=VALUE, got "${value}"`);
    out[value.slice(0, at).toLowerCase()] = value.slice(at + 1);
  }
  return out;
}

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

function durationArg(text: string): number {
  try {
    return parseDuration(text);
  } catch (err) {
    throw new UsageError(`--since: ${(err as Error).message}`);
  }
}

/** The slots of `job` to show: those in [now − since, now], or its last {@link DEFAULT_SLOTS}. */
function slotsOf(job: DeclaredJob, now: Date, sinceMs: number | undefined): Date[] {
  if (sinceMs !== undefined) {
    const range = slotsBetween(job, new Date(now.getTime() - sinceMs), new Date(now.getTime() + 1));
    if (range.truncated) {
      console.error(
        `runs: ${job.id}: the window holds more than ${range.slots.length} slots; showing the oldest ${range.slots.length} (narrow --since to see the latest)`,
      );
    }
    return [...range.slots];
  }
  return previousSlots(job, new Date(now.getTime() + 1), DEFAULT_SLOTS);
}

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values: args } = parseArgs({
    args: argv,
    options: {
      since: { type: 'string' },
      job: { type: 'string', multiple: true },
      json: { type: 'boolean' },
      html: { type: 'string' },
      check: { type: 'boolean' },
      now: { type: 'string' },
      scope: { type: 'string' },
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
  });
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  if (args.json && args.html !== undefined) {
    throw new UsageError('--json and --html are two outputs; choose one');
  }
  const backfillOnly = (['dry-run', 'yes', 'include-before-first-record'] as const).filter(
    (flag) => args[flag] === true,
  );
  if (backfillOnly.length > 0 && !args.backfill) {
    throw new UsageError(`--${backfillOnly[0]} goes with --backfill`);
  }
  if (args['dry-run'] && args.yes) throw new UsageError('--dry-run and --yes: choose one');
  const sinceMs = args.since === undefined ? undefined : durationArg(args.since);
  const now = args.now === undefined ? new Date() : new Date(args.now);
  if (Number.isNaN(now.getTime())) throw new UsageError(`--now "${args.now}" is not a date-time`);
  const config = loadConfig({
    ...env,
    ...(args.scope === undefined ? {} : { RUN_KEY_SCOPE: args.scope }),
    ...(args.collection === undefined ? {} : { RUNS_COLLECTION: args.collection }),
    ...(args.database === undefined ? {} : { FIRESTORE_DATABASE: args.database }),
    ...(args.project === undefined ? {} : { GOOGLE_CLOUD_PROJECT: args.project }),
  });
  const scope = scopeOf(config, {
    headers: pairs(args['scope-header'], 'scope-header'),
    params: pairs(args['scope-param'], 'scope-param'),
  });
  const declared = await loadJobs(env);
  const mismatch = retentionProblems(declared, config.retentionMs, config.forcedRunToleranceMs);
  if (mismatch.length > 0) throw new ConfigError(mismatch);
  const jobs = selectJobs(declared, args.job);

  if (config.projectId === undefined && !env.FIRESTORE_EMULATOR_HOST) {
    throw new UsageError('set GOOGLE_CLOUD_PROJECT or --project (or FIRESTORE_EMULATOR_HOST)');
  }
  if (env.FIRESTORE_EMULATOR_HOST) quietAgainstEmulator(env);
  const documents = new RunDocuments(
    new Firestore({
      // The emulator keeps each project's data apart: without a project, read the one `npm run
      // dev` and `scripts/with-emulator.ts` use rather than fail to detect one.
      projectId: config.projectId ?? EMULATOR_PROJECT,
      databaseId: config.firestoreDatabase,
    }),
    {
      collection: config.runsCollection,
      retentionMs: config.retentionMs,
      timeoutMs: config.firestoreTimeoutMs,
    },
  );
  const rows: SlotRow[] = [];
  let warned = false;
  const history = new RunHistory(documents);
  const outside = await runsOutsideSlots(documents);
  for (const job of jobs) {
    const at = args.now === undefined ? undefined : now;
    const slots = slotsOf(job, now, sinceMs);
    const oldest = slots[0];
    if (!warned && oldest !== undefined && now.getTime() - oldest.getTime() > config.retentionMs) {
      warned = true;
      console.error(
        `runs: the window reaches past RETENTION_SECONDS (${config.retentionMs / 1000} s): a TTL policy may have deleted older records, which then show as missed`,
      );
    }
    const read = await readHistory(history, job, slots, scope, at);
    // Manual and forced runs of the job in the window: they are not slots, so they are listed, not
    // computed (one query on run_kind for all jobs).
    const from = slots[0]?.getTime() ?? now.getTime();
    const extra = outside
      .filter(({ record }) => record.status !== 'unreadable' && record.jobName === job.id)
      .map(({ runId, record }) => {
        const when = record.status === 'unreadable' ? undefined : record.scheduleTime;
        return when === undefined
          ? undefined
          : slotRow(job, when, runId, record, at ?? read.readTime);
      })
      .filter(
        (row): row is SlotRow => row !== undefined && row.slot.getTime() >= from && row.slot <= now,
      );
    rows.push(...[...read.rows, ...extra].sort((a, b) => a.slot.getTime() - b.slot.getTime()));
  }
  if (args.html !== undefined) {
    const page = runsHtml(
      rows,
      {
        generatedAt: now,
        window: sinceMs === undefined ? `the last ${DEFAULT_SLOTS} slots` : `--since ${args.since}`,
      },
      { url: args.url },
    );
    if (args.html === '-') process.stdout.write(page);
    else {
      writeFileSync(args.html, page);
      console.error(`runs: wrote ${args.html} (${rows.length} rows); open it in a browser`);
    }
  } else {
    console.log(args.json ? runsJson(rows) : runsTable(rows));
  }
  if (args.backfill) {
    const plan = planBackfill(rows, jobs, {
      now,
      retentionMs: config.retentionMs,
      forcedRunToleranceMs: config.forcedRunToleranceMs,
      includeBeforeFirstRecord: args['include-before-first-record'] === true,
    });
    return runBackfill(plan, config.retentionMs, () => resolveTarget(args, env), {
      dryRun: args['dry-run'],
      yes: args.yes,
      interactive: process.stdin.isTTY === true && process.stderr.isTTY === true,
    });
  }
  if (!args.check) return 0;
  const failures = checkFailures(rows);
  for (const line of checkLines(failures, now, { url: args.url })) console.error(line);
  return failures.length > 0 ? 1 : 0;
}

await runCommand('runs', USAGE, main);
