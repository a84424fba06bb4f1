/** Which run a delivery asks for (docs/how-it-works.md, "Which run a delivery asks for"). */
import {
  computeRunId,
  computeTriggerRunId,
  type Scope,
  scopeId,
} from '../core/run-key.ts';
import { type RunDetails, RunKind } from '../core/run-record.ts';
import type { DeclaredJob, OverlapPolicy } from './job-declaration.ts';

/** How `npm run trigger` asks for a run by hand (`X-Run-Once-Mode`). */
export const TRIGGER_MODES = ['manual', 'rerun'] as const;

/** A run asked for by hand: its mode, the trigger id its retries share, `--allow-overlap`. */
export interface Trigger {
  readonly mode: (typeof TRIGGER_MODES)[number];
  readonly id: string;
  readonly allowOverlap?: boolean;
}

/**
 * A delivery's run, as its headers name it: `jobNameSent` the job's name as the header carried it
 * (its id or `projects/…/jobs/ID`; the run key and records use the declared job's id), `scheduleTime` in
 * canonical RFC 3339 (the spelling the run key hashes) and `scheduledAt` the same instant, parsed
 * once at the request's edge, `scope` entries in configuration order, `trigger` for `npm run trigger`,
 * `backfill` for `X-Run-Once-Backfill: true`, `caughtUp` for `X-Run-Once-Catch-Up: true`, `withoutScheduleTime` when `force-run.ts` chose it.
 */
export interface ScheduledRun {
  readonly jobNameSent: string;
  readonly scheduleTime: string;
  /** `scheduleTime` as an instant (a fraction finer than a millisecond dropped). */
  readonly scheduledAt: Date;
  readonly scope: Scope;
  readonly trigger?: Trigger;
  readonly backfill?: boolean;
  readonly withoutScheduleTime?: true;
  /** `X-Run-Once-Catch-Up: true`: the run audit's own delivery of a late slot. */
  readonly caughtUp?: boolean;
}

/** What the handler claims and runs for one delivery; `overlap`: `allow` if the trigger asked. */
export interface RunPlan {
  readonly runId: string;
  readonly kind: RunKind;
  readonly details: RunDetails;
  readonly overlap: OverlapPolicy;
}

/** Plans a delivery's run at Firestore's `now`; `toleranceMs` is the job's, ms. */
export function planRun(
  run: ScheduledRun,
  job: DeclaredJob,
  now: Date,
  toleranceMs: number,
): RunPlan {
  const { trigger, scope } = run;
  const base = {
    jobName: job.id,
    scheduleTime: run.scheduleTime,
    keyScope: scopeId(scope),
  };
  const overlap = trigger?.allowOverlap === true ? 'allow' : job.overlap;
  const of = (
    kind: RunKind,
    runId: string,
    details: RunDetails = {},
  ): RunPlan => {
    return { runId, kind, details: { ...base, kind, ...details }, overlap };
  };
  // The short id, not the header as sent: both forms of a job's name are one run.
  const variant = (parts: readonly string[]) =>
    computeRunId({ ...run, jobName: job.id }, parts);
  if (trigger !== undefined) {
    const runId = computeTriggerRunId({
      scope,
      jobName: job.id,
      triggerId: trigger.id,
    });
    if (trigger.mode === 'manual') {
      return of(RunKind.Manual, runId);
    }
    return of(RunKind.Rerun, runId, { rerunOf: variant([]) });
  }
  // Without the header it cannot be Scheduler's on-time delivery of the slot, even a second early.
  if (run.withoutScheduleTime) {
    return of(RunKind.Forced, variant(['forced']), {
      withoutScheduleTime: true,
    });
  }
  const early = run.scheduledAt.getTime() - now.getTime();
  if (early > toleranceMs) {
    return of(RunKind.Forced, variant(['forced']));
  }
  if (run.caughtUp === true) {
    return of(RunKind.Slot, variant([]), { caughtUp: true });
  }
  // A backfill (or `trigger --slot`) is sent by a person, maybe long after the slot and a deploy:
  // it says nothing of the rule in force at the slot.
  if (run.backfill === true) {
    return of(RunKind.Slot, variant([]));
  }
  // Scheduler's delivery of a slot of the schedule deployed now: a sighting of the job's rule at
  // the slot's time, for a check that has seen no run (`rulesFromClaims`, missed-run-rules.ts).
  const claimedUnder = { schedule: job.schedule, timeZone: job.timeZone };
  return of(RunKind.Slot, variant([]), { claimedUnder });
}
