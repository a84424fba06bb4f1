/**
 * The job contract: what a job's code is given for one attempt of one run (`ctx`), and the rule it
 * follows. Declared in the core so the user's `src/job.ts` holds only the user's code.
 * - A job is called at most once per run while each attempt finishes within its lease (a claim's
 *   short lease, widened to LEASE_SECONDS by the heartbeat's first beat and kept alive by it):
 *   duplicate deliveries get 200 or 409 without it.
 * - Return normally when the work is done: the run is marked completed (HTTP 200).
 * - Throw (or reject) when it failed and should be retried: the claim is released (the record
 *   keeps the failure) and Cloud Scheduler gets a 500, so its retry policy runs the job again.
 * - Pass `ctx.runId` to every downstream service that changes state, as its idempotency key
 *   ("the most downstream service must be idempotent", the Scheduler guide).
 */
import type { Logger } from './logger.ts';
import type { NoteValue } from './notes.ts';

/** What a job's code learns about its own declaration (`ctx.job`). */
export interface JobInfo {
  /** The declared id: the Scheduler job id, whatever form of it the delivery carried. */
  readonly id: string;
  /** The unix-cron schedule, fields separated by one space. */
  readonly schedule: string;
  /** The tz database zone the schedule is read in. */
  readonly timeZone: string;
}

/** What the job knows about the run it is doing. */
export interface JobContext {
  /** The run's idempotency key (64 hex chars): send it downstream, e.g. as an `Idempotency-Key` header. */
  readonly runId: string;
  /** The Scheduler job id (or full name) from `X-CloudScheduler-JobName`. */
  readonly jobName: string;
  /**
   * The schedule time in the run's key (ms precision): a slot's time for a scheduled run and a
   * re-run; for a Force run (`gcloud scheduler jobs run`) the time Scheduler sends with it, the
   * job's next slot, although the run is not that slot's (see `slot`); for a manual run the time
   * `npm run trigger` sent.
   */
  readonly scheduleTime: Date;
  /**
   * The slot this run stands for: its schedule time, for a scheduled run (`kind` `slot`) and a
   * re-run of a slot (`rerun`); `undefined` for a Force run and a manual run, which are runs of their
   * own. A job that does one period of work per slot (e.g. "the hour before the slot") should take
   * the period from `slot` and decide what an unscheduled run does when it is `undefined`: with
   * `scheduleTime` it would do the next slot's period early, at the Force run, and again at the slot.
   */
  readonly slot?: Date;
  /**
   * `slot` for a scheduled run; `forced` for Scheduler's "Force run" (a run of its own, so the slot
   * still runs); `manual` for `npm run trigger`; `rerun` for a finished slot run again on purpose
   * (`npm run trigger -- JOB --rerun --slot T`), with its own `runId` shared by its retries.
   */
  readonly kind: 'slot' | 'forced' | 'manual' | 'rerun';
  /** For a re-run: the run id of the slot it runs again (`scheduleTime` is that slot's). */
  readonly rerunOf?: string;
  /**
   * `true` when the run audit delivered this slot itself because Scheduler had not (the job's
   * `catchUp`); `kind` stays `slot`. A job whose work goes stale may skip it (return).
   */
  readonly caughtUp?: boolean;
  /** This attempt's id; differs between a failed attempt and its retry. */
  readonly attemptId: string;
  /**
   * When the first attempt of this run claimed it, by Firestore's clock; the same for every retry:
   * e.g. the lower bound of a search for what an earlier attempt started downstream.
   */
  readonly firstClaimedAt: Date;
  /**
   * When this attempt's lease lapses, by Firestore's clock. It starts as the claim's short lease
   * (3 × FIRESTORE_TIMEOUT_SECONDS, at most LEASE_SECONDS), which the first heartbeat widens; the
   * heartbeat then moves it on every third of LEASE_SECONDS while the job runs; it stops only past
   * JOB_TIMEOUT_SECONDS or if extensions fail for about two thirds of a lease (the first two
   * timeouts, before the widening). Budget work by it only after the first beat.
   */
  readonly leaseExpires: Date;
  /**
   * Aborted when this attempt should stop: its lease was lost, the instance is shutting down
   * (SIGTERM), or the job ran past JOB_TIMEOUT_SECONDS; `signal.reason` (an `AttemptAbortedError`)
   * says which. Pass it to `fetch` and friends, or check it between steps, and throw.
   */
  readonly signal: AbortSignal;
  /** A logger bound to this run (runId, jobName, scheduleTime, attemptId, trace); pino's in the function. */
  readonly logger: Logger;
  /**
   * Notes a value in this run's record (`notes.NAME`) now, e.g. the id of what the job started
   * downstream, so the history shows it even if this attempt dies. A string, number or boolean, or
   * a plain object of those (≤ 20 fields, strings ≤ 1500 characters), under a name that is not an
   * `Object.prototype` member; at most 100 notes and 256 KiB per run. Rejects with a `RunOnceError`
   * naming the note otherwise, or an `AttemptAbortedError` if the lease was lost (at once, with no
   * write, once another attempt is known to hold the run).
   */
  readonly note: (name: string, value: NoteValue) => Promise<void>;
  /**
   * The declaration of the job this run belongs to (`id` in short form, `schedule`, `timeZone`),
   * e.g. for `previousSlot(ctx.job, ctx.scheduleTime)` from `policy/schedule.ts`.
   */
  readonly job: JobInfo;
}

/** The work of one job: return = done, throw = failed, retry me (the contract above). */
export type JobRun = (ctx: JobContext) => Promise<void> | void;
