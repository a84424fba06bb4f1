/**
 * Invariant 52: a deploy starts only with a retention that outlasts the judging of every slot.
 *
 * The rule, from docs/configuration.md (the `RETENTION_SECONDS` row and "Retention"): the
 * retention must exceed every job's judging delay (twice its longest execution plus one attempt
 * deadline: missed-run detection judges a slot up to that long after its time) plus the job's
 * forced-run tolerance, and `LEASE_SECONDS`; the function checks it at cold start and refuses to
 * start otherwise, naming what to raise. A shorter retention would let the TTL delete a slot's
 * record before the slot is judged: a run reported missed, or a missed run never reported.
 *
 * Written from the documentation, not the product: the longest execution is the Scheduler model's
 * ({@link schedulerExecutionMs}), the tolerance `FORCED_RUN_TOLERANCE_SECONDS` bounded by half the
 * schedule's shortest gap by croner ({@link shortestGapMs}), as invariant 14 reads it.
 *
 * Every deploy of the simulator goes through the function's cold start (`loadConfigAndJobs`), and
 * is first tried at the edges of the rule ({@link retentionEdgesSeconds}): at the largest bound
 * (refused), one second above it (started, unless the lease is longer) and below the shortest job's
 * retry window (refused). Cloud Run keeps serving the last revision that started.
 */
import {
  type SchedulerSettings,
  schedulerExecutionMs,
  shortestGapMs,
} from './cloud-scheduler.ts';
import type { SimOutcome } from './simulator.ts';

/** What one job requires of the retention, by the documented rule, ms. */
export interface RetentionBound {
  readonly jobId: string;
  /** Twice the longest execution plus one attempt deadline. */
  readonly judgingDelayMs: number;
  /** `FORCED_RUN_TOLERANCE_SECONDS`, at most half the schedule's shortest gap. */
  readonly toleranceMs: number;
}

/** One cold start of a deploy tried with `retentionSeconds`, and what the function said. */
export interface RetentionProbe {
  /** When it was tried, ms. */
  readonly at: number;
  readonly retentionSeconds: number;
  readonly leaseSeconds: number;
  /** Each served job's bound, by the model. */
  readonly bounds: readonly RetentionBound[];
  /** The problems the cold start refused with; `undefined` if it started. */
  readonly problems: readonly string[] | undefined;
}

/** Job `job`'s bound at `fromMs` (the history's start: its shortest gap from there). */
export function retentionBoundOf(
  job: SchedulerSettings,
  configuredToleranceMs: number,
  fromMs: number,
): RetentionBound {
  const gapMs = shortestGapMs(job.schedule, fromMs);
  return {
    jobId: job.id,
    judgingDelayMs:
      2 * schedulerExecutionMs(job) + job.attemptDeadlineSeconds * 1000,
    toleranceMs: Math.min(configuredToleranceMs, Math.floor(gapMs / 2)),
  };
}

/** The shortest retention `bound` allows, ms: it must exceed this. */
function requiredMs(bound: RetentionBound): number {
  return bound.judgingDelayMs + bound.toleranceMs;
}

/**
 * The retentions a deploy is first tried with, s: the largest bound (one of the jobs is not
 * outlasted: refused), one second above it (every job is), and one attempt deadline plus the
 * tolerance of the job with the shortest deadline (within its retry window: refused).
 */
export function retentionEdgesSeconds(
  bounds: readonly RetentionBound[],
  jobs: readonly SchedulerSettings[],
): number[] {
  const largest = Math.max(...bounds.map(requiredMs)) / 1000;
  const lowest = Math.min(
    ...jobs.map((job, i) => {
      const tolerance = bounds[i]?.toleranceMs ?? 0;
      return job.attemptDeadlineSeconds + tolerance / 1000;
    }),
  );
  return [largest, largest + 1, lowest];
}

/** What the refusal of `probe` must say of a job it does not outlast: the variable, the job, the numbers. */
function saysWhatToRaise(
  problems: readonly string[],
  probe: RetentionProbe,
  bound: RetentionBound,
): boolean {
  const named = `RETENTION_SECONDS (${probe.retentionSeconds})`;
  return problems.some(
    (p) =>
      p.startsWith(named) &&
      p.includes(` of job ${bound.jobId} (`) &&
      p.includes(`forced-run tolerance (${bound.toleranceMs / 1000} s)`) &&
      (!p.includes('judging delay') ||
        p.includes(`(${bound.judgingDelayMs / 1000} s:`)),
  );
}

/** The violations of one probe. */
function probeViolations(probe: RetentionProbe): string[] {
  const retentionMs = probe.retentionSeconds * 1000;
  const short = probe.bounds.filter((b) => retentionMs <= requiredMs(b));
  const underLease = probe.retentionSeconds <= probe.leaseSeconds;
  const shown = `RETENTION_SECONDS ${probe.retentionSeconds}`;
  if (probe.problems === undefined) {
    const lease = underLease
      ? [
          `a deploy started with ${shown}, not above LEASE_SECONDS ${probe.leaseSeconds}`,
        ]
      : [];
    return [
      ...lease,
      ...short.map(
        (b) =>
          `a deploy started with ${shown}, not above job ${b.jobId}'s judging delay of ${b.judgingDelayMs / 1000} s plus its forced-run tolerance of ${b.toleranceMs / 1000} s: its slots could lose their records before they are judged`,
      ),
    ];
  }
  if (underLease) {
    // Refused for the lease alone: the jobs are checked against a configuration that loaded.
    return [];
  }
  if (short.length === 0) {
    return [
      `a deploy with ${shown}, above every job's judging delay plus tolerance and above LEASE_SECONDS ${probe.leaseSeconds}, was refused: ${probe.problems.join(' | ')}`,
    ];
  }
  const found: string[] = [];
  for (const b of short) {
    if (!saysWhatToRaise(probe.problems, probe, b)) {
      found.push(
        `a deploy with ${shown} was refused without a problem naming RETENTION_SECONDS, job ${b.jobId} and its numbers (judging delay ${b.judgingDelayMs / 1000} s, tolerance ${b.toleranceMs / 1000} s): ${probe.problems.join(' | ')}`,
      );
    }
  }
  for (const b of probe.bounds) {
    if (
      !short.includes(b) &&
      probe.problems.some((p) => p.includes(` of job ${b.jobId} (`))
    ) {
      found.push(
        `a deploy with ${shown} was refused naming job ${b.jobId}, whose judging delay plus tolerance (${requiredMs(b) / 1000} s) it outlasts`,
      );
    }
  }
  return found;
}

/** Invariant 52 over every deploy's probes. */
export function retentionGateKept(outcome: SimOutcome): string[] {
  return (outcome.retentionProbes ?? []).flatMap(probeViolations);
}
