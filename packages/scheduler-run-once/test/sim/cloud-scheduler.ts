/**
 * The simulator's Cloud Scheduler, written from Scheduler's documentation alone: it imports no
 * rule of the product (no retry count, back-off or window from src/policy/retry-policy.ts, no slot
 * arithmetic from src/policy/schedule.ts), so a mistake in the product's reading of those rules
 * cannot move the model with it. Slot times come from croner (the cron library), in UTC, as the
 * simulated jobs declare no time zone.
 *
 * The rules, from https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#retryconfig
 * (RetryConfig, Job.attemptDeadline, Job.schedule) and https://cloud.google.com/scheduler/docs/configuring/retry-jobs:
 *
 * - Attempt deadline: "If the request handler does not respond by this deadline then the request
 *   is cancelled and the attempt is marked as a DEADLINE_EXCEEDED failure"; an answer outside
 *   [200, 299] or none is a failed attempt too.
 * - retryCount: failed attempts are retried "retryCount times"; maxRetryDuration: "the time limit
 *   for retrying a failed job, measured from time when an execution was first attempted. If
 *   specified with retryCount, the job will be retried until both limits are reached"; 0 means no
 *   limit of its own (so retryCount alone decides).
 * - Back-off: "A job's retry interval starts at minBackoffDuration, then doubles maxDoublings
 *   times, then increases linearly, and finally retries at intervals of maxBackoffDuration"
 *   (10 s, 300 s, 3 doublings: 10, 20, 40, 80, 160, 240, 300, 300, ...).
 * - One outstanding execution per job: "Cloud Scheduler will never allow two simultaneously
 *   outstanding executions"; a slot that comes while the previous execution runs or retries waits
 *   until it ends ("the next scheduled execution time might be skipped if the retries continue
 *   through that time": a further slot that comes while one waits is skipped).
 * - Force run (jobs.run) "will dispatch the job, even if the job is already running", with the
 *   next slot as its schedule time, or with no schedule-time header at all.
 *
 * It also duplicates deliveries and loses answers at the history's rates, as a network would, and
 * dispatches a slot late when told ({@link CloudScheduler.delayNext}): Scheduler's documentation
 * promises no delivery time, and a late dispatch is what the run audit's catch-up races.
 */
import { Cron } from 'croner';

/** A job's Scheduler settings, seconds, as the Scheduler job carries them. */
export interface SchedulerSettings {
  readonly id: string;
  readonly schedule: string;
  readonly attemptDeadlineSeconds: number;
  readonly retryCount: number;
  readonly maxRetryDurationSeconds: number;
  readonly minBackoffSeconds: number;
  readonly maxBackoffSeconds: number;
  readonly maxDoublings: number;
}

/** Time and timers (virtual in the simulator). */
export interface SchedulerClock {
  now(): number;
  /** Calls `callback` once after `ms`; the returned function cancels it. */
  setTimer(callback: () => void, ms: number): () => void;
}

/** Sends one request; rejects on no answer or when `signal` aborts (the attempt deadline). */
export type SendRequest = (
  headers: Readonly<Record<string, string>>,
  signal: AbortSignal,
  attempt: SchedulerAttempt,
) => Promise<{ status: number }>;

/** One attempt as Scheduler saw it. */
export interface SchedulerAttempt {
  readonly jobId: string;
  /** The slot it is for, ms (for a Force run without the header, the next slot when fired). */
  readonly slotMs: number;
  readonly forced: boolean;
  readonly scheduleTimeSent: boolean;
  /** Which execution (a slot's, or one Force run's) it belongs to: a number of the model's own. */
  readonly execution: number;
  /** 1 for the first attempt, 2 for the first retry, … */
  readonly attempt: number;
  readonly sentAt: number;
  endedAt: number | undefined;
  /** True when answered 2xx and the answer was not lost. */
  succeeded: boolean;
  /** Whether Scheduler will retry after this attempt (false once it gives up or succeeds). */
  retries: boolean | undefined;
  /** How late its execution was dispatched ({@link CloudScheduler.delayNext}), ms; absent if on time. */
  readonly dispatchedLateMs?: number;
  /** Its execution waited behind one dispatched late: it began later than that one's slot allows. */
  readonly behindLateDispatch?: true;
}

/** What the model takes. */
export interface CloudSchedulerOptions {
  readonly jobs: readonly SchedulerSettings[];
  readonly clock: SchedulerClock;
  readonly random: () => number;
  readonly duplicates: number;
  readonly dropAnswers: number;
  readonly send: SendRequest;
}

/** The wait before retry `n` (1 for the first retry), ms: doubling, then linear, then capped. */
export function schedulerBackoffMs(job: SchedulerSettings, n: number): number {
  const first = job.minBackoffSeconds;
  const doublings = Math.min(n - 1, job.maxDoublings);
  const lastDoubled = first * 2 ** job.maxDoublings;
  const linearSteps = Math.max(0, n - 1 - job.maxDoublings);
  const interval = first * 2 ** doublings + linearSteps * lastDoubled;
  return Math.min(interval, job.maxBackoffSeconds) * 1000;
}

/**
 * Whether Scheduler makes retry `n` (1 for the first) of an execution first attempted at
 * `firstAttemptAt`, deciding at `now`: until both limits are reached, the duration's measured from
 * the first attempt to the retry's send time.
 */
export function schedulerRetries(
  job: SchedulerSettings,
  n: number,
  firstAttemptAt: number,
  now: number,
): boolean {
  if (n <= job.retryCount) {
    return true;
  }
  const durationMs = job.maxRetryDurationSeconds * 1000;
  if (durationMs === 0) {
    return false;
  }
  return now + schedulerBackoffMs(job, n) - firstAttemptAt < durationMs;
}

/**
 * The longest an execution of `job` can last from its first attempt, ms, by the rules above: the
 * `retryCount` retries each sent once every attempt before it ran to its deadline; and, if a retry
 * beyond them can come at all (attempts that fail at once, then every back-off waited), one sent
 * just inside `maxRetryDuration`, since the duration limit looks at the send time only. That
 * retry then runs to its deadline too.
 */
export function schedulerExecutionMs(job: SchedulerSettings): number {
  const attemptMs = job.attemptDeadlineSeconds * 1000;
  let countedEndMs = attemptMs;
  let soonestSendMs = 0;
  let n = 1;
  for (; n <= job.retryCount; n++) {
    countedEndMs += schedulerBackoffMs(job, n) + attemptMs;
    soonestSendMs += schedulerBackoffMs(job, n);
  }
  const durationMs = job.maxRetryDurationSeconds * 1000;
  const beyondCount =
    durationMs > 0 && soonestSendMs + schedulerBackoffMs(job, n) < durationMs;
  return beyondCount
    ? Math.max(countedEndMs, durationMs + attemptMs)
    : countedEndMs;
}

/** Parsed schedules of the model, by expression: parsing is most of a slot's cost. */
const parsedSchedules = new Map<string, Cron>();

/** The first slot strictly after `afterMs`, UTC, or undefined. */
export function nextSlotMs(
  schedule: string,
  afterMs: number,
): number | undefined {
  let cron = parsedSchedules.get(schedule);
  if (cron === undefined) {
    cron = new Cron(schedule, { timezone: 'Etc/UTC', paused: true });
    parsedSchedules.set(schedule, cron);
  }
  const next = cron.nextRun(new Date(afterMs));
  return next === null ? undefined : next.getTime();
}

/** Gaps already measured, by schedule, start and count: the invariants ask for each deployment. */
const measuredGaps = new Map<string, number>();

/** The shortest gap between `count` consecutive slots of `schedule` after `fromMs`, ms. */
export function shortestGapMs(
  schedule: string,
  fromMs: number,
  count = 100,
): number {
  const key = `${schedule}|${fromMs}|${count}`;
  let gap = measuredGaps.get(key);
  if (gap === undefined) {
    gap = measureShortestGapMs(schedule, fromMs, count);
    measuredGaps.set(key, gap);
  }
  return gap;
}

function measureShortestGapMs(
  schedule: string,
  fromMs: number,
  count: number,
): number {
  let shortest = Number.POSITIVE_INFINITY;
  let slot = nextSlotMs(schedule, fromMs);
  for (let i = 0; i < count && slot !== undefined; i++) {
    const next = nextSlotMs(schedule, slot);
    if (next !== undefined) {
      shortest = Math.min(shortest, next - slot);
    }
    slot = next;
  }
  return shortest;
}

/** Scheduler's schedule-time header: RFC 3339 UTC, whole seconds ("2026-10-16T12:00:00Z"). */
export function scheduleTimeHeader(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}Z`;
}

/** The model: start it, fire Force runs, change the jobs, stop it. */
export class CloudScheduler {
  readonly #options: CloudSchedulerOptions;
  #jobs: readonly SchedulerSettings[];
  /** Every attempt sent, in order: the ground truth of what Scheduler did. */
  readonly attempts: SchedulerAttempt[] = [];
  readonly #timers = new Map<string, () => void>();
  readonly #outstanding = new Set<string>();
  readonly #waiting = new Map<string, number>();
  /** Paused jobs (`gcloud scheduler jobs pause`): their slots are not fired while paused. */
  readonly #paused = new Set<string>();
  /** How late the next slot of a job is dispatched, ms, by job id (once). */
  readonly #delays = new Map<string, number>();
  #stopped = false;
  /** The number the next execution gets. */
  #nextExecution = 0;

  constructor(options: CloudSchedulerOptions) {
    this.#options = options;
    this.#jobs = options.jobs;
  }

  start(): void {
    for (const job of this.#jobs) {
      this.#arm(job, this.#options.clock.now());
    }
  }

  /** A new revision's jobs: slot timers re-armed; running executions keep their settings. */
  setJobs(jobs: readonly SchedulerSettings[]): void {
    for (const cancel of this.#timers.values()) {
      cancel();
    }
    this.#timers.clear();
    this.#jobs = jobs;
    for (const id of [...this.#waiting.keys()]) {
      if (!jobs.some((j) => j.id === id)) {
        this.#waiting.delete(id);
      }
    }
    if (!this.#stopped) {
      this.start();
    }
  }

  /** Force run: dispatched now even if an execution is outstanding; retried like any. */
  fire(jobId: string, options: { withoutScheduleTime?: boolean } = {}): void {
    const job = this.#jobs.find((j) => j.id === jobId);
    if (job === undefined) {
      throw new Error(`no Scheduler job ${jobId}`);
    }
    const slot = nextSlotMs(job.schedule, this.#options.clock.now());
    if (slot === undefined) {
      return;
    }
    void this.#execute(job, slot, {
      withoutScheduleTime: options.withoutScheduleTime === true,
    });
  }

  /** Pauses a job: "a paused job will not be executed" (Job.state PAUSED) until resumed. */
  pause(jobId: string): void {
    this.#paused.add(jobId);
  }

  resume(jobId: string): void {
    this.#paused.delete(jobId);
  }

  /**
   * The job's next slot is dispatched `ms` late: its first attempt waits, and the job's execution
   * is outstanding meanwhile (its next slots wait behind it, as behind a slow one).
   */
  delayNext(jobId: string, ms: number): void {
    this.#delays.set(jobId, ms);
  }

  stop(): void {
    this.#stopped = true;
    for (const cancel of this.#timers.values()) {
      cancel();
    }
    this.#timers.clear();
  }

  #arm(job: SchedulerSettings, afterMs: number): void {
    const slot = nextSlotMs(job.schedule, afterMs);
    if (slot === undefined) {
      return;
    }
    const { clock } = this.#options;
    this.#timers.set(
      job.id,
      clock.setTimer(() => {
        this.#timers.delete(job.id);
        this.#arm(job, slot);
        this.#onSlot(job, slot);
      }, slot - clock.now()),
    );
  }

  /** A slot: runs now, or waits behind the outstanding execution, or is skipped behind a waiting one. */
  #onSlot(job: SchedulerSettings, slot: number): void {
    if (this.#paused.has(job.id)) {
      return;
    }
    if (!this.#outstanding.has(job.id)) {
      this.#startExecution(job, slot);
    } else if (!this.#waiting.has(job.id)) {
      this.#waiting.set(job.id, slot);
    }
  }

  #startExecution(
    job: SchedulerSettings,
    slot: number,
    behindLateDispatch = false,
  ): void {
    this.#outstanding.add(job.id);
    const delayMs = this.#delays.get(job.id) ?? 0;
    this.#delays.delete(job.id);
    const dispatched =
      delayMs === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) =>
            this.#options.clock.setTimer(resolve, delayMs),
          );
    const executed = dispatched.then(() =>
      this.#stopped
        ? undefined
        : this.#execute(job, slot, undefined, delayMs, behindLateDispatch),
    );
    void executed.finally(() => {
      this.#outstanding.delete(job.id);
      const waiting = this.#waiting.get(job.id);
      this.#waiting.delete(job.id);
      const current = this.#jobs.find((j) => j.id === job.id);
      if (waiting !== undefined && current !== undefined && !this.#stopped) {
        this.#startExecution(current, waiting, delayMs > 0);
      }
    });
  }

  /** One execution: attempts until one succeeds or the retry limits are reached. */
  async #execute(
    job: SchedulerSettings,
    slot: number,
    forced: { withoutScheduleTime: boolean } | undefined,
    dispatchedLateMs = 0,
    behindLateDispatch = false,
  ): Promise<void> {
    const { clock } = this.#options;
    const firstAttemptAt = clock.now();
    const execution = this.#nextExecution++;
    for (let attempt = 1; ; attempt++) {
      const record = await this.#attempt(job, slot, attempt, forced, execution);
      if (dispatchedLateMs > 0) {
        Object.assign(record, { dispatchedLateMs });
      }
      if (behindLateDispatch) {
        Object.assign(record, { behindLateDispatch: true });
      }
      const retry = attempt; // after attempt n comes retry n
      const undeclared = !this.#jobs.some((j) => j.id === job.id);
      record.retries =
        !record.succeeded &&
        !this.#stopped &&
        !undeclared &&
        schedulerRetries(job, retry, firstAttemptAt, clock.now());
      if (!record.retries) {
        return;
      }
      await new Promise<void>((resolve) =>
        clock.setTimer(resolve, schedulerBackoffMs(job, retry)),
      );
      if (this.#stopped) {
        return;
      }
    }
  }

  /** One attempt: the request (maybe duplicated), the deadline, and whether the answer is lost. */
  async #attempt(
    job: SchedulerSettings,
    slot: number,
    attempt: number,
    forced: { withoutScheduleTime: boolean } | undefined,
    execution: number,
  ): Promise<SchedulerAttempt> {
    const { clock, random, send } = this.#options;
    const sent = forced?.withoutScheduleTime !== true;
    const headers: Record<string, string> = {
      'User-Agent': 'Google-Cloud-Scheduler',
      'X-CloudScheduler-JobName': job.id,
      ...(sent
        ? { 'X-CloudScheduler-ScheduleTime': scheduleTimeHeader(slot) }
        : {}),
    };
    const record: SchedulerAttempt = {
      jobId: job.id,
      slotMs: slot,
      forced: forced !== undefined,
      scheduleTimeSent: sent,
      execution,
      attempt,
      sentAt: clock.now(),
      endedAt: undefined,
      succeeded: false,
      retries: undefined,
    };
    this.attempts.push(record);
    const deliver = async (): Promise<number | undefined> => {
      const deadline = new AbortController();
      const cancel = clock.setTimer(
        () => deadline.abort(),
        job.attemptDeadlineSeconds * 1000,
      );
      try {
        return (await send(headers, deadline.signal, record)).status;
      } catch {
        return undefined;
      } finally {
        cancel();
      }
    };
    if (random() < this.#options.duplicates) {
      void deliver();
    }
    const status = await deliver();
    const lost = status !== undefined && random() < this.#options.dropAnswers;
    record.endedAt = clock.now();
    record.succeeded =
      status !== undefined && status >= 200 && status < 300 && !lost;
    return record;
  }
}
