/**
 * `npm run trigger -- JOB`: runs a declared job by hand, against the local function (`npm run dev`)
 * by default or a deployed one (`--url`, with an ID token: see `ops/deliver.ts`).
 *
 *   npm run trigger -- JOB                        a manual run: a run id of its own, recorded as
 *                                                 `manual`; no slot is touched
 *   npm run trigger -- JOB --slot T               slot T delivered exactly as Scheduler would (a
 *                                                 backfill: a duplicate if it already ran)
 *   npm run trigger -- JOB --rerun --slot T       finished slot T (completed or skipped) run again
 *                                                 on purpose: a run of its own (`rerun`), keyed by
 *                                                 the trigger id, listed beside the slot; the job
 *                                                 gets that run's id. The function refuses a
 *                                                 future, off-schedule or unfinished slot too
 *   [--scope NAME=VALUE]…                         the key scope: each sent as the header
 *                                                 (RUN_KEY_SCOPE_HEADERS) or query parameter
 *                                                 (RUN_KEY_SCOPE_PARAMS) the function reads;
 *                                                 every one configured is required
 *   [--allow-overlap]                             a manual run or re-run beside another run of the
 *                                                 job: without it, the job's overlap policy (`skip`,
 *                                                 `wait`) holds, and a blocked run answers 409
 *                                                 `waiting` (nothing recorded; exit 1)
 *   [--url URL] [--invoker SA_EMAIL] [--token TOKEN]
 *
 * `--slot T` must be within `RETENTION_SECONDS` (read from the environment, as the function has
 * it): an older slot's record may be gone, so it may have run; the function refuses it too.
 * The trigger id alone names the run (the function keys it by job, scope and trigger id): retries
 * of one trigger are not made, and re-running the same command prints a new trigger id, so it is a
 * new manual run or re-run. The scope names come from the environment's `RUN_KEY_SCOPE_HEADERS` and
 * `RUN_KEY_SCOPE_PARAMS`, as the function has them; an answer naming another run id than the one
 * this command computes (with `RUN_KEY_SCOPE` too) is warned about: the scopes differ. No rate limit and no prompt: each
 * call is one deliberate run by someone who may invoke the function anyway (docs/operations.md). Exit 0 on a 2xx answer, 1 on any
 * other, 2 on bad arguments.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ConfigError } from '../core/errors.ts';
import { computeTriggerRunId, type Scope } from '../core/run-key.ts';
import { type Config, loadConfig } from '../function/config.ts';
import {
  ALLOW_OVERLAP_HEADER,
  BACKFILL_HEADER,
  MODE_HEADER,
  normaliseScheduleTime,
  TRIGGER_ID_HEADER,
} from '../function/scheduler-request.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { slotRunId } from '../policy/run-history.ts';
import { previousSlot, toUtcRfc3339 } from '../policy/schedule.ts';
import {
  forcedRunToleranceMs,
  oldestAcceptedTime,
  retentionProblems,
} from '../policy/schedule-time.ts';
import { isEntryPoint, runCommand, UsageError } from './command.ts';
import { loadJobs, selectJob } from './declarations.ts';
import {
  answerLine,
  deliver,
  resolveTarget,
  schedulerHeaders,
} from './deliver.ts';
import { scopeArgs, scopeOf, scopeRequest } from './scope-args.ts';

/** What the command prints with a bad argument (exit 2) and for `--help`. */
export const USAGE =
  'usage: run-once trigger JOB [--slot RFC3339 [--rerun]] [--allow-overlap] [--scope NAME=VALUE]... [--url URL] [--invoker SA_EMAIL] [--token TOKEN]';

/**
 * Why slot T may not be delivered by hand: older than `RETENTION_SECONDS` (from the environment,
 * as the deployed function has it), its record may be gone, so it may have run. The function
 * refuses it too, so there is no override; a manual run is the way to run the job now.
 */
function slotTooOld(
  job: DeclaredJob,
  slot: Date,
  config: Config,
): string | undefined {
  const mismatch = retentionProblems(
    [job],
    config.retentionMs,
    config.forcedRunToleranceMs,
  );
  if (mismatch.length > 0) {
    throw new ConfigError(mismatch);
  }
  const tolerance = forcedRunToleranceMs(job, config.forcedRunToleranceMs);
  const oldest = oldestAcceptedTime(new Date(), config.retentionMs, tolerance);
  if (slot >= oldest) {
    return undefined;
  }
  return (
    `--slot ${toUtcRfc3339(slot)} is older than RETENTION_SECONDS (${config.retentionMs / 1000} s; oldest ${toUtcRfc3339(oldest)}): ` +
    'its record may have been deleted, so it may have run, and the function refuses it. To run the job now, leave out --slot (a manual run)'
  );
}

/**
 * `npm run trigger`, for {@link runCommand} and in-process tests: `argv` after the script, the
 * environment `env`; resolves to the exit status.
 */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { values: args, positionals } = parseTriggerArgs(argv);
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  const [jobId, ...extra] = positionals;
  if (jobId === undefined || extra.length > 0) {
    throw new UsageError('name exactly one job');
  }
  const job = selectJob(await loadJobs(env), jobId);
  const config = loadConfig(env);
  const scopeValues = scopeArgs(config, args.scope ?? []).values;
  const scope = scopeRequest(config, scopeValues);
  // The run id the function should answer with, from this environment's scope settings.
  const keyScope = scopeOf(config, scopeValues);
  checkOverlapFlags(args);
  const slot = slotArg(args, job, config);
  const target = resolveTarget(args, env);
  const delivery = triggerDelivery(args, job, slot, keyScope);
  const scoped = Object.entries({ ...scope.headers, ...scope.query }).map(
    ([n, v]) => `${n}=${v}`,
  );
  if (scoped.length > 0) {
    delivery.what += ` [scope ${scoped.join(' ')}]`;
  }
  const answer = await deliver(
    target,
    { ...delivery.headers, ...scope.headers },
    scope.query,
  );
  console.log(answerLine(delivery.what, answer));
  warnOfAnswer(
    answer,
    delivery.runId,
    job,
    slot === undefined || args.rerun === true,
  );
  return answer.status >= 200 && answer.status < 300 ? 0 : 1;
}

/** `npm run trigger`'s flags and words, parsed. */
function parseTriggerArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      slot: { type: 'string' },
      rerun: { type: 'boolean' },
      scope: { type: 'string', multiple: true },
      'allow-overlap': { type: 'boolean' },
      url: { type: 'string' },
      invoker: { type: 'string' },
      token: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** The command's flags. */
type TriggerArgs = ReturnType<typeof parseTriggerArgs>['values'];

/** Refuses `--rerun` without a slot, and `--allow-overlap` with a slot delivered as Scheduler's. */
function checkOverlapFlags(args: TriggerArgs): void {
  if (args.rerun && args.slot === undefined) {
    throw new UsageError('--rerun needs --slot T');
  }
  if (
    args['allow-overlap'] === true &&
    args.slot !== undefined &&
    !args.rerun
  ) {
    throw new UsageError(
      "--allow-overlap goes with a manual run or --rerun: slot T delivered as Scheduler would follows the job's overlap policy",
    );
  }
}

/**
 * `--slot`, checked: a time, not in the future, within the retention, and a slot of the job.
 *
 * @throws {UsageError} for a slot the function would refuse or that is not the job's.
 */
function slotArg(
  args: TriggerArgs,
  job: DeclaredJob,
  config: Config,
): Date | undefined {
  if (args.slot === undefined) {
    return undefined;
  }
  let slot: Date;
  try {
    slot = new Date(normaliseScheduleTime(args.slot));
  } catch (err) {
    throw new UsageError(`--slot: ${(err as Error).message}`);
  }
  if (slot.getTime() > Date.now()) {
    throw new UsageError(
      `--slot ${args.slot} is in the future: Scheduler delivers a slot at or after its time (a delivery before it is a forced run). To run the job now, leave out --slot`,
    );
  }
  const problem = slotTooOld(job, slot, config);
  if (problem !== undefined) {
    throw new UsageError(problem);
  }
  const expected = previousSlot(job, new Date(slot.getTime() + 1));
  if (expected?.getTime() !== slot.getTime()) {
    throw new UsageError(
      `--slot ${args.slot} is not a slot of ${job.id} ('${job.schedule}' in ${job.timeZone})${expected ? `; the slot before it is ${toUtcRfc3339(expected)}` : ''}`,
    );
  }
  return slot;
}

/** What the command delivers: its headers, what it says it ran, and the run id to expect. */
interface TriggerDelivery {
  readonly headers: Record<string, string>;
  what: string;
  readonly runId: string;
}

/**
 * The delivery: a manual run now (no slot), a re-run of the slot (`--rerun`), or the slot as a
 * backfill of one; a manual run and a re-run each under a new trigger id.
 */
function triggerDelivery(
  args: TriggerArgs,
  job: DeclaredJob,
  slot: Date | undefined,
  keyScope: Scope,
): TriggerDelivery {
  const overlapHeader: Record<string, string> =
    args['allow-overlap'] === true ? { [ALLOW_OVERLAP_HEADER]: 'true' } : {};
  if (slot === undefined || args.rerun) {
    const mode = slot === undefined ? 'manual' : 'rerun';
    const at = slot ?? new Date(Math.floor(Date.now() / 1000) * 1000);
    const triggerId = randomUUID();
    const headers = schedulerHeaders(job.id, at, {
      [MODE_HEADER]: mode,
      [TRIGGER_ID_HEADER]: triggerId,
      ...overlapHeader,
    });
    const runId = computeTriggerRunId({
      scope: keyScope,
      jobName: job.id,
      triggerId,
    });
    const run =
      slot === undefined ? 'manual run' : `${toUtcRfc3339(slot)} re-run`;
    return { headers, what: `${job.id} ${run} (trigger ${triggerId})`, runId };
  }
  // A backfill of one slot: blocked by the policy `skip`, it stays missed instead of skipped.
  return {
    headers: schedulerHeaders(job.id, slot, { [BACKFILL_HEADER]: 'true' }),
    what: `${job.id} ${toUtcRfc3339(slot)}`,
    runId: slotRunId(job.id, slot, keyScope),
  };
}

/**
 * Warns when the function named another run than `runId` (its key scope differs), or did not run
 * the job (another run holds it); `byTrigger`: a manual run or re-run, which may be sent again.
 */
function warnOfAnswer(
  answer: Awaited<ReturnType<typeof deliver>>,
  runId: string,
  job: DeclaredJob,
  byTrigger: boolean,
): void {
  if (answer.runId !== undefined && answer.runId !== runId) {
    // The run happened: a warning, not a failure a script would retry into another run.
    console.error(
      `trigger: the function named the run ${answer.runId}, not ${runId} as this command computes it: its key scope (RUN_KEY_SCOPE, RUN_KEY_SCOPE_HEADERS, RUN_KEY_SCOPE_PARAMS) differs from this environment's, so npm run runs here will not find the run; set them as deployed`,
    );
  }
  if (answer.outcome === 'waiting') {
    console.error(
      `trigger: not run: another run of ${job.id} is still running (overlap policy "${job.overlap}"); nothing was recorded. ` +
        (byTrigger
          ? 'Run the command again once it ends, or add --allow-overlap to run beside it.'
          : 'The slot stays missed: deliver it again once that run ends.'),
    );
  }
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('trigger', USAGE, main);
}
