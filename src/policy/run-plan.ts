/**
 * Which run a delivery asks for. A Scheduler delivery names a slot (job + schedule time), but three
 * deliveries are not that slot's run, and must not take its run id (the Scheduler guide warns that
 * "Force run" sends the *next* schedule time, so de-duplication on the headers would make the next
 * real run a duplicate):
 *
 * - a **forced run**: it arrives earlier than its schedule time by more than the job's tolerance
 *   (`FORCED_RUN_TOLERANCE_SECONDS`, at most half the job's shortest gap: `forcedRunToleranceMs`
 *   in `schedule-time.ts`), by Firestore's clock (as leases are judged); its run id is the
 *   slot's with the variant `forced`, so the slot still runs at its time, and the forced run's
 *   retries are duplicates of it;
 * - a **forced run without schedule time** (the console's "Force run" may omit the header): the
 *   forced run of the slot `force-run.ts` chooses, whatever its distance;
 * - a **manual run** (`npm run trigger -- JOB`): a run of its own, keyed by its trigger id;
 * - a **re-run** (`npm run trigger -- JOB --rerun --slot T`): a run of its own, keyed by its
 *   trigger id (variant `['rerun', id]`), naming the slot's run in `rerun_of`: its retries are one
 *   run by construction, and its run id is new, so an idempotent downstream does the work again.
 *   The slot's record is never touched; `rerun.ts` says which re-runs the function refuses.
 */

import { computeRunId, type RunVariant, type Scope } from '../core/run-key.ts';
import { type RunDetails, RunKind } from '../core/run-record.ts';
import type { DeclaredJob, OverlapPolicy } from './job-declaration.ts';

/** How `npm run trigger` asks for a run by hand (`X-Run-Once-Mode`). */
export const TRIGGER_MODES = ['manual', 'rerun'] as const;
export type TriggerMode = (typeof TRIGGER_MODES)[number];

/** A run asked for by hand: its mode and the trigger id its retries share. */
export interface Trigger {
  readonly mode: TriggerMode;
  readonly id: string;
}

/** A delivery's run, as named by its headers. */
export interface ScheduledRun {
  /** The job id, or the full `projects/P/locations/L/jobs/ID` name, exactly as sent. */
  readonly jobName: string;
  /** The schedule time as a UTC instant in canonical RFC 3339 (`…Z`, fraction without trailing zeros). */
  readonly scheduleTime: string;
  /** The scope entries, `[source, value]` pairs in configuration order (fixed scope first). */
  readonly scope: Scope;
  /** Set when `npm run trigger` asked for the run by hand. */
  readonly trigger?: Trigger;
  /**
   * Set when the delivery came without `X-CloudScheduler-ScheduleTime` (the console's "Force run"
   * may omit it) and `scheduleTime` is the one `force-run.ts` chose: a forced run, however near.
   */
  readonly withoutScheduleTime?: true;
}

/** What the handler claims and runs for one delivery. */
export interface RunPlan {
  /** The run record's id: the slot's, or the forced run's, manual run's or re-run's own. */
  readonly runId: string;
  readonly kind: RunKind;
  /** What the record stores about the run. */
  readonly details: RunDetails;
  /** The job's overlap policy, for a slot's run; `allow` for forced and manual runs and re-runs. */
  readonly overlap: OverlapPolicy;
}

/**
 * Plans the run of a delivery of `job`.
 *
 * @param now - Firestore's time now (a read on an instance that has not talked to Firestore yet).
 * @param toleranceMs - how early a delivery may be and still be its slot's, ms: the job's
 *   `forcedRunToleranceMs`.
 * @example const plan = await planRun(run, job, () => ledger.serverTime(), 60_000);
 */
export async function planRun(
  run: ScheduledRun,
  job: DeclaredJob,
  now: () => Promise<Date>,
  toleranceMs: number,
): Promise<RunPlan> {
  // The short id, not the header as sent: both forms of a job's name are one run.
  const keyed = { ...run, jobName: job.id };
  const base = { jobName: job.id, scheduleTime: run.scheduleTime };
  const of = (kind: RunKind, variant: RunVariant, details: RunDetails = {}): RunPlan => ({
    runId: computeRunId(keyed, variant),
    kind,
    details: { ...base, kind, ...details },
    overlap: kind === RunKind.Slot ? job.overlap : 'allow',
  });
  if (run.trigger?.mode === 'manual') return of(RunKind.Manual, ['manual', run.trigger.id]);
  if (run.trigger?.mode === 'rerun') {
    return of(RunKind.Rerun, ['rerun', run.trigger.id], { rerunOf: computeRunId(keyed) });
  }
  // Without the header it cannot be Scheduler's on-time delivery of the slot, even a second early.
  if (run.withoutScheduleTime) return of(RunKind.Forced, ['forced']);
  const early = Date.parse(run.scheduleTime) - (await now()).getTime();
  return early > toleranceMs ? of(RunKind.Forced, ['forced']) : of(RunKind.Slot, []);
}
