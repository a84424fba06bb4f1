/**
 * Which run a delivery asks for: its slot's, or a forced run, a forced run without schedule time,
 * a manual run or a re-run, each keyed apart so that none takes a slot's run id (the cases:
 * docs/how-it-works.md, "Which run a delivery asks for").
 */

import {
  computeRunId,
  computeTriggerRunId,
  type RunVariant,
  type Scope,
  scopeId,
} from '../core/run-key.ts';
import { type RunDetails, RunKind } from '../core/run-record.ts';
import type { DeclaredJob, OverlapPolicy } from './job-declaration.ts';

/** How `npm run trigger` asks for a run by hand (`X-Run-Once-Mode`). */
export const TRIGGER_MODES = ['manual', 'rerun'] as const;
export type TriggerMode = (typeof TRIGGER_MODES)[number];

/** A run asked for by hand: its mode and the trigger id its retries share. */
export interface Trigger {
  readonly mode: TriggerMode;
  readonly id: string;
  /** Run beside another run of the job (`--allow-overlap`): the overlap policy is not applied. */
  readonly allowOverlap?: boolean;
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
   * A backfill's delivery of a slot (`X-Run-Once-Backfill: true`): a slot the overlap policy `skip`
   * would skip is answered `waiting`, not recorded `skipped`, so it stays missed.
   */
  readonly backfill?: boolean;
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
  /** The job's overlap policy; `allow` for a run whose trigger asked to overlap. */
  readonly overlap: OverlapPolicy;
}

/**
 * Plans the run of a delivery of `job`: `now` gives Firestore's time (read only for a timed
 * delivery), `toleranceMs` is the job's `forcedRunToleranceMs`.
 */
export async function planRun(
  run: ScheduledRun,
  job: DeclaredJob,
  now: () => Promise<Date>,
  toleranceMs: number,
): Promise<RunPlan> {
  // The short id, not the header as sent: both forms of a job's name are one run.
  const keyed = { ...run, jobName: job.id };
  const base = { jobName: job.id, scheduleTime: run.scheduleTime, keyScope: scopeId(run.scope) };
  const overlap = run.trigger?.allowOverlap === true ? 'allow' : job.overlap;
  const of = (kind: RunKind, runId: string, details: RunDetails = {}): RunPlan => ({
    runId,
    kind,
    details: { ...base, kind, ...details },
    overlap,
  });
  const variant = (parts: RunVariant) => computeRunId(keyed, parts);
  if (run.trigger !== undefined) {
    const runId = computeTriggerRunId({
      scope: run.scope,
      jobName: job.id,
      triggerId: run.trigger.id,
    });
    if (run.trigger.mode === 'manual') return of(RunKind.Manual, runId);
    return of(RunKind.Rerun, runId, { rerunOf: variant([]) });
  }
  // Without the header it cannot be Scheduler's on-time delivery of the slot, even a second early.
  if (run.withoutScheduleTime) return of(RunKind.Forced, variant(['forced']), { untimed: true });
  const early = Date.parse(run.scheduleTime) - (await now()).getTime();
  return early > toleranceMs
    ? of(RunKind.Forced, variant(['forced']))
    : of(RunKind.Slot, variant([]));
}
