/**
 * What a simulated history is, and the fast-check generator of histories: the jobs (schedule,
 * overlap policy, Scheduler retry settings, how long and how reliably they run), the deployments
 * (one per key scope, each with its instances and its Cloud Scheduler), Firestore's latencies and
 * faults, and the timed events of the environment (crashes, pauses, clock steps, SIGTERM, Force
 * run, manual runs, re-runs, backfill, redeploys). A history is plain data: fast-check shrinks it,
 * and its printed form replays it.
 */
import fc from 'fast-check';
import type { OverlapPolicy } from '../../src/policy/job-declaration.ts';

/**
 * Gaps the simulator found that today's product still has, each waiting for its fix: while a switch
 * is `true`, the invariant it breaks is relaxed as its comment says, so the suite stays green on the
 * known gaps and strict on everything else. A switch is removed once its fix lands (its history
 * stays in `regressions.ts`). `npm run simulate -- --strict`
 * (or `SIM_STRICT=1`) turns them all off to see the gaps fail; flip one to `false` when its fix
 * lands.
 */
export const KNOWN_GAPS = {
  /**
   * Found by the run audit's model (issue 42): the audit's missed-run check can judge a job's slots
   * before the job's first claim lands (its delivery late, its instance paused), take them all for
   * "before the job's first record", and move its cursor past a slot that is then never reported.
   * The late-run scan has the same blind spot (`run_seen`). While on, invariant 2 excuses the
   * silently lost slots of a job whose first slot record was created after an audit was delivered
   * or a delivery's own check began (its first slots dispatched late, its instance paused);
   * regressions.ts keeps such a history. After a schedule change no check saw, the first record
   * that counts is the first at a slot of the rule a check knows (stop 74, seed 9, the 43rd: the
   * old rule's records tell a check that has seen no run nothing, and its own rule's first record
   * landed late); after a cursor started afresh, the first record after the fresh start counts
   * (stop 74, fault-biased seed 17, the 7th).
   */
  auditBeforeFirstRecord: true,
  /**
   * Found with Scheduler's late dispatch (`late_delivery`, issue 42's model): the missed-run check
   * allows a slot's first claim at most one retry window after the slot (slot-verdict.ts), so a
   * dispatch later than that has Scheduler retrying after the check reported the slot failed.
   * While on, invariant 8 excuses the attempts of an execution Scheduler dispatched late.
   */
  lateDispatch: true,
  /**
   * Found by 5,000 histories of seed 20261209 (the 632nd): a Force run without a schedule time
   * carries nothing but the time it is handled (docs/limits.md, "Force run without a schedule
   * time"). A duplicate of its delivery that reaches its handler after Scheduler gave up on it (its
   * instance frozen, or the request queued for an instance's start, past the attempt deadline), once
   * the forced run it duplicates was claimed longer ago than the job's longest execution, reads as
   * a new click and runs again as the next slot's forced run. While on, invariant 5 excuses a run
   * of a delivery handled more than its job's attempt deadline after it was sent.
   */
  forceRunHandledLate: true,
  /**
   * Found by 969 histories of seed -512432762 (stop 70; docs/limits.md, "A slot at a schedule
   * change, before the new rule's first record"): a check that has seen no run of a job looks for
   * the job's first record among the slots of the rules it knows; a slot of a new rule at a
   * schedule change, missed, before any record at that rule's slots, is taken for one before the
   * job's first record, though records at the old rule's own minutes came before it. While on,
   * invariant 2 excuses a slot with no record when, up to it, no record of its job this version
   * reads came at a time its own schedule, or a later schedule of the job, has a slot.
   */
  firstRecordUnderAnotherRule: true,
  /**
   * Found by 179 histories of seed 6 (stop 73; docs/limits.md, "A rolling deploy that changes the
   * schedule"): during a rolling deploy from every five minutes to `3,4,6,8,9,…`, a delivery's own
   * check on an instance of the old revision, after the run audit had seen the new rule, wrote the old rule
   * back into the cursor (a flip); the next rule seen was every minute, minutes later, and the
   * check judged 01:05, a slot of both rules it knew, which the schedule Scheduler ran then lacks:
   * a `missed run` Scheduler never had. While on, invariant 53 excuses a `missed run` of a slot the
   * schedule deployed at its time lacks when a check of the job on a revision with another rule,
   * one that has the slot, began after that schedule was deployed and before the slot.
   */
  oldRuleSeenAfterChange: true,
} as const;

export type GapName = keyof typeof KNOWN_GAPS;
export type Gaps = Readonly<Record<GapName, boolean>>;

/** Every gap off: the strict simulator, for `--strict` and the fixes' branches. */
export const NO_GAPS: Gaps = Object.fromEntries(
  Object.keys(KNOWN_GAPS).map((k) => [k, false]),
) as unknown as Gaps;

/** One simulated job: its declaration's settings and how its work behaves. */
export interface JobSpec {
  readonly id: string;
  readonly schedule: string;
  readonly overlap: OverlapPolicy;
  readonly attemptDeadlineSeconds: number;
  readonly retryCount: number;
  readonly maxRetryDurationSeconds: number;
  readonly minBackoffSeconds: number;
  readonly maxBackoffSeconds: number;
  readonly maxDoublings: number;
  /** Shortest and longest run of the work, virtual ms. */
  readonly minMs: number;
  readonly maxMs: number;
  /** Chance in [0, 1) that one execution throws. */
  readonly failRate: number;
  /** Each execution notes as it starts (`ctx.note`); absent in histories recorded before notes. */
  readonly notes?: boolean;
  /**
   * The job's `catchUp` (src/policy/catch-up.ts): the run audit delivers its late slots itself.
   * Absent in histories recorded before catch-up, and for a job without it.
   */
  readonly catchUp?: {
    readonly graceSeconds: number;
    readonly windowSeconds: number;
    readonly slots: 'latest' | 'all';
  };
}

/** Something the environment or an operator does at `at` ms after the history starts. */
export type SimEvent =
  | {
      readonly at: number;
      readonly type: 'crash';
      readonly deployment: number;
      readonly instance: number;
    }
  | {
      readonly at: number;
      readonly type: 'sigterm';
      readonly deployment: number;
      readonly instance: number;
      /**
       * Instead of `instance`, the instance that takes the deployment's next Scheduler request, a
       * moment after its handler was called: before, or while, its claim is on its way, so its job
       * may start after the SIGTERM.
       */
      readonly onRequest?: boolean;
    }
  | {
      readonly at: number;
      readonly type: 'pause';
      readonly deployment: number;
      readonly instance: number;
      readonly ms: number;
    }
  | {
      readonly at: number;
      /**
       * The instance running the deployment's oldest running job stops for `ms` (a long garbage
       * collection, a CPU-starved container): a `pause` aimed at a running job, so its lease may
       * lapse while Scheduler's retry takes the run over, and the job wakes to a lost lease.
       */
      readonly type: 'stall';
      readonly deployment: number;
      readonly ms: number;
    }
  | {
      readonly at: number;
      /**
       * A lease stolen from a running job: the instance running the deployment's oldest running
       * slot execution stops for a whole lease and `ms` more (a long garbage collection, a frozen
       * container), and once the lease has lapsed a proxy re-sends that slot's request to another
       * instance (a load balancer's retry, which Cloud Scheduler never sees): the re-sent request
       * takes the run over, and the job wakes beating, or noting on, a lease it no longer holds.
       * Fault-biased histories only (`--faults`).
       */
      readonly type: 'stolen_lease';
      readonly deployment: number;
      readonly ms: number;
      /**
       * When the pause begins: at once (absent); a moment before the job's work is drawn to end
       * (`end`), so the job ends while paused and its completion or release, not a beat, meets the
       * run taken over (it tells the lost lease's cause); or a moment before its progress note
       * (`note`), so a job that ignores its signal notes on waking and its note meets the takeover.
       */
      readonly near?: 'end' | 'note';
      /**
       * How the lease is lost: the instance stops (absent); or (`hang`) its connection to Firestore
       * hangs for as long while the job runs on, so every extension fails: a job that ignores its
       * signal learns of the takeover on reconnecting, told `after N failed extension(s)`; one that
       * heeds it stops at the lapse, and its release meets the hang.
       */
      readonly by?: 'hang';
    }
  | {
      readonly at: number;
      /**
       * A proxy re-sends an earlier Scheduler request of the job (a load balancer's retry, a
       * client that timed out and sent again, which Cloud Scheduler never sees) while a later slot's
       * run of it executes: the request of the slot `back` slots before the running one among
       * those Scheduler sent (done, skipped, reported, or still retrying). Its answer goes to the
       * proxy.
       * Fault-biased histories only (`--faults`).
       */
      readonly type: 'replayed_request';
      readonly deployment: number;
      readonly job: number;
      /** How many sent slots before the running one, 1 to 20 (absent: 1). */
      readonly back?: number;
    }
  | {
      readonly at: number;
      readonly type: 'step';
      readonly deployment: number;
      readonly instance: number;
      readonly ms: number;
    }
  | {
      readonly at: number;
      readonly type: 'force';
      readonly deployment: number;
      readonly job: number;
      /** Sent without `X-CloudScheduler-ScheduleTime` (the guide's other form of a Force run). */
      readonly withoutScheduleTime?: boolean;
      /**
       * Pressed a moment (1 to 25 s) before the job's next slot rather than at `at`: where a Force
       * run and the slot's own delivery meet (the forced-run tolerance decides which run it is).
       */
      readonly nearSlot?: boolean;
    }
  | {
      readonly at: number;
      readonly type: 'manual';
      readonly deployment: number;
      readonly job: number;
      /** Send the previous manual run's trigger id again (a client's retry), with a newer time. */
      readonly resend: boolean;
      /** `npm run trigger -- JOB --allow-overlap`: run beside another run of a `skip`/`wait` job. */
      readonly allowOverlap?: boolean;
      /** Sent 2 to 10 s after the job's next slot, as that slot's run starts. */
      readonly whileRunning?: boolean;
    }
  | {
      readonly at: number;
      readonly type: 'rerun';
      readonly deployment: number;
      readonly job: number;
      /** `--rerun --allow-overlap`: run beside another run of a `skip`/`wait` job. */
      readonly allowOverlap?: boolean;
      /** Sent 2 to 10 s after the job's next slot, as that slot's run starts. */
      readonly whileRunning?: boolean;
    }
  | {
      readonly at: number;
      readonly type: 'backfill';
      readonly deployment: number;
      /** Send the previous backfill's deliveries again, as is (an operator re-running the command's output). */
      readonly resend?: boolean;
      /** Once this backfill's deliveries ended, send them again (the operator runs its output twice). */
      readonly again?: boolean;
      /**
       * A missed-run check of each backfilled job runs meanwhile, and the backfill's deliveries of
       * that job land between the check's read of the slots and its reports (a read answered late).
       */
      readonly raceCheck?: boolean;
    }
  | {
      readonly at: number;
      /**
       * `npm run pause -- JOB` (the pause recorded, then the Scheduler job paused), and `ms` later
       * `npm run resume -- JOB` (the resume recorded, then the Scheduler job resumed).
       */
      readonly type: 'operator_pause';
      readonly deployment: number;
      readonly job: number;
      readonly ms: number;
      /**
       * `--until 90s`, and the operator never resumes: the pause outlives its bound, and a check
       * reports it (`pause outlived its bound`). Absent in older recorded histories: resumed.
       */
      readonly forgotten?: boolean;
    }
  | {
      readonly at: number;
      /**
       * A hanging connection: for `ms`, every Firestore operation of this instance is sent and
       * never answered (it never reaches the server); only the client's deadline ends the wait.
       */
      readonly type: 'hang';
      readonly deployment: number;
      readonly instance: number;
      readonly ms: number;
    }
  | {
      readonly at: number;
      /**
       * Another version (or a hand) writes the record of the job's next slot before Scheduler
       * delivers it: `unknown_status`, a status this version does not know (it must be said
       * loudly, never passed as final); `extra_fields`, a `failed` attempt of that version with
       * fields this version never writes (a retry claims and runs it as usual).
       */
      readonly type: 'foreign_record';
      readonly deployment: number;
      readonly job: number;
      readonly kind: 'unknown_status' | 'extra_fields';
    }
  | {
      readonly at: number;
      /**
       * Another version takes the job's overlap lock (fenced, only while no run of the job holds
       * it) for a run whose claim never lands: its holder's record is `absent` (never written, or
       * taken by the TTL), or has a status this version does not know (`unknown_status`, until a
       * `repair` deletes it); or writes a lock whose holder id this version never writes (one of
       * {@link MALFORMED_HOLDERS}, until a `repair` deletes the lock).
       */
      readonly type: 'foreign_lock';
      readonly deployment: number;
      readonly job: number;
      readonly holder: ForeignLockHolder;
    }
  | {
      readonly at: number;
      /**
       * Another version (or a hand) writes the `pauses` of the job's check document, which no one
       * paused here: a form this version never writes (`FOREIGN_PAUSE_KINDS`: it must warn at each
       * check and count no slot paused), or one at the edge of what it writes (it must read it
       * without a word). Fault-biased histories only (`--faults`).
       */
      readonly type: 'foreign_pause';
      readonly deployment: number;
      readonly job: number;
      readonly kind: ForeignPauseKind;
    }
  | {
      readonly at: number;
      /**
       * Another version (or a hand) rewrites the cursor of the job's check document, fenced on
       * its read: a form this version never writes (`FOREIGN_CURSOR_KINDS`: each check must say
       * it in an ERROR and judge nothing, until a `repair` deletes it), or one it reads as its own
       * (an earlier version's fields, fields it never writes, exactly eight rules).
       */
      readonly type: 'foreign_cursor';
      readonly deployment: number;
      readonly job: number;
      readonly kind: ForeignCursorKind;
    }
  | {
      readonly at: number;
      /**
       * The documented repair of an unreadable record (docs/limits.md): the operator deletes the
       * record the job's overlap lock names if no attempt of it is running (an unknown status, or
       * `in_progress` under a lapsed lease), and the lock stays; or deletes the lock itself when
       * its holder id is not a run id (docs/how-it-works.md, "The overlap lock"). First, it
       * deletes the fields of an unreadable cursor another version left on the job's check
       * document (its pauses stay).
       */
      readonly type: 'repair';
      readonly deployment: number;
      readonly job: number;
    }
  | {
      readonly at: number;
      /** Cloud Scheduler cannot reach the function for `ms` (its attempts fail): slots go missed. */
      readonly type: 'outage';
      readonly deployment: number;
      readonly ms: number;
    }
  | {
      readonly at: number;
      /**
       * Cloud Scheduler dispatches the job's next slot `ms` late (its first attempt; the job's
       * later slots wait behind it, one outstanding execution): the run audit may find it late
       * and catch it up while Scheduler's own delivery is on its way. `nearAudit`: instead, at
       * the first run audit after the slot is late (its grace past), `ms` thousandths of 5 s
       * after the audit's time, so both deliveries of the slot meet.
       */
      readonly type: 'late_delivery';
      readonly deployment: number;
      readonly job: number;
      readonly ms: number;
      readonly nearAudit: boolean;
    }
  | {
      readonly at: number;
      readonly type: 'redeploy';
      readonly deployment: number;
      /**
       * The new revision's change: a job dropped, the first job's overlap policy changed, or its
       * retry settings lengthened (`retry_longer`: {@link longerRetries}), so that its missed-run
       * cursor, written under the shorter window, stands ahead of the new closed boundary.
       */
      readonly change:
        | 'drop_last_job'
        | 'overlap_skip'
        | 'overlap_allow'
        | 'retry_longer';
      /** Instances of the old revision keep serving beside the new one's (a rolling deploy). */
      readonly rolling: boolean;
    }
  | {
      readonly at: number;
      /**
       * The job guarded during its run: deployed as `allow` (if it is not), then, while a run of
       * it executes drawn to outlast its next slot, a deploy gives it `overlap`, the old
       * instances draining (Cloud Run's shift of all traffic to a new revision). The new
       * revision's next slot meets a run that took no lock (docs/how-it-works.md, "During a
       * rolling deploy").
       */
      readonly type: 'guard_during_run';
      readonly deployment: number;
      readonly job: number;
      readonly overlap: 'skip' | 'wait';
    };

/** One history: everything the simulator needs to replay it. */
export interface History {
  /** Seeds the simulator's own randomness (latencies, durations, which instance answers). */
  readonly seed: number;
  readonly leaseSeconds: number;
  readonly jobs: readonly JobSpec[];
  /** Key scopes (`RUN_KEY_SCOPE`) sharing the database: one deployment each. */
  readonly scopes: readonly string[];
  /** Instances per deployment. */
  readonly instances: number;
  /** How long Cloud Scheduler delivers, virtual ms. */
  readonly spanMs: number;
  /** Chance Cloud Scheduler delivers an attempt twice, and that it loses an answer. */
  readonly duplicates: number;
  readonly dropAnswers: number;
  /** Firestore's one-way latency range (ms), and each operation's chance of a fault. */
  readonly latency: readonly [number, number];
  readonly faultRate: number;
  /**
   * Each write's chance (create, update, delete, batch commit: claims, extensions, completions,
   * releases, locks) of landing and then being answered after the client's deadline
   * (`FIRESTORE_TIMEOUT_SECONDS`) or never: the client rejects with `LedgerUnavailableError`
   * while the write has landed. Absent in older recorded histories: 0.
   */
  readonly lateAnswers?: number;
  /**
   * Each logged write's chance (a claim, a completion, a report of a missed or finally failed run)
   * that its instance dies right after it lands, before its answer: the log line that reports it
   * never comes, and the instance's requests get no answer. Absent in older recorded histories: 0.
   */
  readonly crashAfterWrite?: number;
  /**
   * `JOB_TIMEOUT_SECONDS` of every deployment: jobs running longer are aborted (`job_timeout`).
   * Absent in older recorded histories and in most new ones: the default, an hour.
   */
  readonly jobTimeoutSeconds?: number;
  /**
   * `FORCED_RUN_TOLERANCE_SECONDS` of every deployment, above the default of 30 s, so that each
   * job's own bound of half its shortest gap decides (30 s for a per-minute job, 60 s every two
   * minutes). Absent in older recorded histories and in most new ones: the default.
   */
  readonly forcedRunToleranceSeconds?: number;
  /**
   * Halfway through the span, a request shaped as Cloud Scheduler's names a slot of the first job
   * older than `RETENTION_SECONDS`, and another a slot after the first one past the forced-run
   * tolerance (a forged or mistyped header): each must be refused `invalid_request` and run
   * nothing. Absent in older recorded histories: none.
   */
  readonly strayDeliveries?: boolean;
  /**
   * With the run audit, each `redeploy` also moves the first job to the next schedule of
   * {@link SCHEDULE_CYCLE}, as an operator editing `schedule` in jobs.ts: the missed-run check then
   * judges each slot by the rules that may have been in force at its time (docs/how-it-works.md,
   * "The schedule in force"). Without the audit a change before any check saw the old rule is an
   * open limit (docs/limits.md), so it is not drawn there. Absent in older recorded histories.
   */
  readonly scheduleChanges?: boolean;
  /**
   * One execution in eight ignores its signal until its work is done; absent in older recorded
   * histories: none.
   */
  readonly stubbornJobs?: boolean;
  /**
   * With `stubbornJobs`, the share of executions that ignore their signal; absent: one in eight.
   * Fault-biased histories draw one in two ({@link FAULT_BIASED}): a stolen lease then meets a job
   * that runs on, so its heartbeat learns of the takeover.
   */
  readonly stubbornShare?: number;
  /**
   * Half the executions that heed their signal take up to {@link SLOW_STOP_MS} to stop after it
   * aborts, as real jobs wind down (fault-biased histories): the heartbeat beats on
   * meanwhile, so a beat on waking from a pause meets the run taken over while the job still runs.
   * Absent: every such job stops at once.
   */
  readonly slowStops?: boolean;
  /**
   * The final missed-run check runs on two machines at once (fault-biased histories, one in two):
   * two checks racing for each report, relog claim and cursor. Absent: one.
   */
  readonly twinFinalChecks?: boolean;
  /**
   * The final missed-run check meets Firestore's faults (fault-biased histories, one in two): its
   * operations refused, answered lost or late, or retried (`FINAL_CHECK_FAULT_RATES`), so its
   * reports are refused, unconfirmed or raced, its relog claims and acknowledgements fail; a later
   * clean check follows. Absent: the final check sees no fault.
   */
  readonly faultyFinalCheck?: boolean;
  /**
   * Each noting job's second note, at the edge of `ctx.note`'s limits or past them
   * (test/sim/note-cases.ts); absent in older recorded histories: none.
   */
  readonly caseNotes?: boolean;
  /**
   * One in twenty first executions of a noting job fills its run's notes to a bound and one past it
   * (`NOTE_FILLS`, test/sim/note-cases.ts) instead of its second note; absent in older recorded
   * histories: none.
   */
  readonly noteFills?: boolean;
  /** `FIRESTORE_TIMEOUT_SECONDS` of every deployment; absent in older recorded histories: 10. */
  readonly firestoreTimeoutSeconds?: number;
  /** Each instance's wall clock minus the true time at its start, ms (before any step). */
  readonly clockOffsetMs: number;
  /**
   * Each deployment declares the run audit every 5 minutes ({@link AUDIT_JOB_ID}): its missed-run
   * check and late-run scan of every job, and the catch-up of jobs with `catchUp`. Absent in
   * histories recorded before catch-up: no audit.
   */
  readonly audit?: boolean;
  readonly events: readonly SimEvent[];
}

/** The longest a job of a history with `slowStops` takes to stop after its signal aborts, ms. */
export const SLOW_STOP_MS = 2_000;

/** How long a `stolen_lease` event looks for a running job to steal from, ms. */
export const STOLEN_LEASE_LOOK_FOR_MS = 60_000;

/**
 * When a pausing event (`pause`, `stall`, `stolen_lease`: at its latest, after looking a minute for
 * a job) resumes its instance, ms; else 0.
 */
export function pauseEndMs(
  event: SimEvent,
  startMs: number,
  leaseMs: number,
): number {
  if (event.type === 'pause' || event.type === 'stall') {
    return startMs + event.at + event.ms;
  }
  if (event.type === 'stolen_lease') {
    return startMs + event.at + STOLEN_LEASE_LOOK_FOR_MS + leaseMs + event.ms;
  }
  return 0;
}

/** The id of the run audit a history with `audit` declares. */
export const AUDIT_JOB_ID = 'run-audit';
/** The run audit's schedule: every 5 minutes, as the starter declares it. */
export const AUDIT_SCHEDULE = '*/5 * * * *';

const MINUTE = 60_000;

function jobSpec(index: number): fc.Arbitrary<JobSpec> {
  return fc
    .record({
      id: fc.constant(`job-${index}`),
      schedule: fc.constantFrom('* * * * *', '*/2 * * * *', '*/5 * * * *'),
      overlap: fc.constantFrom<OverlapPolicy>('allow', 'skip', 'wait'),
      attemptDeadlineSeconds: fc.integer({ min: 15, max: 90 }),
      retryCount: fc.integer({ min: 0, max: 3 }),
      maxRetryDurationSeconds: fc.constantFrom(0, 60, 300),
      minBackoffSeconds: fc.integer({ min: 1, max: 20 }),
      maxBackoffSeconds: fc.constantFrom(20, 60),
      maxDoublings: fc.integer({ min: 0, max: 3 }),
      minMs: fc.integer({ min: 100, max: 20_000 }),
      maxMs: fc.integer({ min: 20_000, max: 150_000 }),
      // 1: a broken job, failing every attempt: every slot ends in a final failure report.
      failRate: fc.constantFrom(0, 0, 0.1, 0.3, 1),
      notes: fc.boolean(),
      catchUp: fc.option(catchUpArbitrary(), { nil: undefined }),
    })
    .map((spec) => withoutUndefinedCatchUp(spec))
    .map((spec) => (spec.failRate === 1 ? brokenJob(spec) : spec));
}

/** A `catchUp` policy: a grace of 30 s to 3 min, a window from the grace to an hour. */
function catchUpArbitrary(): fc.Arbitrary<NonNullable<JobSpec['catchUp']>> {
  return fc
    .record({
      graceSeconds: fc.constantFrom(30, 60, 120, 180),
      extraWindowSeconds: fc.constantFrom(0, 60, 300, 3600),
      slots: fc.constantFrom<'latest' | 'all'>('latest', 'all'),
    })
    .map(({ graceSeconds, extraWindowSeconds, slots }) => ({
      graceSeconds,
      windowSeconds: Math.max(60, graceSeconds + extraWindowSeconds),
      slots,
    }));
}

/** A spec without a `catchUp` key when it has none, as histories before catch-up were. */
function withoutUndefinedCatchUp(spec: JobSpec): JobSpec {
  if (spec.catchUp !== undefined) {
    return spec;
  }
  const { catchUp: _, ...rest } = spec;
  return rest;
}

/** A broken job fails within seconds (a bad configuration, a missing table), not after its work. */
function brokenJob(spec: JobSpec): JobSpec {
  const minMs = Math.min(spec.minMs, 5_000);
  return { ...spec, minMs, maxMs: minMs + 5_000 };
}

/**
 * The most retries Cloud Scheduler's RetryConfig takes (`retryCount`: "Values greater than 5 and
 * negative values are not allowed").
 */
const MAX_RETRY_COUNT = 5;

/** How much longer a `retry_longer` redeploy makes a job's `maxRetryDuration`, seconds. */
const LONGER_RETRY_DURATION_SECONDS = 600;

/**
 * `spec`'s retry settings lengthened, as a `retry_longer` redeploy declares them: two more
 * retries (at most {@link MAX_RETRY_COUNT}) and {@link LONGER_RETRY_DURATION_SECONDS} more of
 * `maxRetryDuration`. Retries go on "until both limits are reached" (Cloud Scheduler's
 * RetryConfig), so the retry window grows by several minutes: more than the missed-run cursor
 * lags the old closed boundary (about one longest execution), so that a cursor written before
 * the deploy stands ahead of the new boundary for a while.
 */
export function longerRetries(spec: JobSpec): JobSpec {
  return {
    ...spec,
    retryCount: Math.min(spec.retryCount + 2, MAX_RETRY_COUNT),
    maxRetryDurationSeconds:
      spec.maxRetryDurationSeconds + LONGER_RETRY_DURATION_SECONDS,
  };
}

/**
 * The generator of histories. `emulator` keeps to what runs on the real emulator (no driven server time: no pauses, no
 * store faults, short spans).
 */
export function historyArbitrary(
  options: {
    readonly emulator?: boolean;
    /** `small` (the test suite's: shorter spans, fewer jobs) or `large` (the CLI's default). */
    readonly size?: 'small' | 'large';
    /** `faults`: {@link FAULT_BIASED} histories, for mutation runs (`--faults`). */
    readonly profile?: 'default' | 'faults';
  } = {},
): fc.Arbitrary<History> {
  const emulator = options.emulator === true;
  const faults = options.profile === 'faults' && !emulator;
  const base = baseArbitrary(emulator, options.size === 'small');
  return (faults ? faultBiased(base) : base).chain((drawn) =>
    fc
      .record({
        jobs: fc.tuple(
          ...Array.from({ length: drawn.jobCount }, (_, i) =>
            faults ? jobSpec(i).map(overlapping) : jobSpec(i),
          ),
        ),
        events: fc.array(
          faults ? faultEventArbitrary(drawn) : eventArbitrary(drawn, emulator),
          {
            minLength: faults ? FAULT_BIASED.minEvents : 0,
            maxLength: emulator ? 3 : 8,
          },
        ),
      })
      .map(({ jobs, events }) => historyOf(drawn, jobs, events)),
  );
}

/**
 * The fault-biased profile (`npm run simulate -- --faults`, the mutation runs' second pass): never
 * calm, every fault of Firestore and the network on, short leases, jobs whose runs meet the next
 * slot's, and at least {@link FAULT_BIASED.minEvents} events, most of them the ones that make an
 * attempt lose its lease while it runs (stalls, pauses, hangs, SIGTERMs, forgotten pauses). The
 * code that handles a lost lease under a beating attempt, a fenced write's lease loss, an
 * unrecorded completion or a run blocked by its overlap policy is reached in a few histories here,
 * where the default profile's first 40 reach it seldom.
 */
export const FAULT_BIASED = {
  minEvents: 3,
  /** The share of executions that ignore their signal (`History.stubbornShare`). */
  stubbornShare: 0.5,
  /** Each event kind's weight; a kind not named weighs 1. */
  weights: {
    stall: 4,
    pause: 3,
    hang: 2,
    sigterm: 2,
    operator_pause: 2,
    foreign_pause: 6,
    stolen_lease: 4,
    // A done slot's request meets a later slot's run: a blocked `skip` run whose record exists.
    replayed_request: 3,
    // A manual run as its job's next slot starts, one in four `--allow-overlap`: it meets a run.
    manual: 2,
    // Another version's lock: a holder id that is not a run id, or a holder with no record.
    foreign_lock: 2,
    // Another version's cursor, and the repair that deletes an unreadable one.
    foreign_cursor: 6,
    repair: 2,
    // A new revision's slot meets the previous slot's run, which took no lock: a rolling
    // `overlap_skip` redeploy reaches it only when such a run happens to outlast its minute.
    guard_during_run: 2,
    // One in four a `retry_longer`: a cursor ahead of the new, longer window's boundary.
    redeploy: 2,
  },
} as const;

/**
 * A fault-biased history's job: due every minute and running 30 s to over two minutes, so its runs
 * meet the next slot's and its overlap policy decides (skip, wait, or run beside).
 */
function overlapping(spec: JobSpec): JobSpec {
  if (spec.failRate === 1) {
    return spec; // a broken job fails within seconds, as it is drawn
  }
  const maxMs = Math.max(spec.maxMs, 70_000);
  return { ...spec, schedule: '* * * * *', minMs: 30_000, maxMs };
}

/** `base` with the {@link FAULT_BIASED} settings drawn over it. */
function faultBiased(base: ReturnType<typeof baseArbitrary>) {
  return base.chain((drawn) =>
    fc
      .record({
        leaseSeconds: fc.integer({ min: 20, max: 40 }),
        duplicates: fc.constantFrom(0.1, 0.3),
        dropAnswers: fc.constantFrom(0.1, 0.3),
        faultRate: fc.constantFrom(0.01, 0.05),
        lateAnswers: fc.constantFrom(0.05, 0.2),
        crashAfterWrite: fc.constantFrom(0.05, 0.3),
        jobTimeoutSeconds: fc.constantFrom(0, 45, 90),
        stubbornShare: fc.constant(FAULT_BIASED.stubbornShare),
        slowStops: fc.constant(true),
        twinFinalChecks: fc.boolean(),
        faultyFinalCheck: fc.boolean(),
      })
      .map((faults) => ({ ...drawn, ...faults, calm: false })),
  );
}

/**
 * An event of a fault-biased history: the kinds {@link FAULT_BIASED} weighs drawn more often, and
 * another version's pauses (`foreign_pause`), stolen leases (`stolen_lease`) and requests a proxy
 * replays (`replayed_request`) beside the default profile's kinds.
 */
function faultEventArbitrary(base: EventBase): fc.Arbitrary<SimEvent> {
  const { deployment, job, at } = eventFields(base);
  const kinds = eventKinds(base, false);
  kinds.set(
    ...kind('foreign_pause', {
      at,
      deployment,
      job,
      kind: fc.constantFrom(...FOREIGN_PAUSE_KINDS),
    }),
  );
  kinds.set(
    ...kind('stolen_lease', {
      at,
      deployment,
      ms: fc.integer({ min: 2_000, max: 30_000 }),
      // Half take the lease at once (a pause or a hang): a job that runs on meets the takeover.
      near: fc.constantFrom(
        undefined,
        undefined,
        'end' as const,
        'note' as const,
      ),
      by: fc.constantFrom(undefined, 'hang' as const),
    }),
  );
  kinds.set(
    ...kind('replayed_request', {
      at,
      deployment,
      job,
      back: fc.integer({ min: 1, max: 20 }),
    }),
  );
  return weightedEvents(kinds, FAULT_BIASED.weights);
}

/**
 * The `pauses` another version writes (`foreign_pause`). Unreadable: not a list, more than 20, an
 * entry not an object, a time not a timestamp, no note, a note too long or with a control
 * character, `overdue_unlogged` not `true`, no `paused_at`, an `until` under a minute or over 30
 * days after it, a resume before the pause, a time a day ahead of Firestore's, an unlogged report
 * that was never written, two pauses that overlap. Readable, at the edge: exactly 20 pauses, a
 * note of exactly 500 characters, an `until` exactly a minute or exactly 30 days after, a pause
 * starting exactly as the one before resumed. The limits are docs/operations.md's ("Bounds"); the
 * pauses lie weeks in the past, so no slot of the history falls in a readable one.
 */
export const FOREIGN_PAUSE_KINDS = [
  'not_a_list',
  'too_many',
  'not_an_object',
  'time_not_timestamp',
  'no_note',
  'note_too_long',
  'note_with_control',
  'unlogged_not_true',
  'no_paused_at',
  'until_too_soon',
  'until_too_far',
  'resumed_before_paused',
  'ahead_of_firestore',
  'unlogged_never_reported',
  'overlapping',
  'readable_most_pauses',
  'readable_longest_note',
  'readable_shortest_until',
  'readable_longest_until',
  'readable_back_to_back',
] as const;

/**
 * The holder ids of another version's lock (`foreign_lock`) that are not a run id (64 lowercase
 * hex digits, `holderOf` in `src/policy/overlap.ts`): a number, no field, a run id with a character
 * before or after it, a run id in capitals. Each must be answered `unreadable_record` naming the
 * lock (docs/how-it-works.md, "The overlap lock"), never taken as free or as a holder.
 */
export const MALFORMED_HOLDERS = [
  'number',
  'missing',
  'prefixed',
  'suffixed',
  'capitals',
] as const;

/** One of {@link MALFORMED_HOLDERS}. */
export type MalformedHolder = (typeof MALFORMED_HOLDERS)[number];

/** Whom another version's lock names: no record, a record of an unknown status, or no run id. */
export type ForeignLockHolder = 'absent' | 'unknown_status' | MalformedHolder;

/** Whether `holder` is one of {@link MALFORMED_HOLDERS}: a lock whose holder id is not a run id. */
export function isMalformedHolder(
  holder: ForeignLockHolder,
): holder is MalformedHolder {
  return holder !== 'absent' && holder !== 'unknown_status';
}

/**
 * The cursors another version writes (`foreign_cursor`), each from the cursor stored. Unreadable
 * (`readCursor` and `readRules` in src/policy/missed-run-cursor.ts and missed-run-rules.ts):
 * `checked_before`, `run_seen` or `seen_at` of the wrong type, one of `checked_before` and
 * `run_seen` without the other (stop 73), a `seen_at` of null or a day ahead
 * (stop 72: both were read silently), a `closed_after_ms` of 0, null (stop 72: read as absent) or a
 * fraction, a `checked_before` ahead of the job's closed boundary (or, stop 73, an hour ahead of
 * the boundary of the shorter window its `closed_after_ms` names), `rules` not a list, empty, or
 * more than eight, a rule not an object, its schedule not text, a schedule or zone no declaration
 * takes, a later rule without `since`, an `until` on the last rule, a `since` or `first_seen` not a
 * timestamp, a rule starting a month ahead, a rule starting a day before the one before it ended
 * (stop 71: both were read, and left slots unjudged silently). Readable: fields this version never writes, no `closed_after_ms` or another
 * version's (other retry settings), an earlier version's cursor without `rules`, `first_seen` or
 * `seen_at` (stop 73: its write's update time stands for it),
 * exactly eight rules (the oldest weeks before any slot of the history); and a cursor nobody wrote
 * for three days (`readable_stale`), which the next check must start afresh from the closed
 * boundary, saying in a WARN which range it does not judge.
 */
export const FOREIGN_CURSOR_KINDS = [
  'checked_before_text',
  'checked_before_missing',
  'run_seen_text',
  'run_seen_missing',
  'seen_at_text',
  'seen_at_null',
  'seen_at_ahead',
  'closed_after_zero',
  'closed_after_fraction',
  'closed_after_null',
  'ahead_of_boundary',
  'ahead_of_writers_window',
  'rules_not_a_list',
  'rules_empty',
  'rules_too_many',
  'rule_not_an_object',
  'rule_schedule_not_text',
  'rule_bad_schedule',
  'rule_bad_zone',
  'rule_without_since',
  'rule_until_on_last',
  'rule_since_text',
  'rule_first_seen_text',
  'rule_since_ahead',
  'rules_out_of_order',
  'readable_extra_fields',
  'readable_no_closed_after',
  'readable_other_closed_after',
  'readable_no_rules',
  'readable_no_first_seen',
  'readable_no_seen_at',
  'readable_most_rules',
  'readable_stale',
] as const;

/**
 * A form of another version's cursor, readable one time in two. The 7 readable forms are the ones
 * a check goes on to judge by (`readable_stale` alone reaches the fresh start); drawn among all
 * 33 alike, none of them came in the 240 histories of a mutation run (stop 74).
 */
function foreignCursorKind(): fc.Arbitrary<ForeignCursorKind> {
  const readable = FOREIGN_CURSOR_KINDS.filter(isReadableCursorKind);
  const unreadable = FOREIGN_CURSOR_KINDS.filter(
    (kind) => !isReadableCursorKind(kind),
  );
  return fc.oneof(fc.constantFrom(...unreadable), fc.constantFrom(...readable));
}

/** One of {@link FOREIGN_CURSOR_KINDS}. */
export type ForeignCursorKind = (typeof FOREIGN_CURSOR_KINDS)[number];

/**
 * The stored field an unreadable `kind` breaks, which the check's ERROR must name first in its
 * `reason` (`checked_before` ahead of the boundary; `rules` for every form of the rules).
 */
export function brokenCursorField(kind: ForeignCursorKind): string {
  const fields = ['checked_before', 'run_seen', 'seen_at', 'closed_after'];
  if (kind.startsWith('ahead_of_')) {
    return 'checked_before';
  }
  return fields.find((field) => kind.startsWith(field)) ?? 'rules';
}

/** Whether this version must read `kind` as a cursor it wrote, not as unreadable. */
export function isReadableCursorKind(kind: ForeignCursorKind): boolean {
  return kind.startsWith('readable_');
}

/** One of {@link FOREIGN_PAUSE_KINDS}. */
export type ForeignPauseKind = (typeof FOREIGN_PAUSE_KINDS)[number];

/** Whether this version must read `kind` as pauses it wrote (the edge cases), not as unreadable. */
export function isReadablePauseKind(kind: ForeignPauseKind): boolean {
  return kind.startsWith('readable_');
}

/** The generator of a history's settings, before its jobs and events. */
function baseArbitrary(emulator: boolean, small: boolean) {
  return fc.record({
    seed: fc.integer(),
    leaseSeconds: fc.integer({ min: 20, max: 120 }),
    jobCount: fc.integer({ min: 1, max: small ? 2 : 3 }),
    scopes: emulator
      ? fc.constant([''])
      : fc.constantFrom<readonly string[]>(
          [''],
          [''],
          ['staging', 'production'],
        ),
    instances: fc.integer({ min: 1, max: small ? 2 : 3 }),
    spanMs: emulator
      ? fc.integer({ min: 2 * MINUTE, max: 4 * MINUTE })
      : fc.integer({
          min: (small ? 2 : 3) * MINUTE,
          max: (small ? 5 : 14) * MINUTE,
        }),
    duplicates: fc.constantFrom(0, 0, 0.1, 0.3),
    dropAnswers: fc.constantFrom(0, 0, 0.1, 0.3),
    latency: fc.constantFrom<readonly [number, number]>(
      [1, 5],
      [5, 50],
      [20, 400],
    ),
    faultRate: emulator ? fc.constant(0) : fc.constantFrom(0, 0, 0.01, 0.05),
    lateAnswers: emulator ? fc.constant(0) : fc.constantFrom(0, 0, 0.05, 0.2),
    crashAfterWrite: emulator
      ? fc.constant(0)
      : fc.constantFrom(0, 0, 0.05, 0.3),
    // A realistic deadline against latencies of at most 0.4 s: a late answer falls within one
    // slot (a minute), so a claim answered late can strand its slot's neighbours.
    firestoreTimeoutSeconds: fc.constantFrom(2, 5, 10),
    // One history in four times its jobs out within their longest runs (0: the default, an hour).
    jobTimeoutSeconds: emulator
      ? fc.constant(0)
      : fc.constantFrom(0, 0, 0, 45, 90),
    clockOffsetMs: fc.integer({ min: -600_000, max: 600_000 }),
    // One history in four is calm (CALM_HISTORY): there, every slot must run.
    calm: fc.constantFrom(false, false, false, true),
    // Half the histories run the audit every 5 minutes (late runs, catch-up); its clock is
    // Firestore's, which the emulator does not drive.
    audit: emulator ? fc.constant(false) : fc.boolean(),
  });
}

/** A history's settings, as {@link baseArbitrary} draws them. */
type HistoryBase =
  ReturnType<typeof baseArbitrary> extends fc.Arbitrary<infer T> ? T : never;

/**
 * The history of drawn settings, jobs and events: a lease long enough for the heartbeat, calmed
 * when drawn calm.
 */
function historyOf(
  base: HistoryBase,
  jobs: readonly JobSpec[],
  events: readonly SimEvent[],
): History {
  const { jobCount: _, calm, audit, jobTimeoutSeconds, ...fields } = base;
  // The heartbeat learns a beat failed within a timeout, before the next beat (a third of
  // a lease): docs/configuration.md asks LEASE_SECONDS ≥ 3 × FIRESTORE_TIMEOUT_SECONDS.
  const shortestLease = 3 * fields.firestoreTimeoutSeconds;
  const rest = {
    ...fields,
    stubbornJobs: true,
    caseNotes: true,
    noteFills: true,
    leaseSeconds: Math.max(fields.leaseSeconds, shortestLease),
    ...(jobTimeoutSeconds === 0 ? {} : { jobTimeoutSeconds }),
    ...toleranceOf(fields.seed),
    // One history in three, chosen by the seed as the tolerance is.
    ...(Math.floor(Math.abs(fields.seed) / 4) % 3 === 0
      ? { strayDeliveries: true }
      : {}),
    // One history in two, by the seed too (each choice by its own digits of it).
    ...(Math.floor(Math.abs(fields.seed) / 48) % 2 === 0
      ? { scheduleChanges: true }
      : {}),
    // With the audit, the span holds five audits or more (every 5 minutes): the first only sets
    // each job's late-run mark, and a slot is late a grace after it could start.
    ...(audit
      ? { audit, spanMs: Math.max(fields.spanMs, 16 * MINUTE) + 10 * MINUTE }
      : {}),
  };
  const planned = withUnevenSchedule(jobs, fields.seed);
  if (calm) {
    return calmed({ ...rest, jobs: planned, events });
  }
  return {
    ...rest,
    jobs: planned,
    events: [...events].sort((a, b) => a.at - b.at),
  };
}

/**
 * A schedule whose slots are not evenly spaced: minutes divisible by 3 or by 4 (0, 3, 4, 6, 8, 9,
 * 12, …), gaps of one to three minutes. Its forced-run tolerance is bounded by the shortest gap
 * (half a minute), never by the longest or the first (docs/configuration.md, "Forced-run
 * tolerance"); every drawn schedule is evenly spaced, where the three agree.
 */
export const UNEVEN_SCHEDULE = '*/3,*/4 * * * *';

/** The schedules a {@link History.scheduleChanges} redeploy moves the first job through, in turn. */
export const SCHEDULE_CYCLE = [
  '* * * * *',
  '*/2 * * * *',
  '*/5 * * * *',
  UNEVEN_SCHEDULE,
] as const;

/** The schedule after `schedule` in {@link SCHEDULE_CYCLE} (its first for one not in it). */
export function nextScheduleOf(schedule: string): string {
  const at = (SCHEDULE_CYCLE as readonly string[]).indexOf(schedule);
  return SCHEDULE_CYCLE[(at + 1) % SCHEDULE_CYCLE.length] ?? '* * * * *';
}

/**
 * `jobs` with the first one due on {@link UNEVEN_SCHEDULE} in one history in four, chosen by its
 * seed (independently of the tolerance and the stray deliveries) so that no other draw moves.
 */
function withUnevenSchedule(
  jobs: readonly JobSpec[],
  seed: number,
): readonly JobSpec[] {
  const [first, ...others] = jobs;
  if (first === undefined || Math.floor(Math.abs(seed) / 12) % 4 !== 0) {
    return jobs;
  }
  return [{ ...first, schedule: UNEVEN_SCHEDULE }, ...others];
}

/**
 * The forced-run tolerance a history's deployments run with, chosen by its seed so that no other
 * draw moves: one history in four 45 s, one in four 90 s, the others the default.
 */
function toleranceOf(seed: number): { forcedRunToleranceSeconds?: number } {
  const tolerance = FORCED_RUN_TOLERANCES[Math.abs(seed) % 4];
  return tolerance === undefined
    ? {}
    : { forcedRunToleranceSeconds: tolerance };
}

/** {@link toleranceOf}'s choices, s: `undefined` is the default (30 s). */
const FORCED_RUN_TOLERANCES = [undefined, undefined, 45, 90] as const;

/**
 * A calm history: no fault of Firestore or the network, no operator or environment event, jobs that
 * never fail and end within their attempt deadline and before their next slot. Nothing excuses a
 * slot there that did not run (the invariants' `calmSlotsRan`), so a product that refuses, crashes
 * or reports runs it should have run is caught, not excused as an outage.
 */
export function isCalm(h: History): boolean {
  const quiet =
    h.events.length === 0 &&
    h.faultRate === 0 &&
    h.dropAnswers === 0 &&
    (h.lateAnswers ?? 0) === 0 &&
    (h.crashAfterWrite ?? 0) === 0;
  const timeoutMs = jobTimeoutMs(h);
  return (
    quiet && h.jobs.every((job) => isCalmJob(job) && job.maxMs < timeoutMs)
  );
}

/** `JOB_TIMEOUT_SECONDS` of `h`'s deployments, ms: an hour when it sets none (the default). */
export function jobTimeoutMs(h: Pick<History, 'jobTimeoutSeconds'>): number {
  return (h.jobTimeoutSeconds ?? 3600) * 1000;
}

/** The shortest gap between two slots of the simulated schedules, ms. */
const SHORTEST_GAP_MS = MINUTE;

function isCalmJob(job: JobSpec): boolean {
  const endsInTime =
    job.maxMs < Math.min(job.attemptDeadlineSeconds * 1000, SHORTEST_GAP_MS);
  return job.failRate === 0 && endsInTime;
}

/** `h` made calm ({@link isCalm}): its faults and events dropped, its jobs reliable and short. */
function calmed(h: History): History {
  const jobs = h.jobs.map((job) => {
    const limitMs =
      Math.min(
        job.attemptDeadlineSeconds * 1000,
        SHORTEST_GAP_MS,
        jobTimeoutMs(h),
      ) - 1_000;
    const maxMs = Math.min(job.maxMs, limitMs);
    return { ...job, failRate: 0, maxMs, minMs: Math.min(job.minMs, maxMs) };
  });
  return {
    ...h,
    jobs,
    events: [],
    faultRate: 0,
    dropAnswers: 0,
    lateAnswers: 0,
    crashAfterWrite: 0,
  };
}

/** The arbitraries an event draws its fields from: its time, deployment, instance and job. */
interface EventFields {
  readonly at: fc.Arbitrary<number>;
  readonly deployment: fc.Arbitrary<number>;
  readonly instance: fc.Arbitrary<number>;
  readonly job: fc.Arbitrary<number>;
}

/** What an event's generator needs of its history: its span, jobs, scopes, instances and audit. */
interface EventBase {
  spanMs: number;
  jobCount: number;
  scopes: readonly string[];
  instances: number;
  audit?: boolean;
}

/** The generator of one event of a history with `base`'s span, jobs, scopes and instances. */
function eventArbitrary(
  base: EventBase,
  emulator: boolean,
): fc.Arbitrary<SimEvent> {
  // Force runs come three times as often as each other event: half are pressed near a slot, half of
  // those without a schedule time, and a Force run taken for its slot meets the slot's own retries.
  // Late deliveries are what the run audit's catch-up races: as often as Force runs beside it.
  // With the run audit, redeploys twice as often: one in four lengthens a job's retry window
  // (`retry_longer`), which only the audit's missed-run check can meet. Another version's cursor
  // three times as often: without the audit, a check reads it only at an hour's first slot, which
  // most histories never reach.
  const audit = base.audit === true;
  const weights = {
    force: 3,
    late_delivery: audit ? 3 : 1,
    redeploy: audit ? 2 : 1,
    foreign_cursor: audit ? 3 : 1,
  };
  return weightedEvents(eventKinds(base, emulator), weights);
}

/** `kinds` drawn by `weights` (a kind not named weighs 1). */
function weightedEvents(
  kinds: ReadonlyMap<SimEvent['type'], fc.Arbitrary<SimEvent>>,
  weights: Readonly<Partial<Record<SimEvent['type'], number>>>,
): fc.Arbitrary<SimEvent> {
  return fc.oneof(
    ...[...kinds].map(([kind, arbitrary]) => ({
      arbitrary,
      weight: weights[kind] ?? 1,
    })),
  );
}

/** Every kind of event a history with `base` can hold, by its type. */
function eventKinds(
  base: EventBase,
  emulator: boolean,
): Map<SimEvent['type'], fc.Arbitrary<SimEvent>> {
  const fields = eventFields(base);
  const options = operatorEvents(fields);
  if (!emulator) {
    // Another version's records and locks, and the repair: their times are virtual, the
    // emulator's server time is real.
    options.push(...storeEvents(fields));
  }
  options.push(
    kind('step', {
      at: fields.at,
      deployment: fields.deployment,
      instance: fields.instance,
      ms: fc.integer({ min: -600_000, max: 600_000 }),
    }),
  );
  const lateDelivery = kind('late_delivery', {
    at: fields.at,
    deployment: fields.deployment,
    job: fields.job,
    ms: fc.integer({ min: 30_000, max: 400_000 }),
    nearAudit: fc.boolean(),
  });
  // Second, after the Force run: the order fast-check draws from, which seeds' paths replay.
  const [force, ...others] = options as [EventKind, ...EventKind[]];
  return new Map([force, lateDelivery, ...others]);
}

/** The arbitraries an event of a history with `base` draws its time, deployment, instance and job from. */
function eventFields(base: EventBase): EventFields {
  return {
    at: fc.integer({ min: 0, max: base.spanMs }),
    deployment: fc.integer({ min: 0, max: base.scopes.length - 1 }),
    instance: fc.integer({ min: 0, max: base.instances - 1 }),
    job: fc.integer({ min: 0, max: base.jobCount - 1 }),
  };
}

/** One kind of event: its type, and the generator of its events. */
type EventKind = readonly [SimEvent['type'], fc.Arbitrary<SimEvent>];

/** The kind of event `type` whose other fields `shape` draws. */
function kind<T extends SimEvent['type']>(
  type: T,
  shape: Record<string, fc.Arbitrary<unknown>>,
): EventKind {
  const arbitrary = fc.record({ ...shape, type: fc.constant(type) });
  return [type, arbitrary as unknown as fc.Arbitrary<SimEvent>];
}

/** Operators' and Cloud Scheduler's events, and the environment's (crashes, redeploys, outages). */
function operatorEvents(fields: EventFields): EventKind[] {
  return [...triggerEvents(fields), ...disruptionEvents(fields)];
}

/** Runs asked for outside the schedule: Force runs, manual triggers, re-runs, backfills. */
function triggerEvents(fields: EventFields): EventKind[] {
  const { at, deployment, job } = fields;
  return [
    kind('force', {
      at,
      deployment,
      job,
      withoutScheduleTime: fc.boolean(),
      nearSlot: fc.boolean(),
    }),
    kind('manual', {
      at,
      deployment,
      job,
      resend: fc.boolean(),
      allowOverlap: fc.boolean(),
      whileRunning: fc.boolean(),
    }),
    kind('rerun', {
      at,
      deployment,
      job,
      allowOverlap: fc.boolean(),
      whileRunning: fc.boolean(),
    }),
    kind('backfill', {
      at,
      deployment,
      resend: fc.boolean(),
      again: fc.boolean(),
      raceCheck: fc.boolean(),
    }),
  ];
}

/** What disrupts runs: an operator's pause, outages, crashes, SIGTERMs, redeploys. */
function disruptionEvents(fields: EventFields): EventKind[] {
  const { at, deployment, instance, job } = fields;
  return [
    kind('operator_pause', {
      at,
      deployment,
      job,
      ms: fc.integer({ min: 60_000, max: 300_000 }),
      forgotten: fc.constantFrom(false, false, true),
    }),
    kind('outage', {
      at,
      deployment,
      ms: fc.integer({ min: 30_000, max: 240_000 }),
    }),
    kind('crash', {
      at,
      deployment,
      instance,
    }),
    kind('sigterm', {
      at,
      deployment,
      instance,
      onRequest: fc.boolean(),
    }),
    kind('redeploy', {
      at,
      deployment,
      change: fc.constantFrom(
        'drop_last_job' as const,
        'overlap_skip' as const,
        'overlap_allow' as const,
        'retry_longer' as const,
      ),
      rolling: fc.boolean(),
    }),
    kind('guard_during_run', {
      at,
      deployment,
      job,
      overlap: fc.constantFrom('skip' as const, 'wait' as const),
    }),
  ];
}

/** Another version's records and locks, the repair, hangs and process pauses (memory store only). */
function storeEvents(fields: EventFields): EventKind[] {
  const { at, deployment, instance, job } = fields;
  return [
    kind('foreign_record', {
      at,
      deployment,
      job,
      kind: fc.constantFrom('unknown_status' as const, 'extra_fields' as const),
    }),
    kind('foreign_lock', {
      at,
      deployment,
      job,
      // One lock in two names a holder id this version never writes.
      holder: fc.oneof(
        fc.constantFrom('absent' as const, 'unknown_status' as const),
        fc.constantFrom(...MALFORMED_HOLDERS),
      ),
    }),
    kind('foreign_cursor', {
      at,
      deployment,
      job,
      kind: foreignCursorKind(),
    }),
    kind('repair', { at, deployment, job }),
    kind('hang', {
      at,
      deployment,
      instance,
      ms: fc.integer({ min: 1_000, max: 120_000 }),
    }),
    kind('pause', {
      at,
      deployment,
      instance,
      ms: fc.integer({ min: 1_000, max: 200_000 }),
    }),
    kind('stall', {
      at,
      deployment,
      ms: fc.integer({ min: 20_000, max: 200_000 }),
    }),
  ];
}
