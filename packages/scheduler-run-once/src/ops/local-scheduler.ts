/**
 * A local Cloud Scheduler: fires each declared job at its slots (its cron in its time zone) against a
 * running function, sends what Scheduler sends, and retries as Scheduler retries. `npm run dev`
 * runs it beside the function; `npm run scheduler` runs it alone (`ops/scheduler.ts`).
 *
 * What it imitates, and where Google documents it:
 *
 * - The request: `POST` to the job's URL (with `JOB_QUERY`, as `deploy.sh` builds it) carrying
 *   `X-CloudScheduler-JobName` (the short job id) and `X-CloudScheduler-ScheduleTime` ("the job
 *   schedule time in RFC3339 UTC "Zulu" format", AppEngineHttpTarget.headers; the "deduplicate job
 *   requests" guide's example is `2026-10-16T12:00:00Z`), the job's own headers (`JOB_HEADERS`),
 *   `User-Agent: Google-Cloud-Scheduler` ("User-Agent: This will be set to "Google-Cloud-Scheduler"",
 *   HttpTarget.headers), and with OIDC an `Authorization: Bearer` ID token for the audience.
 * - The attempt deadline: "If the request handler does not respond by this deadline then the request
 *   is cancelled and the attempt is marked as a DEADLINE_EXCEEDED failure. [...] Cloud Scheduler
 *   will retry the job according to the RetryConfig" (Job.attemptDeadline). The request is aborted;
 *   the function may well keep working, which is what makes a retry meet a run still in progress.
 * - Success is an answer in [200, 299]; anything else, no answer, or a lost answer is a failed
 *   attempt, retried after the back-off of `src/retry-policy.ts` (RetryConfig's documented
 *   sequence) until both retry limits are reached.
 * - One outstanding execution per job: "As a general rule, execution n + 1 of a job will not begin
 *   until execution n has finished. Cloud Scheduler will never allow two simultaneously outstanding
 *   executions" (Job.schedule, https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs
 *   and https://cloud.google.com/python/docs/reference/cloudscheduler/latest/google.cloud.scheduler_v1.types.Job),
 *   and "the next scheduled execution time might be skipped if the retries continue through that
 *   time" ("Retry jobs", https://cloud.google.com/scheduler/docs/configuring/retry-jobs). So a slot
 *   that comes while the job's previous execution is outstanding (running or retrying) is
 *   *delayed*: it fires, with its own schedule time, as soon as that execution ends. A further slot
 *   that comes while one is already delayed is skipped, and reported.
 * - Jobs no longer declared ({@link LocalScheduler.setJobs} after a reload): their retries and
 *   their delayed slot are dropped, and reported, as a deleted Scheduler job stops retrying.
 * - A forced run ({@link LocalScheduler.fire}, like `gcloud scheduler jobs run`) "will dispatch the
 *   job, even if the job is already running" (jobs.run), and its schedule-time header carries "the
 *   timestamp of the next scheduled execution or may be omitted" ("deduplicate job requests"
 *   guide): `withoutScheduleTime` sends the second form, with no such header at all.
 *
 * For seeing de-duplication at work it can also lose answers (the delivery is made and answered,
 * and the answer is dropped, as after a lost acknowledgement) and add duplicate deliveries (a second
 * identical request at the same time, as from a proxy retry).
 *
 * Time comes from an injected {@link Clock}, requests go through an injected {@link Send} and chance
 * from an injected `random`, so tests drive all three.
 */
import type { DeclaredJob, JobSettings } from '../policy/job-declaration.ts';
import { backoffMs, makesRetry } from '../policy/retry-policy.ts';
import { nextSlots, toUtcRfc3339 } from '../policy/schedule.ts';

/** What the Scheduler needs of a job: its id, its schedule and its Scheduler settings. */
export type SchedulerJob = Pick<DeclaredJob, 'id' | 'schedule' | 'timeZone'> &
  JobSettings;

/** Wall-clock time and timers. */
export interface Clock {
  /** Now, ms since the epoch. */
  now(): number;
  /** Calls `callback` once after `ms` milliseconds; the returned function cancels it. */
  setTimer(callback: () => void, ms: number): () => void;
}

/** Node's timer limit: a longer delay fires after 1 ms, so longer waits are chained. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The machine's clock and Node's timers (waits of any length, chained past Node's limit). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(callback, ms) {
    let timer: NodeJS.Timeout;
    const wait = (remaining: number) => {
      timer = setTimeout(
        () =>
          remaining > MAX_TIMER_MS
            ? wait(remaining - MAX_TIMER_MS)
            : callback(),
        Math.min(Math.max(remaining, 0), MAX_TIMER_MS),
      );
    };
    wait(ms);
    return () => clearTimeout(timer);
  },
};

/**
 * Resolves after `ms` on `clock`, or at once when `signal` aborts.
 *
 * @example await sleepOn(systemClock, 30_000, stopping.signal);
 */
export function sleepOn(
  clock: Clock,
  ms: number,
  signal?: AbortSignal,
): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      return resolve();
    }
    const done = () => {
      cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const cancel = clock.setTimer(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** One HTTP request the Scheduler makes. */
export interface Delivery {
  readonly url: string;
  readonly method: 'POST';
  readonly headers: Readonly<Record<string, string>>;
}

/** An HTTP answer: its status and its body as text. */
export interface Answer {
  readonly status: number;
  readonly body: string;
}

/** Sends a delivery and resolves with the answer; rejects when `signal` aborts or the request fails. */
export type Send = (delivery: Delivery, signal: AbortSignal) => Promise<Answer>;

/** {@link Send} over `fetch`, following redirects as Scheduler does (HttpTarget). */
export const fetchSend: Send = async (delivery, signal) => {
  const res = await fetch(delivery.url, {
    method: delivery.method,
    headers: delivery.headers,
    signal,
  });
  return { status: res.status, body: await res.text() };
};

/** What happened after an attempt of an execution. */
export type Next =
  | { readonly kind: 'retry'; readonly inMs: number }
  | { readonly kind: 'succeeded' }
  | { readonly kind: 'gave_up'; readonly retries: number }
  /** A duplicate delivery decides nothing: its attempt's primary delivery does. */
  | { readonly kind: 'none' };

/** One delivery of an attempt and its answer. */
export interface AttemptEvent {
  readonly type: 'attempt';
  readonly jobId: string;
  readonly scheduleTime: Date;
  /** 1 for the first attempt of the execution, 2 for its first retry, … */
  readonly attempt: number;
  /** Whether the execution is a forced run ({@link LocalScheduler.fire}). */
  readonly forced: boolean;
  /**
   * False for a forced run fired without `X-CloudScheduler-ScheduleTime`; `scheduleTime` is then
   * the next slot when it was fired, never sent.
   */
  readonly scheduleTimeSent: boolean;
  /** `duplicate`: the extra delivery added by the duplicates rate. */
  readonly delivery: 'primary' | 'duplicate';
  /** When the request was sent, ms since the epoch. */
  readonly startedAt: number;
  /** Until the answer, the deadline or the failure, ms. */
  readonly durationMs: number;
  /** The HTTP status; absent when there was no answer. */
  readonly status?: number;
  /**
   * The answer's `outcome` (`processed`, `duplicate`, `in_progress`, …), `deadline_exceeded` when
   * the attempt deadline passed first, or `no_answer` when the request failed.
   */
  readonly outcome: string;
  /** Why there was no answer (`no_answer`), e.g. `connect ECONNREFUSED 127.0.0.1:8080`. */
  readonly error?: string;
  /** True when the answer was received and dropped, as a lost acknowledgement. */
  readonly answerDropped: boolean;
  readonly next: Next;
}

/** A slot not fired because the job's previous execution was still outstanding. */
export interface SkippedEvent {
  readonly type: 'skipped';
  readonly jobId: string;
  readonly scheduleTime: Date;
  /** The schedule time of the outstanding execution. */
  readonly outstanding: Date;
}

/** A slot held back until the job's outstanding execution ends (Job.schedule). */
export interface DelayedEvent {
  readonly type: 'delayed';
  readonly jobId: string;
  readonly scheduleTime: Date;
  /** The schedule time of the outstanding execution. */
  readonly outstanding: Date;
}

/** An execution whose retries stopped because its job is no longer declared. */
export interface DroppedEvent {
  readonly type: 'dropped';
  readonly jobId: string;
  readonly scheduleTime: Date;
}

/** A slot not fired because the job is paused (`npm run pause`). */
export interface PausedEvent {
  readonly type: 'paused';
  readonly jobId: string;
  readonly scheduleTime: Date;
  /** The pause's note, `''` if none. */
  readonly note: string;
}

/**
 * Slots that came while no Scheduler ran (between a crash and the restart of `npm run dev`): the
 * newest, `scheduleTime`, is delivered late; the `missed - 1` older ones are not.
 */
export interface RecoveredEvent {
  readonly type: 'recovered';
  readonly jobId: string;
  /** The newest slot missed, which is delivered now. */
  readonly scheduleTime: Date;
  /** How many slots of the job passed while it was down, the delivered one included. */
  readonly missed: number;
}

/** What the Scheduler reports, as it happens. */
export type SchedulerEvent =
  | AttemptEvent
  | SkippedEvent
  | DelayedEvent
  | DroppedEvent
  | PausedEvent
  | RecoveredEvent;

/** A retry waiting out its back-off, as kept across restarts ({@link SchedulerState}). */
export interface PendingRetry {
  readonly jobId: string;
  /** The execution's slot, ISO 8601. */
  readonly scheduleTime: string;
  /** The number of the attempt the retry makes (2 for the first retry). */
  readonly attempt: number;
  /** When the execution's first attempt was sent, ms since the epoch: the retry limits count from it. */
  readonly firstAttemptAt: number;
  /** When the retry is due, ms since the epoch. */
  readonly dueAt: number;
  /** Set for a forced run: whether it sends no schedule time. */
  readonly forced?: { readonly withoutScheduleTime: boolean };
}

/**
 * What the Scheduler owes, kept so that a restart after a crash delivers it: each job's last slot
 * reached (fired, delayed, skipped or paused) and the retries waiting out their back-off.
 */
export interface SchedulerState {
  /** Job id to its last slot reached, ISO 8601. */
  readonly lastSlots: Readonly<Record<string, string>>;
  readonly retries: readonly PendingRetry[];
}

/** Where {@link SchedulerState} is kept (`npm run dev`: `.run-once/scheduler.json`). */
export interface SchedulerStateStore {
  /** The state kept by the last run, or undefined for none. */
  load(): SchedulerState | undefined;
  /** Keeps `state`, replacing the last; called on every change, so it should be quick. */
  save(state: SchedulerState): void;
}

/** How an execution (a slot's attempts and retries) ended. */
export interface ExecutionResult {
  readonly jobId: string;
  readonly scheduleTime: Date;
  /** True when an attempt was answered 2xx and the answer was not dropped. */
  readonly succeeded: boolean;
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** The status of the last attempt's answer; absent when it got none. */
  readonly lastStatus?: number;
}

/** OIDC tokens: Scheduler's `--oidc-token-audience` and a signer for it. */
export interface TokenSource {
  readonly audience: string;
  /** The invoker service account the token names. */
  readonly email: string;
  /** An ID token for `audience` as `email`, issued at `nowMs`. */
  token(audience: string, email: string, nowMs: number): string;
}

/** What {@link LocalScheduler} takes. */
export interface LocalSchedulerOptions {
  /** The function's URL, e.g. `http://127.0.0.1:8080/`. */
  readonly url: string;
  readonly jobs: readonly SchedulerJob[];
  /** Headers every job sends (`JOB_HEADERS` of `deploy.sh`); Scheduler's own win on a clash. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Query string appended to the URL (`JOB_QUERY` of `deploy.sh`), without `?`. */
  readonly query?: string;
  /** With `AUTH_MODE=verify-oidc`: where the `Authorization` header's tokens come from. */
  readonly tokens?: TokenSource;
  /** Share of answers dropped after they arrived, 0 to 1. */
  readonly dropAnswers?: number;
  /** Share of attempts delivered twice at once, 0 to 1. */
  readonly duplicates?: number;
  readonly clock?: Clock;
  readonly send?: Send;
  /** Uniform in [0, 1); `Math.random` unless given. */
  readonly random?: () => number;
  /** Called with every event as it happens. */
  readonly onEvent?: (event: SchedulerEvent) => void;
  /**
   * The note of the pause `slot` of job `jobId` falls in (`''` without one), or undefined when it
   * is not paused: a paused slot is not fired, as a paused Cloud Scheduler job fires nothing. Asked
   * at each slot; a slot whose answer fails is fired.
   */
  readonly pauseOf?: (jobId: string, slot: Date) => Promise<string | undefined>;
  /**
   * Where what the Scheduler owes is kept. At the first {@link LocalScheduler.start} the state
   * kept by the last run is taken up: its pending retries resume (due at once if their back-off
   * passed), and for each job the newest slot that passed since its last slot reached is delivered
   * late (one per job, whatever the gap; the older ones are counted in a `recovered` event).
   */
  readonly state?: SchedulerStateStore;
}

/** How a forced run is sent: with its schedule time (as `gcloud scheduler jobs run`) or without. */
interface Forced {
  readonly withoutScheduleTime: boolean;
}

/** Where an execution kept by the last run picks up: its next attempt, after `waitMs`. */
interface Resume {
  readonly attempt: number;
  readonly firstAttemptAt: number;
  readonly waitMs: number;
}

/**
 * How many missed slots of a job a restart counts before it stops counting (an every-minute job
 * down for a month): only the newest is delivered anyway, and it is found by walking the slots.
 */
const MAX_COUNTED_MISSED = 10_000;

/** The first slot strictly after `after`, or `undefined` if the schedule never fires again. */
function nextSlot(job: SchedulerJob, after: number): Date | undefined {
  return nextSlots(job, new Date(after), 1)[0];
}

/**
 * The local Scheduler. Construct it, then {@link start} it to fire every job on its schedule, or
 * {@link fire} one job now; {@link stop} ends everything.
 *
 * @example
 * const scheduler = new LocalScheduler({ url: 'http://127.0.0.1:8080/', jobs, onEvent: print });
 * scheduler.start();
 * process.once('SIGINT', () => void scheduler.stop());
 */
export class LocalScheduler {
  readonly #options: LocalSchedulerOptions;
  readonly #clock: Clock;
  readonly #send: Send;
  readonly #random: () => number;
  #jobs: readonly SchedulerJob[];
  /** The armed slot timer of each job, by id. */
  readonly #timers = new Map<string, () => void>();
  /** The outstanding execution of each job, by id, with its schedule time. */
  readonly #outstanding = new Map<string, Date>();
  /** The slot of each job held back until its outstanding execution ends, by id. */
  readonly #delayed = new Map<string, { job: SchedulerJob; slot: Date }>();
  /** Aborted for a job that is no longer declared: ends its executions' retries. */
  readonly #undeclared = new Map<string, AbortController>();
  /** Every execution and duplicate delivery not yet settled. */
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #stopping = new AbortController();
  /** Each job's last slot reached, by id ({@link SchedulerState.lastSlots}). */
  readonly #lastSlots = new Map<string, Date>();
  /** The retries waiting out their back-off now. */
  readonly #pendingRetries = new Set<PendingRetry>();
  /** Whether the kept state was taken up (at the first start). */
  #recovered = false;

  constructor(options: LocalSchedulerOptions) {
    this.#options = options;
    this.#jobs = options.jobs;
    this.#clock = options.clock ?? systemClock;
    this.#send = options.send ?? fetchSend;
    this.#random = options.random ?? Math.random;
  }

  /** Arms every job for its next slot; each slot fires an execution and arms the one after it. */
  start(): void {
    if (!this.#recovered) {
      this.#recovered = true;
      this.#recover();
    }
    for (const job of this.#jobs) {
      this.#arm(job, this.#clock.now());
    }
  }

  /** Takes up the kept state: resumes its retries, delivers each job's newest missed slot. */
  #recover(): void {
    const kept = this.#options.state?.load();
    if (kept === undefined) {
      return;
    }
    const now = this.#clock.now();
    for (const retry of kept.retries) {
      const job = this.#jobs.find((j) => j.id === retry.jobId);
      if (job !== undefined) {
        this.#resumeRetry(job, retry, now);
      }
    }
    for (const job of this.#jobs) {
      const last = kept.lastSlots[job.id];
      if (last !== undefined) {
        this.#lastSlots.set(job.id, new Date(last));
        this.#deliverMissed(job, Date.parse(last), now);
      }
    }
    this.#saveState();
  }

  /** Resumes a retry kept by the last run, at its due time (at once if it passed). */
  #resumeRetry(job: SchedulerJob, retry: PendingRetry, now: number): void {
    const slot = new Date(retry.scheduleTime);
    const resume = {
      attempt: retry.attempt,
      firstAttemptAt: retry.firstAttemptAt,
      waitMs: Math.max(0, retry.dueAt - now),
    };
    if (retry.forced !== undefined) {
      void this.#track(this.#execute(job, slot, retry.forced, resume));
      return;
    }
    this.#startExecution(job, slot, resume);
  }

  /** The slots of `job` after `last` up to `now`: the newest is delivered late, once. */
  #deliverMissed(job: SchedulerJob, last: number, now: number): void {
    let missed = 0;
    let newest: Date | undefined;
    for (let slot = nextSlot(job, last); slot && slot.getTime() <= now; ) {
      missed++;
      newest = slot;
      slot = nextSlot(job, slot.getTime());
      if (missed >= MAX_COUNTED_MISSED) {
        break;
      }
    }
    if (newest === undefined) {
      return;
    }
    this.#options.onEvent?.({
      type: 'recovered',
      jobId: job.id,
      scheduleTime: newest,
      missed,
    });
    this.#onSlot(job, newest, { rearm: false });
  }

  /** Keeps what the Scheduler owes now, when a store was given. */
  #saveState(): void {
    const store = this.#options.state;
    if (store === undefined) {
      return;
    }
    const lastSlots = Object.fromEntries(
      [...this.#lastSlots].map(([id, slot]) => [id, slot.toISOString()]),
    );
    store.save({ lastSlots, retries: [...this.#pendingRetries] });
  }

  /**
   * Replaces the jobs (after the declarations changed): every timer is re-armed from now with the
   * new settings; executions already under way finish with the settings they started with.
   */
  setJobs(jobs: readonly SchedulerJob[]): void {
    for (const cancel of this.#timers.values()) {
      cancel();
    }
    this.#timers.clear();
    this.#jobs = jobs;
    const declared = new Set(jobs.map((job) => job.id));
    for (const [id, controller] of this.#undeclared) {
      if (!declared.has(id)) {
        controller.abort();
      }
    }
    for (const [id, { slot }] of this.#delayed) {
      if (declared.has(id)) {
        continue;
      }
      this.#delayed.delete(id);
      this.#options.onEvent?.({
        type: 'dropped',
        jobId: id,
        scheduleTime: slot,
      });
    }
    if (!this.#stopping.signal.aborted) {
      this.start();
    }
  }

  /** The jobs it fires. */
  get jobs(): readonly SchedulerJob[] {
    return this.#jobs;
  }

  /**
   * A forced run of job `jobId`, as `gcloud scheduler jobs run`: fires at once, even if an
   * execution of the job is outstanding, with the job's next slot as its schedule time (or, with
   * `withoutScheduleTime`, no `X-CloudScheduler-ScheduleTime` header at all, the guide's other
   * form), and follows it through its retries.
   *
   * @throws {Error} if no job has that id, or its schedule never fires again (no next slot).
   * @example
   * const { succeeded } = await scheduler.fire('scheduled-job', { withoutScheduleTime: true });
   */
  fire(
    jobId: string,
    options: { withoutScheduleTime?: boolean } = {},
  ): Promise<ExecutionResult> {
    const job = this.#jobs.find((j) => j.id === jobId);
    if (job === undefined) {
      throw new Error(
        `no job "${jobId}" is declared; declared: ${this.#jobs.map((j) => j.id).join(', ')}`,
      );
    }
    const slot = nextSlot(job, this.#clock.now());
    if (slot === undefined) {
      throw new Error(`job "${jobId}" never fires again: no next slot`);
    }
    const forced = {
      withoutScheduleTime: options.withoutScheduleTime === true,
    };
    return this.#track(this.#execute(job, slot, forced));
  }

  /**
   * Stops firing: cancels the slot timers and pending retries, aborts requests in flight, and
   * resolves once every execution has settled.
   */
  async stop(): Promise<void> {
    this.#stopping.abort();
    for (const cancel of this.#timers.values()) {
      cancel();
    }
    this.#timers.clear();
    while (this.#inFlight.size > 0) {
      await Promise.allSettled([...this.#inFlight]);
    }
  }

  #track<T>(work: Promise<T>): Promise<T> {
    this.#inFlight.add(work);
    const forget = () => this.#inFlight.delete(work);
    work.then(forget, forget);
    return work;
  }

  /** Sets the job's timer for its first slot after `after` (ms). */
  #arm(job: SchedulerJob, after: number): void {
    this.#timers.get(job.id)?.();
    this.#timers.delete(job.id);
    const slot = nextSlot(job, after);
    if (slot === undefined) {
      return;
    }
    const wake = () => {
      // A timer may wake before the slot by the wall clock (the clock was set back): wait on.
      const early = slot.getTime() - this.#clock.now();
      if (early > 0) {
        this.#timers.set(job.id, this.#clock.setTimer(wake, early));
        return;
      }
      this.#timers.delete(job.id);
      this.#onSlot(job, slot);
    };
    this.#timers.set(
      job.id,
      this.#clock.setTimer(wake, slot.getTime() - this.#clock.now()),
    );
  }

  #onSlot(
    job: SchedulerJob,
    slot: Date,
    { rearm }: { rearm: boolean } = { rearm: true },
  ): void {
    // Slots passed while the clock jumped (a suspended laptop) are not fired late.
    if (rearm) {
      this.#arm(job, Math.max(this.#clock.now(), slot.getTime()));
    }
    this.#lastSlots.set(job.id, slot);
    this.#saveState();
    const { pauseOf } = this.#options;
    if (pauseOf === undefined) {
      this.#schedule(job, slot);
      return;
    }
    const decided = pauseOf(job.id, slot).then(
      (note) => {
        if (this.#stopping.signal.aborted) {
          return;
        }
        if (note === undefined) {
          this.#schedule(job, slot);
        } else {
          this.#options.onEvent?.({
            type: 'paused',
            jobId: job.id,
            scheduleTime: slot,
            note,
          });
        }
      },
      () => {
        if (!this.#stopping.signal.aborted) {
          this.#schedule(job, slot);
        }
      },
    );
    void this.#track(decided);
  }

  /** A slot that fires: now, or delayed or skipped behind the job's outstanding execution. */
  #schedule(job: SchedulerJob, slot: Date): void {
    const outstanding = this.#outstanding.get(job.id);
    if (outstanding === undefined) {
      this.#startExecution(job, slot);
    } else if (!this.#delayed.has(job.id)) {
      this.#delayed.set(job.id, { job, slot });
      this.#options.onEvent?.({
        type: 'delayed',
        jobId: job.id,
        scheduleTime: slot,
        outstanding,
      });
    } else {
      this.#options.onEvent?.({
        type: 'skipped',
        jobId: job.id,
        scheduleTime: slot,
        outstanding,
      });
    }
  }

  /** Starts the execution of a slot; when it ends, the slot delayed meanwhile, if any, starts. */
  #startExecution(job: SchedulerJob, slot: Date, resume?: Resume): void {
    this.#outstanding.set(job.id, slot);
    void this.#track(this.#execute(job, slot, undefined, resume)).finally(
      () => {
        if (this.#outstanding.get(job.id) === slot) {
          this.#outstanding.delete(job.id);
        }
        const delayed = this.#delayed.get(job.id);
        this.#delayed.delete(job.id);
        if (delayed !== undefined && !this.#stopping.signal.aborted) {
          this.#startExecution(delayed.job, delayed.slot);
        }
      },
    );
  }

  /** The signal that ends the retries of `jobId`'s executions once it is no longer declared. */
  #dropSignal(jobId: string): AbortSignal {
    let controller = this.#undeclared.get(jobId);
    if (controller === undefined || controller.signal.aborted) {
      controller = new AbortController();
      this.#undeclared.set(jobId, controller);
    }
    return controller.signal;
  }

  /**
   * One execution: the first attempt and its retries, until success or the retry limits.
   * `forced` is set for a forced run, saying whether it sends its schedule time.
   */
  async #execute(
    job: SchedulerJob,
    scheduleTime: Date,
    forced: Forced | undefined,
    resume?: Resume,
  ): Promise<ExecutionResult> {
    const firstAttemptAt = resume?.firstAttemptAt ?? this.#clock.now();
    const dropped = this.#dropSignal(job.id);
    const waitSignal = AbortSignal.any([this.#stopping.signal, dropped]);
    if (
      resume !== undefined &&
      !(await this.#waitToResume(job, scheduleTime, forced, resume, waitSignal))
    ) {
      return {
        jobId: job.id,
        scheduleTime,
        succeeded: false,
        attempts: resume.attempt - 1,
      };
    }
    for (let attempt = resume?.attempt ?? 1; ; attempt++) {
      const answer = await this.#attempt(job, scheduleTime, attempt, forced);
      const ok =
        !answer.dropped && answer.status !== undefined && answer.status < 300;
      const next = this.#nextAfter(job, attempt, ok, firstAttemptAt);
      this.#options.onEvent?.({ ...answer.event, next });
      if (next.kind !== 'retry') {
        return {
          jobId: job.id,
          scheduleTime,
          succeeded: ok,
          attempts: attempt,
          ...(answer.status === undefined ? {} : { lastStatus: answer.status }),
        };
      }
      await this.#backOff(
        job,
        scheduleTime,
        forced,
        {
          attempt: attempt + 1,
          firstAttemptAt,
          dueAt: this.#clock.now() + next.inMs,
        },
        dropped,
      );
      if (waitSignal.aborted) {
        return {
          jobId: job.id,
          scheduleTime,
          succeeded: false,
          attempts: attempt,
        };
      }
    }
  }

  /**
   * Waits out the rest of a kept retry's back-off, kept meanwhile; false when `signal` ended the
   * wait (a stop, or the job no longer declared).
   */
  async #waitToResume(
    job: SchedulerJob,
    scheduleTime: Date,
    forced: Forced | undefined,
    resume: Resume,
    signal: AbortSignal,
  ): Promise<boolean> {
    const kept = this.#keepRetry(job, scheduleTime, forced, {
      attempt: resume.attempt,
      firstAttemptAt: resume.firstAttemptAt,
      dueAt: this.#clock.now() + resume.waitMs,
    });
    await sleepOn(this.#clock, resume.waitMs, signal);
    if (!this.#stopping.signal.aborted) {
      this.#forgetRetry(kept);
    }
    return !signal.aborted;
  }

  /** What follows attempt `attempt` (answered `ok` or not) of an execution first sent at `firstAttemptAt`. */
  #nextAfter(
    job: SchedulerJob,
    attempt: number,
    ok: boolean,
    firstAttemptAt: number,
  ): Next {
    // Retries are counted from 0: after attempt n comes retry n - 1.
    const retry = attempt - 1;
    const elapsedMs = this.#clock.now() - firstAttemptAt;
    if (ok) {
      return { kind: 'succeeded' };
    }
    if (this.#stopping.signal.aborted || !makesRetry(job, retry, elapsedMs)) {
      return { kind: 'gave_up', retries: retry };
    }
    return { kind: 'retry', inMs: backoffMs(job, retry) };
  }

  /**
   * Waits out a retry's back-off, kept meanwhile: a stop (Ctrl-C, or a crash) leaves it kept, owed
   * to the next start; a retry dropped with its job is forgotten, and reported.
   */
  async #backOff(
    job: SchedulerJob,
    scheduleTime: Date,
    forced: Forced | undefined,
    when: Pick<PendingRetry, 'attempt' | 'firstAttemptAt' | 'dueAt'>,
    dropped: AbortSignal,
  ): Promise<void> {
    const waitSignal = AbortSignal.any([this.#stopping.signal, dropped]);
    const kept = this.#keepRetry(job, scheduleTime, forced, when);
    await sleepOn(this.#clock, when.dueAt - this.#clock.now(), waitSignal);
    if (!this.#stopping.signal.aborted || dropped.aborted) {
      this.#forgetRetry(kept);
    }
    if (dropped.aborted && !this.#stopping.signal.aborted) {
      this.#options.onEvent?.({
        type: 'dropped',
        jobId: job.id,
        scheduleTime,
      });
    }
  }

  /** Records a retry waiting out its back-off, and keeps the state. */
  #keepRetry(
    job: SchedulerJob,
    scheduleTime: Date,
    forced: Forced | undefined,
    when: Pick<PendingRetry, 'attempt' | 'firstAttemptAt' | 'dueAt'>,
  ): PendingRetry {
    const retry: PendingRetry = {
      jobId: job.id,
      scheduleTime: scheduleTime.toISOString(),
      ...when,
      ...(forced === undefined ? {} : { forced }),
    };
    this.#pendingRetries.add(retry);
    this.#saveState();
    return retry;
  }

  /** Forgets a retry that is due (or dropped), and keeps the state. */
  #forgetRetry(retry: PendingRetry): void {
    this.#pendingRetries.delete(retry);
    this.#saveState();
  }

  /** One attempt: its delivery (and maybe a duplicate), the answer, and whether it was dropped. */
  async #attempt(
    job: SchedulerJob,
    scheduleTime: Date,
    attempt: number,
    forced: Forced | undefined,
  ): Promise<{
    event: Omit<AttemptEvent, 'next'>;
    status?: number;
    dropped: boolean;
  }> {
    const sent = forced?.withoutScheduleTime !== true;
    const delivery = this.#delivery(job, sent ? scheduleTime : undefined);
    const base = {
      type: 'attempt',
      jobId: job.id,
      scheduleTime,
      attempt,
      forced: forced !== undefined,
      scheduleTimeSent: sent,
    } as const;
    if (this.#random() < (this.#options.duplicates ?? 0)) {
      void this.#track(
        this.#deliver(job, delivery).then((answer) =>
          this.#options.onEvent?.({
            ...base,
            ...answer,
            delivery: 'duplicate',
            answerDropped: false,
            next: { kind: 'none' },
          }),
        ),
      );
    }
    const answer = await this.#deliver(job, delivery);
    const dropped =
      answer.status !== undefined &&
      this.#random() < (this.#options.dropAnswers ?? 0);
    return {
      event: {
        ...base,
        ...answer,
        delivery: 'primary',
        answerDropped: dropped,
      },
      ...(answer.status === undefined ? {} : { status: answer.status }),
      dropped,
    };
  }

  /** The request Scheduler sends for a run of `job` at `scheduleTime` (none: a Force run without it). */
  #delivery(job: SchedulerJob, scheduleTime: Date | undefined): Delivery {
    const { url, query, headers = {}, tokens } = this.#options;
    const own: Record<string, string> = {
      'User-Agent': 'Google-Cloud-Scheduler',
      'X-CloudScheduler-JobName': job.id,
      ...(scheduleTime === undefined
        ? {}
        : { 'X-CloudScheduler-ScheduleTime': toUtcRfc3339(scheduleTime) }),
    };
    if (tokens !== undefined) {
      own.Authorization = `Bearer ${tokens.token(tokens.audience, tokens.email, this.#clock.now())}`;
    }
    // Header names are case-insensitive: a job header spelled differently must not double ours.
    // Scheduler's own names are its alone, the schedule time's even when it sends none.
    const names = [...Object.keys(own), 'X-CloudScheduler-ScheduleTime'];
    const overridden = new Set(names.map((name) => name.toLowerCase()));
    const kept = Object.entries(headers).filter(
      ([name]) => !overridden.has(name.toLowerCase()),
    );
    return {
      url: query ? `${url}${url.includes('?') ? '&' : '?'}${query}` : url,
      method: 'POST',
      headers: { ...Object.fromEntries(kept), ...own },
    };
  }

  /** Sends `delivery`, giving up at the job's attempt deadline. */
  async #deliver(
    job: SchedulerJob,
    delivery: Delivery,
  ): Promise<
    Pick<
      AttemptEvent,
      'startedAt' | 'durationMs' | 'status' | 'outcome' | 'error'
    >
  > {
    const startedAt = this.#clock.now();
    const deadline = new AbortController();
    const cancelDeadline = this.#clock.setTimer(
      () => deadline.abort(),
      job.attemptDeadlineSeconds * 1000,
    );
    const signal = AbortSignal.any([deadline.signal, this.#stopping.signal]);
    try {
      const answer = await this.#send(delivery, signal);
      return {
        startedAt,
        durationMs: this.#clock.now() - startedAt,
        status: answer.status,
        outcome: outcomeOf(answer.body),
      };
    } catch (err) {
      const durationMs = this.#clock.now() - startedAt;
      if (deadline.signal.aborted) {
        return { startedAt, durationMs, outcome: 'deadline_exceeded' };
      }
      return {
        startedAt,
        durationMs,
        outcome: 'no_answer',
        error: errorText(err),
      };
    } finally {
      cancelDeadline();
    }
  }
}

/** The `outcome` of a JSON answer body, or `-` for any other body. */
function outcomeOf(body: string): string {
  try {
    const outcome = (JSON.parse(body) as { outcome?: unknown }).outcome;
    return typeof outcome === 'string' ? outcome : '-';
  } catch {
    return '-';
  }
}

/** A failed request's reason: fetch hides it in `cause` (`fetch failed` ← `ECONNREFUSED …`). */
function errorText(err: unknown): string {
  const cause = (err as { cause?: unknown } | null)?.cause;
  const inner = cause instanceof Error ? cause : err;
  return inner instanceof Error ? inner.message : String(inner);
}
