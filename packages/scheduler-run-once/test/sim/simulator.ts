/**
 * The deterministic simulator: one {@link History} played in one process on driven virtual time.
 * Each deployment (one per key scope) has its handler instances (`createScheduledJobHandler`, each
 * with its own RunDocuments, RunLedger and RunHistory over the shared store, its own wall clock),
 * and its own Cloud Scheduler (cloud-scheduler.ts: a model written from Scheduler's documentation,
 * independent of the product's retry rules: attempt deadline, retries with back-off until
 * retryCount and maxRetryDuration are reached, one outstanding execution per job, Force run with
 * the next slot's time, duplicate deliveries, lost answers). Every Firestore operation takes a seeded random latency, so interleavings vary with
 * the seed and replay exactly. The jobs are simulated work that records each execution; the
 * invariants (`invariants.ts`) judge the history against those records.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import {
  type DocumentData,
  type Firestore,
  Timestamp,
} from '@google-cloud/firestore';
import { Cron } from 'croner';
import { ConfigError, LedgerUnavailableError } from '../../src/core/errors.ts';
import type { JobRun } from '../../src/core/job-context.ts';
import { RunLedger } from '../../src/core/ledger.ts';
import { RunDocuments } from '../../src/core/run-documents.ts';
import type { Scope } from '../../src/core/run-key.ts';
import { waitForClaim } from '../../src/function/catch-up-delivery.ts';
import { type Config, loadConfig } from '../../src/function/config.ts';
import { createScheduledJobHandler } from '../../src/function/handler.ts';
import { createLogger } from '../../src/function/logger.ts';
import { loadConfigAndJobs } from '../../src/function/register.ts';
import {
  ALLOW_OVERLAP_HEADER,
  BACKFILL_HEADER,
  CATCH_UP_HEADER,
  MODE_HEADER,
  TRIGGER_ID_HEADER,
} from '../../src/function/scheduler-request.ts';
import { GracefulShutdown } from '../../src/function/shutdown.ts';
import { planBackfill } from '../../src/ops/backfill.ts';
import { schedulerHeaders } from '../../src/ops/deliver.ts';
import { recordPause, recordResume } from '../../src/ops/pause-records.ts';
import { scopeOf } from '../../src/ops/scope-args.ts';
import { readHistory } from '../../src/ops/slot-history.ts';
import { lateGraceMs } from '../../src/policy/catch-up.ts';
import {
  type DeclaredJob,
  defineJob,
  type JobDeclaration,
  type OverlapPolicy,
} from '../../src/policy/job-declaration.ts';
import { jobStateCollection } from '../../src/policy/job-state.ts';
import type { CatchUpSender, CatchUpSent } from '../../src/policy/late-runs.ts';
import {
  MAX_CHECK_SLOTS,
  MissedRunCheck,
} from '../../src/policy/missed-runs.ts';
import { defineAuditJob } from '../../src/policy/run-audit.ts';
import { RunHistory, unloggedReportBy } from '../../src/policy/run-history.ts';
import {
  nextSlots,
  previousSlot,
  slotsBetween,
} from '../../src/policy/schedule.ts';
import {
  asFirestore,
  GrpcCode,
  MemoryFirestore,
  type OpInfo,
  type OpPlan,
} from '../../src/testing/memory-firestore.ts';
import {
  CloudScheduler,
  nextSlotMs,
  type SchedulerAttempt,
  scheduleTimeHeader,
} from './cloud-scheduler.ts';
import { repairCursor, writeForeignCursor } from './foreign-cursors.ts';
import {
  type ForeignStore,
  lockIdOf,
  malformedHolderValue,
  repairLockHolder,
  type UnreadableForm,
  unreadableFormAt,
  writeForeignLock,
  writeForeignPauses,
  writeForeignRecord,
} from './foreign-writes.ts';
import {
  AUDIT_JOB_ID,
  AUDIT_SCHEDULE,
  type ForeignCursorKind,
  type ForeignPauseKind,
  type Gaps,
  type History,
  isCalm,
  isMalformedHolder,
  isReadableCursorKind,
  type JobSpec,
  KNOWN_GAPS,
  longerRetries,
  type MalformedHolder,
  nextScheduleOf,
  pauseEndMs,
  type SimEvent,
  SLOW_STOP_MS,
  STOLEN_LEASE_LOOK_FOR_MS,
} from './model.ts';
import {
  NOTE_CASES,
  NOTE_FILLS,
  type NoteCase,
  type NoteFill,
} from './note-cases.ts';
import { realStore } from './real-store.ts';
import {
  type RetentionProbe,
  retentionBoundOf,
  retentionEdgesSeconds,
} from './retention-invariants.ts';
import { v1CheckDocumentId } from './run-id-invariants.ts';
import { EPOCH_MS, type MachineClock, VirtualTime } from './virtual-time.ts';

/** Where a delivery came from: what the simulated world meant it to be. */
export type Source =
  | 'scheduler'
  | 'force'
  | 'manual'
  | 'rerun'
  | 'backfill'
  | 'catchup'
  /** A request naming a schedule time no delivery of the job may carry (`strayDeliveries`). */
  | 'stray';

/** One catch-up the run audit sent (its sender was called), and what the sender resolved with. */
export interface CatchUp {
  readonly deployment: number;
  readonly jobId: string;
  /** The slot delivered, ms, and its run id. */
  readonly slot: number;
  readonly runId: string;
  /** The schedule time of the audit run that sent it (as its delivery's header has it). */
  readonly auditSlot: string;
  /** Which audit request (one check of every job) sent it: a number of the world's own. */
  readonly auditRequest: number;
  /** The instance the audit ran on. */
  readonly auditInstance: string;
  readonly sentAt: number;
  /** What the sender resolved with, and when, once it did. */
  sent: CatchUpSent | undefined;
  resolvedAt: number | undefined;
}

/** One execution of a job's work, as the work itself recorded it. */
export interface Execution {
  readonly deployment: number;
  readonly revision: number;
  readonly scope: string;
  readonly jobId: string;
  /** The delivery's schedule time, ms. */
  readonly scheduleTime: number;
  readonly kind: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly instance: string;
  readonly source: Source;
  readonly triggerId: string | undefined;
  /** Its request was sent with `--allow-overlap` (`X-Run-Once-Allow-Overlap: true`). */
  readonly allowOverlap?: boolean;
  /** When its request's handler was called, ms: its claim was sent no sooner. */
  readonly handledAt?: number;
  /**
   * When its request last sent a write to its run's record before the job started, ms: its claim,
   * or its claim's last round (`runOnce` took its `claimStartedAt` then or before; a `wait` job's
   * request may have claimed before, and waited).
   */
  readonly claimSentAt?: number;
  readonly start: number;
  /**
   * When its work was drawn to end, ms, unless its signal or a crash cut it short (its notes' round
   * trips are part of that time), or its notes took longer.
   */
  plannedEnd?: number;
  end: number | undefined;
  result: 'running' | 'returned' | 'threw' | 'crashed';
  /**
   * It returned or threw, but its instance crashed before the delivery's answer: its completion or
   * release may not have landed.
   */
  crashedBeforeAnswer?: boolean;
  /** Then, when its instance died, ms: its heartbeat may have extended its lease until then. */
  diedAt?: number;
  /** When its job first called `ctx.note`, ms: a note is a renewal, sent as the job says. */
  firstNoteAt?: number;
  /** Its `ctx.note` of {@link START_NOTE} was answered: the note is in its run's record. */
  noted?: boolean;
  /** The error's name when its `ctx.note` was refused. */
  noteRefused?: string;
  /** When its note of {@link PROGRESS_NOTE} is due, halfway through its work, ms. */
  progressNoteDueAt?: number;
  /**
   * Its note of {@link PROGRESS_NOTE} halfway through its work: when it was called, ms, and whether
   * it was answered, or the refusal's name.
   */
  progressNote?: { calledAt?: number; answered?: boolean; refused?: string };
  /**
   * Its second note, one of {@link NOTE_CASES} (valid at a limit's edge, or just past it): the
   * case, and whether it was answered or the name of the error that refused it.
   */
  caseNote?: {
    readonly note: NoteCase;
    answered?: boolean;
    refused?: string;
    /** The refusal's message, which must name the note (`JobContext.note`). */
    refusedMessage?: string;
  };
  /**
   * Its fill of the run's notes to a bound, made instead of the second note ({@link NOTE_FILLS}):
   * how many notes were planned and answered, and the refusal that ended it, if any.
   */
  noteFill?: {
    readonly fill: NoteFill;
    readonly planned: readonly { readonly name: string }[];
    answered: number;
    refused?: { readonly name: string; readonly message: string };
  };
  /** The message of its signal's abort reason, when its signal was aborted. */
  abortMessage?: string;
  /** When its instance got SIGTERM while it ran (or before it started), ms. */
  sigtermAt?: number;
  /** Its completion was written to the store (memory store only), answered or not. */
  completionLanded?: boolean;
  /** How long its instance was paused while it ran, ms. */
  pausedMs: number;
  /**
   * Why its job's signal was aborted (`AttemptAbortedError.reason`: `lease_lost`, `shutdown`,
   * `job_timeout`); absent when it was not. Simulated jobs stop on their signal at once, but
   * stubborn ones, and with `slowStops` one in two of the others up to 2 s later.
   */
  abortReason?: string;
  /** Its job ignored its signal until its work was done ({@link STUBBORN_SHARE}). */
  stubborn?: boolean;
  /** When its job's signal was aborted, ms, whether or not the job stopped on it. */
  abortedAt?: number;
  /** Its instance's pauses while it ran: from when until when, ms. */
  pauses: { from: number; until: number }[];
  /** What its job's context said as it started (invariant 21, record-invariants.ts). */
  context?: SeenContext;
}

/** The fields of a job's context that the ledger fills in, as the job saw them at its start. */
export interface SeenContext {
  readonly jobName: string;
  /** `firstClaimedAt` and `leaseExpires`, ms. */
  readonly firstClaimedAt: number;
  readonly leaseExpires: number;
  readonly slot: number | undefined;
  /** The run a re-run stands for, and whether the run audit's catch-up delivered it. */
  readonly rerunOf?: string | undefined;
  readonly caughtUp?: boolean | undefined;
}

/** One JSON log line, with the virtual time and instance it came from. */
export interface LogLine {
  readonly at: number;
  readonly instance: string;
  readonly level: string;
  readonly message: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

/**
 * The deployment a log line's machine belongs to, if named so: every machine of deployment N is
 * named `d{N}-…` (an instance `d0-i3-r1`, `d0-auditor`, `d0-operator`, `d0-check`).
 */
export function deploymentOf(line: LogLine): number | undefined {
  const match = /^d(\d+)-/.exec(line.instance);
  return match === null ? undefined : Number(match[1]);
}

/** One answer the function gave a delivery. */
export interface Answered {
  readonly at: number;
  readonly deployment: number;
  readonly source: Source;
  readonly jobId: string;
  readonly scheduleTime: string;
  readonly status: number;
  readonly outcome: string;
  readonly runId: string | undefined;
}

/** One request made to the function: when it was sent and when it ended (answered or not). */
export interface Delivered {
  readonly deployment: number;
  readonly source: Source;
  readonly jobId: string;
  /** The `X-CloudScheduler-ScheduleTime` header, `''` when none was sent. */
  readonly scheduleTime: string;
  readonly sentAt: number;
  /** When its answer was sent or the request failed (crash, deadline); open if neither. */
  endedAt: number | undefined;
  status: number | undefined;
  outcome: string | undefined;
  /** The instance it was sent to. */
  readonly instance: string;
  /** The run its answer named, if any. */
  runId: string | undefined;
  /** Its answer's `message`: what the function told the caller to do. */
  message?: string;
  /** Sent with `X-Run-Once-Allow-Overlap: true` (`npm run trigger -- --allow-overlap`). */
  readonly allowOverlap?: boolean;
  /** The attempt its own job ran as, once the job started (the request that claimed the run). */
  ranAs?: string;
  /** The Scheduler execution it is an attempt of (`SchedulerAttempt.execution`), if any. */
  schedulerExecution?: number;
  /** Every Firestore operation sent within the request (its job's too), in order. */
  readonly ops?: DeliveryOp[];
}

/** A Firestore operation a request sent: when, what, on which documents, and whether a fault met it. */
export interface DeliveryOp {
  readonly at: number;
  readonly kind: OpInfo['kind'];
  readonly paths: readonly string[];
  /** Refused, lost, never answered, retried, or answered past `FIRESTORE_TIMEOUT_SECONDS`. */
  readonly troubled: boolean;
}

/** An operator's pause of a job, from the time its pause recorded to the time its resume recorded, ms. */
export interface OperatorPause {
  readonly deployment: number;
  readonly jobId: string;
  readonly from: number;
  to: number;
  /** Never resumed, recorded with `--until 90s` (a bound it outlives); else without `--until`. */
  readonly forgotten?: boolean;
}

/** One landed write of an attempt's lease: when it landed and until when it leased the run, ms. */
export interface LeaseEnd {
  readonly landedAt: number;
  readonly expires: number;
  /** The lease the write gave, ms (`lease_ms`: the claim's short one, or a widened one). */
  readonly leaseMs: number;
  /** The run whose record the write landed on (its document id). */
  readonly runId: string;
}

/** A write an attempt sent to its run's record: when, and when its answer came at the earliest, ms. */
export interface WriteSpan {
  readonly sentAt: number;
  readonly answeredBy: number;
  /** It met no fault (refused, lost, retried, never or late answered): answered as it landed. */
  readonly clean: boolean;
}

/** A write by one attempt that landed on its run's record while the record named another. */
export interface ForeignWrite {
  readonly at: number;
  readonly runId: string;
  readonly writer: string;
  readonly holder: string;
  /** The record's status before and after, e.g. `in_progress → completed`. */
  readonly status: string;
}

/** An instance that died right after one of its logged writes landed, before its log line. */
/** A missed-run check's report write that landed: the report its check must log. */
export interface CheckReport {
  readonly at: number;
  /** The machine whose check wrote it (an instance's name, `auditor`, `operator`). */
  readonly machine: string;
  readonly runId: string;
  /** The reporter id the write names (`reported_by` less its unlogged mark). */
  readonly reporter: string;
}

/** A write that landed on a run's record, and the machine whose operation it was. */
export interface RecordWrite {
  readonly at: number;
  /** The writer's machine (an instance's name, `auditor`, `operator`), `?` outside any. */
  readonly machine: string;
  readonly runId: string;
  /** The record's `status` after the write; `undefined` when it was deleted or has none. */
  readonly status?: unknown;
  /** The record holds a report (`reported_at`) after the write. */
  readonly reported?: boolean;
  /** Who the record says reported it (`reported_by`) after the write, if anyone. */
  readonly reportedBy?: unknown;
  /** The check that claimed logging its report again (`relog_by`) after the write, if any. */
  readonly relogBy?: unknown;
  /** The attempt the record names (`attempt_id`) after the write, if any. */
  readonly attemptId?: unknown;
  /**
   * The attempt whose request sent the write, once its job had started (its completion, release,
   * extensions and notes); `undefined` for a check's write, a claim, or a write outside a request.
   */
  readonly sentBy?: string;
}

/**
 * An operation a fault met: refused, lost, answered late or never (a hang), or retried by the
 * client. Sent at `at` by `machine`, on the documents `paths`.
 */
export interface TroubledOp {
  readonly at: number;
  readonly machine: string;
  readonly paths: readonly string[];
}

export interface CrashAfterWrite {
  readonly at: number;
  readonly instance: string;
  readonly write: LoggedWrite;
  readonly path: string;
}

/** An instance's death: its timers never fire again, so a write it made may stay unlogged. */
export interface Death {
  readonly at: number;
  readonly instance: string;
}

/** Pauses another version wrote on a job's check document (`document`), landed at `at`. */
export interface ForeignPauses {
  readonly at: number;
  readonly deployment: number;
  readonly jobId: string;
  readonly document: string;
  readonly kind: ForeignPauseKind;
}

/**
 * A cursor another version wrote on a job's check document (`document`), landed at `at`;
 * `repairedAt`: when the operator's repair deleted it (an unreadable one), ms.
 */
export interface ForeignCursor {
  readonly at: number;
  readonly deployment: number;
  readonly jobId: string;
  readonly document: string;
  readonly kind: ForeignCursorKind;
  repairedAt?: number;
}

/** A landed write of a job's check document, with its stored fields before and after it. */
export interface CheckDocumentWrite {
  readonly at: number;
  /** The writer's machine (an instance's name, `auditor`, `operator`), `?` outside any. */
  readonly machine: string;
  readonly document: string;
  readonly before: Readonly<Record<string, unknown>> | undefined;
  readonly after: Readonly<Record<string, unknown>> | undefined;
}

/** An instance stopped from `from` to `until` (true time, ms): its timers and jobs waited. */
export interface InstancePause {
  readonly instance: string;
  readonly from: number;
  readonly until: number;
}

/** A write whose log line comes after its answer: its instance may die between the two. */
export type LoggedWrite = 'claim' | 'completion' | 'report';

/** A run record another version wrote, or a lock's holder it named. */
export interface ForeignRecord {
  readonly at: number;
  readonly deployment: number;
  readonly jobId: string;
  /**
   * `unknown_status`: a record this version cannot read (a status it does not know, or, by its
   * `form`, a field it cannot read); `extra_fields`: fields it never writes; `absent`: a lock's
   * holder never recorded; `repaired`: this version's record of a dead holder, deleted by a
   * `repair`.
   */
  readonly kind: 'unknown_status' | 'extra_fields' | 'absent' | 'repaired';
  /** An `unknown_status` record's form: an unknown status, or a field this version cannot read. */
  readonly form?: UnreadableForm;
  /** Written as a lock's holder (`foreign_lock`), when its lock landed, ms. */
  readonly lockedAt?: number;
  /** A lock's `unknown_status` holder: when its record landed, a moment after its lock, ms. */
  readonly recordedAt?: number;
  /** When a `repair` deleted it, ms. */
  deletedAt?: number;
  /** When another `foreign_lock` replaced its lock, ms: the lock names it no more. */
  replacedAt?: number;
  /** When a claim of its run wrote its record again after a `repair` deleted it, ms. */
  revivedAt?: number;
}

/**
 * An overlap lock another version wrote whose holder id is not a run id (`foreign_lock` with a
 * malformed holder): it names no run, so every run of its job and scope must be answered
 * `unreadable_record` naming it until a `repair` deletes it.
 */
export interface MalformedLock {
  readonly deployment: number;
  readonly jobId: string;
  /** The lock document's id, as the answers name it (`blockedBy`). */
  readonly lockId: string;
  readonly form: MalformedHolder;
  /** Its `holder_run_id` as stored (`undefined`: no field); absent in outcomes made by hand. */
  readonly holderValue?: unknown;
  /** When it landed, ms. */
  readonly lockedAt: number;
  /** When a `repair`'s delete of it was sent, ms (it landed a moment later). */
  deletedAt?: number;
  /** When another `foreign_lock`'s write over it was sent, ms (it landed a moment later). */
  replacedAt?: number;
}

/** What a played history left: the ground truth the invariants judge. */
export interface SimOutcome {
  readonly history: History;
  readonly gaps: Gaps;
  /** Played on the real emulator: no missed-run detection, so invariant 2 is not judged. */
  readonly emulator: boolean;
  readonly startMs: number;
  /** When Cloud Scheduler stopped, and when the final missed-run check ran. */
  readonly stopMs: number;
  readonly finalMs: number;
  readonly executions: readonly Execution[];
  readonly logs: readonly LogLine[];
  readonly answers: readonly Answered[];
  /** Every attempt each deployment's Cloud Scheduler made, by deployment. */
  readonly schedulerAttempts: readonly (readonly SchedulerAttempt[])[];
  /** The operator's pauses: a slot inside one is paused, never missed. */
  readonly operatorPauses: readonly OperatorPause[];
  /** Every catch-up the run audit sent (histories with `audit`). */
  readonly catchUps: readonly CatchUp[];
  /** The run audit's deliveries (Scheduler's, of {@link AUDIT_JOB_ID}), kept apart from the jobs'. */
  readonly auditDeliveries: readonly Delivered[];
  /** Completions, extensions and releases that landed on a record naming another attempt. */
  readonly foreignWrites: readonly ForeignWrite[];
  /**
   * When each attempt's lease ended, by the writes of it that landed (claims, takeovers,
   * extensions, notes: `leased_at` + `lease_ms`), in the order they landed (memory store only).
   */
  readonly leaseEnds: ReadonlyMap<string, readonly LeaseEnd[]>;
  /**
   * When each job's attempt sent a write to its run's record (extensions, notes, its completion or
   * release), by attempt id, landed or not; absent in outcomes made by hand.
   */
  readonly attemptWrites?: ReadonlyMap<string, readonly number[]>;
  /**
   * The same writes with when each was answered at the earliest (`Infinity`: never), ms: its
   * latency and fault as planned, before any pause of its instance delays it.
   */
  readonly attemptWriteSpans?: ReadonlyMap<string, readonly WriteSpan[]>;
  /**
   * The check documents (`{jobId}~check…`) each job's attempt read, by attempt id, in order: its
   * delivery's missed-run check beside the job; absent in outcomes made by hand.
   */
  readonly checkReads?: ReadonlyMap<string, readonly string[]>;
  /** The instances that died right after a logged write landed (`crashAfterWrite`). */
  readonly crashesAfterWrite?: readonly CrashAfterWrite[];
  /** Every landed write on a run's record, in order; absent in outcomes made by hand. */
  readonly recordWrites?: readonly RecordWrite[];
  /** Every landed write on a job's check document, in order; absent in outcomes made by hand. */
  readonly checkDocumentWrites?: readonly CheckDocumentWrite[];
  /** Every operation a fault met, in order; absent in outcomes made by hand. */
  readonly troubledOps?: readonly TroubledOp[];
  /** Every report a missed-run check wrote that landed, in order; absent in outcomes made by hand. */
  readonly checkReports?: readonly CheckReport[];
  /** Every instance that died (a crash, a kill after SIGTERM, the auditor's crash), in order. */
  readonly deaths?: readonly Death[];
  /** Every pause of an instance (`pause`, `stall`), whatever ran on it: the run audit's attempts too. */
  readonly instancePauses?: readonly InstancePause[];
  /** The pauses another version wrote on a check document (`foreign_pause`), as they landed. */
  readonly foreignPauses?: readonly ForeignPauses[];
  /** The cursors another version wrote on a check document (`foreign_cursor`), as they landed. */
  readonly foreignCursors?: readonly ForeignCursor[];
  /** Every job document at the end (cursors, pauses, locks), by id (memory store only). */
  readonly jobDocuments?: ReadonlyMap<
    string,
    Readonly<Record<string, unknown>>
  >;
  /** The records and locks another version wrote (`foreign_record`, `foreign_lock`), by run id. */
  readonly foreignRecords?: ReadonlyMap<string, ForeignRecord>;
  /** The locks another version wrote naming no run id, in order. */
  readonly malformedLocks?: readonly MalformedLock[];
  /** Every request made to the function, answered or not. */
  readonly deliveries: readonly Delivered[];
  /** `FIRESTORE_TIMEOUT_SECONDS` of every deployment, ms. */
  readonly firestoreTimeoutMs: number;
  /** Each deployment's scope (as run ids have it), jobs per revision and when each revision came. */
  readonly deployments: readonly {
    readonly scope: string;
    readonly keyScope: Scope;
    readonly revisions: readonly {
      readonly at: number;
      readonly jobs: readonly DeclaredJob[];
    }[];
  }[];
  /** Every stored run record at the end, by run id (memory store only). */
  readonly records: ReadonlyMap<string, Readonly<Record<string, unknown>>>;
  /** Each record's create time, ms. */
  readonly createTimes: ReadonlyMap<string, number>;
  /** Errors thrown where the product should never throw (a timer callback, a handler). */
  readonly errors: readonly unknown[];
  readonly leaseMs: number;
  /** `FORCED_RUN_TOLERANCE_SECONDS` of every deployment, ms (before each job's own bound). */
  readonly forcedRunToleranceMs?: number;
  /** Each deploy's cold start tried at the edges of the retention's rule (invariant 52). */
  readonly retentionProbes?: readonly RetentionProbe[];
}

/** How to play a history beyond its data. */
export interface SimOptions {
  readonly gaps?: Gaps;
  /** Drop the `lastUpdateTime` precondition of every update: a product without fencing. */
  readonly brokenFencing?: boolean;
}

const COLLECTION = 'runs';
/**
 * The note a simulated job with `notes` writes as it starts (`ctx.note`), as a job notes what it
 * started downstream: a fenced renewal of its lease, judged by invariant 15.
 */
export const START_NOTE = 'started';
/**
 * The note a noting job writes halfway through its work, unless an execution of its run filled
 * the run's notes: between its beats, so it may meet one in flight (a note waits for it) or a lease
 * lost meanwhile.
 */
export const PROGRESS_NOTE = 'progress';
/** How late a raced check's read is answered (a backfill's claims land meanwhile), ms. */
const RACED_READ_MS = 5_000;
/**
 * 8,000 s: beyond every generated retry window (< 15 min) and beyond the final check, which comes
 * at most about 80 minutes after a history's first slot (a 14-minute span, the drain, up to 30
 * minutes of open requests, a later check); older slots are out of the check's range, by design.
 * It also bounds the missed-run check's first look-back to 133 slots, not a day's. And the cold
 * start accepts it (invariant 52): it outlasts the run audit's judging delay (7,740 s, Scheduler's
 * default retries) plus its forced-run tolerance (up to 90 s here).
 */
const RETENTION_SECONDS = 8000;

/**
 * When the check after the final one comes (after an instance died), ms after the final check:
 * the model's cadence of checks, the job's next due delivery (hourly in production, sooner here).
 */
const LATER_CHECK_MS = 5 * 60_000;

/** A seeded PRNG (mulberry32): the simulator's only randomness. */
/** Mixed into a history's seed for {@link World.laterRng}. */
const LATER_STREAM = 0x5eed_0040;

export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface RequestContext {
  /** The attempt this request's job runs as, once the job started (its claim is then known). */
  readonly attempt: { id?: string; runId?: string };
  /**
   * When its handler was called, and when it last sent a write to each record before its job
   * started (a run's claim): the bounds of `claimStartedAt` in `runOnce`.
   */
  readonly before: { handledAt?: number; lastWriteTo: Map<string, number> };
  readonly source: Source;
  readonly triggerId: string | undefined;
  /** Sent with `X-Run-Once-Allow-Overlap: true`. */
  readonly allowOverlap?: boolean;
  /**
   * Set while the request's own missed-run check writes a run record ({@link CheckHistory}): the
   * write is the check's, never its attempt's, even on the record of the run the request executes.
   */
  readonly checking?: boolean;
  readonly deployment: number;
  readonly revision: number;
  /** The delivery this request is, whose `ranAs` its job's start sets. */
  readonly delivered: Delivered;
}

interface Instance {
  readonly name: string;
  readonly machine: MachineClock;
  readonly revision: number;
  readonly handler: (req: unknown, res: unknown) => unknown;
  readonly shutdown: GracefulShutdown;
  /** Accepts new requests (not draining, not crashed). */
  serving: boolean;
  readonly pending: Set<(err: Error) => void>;
  readonly running: Set<Execution>;
  /** When it got SIGTERM (a `sigterm` event, a redeploy), ms: its jobs are told to stop. */
  terminatedAt?: number;
}

interface Deployment {
  readonly index: number;
  readonly scope: string;
  readonly keyScope: Scope;
  readonly config: Config;
  readonly revisions: {
    at: number;
    specs: readonly JobSpec[];
    jobs: readonly DeclaredJob[];
    /** What the function serves: the jobs, and the run audit in a history with `audit`. */
    served: readonly DeclaredJob[];
  }[];
  instances: Instance[];
  scheduler: CloudScheduler;
  lastTriggerId: string | undefined;
  /** Whether the last manual run was sent with `--allow-overlap`: a client's retry sends it again. */
  lastTriggerOverlap: boolean;
  /** The last backfill's requests, for an operator who sends them again. */
  lastBackfill: readonly Readonly<Record<string, string>>[];
  /** Until when Cloud Scheduler cannot reach the function, ms. */
  outageUntil: number;
  /** A `sigterm` event `onRequest` waits for the next Scheduler request an instance takes. */
  sigtermOnRequest: boolean;
}

/** The minimal request the handler reads: method, headers (raw and by name), url. */
function request(headers: Readonly<Record<string, string>>) {
  const lower = Object.fromEntries(
    Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]),
  );
  return {
    method: 'POST',
    url: '/',
    headers: lower,
    rawHeaders: Object.entries(headers).flat(),
    get: (name: string) => lower[name.toLowerCase()],
    header: (name: string) => lower[name.toLowerCase()],
  };
}

/** The minimal response: status, JSON body, and a callback when it is sent. */
function response(onSent: (status: number, body: unknown) => void) {
  let status = 200;
  const res = {
    headersSent: false,
    set: () => res,
    status: (s: number) => {
      status = s;
      return res;
    },
    json: (body: unknown) => {
      res.headersSent = true;
      onSent(status, body);
      return res;
    },
  };
  return res;
}

/** What one played history shares among its steps: its world, its clocks and its records. */
interface World {
  readonly history: History;
  readonly options: SimOptions;
  /** The real emulator, when given; the in-memory Firestore otherwise. */
  readonly db: Firestore | undefined;
  readonly gaps: Gaps;
  readonly rng: () => number;
  /** The PRNG of the behaviours a history opts into ({@link History.stubbornJobs}, `caseNotes`). */
  readonly laterRng: () => number;
  /** A whole number from `lo` to `hi`, both included, from the seeded PRNG. */
  readonly between: (lo: number, hi: number) => number;
  readonly time: VirtualTime;
  readonly startMs: number;
  readonly stopMs: number;
  readonly leaseMs: number;
  readonly collection: string;
  readonly firestoreTimeoutMs: number;
  readonly executions: Execution[];
  readonly logs: LogLine[];
  readonly answers: Answered[];
  readonly deliveries: Delivered[];
  readonly errors: unknown[];
  readonly requests: AsyncLocalStorage<RequestContext>;
  /** Which attempts' completions landed, answered or not (a crash may lose the answer). */
  readonly completedAttempts: Set<string>;
  readonly operator: MachineClock;
  /**
   * The instance that runs the final missed-run check: no Firestore fault reaches it, but it may
   * die right after a report it writes (`crashAfterWrite`), as the issue's audit did; the check
   * after it (on the operator's machine) then finds the report unlogged.
   */
  readonly auditor: MachineClock;
  readonly foreignWrites: ForeignWrite[];
  readonly leaseEnds: Map<string, LeaseEnd[]>;
  readonly attemptWriteSpans: Map<string, WriteSpan[]>;
  readonly checkReads: Map<string, string[]>;
  readonly checkReports: CheckReport[];
  readonly recordWrites: RecordWrite[];
  readonly checkDocumentWrites: CheckDocumentWrite[];
  readonly troubledOps: TroubledOp[];
  readonly operatorPauses: OperatorPause[];
  readonly catchUps: CatchUp[];
  /** How many audit requests got a catch-up sender (numbers {@link CatchUp.auditRequest}). */
  auditRequests: number;
  readonly crashesAfterWrite: CrashAfterWrite[];
  readonly foreignRecords: Map<string, ForeignRecord>;
  readonly malformedLocks: MalformedLock[];
  /** Each instance by its machine, with its deployment: the one a `crashAfterWrite` kills. */
  readonly instanceOf: Map<
    MachineClock,
    { dep: Deployment; instance: Instance }
  >;
  /** Until when each instance's connection to Firestore hangs (a `hang` event), by machine. */
  readonly hangingUntil: Map<MachineClock, number>;
  /** Instances no longer routed to but maybe still running (a rolling deploy's old revision). */
  readonly retired: Map<MachineClock | undefined, Instance>;
  /** One pino logger (its set-up is costly); each instance logs through a child naming it. */
  readonly baseLogger: ReturnType<typeof createLogger>;
  /** The instances that died (crashed, or killed after SIGTERM): a report may be left unlogged. */
  readonly deaths: Death[];
  readonly instancePauses: InstancePause[];
  readonly foreignPauses: ForeignPauses[];
  readonly foreignCursors: ForeignCursor[];
  /** Each deploy's cold start tried at the edges of the retention's rule (invariant 52). */
  readonly retentionProbes: RetentionProbe[];
  instanceCount: number;
  memory: MemoryFirestore | undefined;
  store: Firestore;
  deployments: Deployment[];
  /** Where another version (or the operator's repair) writes: the shared store, on true time. */
  foreignStore: ForeignStore;
}

/**
 * Plays `history` and returns what happened. The store is the in-memory Firestore unless `db`
 * is given (the real emulator: then no Firestore latency or fault is injected, and server time
 * is the emulator's).
 */
export async function simulate(
  history: History,
  options: SimOptions = {},
  db?: Firestore,
): Promise<SimOutcome> {
  const world = newWorld(history, options, db);
  openStore(world);
  world.deployments = history.scopes.map((scope, index) =>
    newDeployment(world, scope, index),
  );
  for (const dep of world.deployments) {
    startDeployment(world, dep);
  }
  world.foreignStore = foreignStoreOf(world);
  const { time } = world;
  time.install();
  try {
    await playEvents(world);
    const drainedMs = await drain(world);
    const racedMs = await raceBackfills(world, drainedMs);
    // A backfill delivers old slots one after another, past the drain: the final check comes once
    // no request is still open (the check's cursor stops at a run in flight), then a lease later.
    const finalMs = await untilRequestsEnd(world, racedMs, world.leaseMs);
    await finalAudits(world, finalMs);
    world.errors.push(...time.errors);
    const stored = await storedDocuments(world);
    noteLandedCompletions(world);
    return outcomeOf(world, finalMs, stored);
  } finally {
    time.uninstall();
  }
}

/** A world for `history` before its store and deployments: clocks, PRNG, empty records. */
function newWorld(
  history: History,
  options: SimOptions,
  db: Firestore | undefined,
): World {
  const rng = random(history.seed);
  // The draws of behaviours added later (stubborn jobs, case notes) come from a stream of their
  // own: the histories recorded before them replay as they did.
  const laterRng = random(history.seed ^ LATER_STREAM);
  // On the emulator, whose clock is real, the history happens half an hour ago: every slot is
  // in the past (within the retention) for the server, however fast virtual time runs.
  const time = new VirtualTime(
    db === undefined
      ? EPOCH_MS
      : Math.floor((Date.now() - 1_800_000) / 60_000) * 60_000,
  );
  const startMs = time.now;
  const logs: LogLine[] = [];
  return {
    history,
    options,
    db,
    gaps: options.gaps ?? KNOWN_GAPS,
    rng,
    laterRng,
    between: (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1)),
    time,
    startMs,
    stopMs: startMs + history.spanMs,
    leaseMs: history.leaseSeconds * 1000,
    collection: db === undefined ? COLLECTION : `sim_${randomUUID()}`,
    firestoreTimeoutMs: (history.firestoreTimeoutSeconds ?? 10) * 1000,
    executions: [],
    logs,
    answers: [],
    deliveries: [],
    errors: [],
    requests: new AsyncLocalStorage<RequestContext>(),
    completedAttempts: new Set<string>(),
    operator: { name: 'operator', offsetMs: 0, pausedUntil: 0, dead: false },
    auditor: { name: 'auditor', offsetMs: 0, pausedUntil: 0, dead: false },
    ...writesSeen(),
    operatorPauses: [],
    catchUps: [],
    auditRequests: 0,
    foreignRecords: new Map(),
    malformedLocks: [],
    instanceOf: new Map(),
    hangingUntil: new Map(),
    retired: new Map(),
    baseLogger: simLogger(logs, time),
    deaths: [],
    instancePauses: [],
    foreignPauses: [],
    foreignCursors: [],
    retentionProbes: [],
    instanceCount: 0,
    memory: undefined,
    store: undefined as unknown as Firestore,
    deployments: [],
    foreignStore: undefined as unknown as ForeignStore,
  };
}

/** What a world records of the writes and reads it sees land or sent, empty. */
function writesSeen() {
  return {
    foreignWrites: [],
    leaseEnds: new Map(),
    attemptWriteSpans: new Map(),
    checkReads: new Map(),
    checkReports: [],
    recordWrites: [],
    checkDocumentWrites: [],
    troubledOps: [],
    crashesAfterWrite: [],
  };
}

/** The pino logger every instance logs through: each line lands in `logs`, at virtual time. */
function simLogger(
  logs: LogLine[],
  time: VirtualTime,
): ReturnType<typeof createLogger> {
  return createLogger(
    { logLevel: 'info', projectId: 'demo-sim', serviceName: 'sim' },
    {
      write(line: string) {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        const { severity, message, msg, simInstance, ...fields } = parsed;
        logs.push({
          at: time.now,
          instance: String(simInstance),
          level: String(severity ?? parsed.level ?? ''),
          message: String(message ?? msg ?? ''),
          fields,
        });
      },
    },
  );
}

/** The world's store: the in-memory Firestore, with its hooks, or the emulator on virtual time. */
function openStore(world: World): void {
  const { db, time } = world;
  world.memory =
    db === undefined
      ? new MemoryFirestore({
          // As the function's own client (src/function/register.ts).
          ignoreUndefinedProperties: true,
          now: () => time.now,
          sleep: (ms) => time.sleep(ms),
          dropPreconditions: world.options.brokenFencing === true,
          landed: (path, before, after) =>
            noteLandedWrite(world, path, before, after),
          // Which attempts' completions landed, answered or not (a crash may lose the answer).
          committed: (_path, data) => {
            if (
              data.status === 'completed' &&
              typeof data.attempt_id === 'string'
            ) {
              world.completedAttempts.add(data.attempt_id);
            }
          },
          plan: (op): OpPlan => planOperation(world, op),
        })
      : undefined;
  world.store =
    db === undefined
      ? asFirestore(world.memory as MemoryFirestore)
      : realStore(db, time);
}

/** What the world records of a write that landed: its lease, a foreign write, a crash after it. */
function noteLandedWrite(
  world: World,
  path: string,
  before: DocumentData | undefined,
  after: DocumentData | undefined,
): void {
  noteLease(world, path, after);
  if (path.startsWith(`${world.collection}/`)) {
    world.recordWrites.push({
      at: world.time.now,
      machine: world.time.current?.name ?? '?',
      runId: path.slice(world.collection.length + 1),
      status: after?.status,
      reported: after?.reported_at !== undefined,
      reportedBy: after?.reported_by,
      relogBy: after?.relog_by,
      attemptId: after?.attempt_id,
      sentBy: attemptOfRequest(world),
    });
  }
  const checkDocuments = `${jobStateCollection(world.collection)}/`;
  if (path.startsWith(checkDocuments) && path.includes('~check')) {
    world.checkDocumentWrites.push({
      at: world.time.now,
      machine: world.time.current?.name ?? '?',
      document: path.slice(checkDocuments.length),
      before,
      after,
    });
  }
  const foreign = foreignWrite(world, path, before, after);
  if (foreign !== undefined) {
    world.foreignWrites.push(foreign);
  }
  noteCheckReport(world, path, before, after);
  dieAfterLoggedWrite(world, path, before, after);
  noteRevived(world, path, after);
}

/** Notes the lease an `in_progress` record's landed write gives its attempt. */
function noteLease(
  world: World,
  path: string,
  after: Readonly<Record<string, unknown>> | undefined,
): void {
  if (after?.status !== 'in_progress' || typeof after.attempt_id !== 'string') {
    return;
  }
  const leasedAt = after.leased_at as { toMillis?: () => number } | undefined;
  const leaseMs = Number(after.lease_ms);
  if (typeof leasedAt?.toMillis !== 'function' || !Number.isFinite(leaseMs)) {
    return;
  }
  const list = world.leaseEnds.get(after.attempt_id) ?? [];
  list.push({
    landedAt: world.time.now,
    expires: leasedAt.toMillis() + leaseMs,
    leaseMs,
    runId: path.slice(path.lastIndexOf('/') + 1),
  });
  world.leaseEnds.set(after.attempt_id, list);
}

/**
 * A completion, extension or release by an attempt that landed on its run's record while the
 * record named another attempt (a claim, which names its own attempt, is never one).
 */
function foreignWrite(
  world: World,
  path: string,
  before: Readonly<Record<string, unknown>> | undefined,
  after: Readonly<Record<string, unknown>> | undefined,
): ForeignWrite | undefined {
  const writer = world.requests.getStore()?.attempt;
  if (
    writer?.id === undefined ||
    path !== `${world.collection}/${writer.runId}`
  ) {
    return undefined;
  }
  if (before === undefined || after === undefined) {
    return undefined;
  }
  if (after.attempt_id !== before.attempt_id) {
    return undefined; // a claim or takeover
  }
  if (before.attempt_id === writer.id) {
    return undefined;
  }
  return {
    at: world.time.now,
    runId: String(writer.runId),
    writer: writer.id,
    holder: String(before.attempt_id),
    status: `${String(before.status)} → ${String(after.status)}`,
  };
}

/** Notes a missed-run check's report (a `reported_at` with an unlogged reporter) as it lands. */
function noteCheckReport(
  world: World,
  path: string,
  before: DocumentData | undefined,
  after: DocumentData | undefined,
): void {
  const machine = world.time.current;
  const prefix = `${world.collection}/`;
  if (machine === undefined || !path.startsWith(prefix)) {
    return;
  }
  const reportedAt = (data: DocumentData | undefined) =>
    data?.reported_at instanceof Timestamp
      ? data.reported_at.toMillis()
      : undefined;
  const reporter = unloggedReportBy(
    typeof after?.reported_by === 'string' ? after.reported_by : undefined,
  );
  const reported = reportedAt(after);
  if (reporter === undefined || reported === reportedAt(before)) {
    return;
  }
  world.checkReports.push({
    at: world.time.now,
    machine: machine.name,
    runId: path.slice(prefix.length),
    reporter,
  });
}

/**
 * The `crashAfterWrite` fault: the instance whose logged write ({@link loggedWriteOf}) this is
 * dies as it lands, before the answer reaches it: its timers never fire again, so the log line
 * that would report the write never comes and its requests are never answered.
 */
function dieAfterLoggedWrite(
  world: World,
  path: string,
  before: DocumentData | undefined,
  after: DocumentData | undefined,
): void {
  const { collection, time } = world;
  const chance = world.history.crashAfterWrite ?? 0;
  const jobState = path.startsWith(`${jobStateCollection(collection)}/`);
  if (chance === 0 || !(path.startsWith(`${collection}/`) || jobState)) {
    return;
  }
  const write = jobState
    ? overdueReportOf(before, after)
    : loggedWriteOf(before, after);
  const machine = time.current;
  const owner =
    machine === undefined ? undefined : world.instanceOf.get(machine);
  const dies = owner !== undefined || machine === world.auditor;
  if (write === undefined || machine === undefined || !dies || machine.dead) {
    return;
  }
  if (world.rng() >= chance) {
    return;
  }
  world.crashesAfterWrite.push({
    at: time.now,
    instance: machine.name,
    write,
    path,
  });
  if (owner !== undefined) {
    crash(world, owner.dep, owner.instance);
  } else {
    machine.dead = true; // the auditor: its checks stop where they are
    world.deaths.push({ at: time.now, instance: machine.name });
  }
}

/** A record a `repair` deleted, written again (a later claim of its run): its holder is back. */
function noteRevived(
  world: World,
  path: string,
  after: DocumentData | undefined,
): void {
  const repaired = world.foreignRecords.get(
    path.slice(world.collection.length + 1),
  );
  if (repaired?.deletedAt !== undefined && after !== undefined) {
    repaired.revivedAt ??= world.time.now;
  }
}

/** Whether `op` writes. */
function isWrite(op: OpInfo): boolean {
  return (
    op.kind === 'create' ||
    op.kind === 'update' ||
    op.kind === 'commit' ||
    op.kind === 'delete'
  );
}

/** One Firestore operation's latency and fault (`plannedOperation`), noting one a fault met. */
function planOperation(world: World, op: OpInfo): OpPlan {
  const plan = plannedOperation(world, op);
  noteAttemptWriteSpan(world, op, plan);
  const troubled = isTroubled(world, plan);
  if (troubled) {
    world.troubledOps.push({
      at: world.time.now,
      machine: world.time.current?.name ?? '?',
      paths: op.paths,
    });
  }
  world.requests.getStore()?.delivered.ops?.push({
    at: world.time.now,
    kind: op.kind,
    paths: op.paths,
    troubled,
  });
  return plan;
}

/** Whether `plan` meets a fault: refused, lost, never answered, retried, or answered past the timeout. */
function isTroubled(world: World, plan: OpPlan): boolean {
  const { fail, lose, hang, retry, beforeMs = 0, afterMs = 0 } = plan;
  return (
    fail !== undefined ||
    lose !== undefined ||
    hang === true ||
    retry === true ||
    beforeMs + afterMs >= world.firestoreTimeoutMs
  );
}

/**
 * One Firestore operation's latency and fault, from the seeded PRNG. The operator's reads
 * (backfill's) and the final audit see no faults.
 */
function plannedOperation(world: World, op: OpInfo): OpPlan {
  const { history, between, rng, time } = world;
  noteClaimWrite(world, op);
  noteCheckRead(world, op);
  const [lo, hi] = history.latency;
  const plan: OpPlan = { beforeMs: between(lo, hi), afterMs: between(lo, hi) };
  const machine = time.current;
  if (machine === world.operator) {
    return plan;
  }
  if (machine === world.auditor) {
    return finalCheckPlan(world, op, plan);
  }
  // A hanging connection: sent, never reaches the server, never answered.
  if (
    machine !== undefined &&
    time.now < (world.hangingUntil.get(machine) ?? 0)
  ) {
    return { ...plan, fail: GrpcCode.UNAVAILABLE, hang: true };
  }
  // Only histories with late answers draw for them: recorded histories replay as they did.
  const late = history.lateAnswers ?? 0;
  if (late > 0 && isWrite(op) && rng() < late) {
    return lateAnswer(world, plan);
  }
  if (rng() >= history.faultRate) {
    return plan;
  }
  return faultOf(world, op, plan);
}

/**
 * How often the final check's operations meet a fault with `faultyFinalCheck`: one write in two
 * (its reports, relog claims, acknowledgements and cursor), one read in seven (more, and the check
 * would seldom read its way to a report: a failed read stops it).
 */
export const FINAL_CHECK_FAULT_RATES = { write: 0.5, read: 0.15 } as const;

/** An operation of the final check: faultless, unless the history says `faultyFinalCheck`. */
function finalCheckPlan(world: World, op: OpInfo, plan: OpPlan): OpPlan {
  if (world.history.faultyFinalCheck !== true) {
    return plan;
  }
  const rate = isWrite(op)
    ? FINAL_CHECK_FAULT_RATES.write
    : FINAL_CHECK_FAULT_RATES.read;
  return world.rng() < rate ? faultOf(world, op, plan) : plan;
}

/**
 * The attempt id of the job whose request sends `op`, when `op` writes that attempt's run's record
 * (its heartbeat's, its notes', its completion's or release's write).
 */
function attemptWriting(world: World, op: OpInfo): string | undefined {
  const writer = world.requests.getStore()?.attempt;
  if (writer?.id === undefined || !isWrite(op) || checkWriting(world)) {
    return undefined;
  }
  const ownRecord = op.paths.includes(`${world.collection}/${writer.runId}`);
  return ownRecord ? writer.id : undefined;
}

/** Notes, before a request's job started, when it last sent a write to each record (its claim). */
function noteClaimWrite(world: World, op: OpInfo): void {
  const context = world.requests.getStore();
  if (
    context !== undefined &&
    context.attempt.id === undefined &&
    context.checking !== true &&
    isWrite(op)
  ) {
    for (const path of op.paths) {
      context.before.lastWriteTo.set(path, world.time.now);
    }
  }
}

/** When each attempt sent its writes to its run's record, ms, from their spans. */
function sentTimes(
  spans: ReadonlyMap<string, readonly WriteSpan[]>,
): Map<string, number[]> {
  return new Map(
    [...spans].map(([attemptId, sent]) => [
      attemptId,
      sent.map((span) => span.sentAt),
    ]),
  );
}

/**
 * Notes an attempt's write to its run's record, whatever becomes of it: when it was sent, and
 * when its answer comes at the earliest, by `plan`.
 */
function noteAttemptWriteSpan(world: World, op: OpInfo, plan: OpPlan): void {
  const attemptId = attemptWriting(world, op);
  if (attemptId === undefined) {
    return;
  }
  const { beforeMs = 0, afterMs = 0 } = plan;
  const sentAt = world.time.now;
  // Refused before the server answers after the way there; a hang is never answered.
  const answeredBy = plan.hang
    ? Number.POSITIVE_INFINITY
    : sentAt + beforeMs + (plan.fail === undefined ? afterMs : 0);
  const spans = world.attemptWriteSpans.get(attemptId) ?? [];
  spans.push({ sentAt, answeredBy, clean: !isTroubled(world, plan) });
  world.attemptWriteSpans.set(attemptId, spans);
}

/**
 * Notes when a job's attempt reads a check document: its delivery's missed-run check beside the
 * job (the run audit's attempts read every job's), whatever becomes of the read.
 */
function noteCheckRead(world: World, op: OpInfo): void {
  const reader = world.requests.getStore()?.attempt.id;
  const [path] = op.paths;
  if (reader === undefined || op.kind !== 'get' || path === undefined) {
    return;
  }
  const documentId = path.slice(path.lastIndexOf('/') + 1);
  if (!documentId.includes('~check')) {
    return;
  }
  const read = world.checkReads.get(reader) ?? [];
  read.push(documentId);
  world.checkReads.set(reader, read);
}

/** The fault an operation drawn to fail meets: refused, lost, answered late, or retried. */
function faultOf(world: World, op: OpInfo, plan: OpPlan): OpPlan {
  const fault = world.rng();
  if (fault < 0.35) {
    return { ...plan, fail: GrpcCode.UNAVAILABLE };
  }
  if (fault < 0.7) {
    return { ...plan, lose: GrpcCode.UNAVAILABLE };
  }
  if (fault < 0.85) {
    return { ...plan, afterMs: world.firestoreTimeoutMs + 5_000 };
  }
  // The client retries a commit on UNAVAILABLE: a landed write sent again (a create, a
  // fenced update, a guarded batch) answers a conflict.
  if (isWrite(op)) {
    return { ...plan, retry: true };
  }
  return { ...plan, lose: GrpcCode.DEADLINE_EXCEEDED };
}

/**
 * A write that lands and whose answer comes after the client's deadline, or never: the client
 * rejects (LedgerUnavailableError) while the write has landed.
 */
function lateAnswer(world: World, plan: OpPlan): OpPlan {
  if (world.rng() < 0.5) {
    return { ...plan, hang: true };
  }
  const timeoutMs = world.firestoreTimeoutMs;
  return { ...plan, afterMs: timeoutMs + world.between(1, 2 * timeoutMs) };
}

/** A deployment's configuration, for key scope `scope` (`''`: none). */
function configOf(world: World, scope: string): Config {
  return loadConfig(envOf(world, scope));
}

/** A deployment's environment variables, for key scope `scope` (`''`: none). */
function envOf(world: World, scope: string): Record<string, string> {
  return {
    NODE_ENV: 'test',
    EXPOSE_ERRORS: 'true',
    LOG_LEVEL: 'info',
    LEASE_SECONDS: String(world.history.leaseSeconds),
    RETENTION_SECONDS: String(RETENTION_SECONDS),
    FIRESTORE_TIMEOUT_SECONDS: String(world.firestoreTimeoutMs / 1000),
    ...(world.history.jobTimeoutSeconds === undefined
      ? {}
      : { JOB_TIMEOUT_SECONDS: String(world.history.jobTimeoutSeconds) }),
    ...(world.history.forcedRunToleranceSeconds === undefined
      ? {}
      : {
          FORCED_RUN_TOLERANCE_SECONDS: String(
            world.history.forcedRunToleranceSeconds,
          ),
        }),
    RUNS_COLLECTION: world.collection,
    MISSED_RUN_CHECK: world.db === undefined ? 'on' : 'off',
    ...(scope === '' ? {} : { RUN_KEY_SCOPE: scope }),
  };
}

/** The logger instance (or check) `name` logs through. */
function loggerFor(world: World, name: string) {
  return world.baseLogger.child({ simInstance: name });
}

/** The run records, the job documents and the run history of a deployment's configuration. */
function storesOf(world: World, config: Config) {
  const documents = new RunDocuments(world.store, {
    collection: world.collection,
    retentionMs: config.retentionMs,
    timeoutMs: config.firestoreTimeoutMs,
  });
  const jobDocuments = new RunDocuments(world.store, {
    collection: jobStateCollection(world.collection),
    retentionMs: config.retentionMs,
    timeoutMs: config.firestoreTimeoutMs,
  });
  return {
    documents,
    jobDocuments,
    history: new CheckHistory(documents, world.requests),
  };
}

/**
 * The run history a request's missed-run check writes reports, their acknowledgements and relog
 * claims through: each write runs marked as the check's (`RequestContext.checking`), so the
 * simulator never takes it for its attempt's extension, even on the record of the run the request
 * executes (a backfill of a slot whose `missed` report went unlogged: seed 20261210, history 489).
 */
class CheckHistory extends RunHistory {
  readonly #requests: AsyncLocalStorage<RequestContext>;

  constructor(
    documents: RunDocuments,
    requests: AsyncLocalStorage<RequestContext>,
  ) {
    super(documents);
    this.#requests = requests;
  }
  #asCheck<T>(write: () => Promise<T>): Promise<T> {
    const context = this.#requests.getStore();
    return context === undefined
      ? write()
      : this.#requests.run({ ...context, checking: true }, write);
  }
  reportMissed(...args: Parameters<RunHistory['reportMissed']>) {
    return this.#asCheck(() => super.reportMissed(...args));
  }
  markReported(...args: Parameters<RunHistory['markReported']>) {
    return this.#asCheck(() => super.markReported(...args));
  }
  acknowledgeReport(...args: Parameters<RunHistory['acknowledgeReport']>) {
    return this.#asCheck(() => super.acknowledgeReport(...args));
  }
  claimRelog(...args: Parameters<RunHistory['claimRelog']>) {
    return this.#asCheck(() => super.claimRelog(...args));
  }
}

/** Whether the write being sent now is a request's missed-run check's ({@link CheckHistory}). */
function checkWriting(world: World): boolean {
  return world.requests.getStore()?.checking === true;
}

/** The attempt whose request sends the write being sent now, unless its check sends it. */
function attemptOfRequest(world: World): string | undefined {
  return checkWriting(world)
    ? undefined
    : world.requests.getStore()?.attempt.id;
}

/** Notes that `exec`'s job calls `ctx.note` now (its first call's time is kept). */
function noteCalled(world: World, exec: Execution): void {
  exec.firstNoteAt ??= world.time.now;
}

/**
 * The job's note as it starts; a refusal is kept on `exec`, and the job then throws.
 * @returns the notes it leaves in the record of a run no other attempt noted in
 */
async function noteStart(
  world: World,
  ctx: Parameters<JobRun>[0],
  exec: Execution,
): Promise<Record<string, unknown>> {
  const value = { attempt: ctx.attemptId, at: world.time.now };
  try {
    noteCalled(world, exec);
    await ctx.note(START_NOTE, value);
    exec.noted = true;
    return { [START_NOTE]: value };
  } catch (err) {
    exec.noteRefused = err instanceof Error ? err.name : String(err);
    throw err;
  }
}

/** The job's note halfway through its work; a refusal is kept on `exec`, and the job then throws. */
async function noteProgress(
  world: World,
  ctx: Parameters<JobRun>[0],
  exec: Execution,
): Promise<void> {
  const progress: NonNullable<Execution['progressNote']> = {
    calledAt: world.time.now,
  };
  exec.progressNote = progress;
  try {
    noteCalled(world, exec);
    await ctx.note(PROGRESS_NOTE, { at: world.time.now });
    progress.answered = true;
  } catch (err) {
    progress.refused = err instanceof Error ? err.name : String(err);
    throw err;
  }
}

/**
 * The job's second note, a case of {@link NOTE_CASES} drawn by the simulator: a refused invalid
 * note is what a careful job catches (its `RunOnceError`), and the job goes on; any other refusal
 * ends the job as the start note's does.
 */
async function noteCase(
  world: World,
  ctx: Parameters<JobRun>[0],
  exec: Execution,
): Promise<void> {
  const note = NOTE_CASES[
    Math.floor(world.laterRng() * NOTE_CASES.length)
  ] as NoteCase;
  const tried: NonNullable<Execution['caseNote']> = { note };
  exec.caseNote = tried;
  try {
    noteCalled(world, exec);
    await ctx.note(note.name, note.value() as never);
    tried.answered = true;
  } catch (err) {
    tried.refused = err instanceof Error ? err.name : String(err);
    tried.refusedMessage = err instanceof Error ? err.message : String(err);
    if (tried.refused !== 'RunOnceError') {
      throw err;
    }
  }
}

/**
 * The job's fill of its run's notes to a bound of {@link NOTE_FILLS}, drawn by the simulator, made
 * by the first execution of a run (its record then holds only the start note, `held`). It stops at
 * the first refusal: a `RunOnceError` is caught as a careful job does, any other ends the job.
 */
async function noteFill(
  world: World,
  ctx: Parameters<JobRun>[0],
  exec: Execution,
  held: Readonly<Record<string, unknown>>,
): Promise<void> {
  const fill = NOTE_FILLS[
    Math.floor(world.laterRng() * NOTE_FILLS.length)
  ] as NoteFill;
  const planned = fill.plan(held);
  const tried: NonNullable<Execution['noteFill']> = {
    fill,
    planned,
    answered: 0,
  };
  exec.noteFill = tried;
  for (const note of planned) {
    try {
      noteCalled(world, exec);
      await ctx.note(note.name, note.value as never);
      tried.answered++;
    } catch (err) {
      const refused = err instanceof Error ? err : new Error(String(err));
      tried.refused = { name: refused.name, message: refused.message };
      if (refused.name !== 'RunOnceError') {
        throw err;
      }
      return;
    }
  }
}

/** Whether an earlier execution of `exec`'s run filled its notes: a case note would not fit. */
function filled(world: World, exec: Execution): boolean {
  return world.executions.some(
    (other) => other.runId === exec.runId && other.noteFill !== undefined,
  );
}

/** The share of a run's first executions that fill its notes to a bound, where a history allows. */
const FILL_SHARE = 1 / 20;

/** Whether `exec` fills its notes ({@link noteFill}): drawn only where the history allows fills. */
function fillsNotes(world: World, exec: Execution): boolean {
  // A fill's hundred writes may outlast a calm history's job timeout: calm histories fill none.
  if (world.history.noteFills !== true || isCalm(world.history)) {
    return false;
  }
  const firstOfRun = !world.executions.some(
    (other) => other !== exec && other.runId === exec.runId,
  );
  return world.laterRng() < FILL_SHARE && firstOfRun;
}

/**
 * The share of executions whose job ignores its signal until its work is done (then throws its
 * reason), unless the history sets its own (`stubbornShare`): what the product's still-running warning, its timeout's stopped heartbeat and its
 * fenced completion exist for (docs/jobs.md: a job should stop and throw when its signal aborts).
 */
const STUBBORN_SHARE = 1 / 8;
const NEVER_ABORTED = new AbortController().signal;

/** The simulated work of `spec` in deployment `deployment`: it records each execution. */
function runOf(world: World, deployment: number, spec: JobSpec): JobRun {
  return async (ctx) => {
    const { time } = world;
    const machine = time.current;
    const dep = world.deployments[deployment] as Deployment;
    const instance =
      dep.instances.find((i) => i.machine === machine) ??
      world.retired.get(machine);
    const exec = startExecution(world, dep, spec, ctx);
    instance?.running.add(exec);
    // A delivery its instance took before its SIGTERM may start its job after it.
    if (instance?.terminatedAt !== undefined) {
      exec.sigtermAt = time.now;
    }
    const ms = world.between(spec.minMs, spec.maxMs);
    exec.plannedEnd = time.now + ms;
    const fails = world.rng() < spec.failRate;
    const stubborn =
      world.history.stubbornJobs === true &&
      world.laterRng() < (world.history.stubbornShare ?? STUBBORN_SHARE);
    if (stubborn) {
      exec.stubborn = true;
    }
    try {
      if (spec.notes === true) {
        await notes(world, ctx, exec);
      }
      // The notes' round trips are part of the job's drawn time: its work is shorter by them, so
      // a job drawn within JOB_TIMEOUT_SECONDS ends within it (`--regressions`, seed 1840671871).
      const left = () => Math.max(0, (exec.plannedEnd ?? 0) - time.now);
      const signal = stubborn ? NEVER_ABORTED : heeded(world, ctx.signal);
      // A run whose notes an execution filled has no room left for it.
      if (spec.notes === true && !filled(world, exec)) {
        const halfMs = Math.floor(left() / 2);
        exec.progressNoteDueAt = time.now + halfMs;
        await work(signal, halfMs);
        await noteProgress(world, ctx, exec);
      }
      await work(signal, left());
      if (ctx.signal.aborted) {
        throw ctx.signal.reason;
      }
    } catch (err) {
      exec.end = time.now;
      exec.result = 'threw';
      throw err;
    } finally {
      instance?.running.delete(exec);
    }
    exec.end = time.now;
    if (fails) {
      exec.result = 'threw';
      throw new Error(failureMessage(world, exec));
    }
    exec.result = 'returned';
  };
}

/**
 * A failed job's message: in one execution in two a long one, as a Google API's error body or a
 * stack makes it (longer than any record or line keeps), so that what the record keeps and what the
 * attempt's report line tells can be compared (invariant 32). Chosen by the execution's place
 * rather than drawn, so that no history's draws move.
 */
function failureMessage(world: World, exec: Execution): string {
  const place = world.executions.indexOf(exec);
  return place % 2 === 0
    ? 'simulated job failure'
    : `simulated job failure: ${LONG_ERROR_DETAIL}`;
}

/** A long error's detail: some 2,000 characters. */
const LONG_ERROR_DETAIL = 'upstream answered 503 and a body; '.repeat(60);

/**
 * The signal a job that heeds `signal` stops on: `signal` itself, or in a history with
 * `slowStops`, for one execution in two, one that aborts up to {@link SLOW_STOP_MS} after it (on
 * the instance's timers), as a job winding down its work would stop.
 */
function heeded(world: World, signal: AbortSignal): AbortSignal {
  if (world.history.slowStops !== true || world.laterRng() < 0.5) {
    return signal;
  }
  const stopMs = Math.floor(world.laterRng() * SLOW_STOP_MS);
  const stopping = new AbortController();
  const stop = () => setTimeout(() => stopping.abort(signal.reason), stopMs);
  if (signal.aborted) {
    stop();
  } else {
    signal.addEventListener('abort', stop, { once: true });
  }
  return stopping.signal;
}

/** A noting job's notes: its start note, then a fill of its run's notes or a case note. */
async function notes(
  world: World,
  ctx: Parameters<JobRun>[0],
  exec: Execution,
): Promise<void> {
  const held = await noteStart(world, ctx, exec);
  if (fillsNotes(world, exec)) {
    await noteFill(world, ctx, exec, held);
    return;
  }
  if (world.history.caseNotes === true && !filled(world, exec)) {
    await noteCase(world, ctx, exec);
  }
}

/** The `reason` of an abort signal's `AttemptAbortedError`, or `unknown`. */
function abortReasonOf(reason: unknown): string {
  const named =
    typeof reason === 'object' && reason !== null && 'reason' in reason
      ? reason.reason
      : undefined;
  return typeof named === 'string' ? named : 'unknown';
}

/** Records an execution of `spec` starting now, and names its attempt on its request. */
function startExecution(
  world: World,
  dep: Deployment,
  spec: JobSpec,
  ctx: Parameters<JobRun>[0],
): Execution {
  const { time } = world;
  const context = world.requests.getStore();
  const exec: Execution = {
    deployment: dep.index,
    revision: context?.revision ?? -1,
    scope: dep.scope,
    jobId: spec.id,
    scheduleTime: ctx.scheduleTime.getTime(),
    kind: ctx.kind,
    runId: ctx.runId,
    attemptId: ctx.attemptId,
    instance: time.current?.name ?? '?',
    source: context?.source ?? 'scheduler',
    triggerId: context?.triggerId,
    ...(context?.allowOverlap === true ? { allowOverlap: true } : {}),
    handledAt: context?.before.handledAt,
    claimSentAt: context?.before.lastWriteTo.get(
      `${world.collection}/${ctx.runId}`,
    ),
    start: time.now,
    end: undefined,
    result: 'running',
    pausedMs: 0,
    pauses: [],
    context: seenContext(ctx),
  };
  world.executions.push(exec);
  const noteAbort = () => {
    exec.abortedAt = time.now;
    exec.abortReason = abortReasonOf(ctx.signal.reason);
    const { reason } = ctx.signal;
    exec.abortMessage = reason instanceof Error ? reason.message : undefined;
  };
  if (ctx.signal.aborted) {
    noteAbort();
  } else {
    ctx.signal.addEventListener('abort', noteAbort, { once: true });
  }
  if (context !== undefined) {
    context.attempt.id = ctx.attemptId;
    context.attempt.runId = ctx.runId;
    context.delivered.ranAs = ctx.attemptId;
  }
  return exec;
}

/** What the job's context says of its claim as the job starts (judged by invariant 21). */
function seenContext(ctx: Parameters<JobRun>[0]): SeenContext {
  return {
    jobName: ctx.jobName,
    firstClaimedAt: ctx.firstClaimedAt.getTime(),
    leaseExpires: ctx.leaseExpires.getTime(),
    slot: ctx.slot?.getTime(),
    rerunOf: ctx.rerunOf,
    caughtUp: ctx.caughtUp,
  };
}

/** `ms` of work, cut short (rejecting with its reason) when `signal` aborts. */
function work(signal: AbortSignal, ms: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      return reject(signal.reason);
    }
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** The declarations of `specs` in deployment `deployment`, each running simulated work. */
function declarationsOf(
  world: World,
  deployment: number,
  specs: readonly JobSpec[],
) {
  return specs.map((spec) => {
    const { minMs: _a, maxMs: _b, failRate: _c, ...declared } = spec;
    return defineJob({ ...declared, run: runOf(world, deployment, spec) });
  });
}

/** A revision of `specs` in `dep`: its jobs, and what the function serves (the run audit too, if any). */
function revisionOf(
  world: World,
  dep: Deployment,
  specs: readonly JobSpec[],
): Deployment['revisions'][number] {
  const declarations = declarationsOf(world, dep.index, specs);
  if (world.history.audit !== true) {
    const jobs = coldStart(world, dep, declarations);
    return { at: world.time.now, specs, jobs, served: jobs };
  }
  const audit = defineAuditJob({ id: AUDIT_JOB_ID, schedule: AUDIT_SCHEDULE });
  const served = coldStart(world, dep, [...declarations, audit]);
  return {
    at: world.time.now,
    specs,
    jobs: served.filter((job) => job.id !== AUDIT_JOB_ID),
    served,
  };
}

/**
 * The function's cold start of a deploy of `declarations` in `dep` (`loadConfigAndJobs`, as
 * `registerScheduledJob` runs it), first tried at the edges of the retention's rule (invariant 52).
 * @returns the jobs it serves.
 * @throws {ConfigError} if the simulator's own configuration is refused: a simulator mistake.
 */
function coldStart(
  world: World,
  dep: Deployment,
  declarations: readonly JobDeclaration[],
): readonly DeclaredJob[] {
  const env = envOf(world, dep.scope);
  const { config, jobs } = loadConfigAndJobs(declarations, env);
  const bounds = jobs.map((job) =>
    retentionBoundOf(job, config.forcedRunToleranceMs, world.startMs),
  );
  for (const seconds of retentionEdgesSeconds(bounds, jobs)) {
    world.retentionProbes.push({
      at: world.time.now,
      retentionSeconds: seconds,
      leaseSeconds: config.leaseMs / 1000,
      bounds,
      problems: coldStartProblems(declarations, {
        ...env,
        RETENTION_SECONDS: String(seconds),
      }),
    });
  }
  return jobs;
}

/** The problems a cold start of `declarations` under `env` refuses with; `undefined` if it starts. */
function coldStartProblems(
  declarations: readonly JobDeclaration[],
  env: Readonly<Record<string, string>>,
): readonly string[] | undefined {
  try {
    loadConfigAndJobs(declarations, env);
    return undefined;
  } catch (err) {
    if (err instanceof ConfigError) {
      return err.problems;
    }
    throw err;
  }
}

/**
 * The run audit's catch-up sender on the instance that runs the audit delivered by `auditRequest`:
 * the slot delivered as Scheduler's deliveries are (to a serving instance of `dep`, in-process),
 * marked caught up, waited on until its claim or answer (`waitForClaim`, as the HTTP sender).
 */
function simCatchUpSender(
  world: World,
  dep: Deployment,
  auditRequest: { get(name: string): string | undefined },
  runHistory: RunHistory,
): CatchUpSender {
  const auditSlot = auditRequest.get('X-CloudScheduler-ScheduleTime') ?? '';
  const request = world.auditRequests++;
  return async (job, slot, runId) => {
    const sent: CatchUp = {
      deployment: dep.index,
      jobId: job.id,
      slot: slot.getTime(),
      runId,
      auditSlot,
      auditRequest: request,
      auditInstance: world.time.current?.name ?? '?',
      sentAt: world.time.now,
      sent: undefined,
      resolvedAt: undefined,
    };
    world.catchUps.push(sent);
    const headers = schedulerHeaders(job.id, slot, {
      [CATCH_UP_HEADER]: 'true',
    });
    const answered = deliverTo(world, dep, headers, 'catchup', undefined).then(
      ({ body }): CatchUpSent => ({
        result: 'answered',
        outcome: String((JSON.parse(body) as { outcome?: unknown }).outcome),
      }),
      (err: unknown): CatchUpSent => ({
        result: 'unsent',
        reason: String(err),
      }),
    );
    sent.sent = await waitForClaim({ history: runHistory }, runId, answered);
    sent.resolvedAt = world.time.now;
    return sent.sent;
  };
}

/** Starts an instance of `dep`'s revision `revision`, on a machine of its own. */
function startInstance(
  world: World,
  dep: Deployment,
  revision: number,
): Instance {
  const { history, time } = world;
  const name = `d${dep.index}-i${world.instanceCount++}-r${revision}`;
  const machine: MachineClock = {
    name,
    offsetMs: history.clockOffsetMs * (world.instanceCount % 2 === 0 ? 1 : -1),
    pausedUntil: 0,
    dead: false,
  };
  const { config } = dep;
  const {
    documents,
    jobDocuments,
    history: runHistory,
  } = storesOf(world, config);
  const ledger = new RunLedger(documents, { leaseMs: config.leaseMs });
  const shutdown = new GracefulShutdown();
  const jobs = (dep.revisions[revision] as Deployment['revisions'][number])
    .served;
  const handler = time.within(machine, () =>
    createScheduledJobHandler({
      config,
      ledger,
      history: runHistory,
      jobDocuments,
      clock: () => documents.serverTime(),
      jobs,
      logger: loggerFor(world, name),
      shutdown,
      catchUpSender: (auditRequest) =>
        simCatchUpSender(world, dep, auditRequest, runHistory),
    }),
  );
  const instance: Instance = {
    name,
    machine,
    revision,
    handler: handler as Instance['handler'],
    shutdown,
    serving: true,
    pending: new Set(),
    running: new Set(),
  };
  world.instanceOf.set(machine, { dep, instance });
  return instance;
}

/** The instance dies: its executions and open requests end, and a new one takes its place. */
function crash(world: World, dep: Deployment, instance: Instance): void {
  if (instance.machine.dead) {
    return;
  }
  instance.machine.dead = true;
  world.deaths.push({ at: world.time.now, instance: instance.machine.name });
  instance.serving = false;
  for (const exec of instance.running) {
    exec.result = 'crashed';
    exec.end = world.time.now;
  }
  instance.running.clear();
  noteUnansweredEnds(world, instance);
  for (const reject of instance.pending) {
    reject(new Error('connection reset: the instance crashed'));
  }
  instance.pending.clear();
  const at = dep.instances.indexOf(instance);
  if (at !== -1) {
    dep.instances[at] = startInstance(world, dep, dep.revisions.length - 1);
  }
}

/**
 * A job that returned (or threw) on a crashed instance, whose completion (or release) write may
 * still be in flight: the crash can lose it, and the record stays held under its lease.
 */
function noteUnansweredEnds(world: World, instance: Instance): void {
  for (const exec of world.executions) {
    const ended = exec.result === 'returned' || exec.result === 'threw';
    if (exec.instance !== instance.machine.name || !ended) {
      continue;
    }
    const answered = world.logs.some(
      (l) =>
        l.fields.attemptId === exec.attemptId &&
        (typeof l.fields.completion === 'string' ||
          typeof l.fields.release === 'string'),
    );
    if (!answered) {
      exec.crashedBeforeAnswer = true;
      exec.diedAt = world.time.now;
    }
  }
}

/** Delivers `headers` to a serving instance of `dep` (a cold start if none serves). */
function deliverTo(
  world: World,
  dep: Deployment,
  headers: Readonly<Record<string, string>>,
  source: Source,
  triggerId: string | undefined,
  signal?: AbortSignal,
  target: Instance = servingInstance(world, dep),
): Promise<{ status: number; body: string }> {
  const delivered = newDelivery(world, dep, headers, source, target);
  const ended = () => {
    delivered.endedAt ??= world.time.now;
  };
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => {
      ended();
      reject(err);
    };
    target.pending.add(fail);
    // Scheduler gives up at its deadline; the request goes on at the instance (not ended).
    signal?.addEventListener('abort', () => {
      target.pending.delete(fail);
      reject(new Error('attempt deadline exceeded'));
    });
    const res = response((status, body) => {
      target.pending.delete(fail);
      noteAnswer(
        world,
        delivered,
        headers,
        status,
        body as { outcome?: string; runId?: string; message?: string },
      );
      resolve({ status, body: JSON.stringify(body) });
    });
    const context: RequestContext = {
      attempt: {},
      before: { lastWriteTo: new Map() },
      source,
      triggerId,
      allowOverlap: headers[ALLOW_OVERLAP_HEADER] === 'true',
      deployment: dep.index,
      revision: target.revision,
      delivered,
    };
    sendRequest(world, target, context, () =>
      target.handler(request(headers), res),
    );
  });
}

/** A serving instance of `dep`, drawn at random; a cold start if none serves. */
function servingInstance(world: World, dep: Deployment): Instance {
  const serving = dep.instances.filter((i) => i.serving);
  let instance = serving[Math.floor(world.rng() * serving.length)];
  if (instance === undefined) {
    instance = startInstance(world, dep, dep.revisions.length - 1);
    dep.instances.push(instance);
  }
  return instance;
}

/** Records a request to `target`, sent now and not yet answered. */
function newDelivery(
  world: World,
  dep: Deployment,
  headers: Readonly<Record<string, string>>,
  source: Source,
  target: Instance,
): Delivered {
  const delivered: Delivered = {
    deployment: dep.index,
    source,
    jobId: headers['X-CloudScheduler-JobName'] ?? '',
    scheduleTime: headers['X-CloudScheduler-ScheduleTime'] ?? '',
    sentAt: world.time.now,
    endedAt: undefined,
    status: undefined,
    outcome: undefined,
    instance: target.name,
    runId: undefined,
    ...(headers[ALLOW_OVERLAP_HEADER] === 'true' ? { allowOverlap: true } : {}),
    ops: [],
  };
  world.deliveries.push(delivered);
  return delivered;
}

/** Records the function's answer to a delivery (the first one ends it). */
function noteAnswer(
  world: World,
  delivered: Delivered,
  headers: Readonly<Record<string, string>>,
  status: number,
  body: { outcome?: string; runId?: string; message?: string },
): void {
  if (delivered.endedAt === undefined) {
    delivered.status = status;
    delivered.outcome = body.outcome ?? '';
    delivered.runId = body.runId;
    delivered.message = body.message;
  }
  delivered.endedAt ??= world.time.now;
  world.answers.push({
    at: world.time.now,
    deployment: delivered.deployment,
    source: delivered.source,
    jobId: headers['X-CloudScheduler-JobName'] ?? '',
    scheduleTime: headers['X-CloudScheduler-ScheduleTime'] ?? '',
    status,
    outcome: body.outcome ?? '',
    runId: body.runId,
  });
}

/** Hands a request to `target`'s handler after network latency, on the instance's timers. */
function sendRequest(
  world: World,
  target: Instance,
  context: RequestContext,
  handle: () => unknown,
): void {
  const { time } = world;
  time.within(target.machine, () =>
    world.requests.run(context, () => {
      // Network latency to the function, on the instance's timers (a paused one answers late).
      setTimeout(
        () => {
          context.before.handledAt = time.now;
          Promise.resolve(handle()).catch((err: unknown) =>
            world.errors.push(err),
          );
          sigtermWhileHandled(world, target, context);
        },
        world.between(1, 30),
      );
    }),
  );
}

/**
 * A `sigterm` event `onRequest` that waits for this request (a Scheduler one, on a serving
 * instance) sends its SIGTERM within two Firestore round trips of the handler's call: before the
 * claim is sent, or while it is on its way, so the job may start on an instance already told to
 * stop (`runOnce`'s `shutdown` already aborted).
 */
function sigtermWhileHandled(
  world: World,
  target: Instance,
  context: RequestContext,
): void {
  const dep = world.deployments[context.deployment];
  if (
    dep === undefined ||
    !dep.sigtermOnRequest ||
    context.source !== 'scheduler' ||
    !target.serving
  ) {
    return;
  }
  dep.sigtermOnRequest = false;
  const [, hi] = world.history.latency;
  const inMs = world.between(0, 4 * hi);
  world.time.within(undefined, () =>
    world.time.schedule(() => sigterm(world, dep, target), inMs),
  );
}

/** Deployment `index`, for key scope `scope`, before its first revision and its Scheduler. */
function newDeployment(world: World, scope: string, index: number): Deployment {
  const config = configOf(world, scope);
  return {
    index,
    scope,
    keyScope: scopeOf(config),
    config,
    revisions: [],
    instances: [],
    scheduler: undefined as unknown as CloudScheduler,
    lastTriggerId: undefined,
    lastTriggerOverlap: false,
    lastBackfill: [],
    outageUntil: 0,
    sigtermOnRequest: false,
  };
}

/** Deploys `dep`'s first revision: the history's jobs, its instances and its Cloud Scheduler. */
function startDeployment(world: World, dep: Deployment): void {
  const { history, time } = world;
  dep.revisions.push(revisionOf(world, dep, history.jobs));
  dep.instances = Array.from({ length: history.instances }, () =>
    startInstance(world, dep, 0),
  );
  dep.scheduler = new CloudScheduler({
    jobs: (dep.revisions[0] as Deployment['revisions'][number]).served,
    clock: {
      now: () => time.now,
      setTimer: (callback, ms) => {
        const timer = time.within(undefined, () => time.schedule(callback, ms));
        return () => time.cancel(timer);
      },
    },
    random: world.rng,
    duplicates: history.duplicates,
    dropAnswers: history.dropAnswers,
    send: (headers, signal, attempt) => {
      const header = headers['X-CloudScheduler-ScheduleTime'];
      // Scheduler sends a slot before its time, or no time, only for a Force run.
      const source: Source =
        header === undefined || Date.parse(header) > time.now
          ? 'force'
          : 'scheduler';
      if (time.now < dep.outageUntil) {
        return Promise.reject(
          new Error('Cloud Scheduler cannot reach the function (outage)'),
        );
      }
      return time.within(undefined, () => {
        const sent = deliverTo(world, dep, headers, source, undefined, signal);
        // deliverTo records the delivery before it returns.
        const delivered = world.deliveries.at(-1) as Delivered;
        delivered.schedulerExecution = attempt.execution;
        return sent;
      });
    },
  });
}

/** The jobs `dep`'s latest revision declares. */
function currentJobs(dep: Deployment): readonly DeclaredJob[] {
  return (dep.revisions.at(-1) as Deployment['revisions'][number]).jobs;
}

/**
 * `npm run runs -- --backfill` on `dep`: the missed slots since the history began, delivered;
 * with `raceCheck`, each job's while a missed-run check of its slots reads them.
 */
async function backfill(
  world: World,
  dep: Deployment,
  raceCheck = false,
): Promise<void> {
  const { history: runHistory } = storesOf(world, dep.config);
  const jobs = currentJobs(dep);
  const now = new Date(world.time.now);
  const rows = [];
  for (const job of jobs) {
    const { slots } = slotsBetween(job, new Date(world.startMs - 1), now, 1000);
    rows.push(
      ...(await readHistory(runHistory, job, slots, dep.keyScope, now)).rows,
    );
  }
  const plan = planBackfill(rows, jobs, {
    now,
    retentionMs: dep.config.retentionMs,
    forcedRunToleranceMs: dep.config.forcedRunToleranceMs,
  });
  // As `npm run runs -- --backfill` sends them: marked, so a blocked slot stays missed.
  const sent = plan.deliver.map((row) =>
    schedulerHeaders(row.job, row.slot, { [BACKFILL_HEADER]: 'true' }),
  );
  dep.lastBackfill = sent;
  if (!raceCheck) {
    await deliverBackfill(world, dep, sent);
    return;
  }
  await Promise.all(
    jobs.map((job) =>
      racedCheck(
        world,
        dep,
        job,
        sent.filter(
          (headers) => headers['X-CloudScheduler-JobName'] === job.id,
        ),
      ),
    ),
  );
}

/**
 * A missed-run check of `job` (as a due delivery's would run) whose read of the slots' records
 * is answered late: meanwhile `sent` (backfill deliveries of the job's slots) are delivered
 * and claim, so the check judges slots from a read that other runs have overtaken.
 */
async function racedCheck(
  world: World,
  dep: Deployment,
  job: DeclaredJob,
  sent: readonly Readonly<Record<string, string>>[],
): Promise<void> {
  if (sent.length === 0) {
    return;
  }
  const stores = storesOf(world, dep.config);
  let raced = false;
  const delivering: Promise<unknown>[] = [];
  const deliverDuringRead = async () => {
    raced = true;
    for (const headers of sent) {
      delivering.push(
        deliverTo(world, dep, headers, 'backfill', undefined).catch(() => {}),
      );
    }
    await world.time.sleep(RACED_READ_MS);
  };
  const history = new Proxy(stores.history, {
    get(target, property) {
      if (property === 'getMany') {
        return async (runIds: readonly string[]) => {
          const read = await target.getMany(runIds);
          if (!raced) {
            await deliverDuringRead();
          }
          return read;
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const check = new MissedRunCheck({
    history,
    jobDocuments: stores.jobDocuments,
    clock: () => stores.documents.serverTime(),
    forcedRunToleranceMs: dep.config.forcedRunToleranceMs,
  });
  await check.check(job, dep.keyScope, loggerFor(world, `d${dep.index}-check`));
  // Nothing closed to judge: the backfill is delivered all the same.
  if (!raced) {
    await deliverBackfill(world, dep, sent);
  }
  await Promise.all(delivering);
}

/** Delivers a backfill's requests 0.5 s apart. */
async function deliverBackfill(
  world: World,
  dep: Deployment,
  sent: readonly Readonly<Record<string, string>>[],
): Promise<void> {
  for (const [i, headers] of sent.entries()) {
    if (i > 0) {
      await world.time.sleep(500);
    }
    await deliverTo(world, dep, headers, 'backfill', undefined).catch(() => {});
  }
}

/**
 * `npm run pause -- JOB`, then `ms` later `npm run resume -- JOB`, as ops/pause.ts does each:
 * the record first, then the Scheduler job. The pause counts from its record to its resume's
 * start (a slot between the resume's record and Scheduler's resume is missed, and reported).
 */
async function operatorPause(
  world: World,
  dep: Deployment,
  jobId: string,
  ms: number,
  forgotten: boolean,
): Promise<void> {
  const { time } = world;
  const { jobDocuments } = storesOf(world, dep.config);
  const docId = v1CheckDocumentId(jobId, dep.keyScope);
  // `--until 90s`: a bound the forgotten pause outlives, so a check reports it overdue.
  const until = forgotten
    ? (pausedAt: Date) => new Date(pausedAt.getTime() + 90_000)
    : undefined;
  let recorded: Awaited<ReturnType<typeof recordPause>>;
  try {
    recorded = await recordPause(jobDocuments, docId, jobId, {
      until,
      note: OPERATOR_PAUSE_NOTE,
    });
  } catch {
    return; // already paused (refused): this pause changes nothing
  }
  // From the time the command printed (Firestore's, when it read the job's document): a slot
  // then is paused, though Scheduler's pause comes a moment later.
  const from = recorded.pausedAt.getTime();
  const pause: OperatorPause = {
    deployment: dep.index,
    jobId,
    from,
    to: Infinity,
    forgotten,
  };
  world.operatorPauses.push(pause);
  dep.scheduler.pause(jobId);
  if (forgotten) {
    return;
  }
  await time.sleep(ms);
  pause.to = time.now;
  const resumed = await recordResume(jobDocuments, docId, jobId);
  // Until the resume the command printed: a slot before it is paused, one after it (before
  // Scheduler's resume) missed.
  pause.to = resumed.resumedAt?.getTime() ?? time.now;
  dep.scheduler.resume(jobId);
}

/** The note of every operator pause (`npm run pause -- JOB --note sim`). */
export const OPERATOR_PAUSE_NOTE = 'sim';

/** Where another version (or the operator's repair) writes: the shared store, on true time. */
function foreignStoreOf(world: World): ForeignStore {
  return {
    store: world.store,
    collection: world.collection,
    now: () => world.time.now,
    retentionMs: RETENTION_SECONDS * 1000,
    randomRunId: () =>
      Array.from({ length: 64 }, () =>
        Math.floor(world.rng() * 16).toString(16),
      ).join(''),
  };
}

/** Whether a run of `jobId` executes in deployment `d`, or a request of it is still open. */
function isJobBusy(world: World, d: number, jobId: string): boolean {
  return (
    world.executions.some(
      (e) => e.deployment === d && e.jobId === jobId && e.result === 'running',
    ) ||
    world.deliveries.some(
      (r) => r.deployment === d && r.jobId === jobId && r.endedAt === undefined,
    )
  );
}

/** Whether every execution of run `runId` ended (none still runs or may still complete). */
function isRunEnded(world: World, runId: string): boolean {
  return world.executions.every(
    (e) => e.runId !== runId || e.result === 'crashed' || e.result === 'threw',
  );
}

/** A `foreign_record`, `foreign_lock` or `repair` event, recorded for the invariants. */
async function writeAsAnotherVersion(
  world: World,
  dep: Deployment,
  job: DeclaredJob,
  event: Extract<
    SimEvent,
    { type: 'foreign_record' | 'foreign_lock' | 'repair' }
  >,
): Promise<void> {
  const w = world.foreignStore;
  const base = { at: world.time.now, deployment: dep.index, jobId: job.id };
  if (event.type === 'foreign_record') {
    const written = await writeForeignRecord(
      w,
      job,
      dep.keyScope,
      event.kind,
      unreadableFormAt(event.at),
    );
    for (const { runId, form } of written) {
      world.foreignRecords.set(runId, {
        ...base,
        kind: event.kind,
        ...(form === undefined ? {} : { form }),
      });
    }
    return;
  }
  if (event.type === 'foreign_lock') {
    await lockAsAnotherVersion(world, dep, job, event.holder, base);
    return;
  }
  await repairUnreadableCursor(world, dep, job);
  const repaired = await repairLockHolder(w, job, dep.keyScope, (runId) =>
    isRunEnded(world, runId),
  );
  if (repaired?.deleted === 'lock') {
    for (const lock of malformedLocksOf(world, dep.index, job.id)) {
      lock.deletedAt = repaired.sentAt;
    }
    return;
  }
  if (repaired === undefined) {
    return;
  }
  const known = world.foreignRecords.get(repaired.runId);
  if (known !== undefined) {
    known.deletedAt = world.time.now;
  } else {
    world.foreignRecords.set(repaired.runId, {
      ...base,
      kind: 'repaired',
      deletedAt: world.time.now,
    });
  }
}

/** The malformed locks of `jobId` in deployment `deployment` that still stand (none or one). */
function malformedLocksOf(
  world: World,
  deployment: number,
  jobId: string,
): MalformedLock[] {
  return world.malformedLocks.filter(
    (l) =>
      l.deployment === deployment &&
      l.jobId === jobId &&
      l.deletedAt === undefined &&
      l.replacedAt === undefined,
  );
}

/** A `foreign_pause` event: another version writes the pauses of the job's check document. */
async function pausesAsAnotherVersion(
  world: World,
  dep: Deployment,
  event: EventOf<'foreign_pause'>,
): Promise<void> {
  const job = jobOf(dep, event.job);
  const { kind } = event;
  const document = await writeForeignPauses(
    world.foreignStore,
    job,
    dep.keyScope,
    kind,
  );
  if (document !== undefined) {
    const at = world.time.now;
    world.foreignPauses.push({
      at,
      deployment: dep.index,
      jobId: job.id,
      document,
      kind,
    });
  }
}

/**
 * The unreadable cursor another version left on `job`'s check document, still standing (not
 * repaired, no later write of another version over it), or `undefined`.
 */
export function standingUnreadableCursor(
  cursors: readonly ForeignCursor[],
  deployment: number,
  jobId: string,
): ForeignCursor | undefined {
  const last = cursors.findLast(
    (c) => c.deployment === deployment && c.jobId === jobId,
  );
  return last !== undefined &&
    !isReadableCursorKind(last.kind) &&
    last.repairedAt === undefined
    ? last
    : undefined;
}

/**
 * A `foreign_cursor` event: another version rewrites the cursor of the job's check document,
 * unless an unreadable one it wrote still stands there (the next form is written over a cursor
 * this version wrote, so each is judged alone).
 */
async function cursorAsAnotherVersion(
  world: World,
  dep: Deployment,
  event: EventOf<'foreign_cursor'>,
): Promise<void> {
  const job = jobOf(dep, event.job);
  if (standingUnreadableCursor(world.foreignCursors, dep.index, job.id)) {
    return;
  }
  const { kind } = event;
  const document = await writeForeignCursor(
    world.foreignStore,
    job,
    dep.keyScope,
    kind,
  );
  if (document !== undefined) {
    world.foreignCursors.push({
      at: world.time.now,
      deployment: dep.index,
      jobId: job.id,
      document,
      kind,
    });
  }
}

/** The repair's first step: an unreadable cursor another version left on `job`'s document, deleted. */
async function repairUnreadableCursor(
  world: World,
  dep: Deployment,
  job: DeclaredJob,
): Promise<void> {
  const standing = standingUnreadableCursor(
    world.foreignCursors,
    dep.index,
    job.id,
  );
  if (standing === undefined) {
    return;
  }
  const sentAt = world.time.now;
  if (await repairCursor(world.foreignStore, job, dep.keyScope)) {
    standing.repairedAt = sentAt;
  }
}

/** A `foreign_lock` event: another version locks `job`; the lock it replaces names it no more. */
async function lockAsAnotherVersion(
  world: World,
  dep: Deployment,
  job: DeclaredJob,
  holder: Extract<SimEvent, { type: 'foreign_lock' }>['holder'],
  base: { at: number; deployment: number; jobId: string },
): Promise<void> {
  const busy = () => isJobBusy(world, dep.index, job.id);
  const lock = await writeForeignLock(
    world.foreignStore,
    job,
    dep.keyScope,
    holder,
    busy,
  );
  if (lock === undefined) {
    return;
  }
  for (const earlier of world.foreignRecords.values()) {
    const sameLock =
      earlier.deployment === dep.index && earlier.jobId === job.id;
    if (sameLock && earlier.lockedAt !== undefined) {
      earlier.replacedAt ??= lock.lockedAt;
    }
  }
  for (const earlier of malformedLocksOf(world, dep.index, job.id)) {
    earlier.replacedAt = lock.sentAt;
  }
  if (isMalformedHolder(holder)) {
    world.malformedLocks.push({
      deployment: dep.index,
      jobId: job.id,
      lockId: lockIdOf(job.id, dep.keyScope),
      form: holder,
      holderValue: malformedHolderValue(holder, lock.runId),
      lockedAt: lock.lockedAt,
    });
    return;
  }
  world.foreignRecords.set(lock.runId, {
    ...base,
    kind: holder,
    lockedAt: lock.lockedAt,
    ...(lock.recordedAt === undefined ? {} : { recordedAt: lock.recordedAt }),
  });
}

/**
 * Cloud Run: SIGTERM, then SIGKILL 10 s later; the function drains for its grace. The signal is
 * handled on the instance's own timers: a paused process handles it when it resumes.
 */
function terminate(world: World, dep: Deployment, instance: Instance): void {
  const { time } = world;
  instance.terminatedAt ??= time.now;
  for (const exec of instance.running) {
    exec.sigtermAt ??= time.now;
  }
  time.within(instance.machine, () =>
    time.schedule(
      () => void instance.shutdown.drain(dep.config.shutdownGraceMs),
      0,
    ),
  );
  time.within(undefined, () =>
    time.schedule(() => crash(world, dep, instance), 10_000),
  );
}

/** A history event of one type. */
type EventOf<T extends SimEvent['type']> = Extract<SimEvent, { type: T }>;

/** Applies one event of the history, now. */
function apply(world: World, event: SimEvent): void {
  const dep = world.deployments[event.deployment];
  if (dep === undefined) {
    return;
  }
  switch (event.type) {
    case 'crash':
    case 'sigterm':
    case 'pause':
    case 'step':
    case 'hang':
      applyToInstance(world, dep, event);
      return;
    case 'stall':
    case 'stolen_lease':
    case 'replayed_request':
      applyToRunning(world, dep, event);
      return;
    case 'force':
      force(world, dep, event);
      return;
    case 'manual':
      triggerManual(world, dep, event);
      return;
    case 'rerun':
      triggerRerun(world, dep, event);
      return;
    case 'operator_pause':
      pauseByOperator(world, dep, event);
      return;
    case 'outage':
      dep.outageUntil = Math.max(dep.outageUntil, world.time.now + event.ms);
      return;
    case 'late_delivery':
      lateDelivery(world, dep, event);
      return;
    case 'foreign_pause':
    case 'foreign_cursor':
      writeCheckDocumentAsAnotherVersion(world, dep, event);
      return;
    case 'foreign_record':
    case 'foreign_lock':
    case 'repair': {
      const job = jobOf(dep, event.job);
      void world.time.within(world.operator, () =>
        writeAsAnotherVersion(world, dep, job, event).catch((err: unknown) =>
          world.errors.push(err),
        ),
      );
      return;
    }
    case 'backfill':
      operatorBackfill(world, dep, event);
      return;
    case 'redeploy':
    case 'guard_during_run':
      deploy(world, dep, event);
      return;
  }
}

/** An event aimed at a running job: a stall, a stolen lease, a proxy's replayed request. */
function applyToRunning(
  world: World,
  dep: Deployment,
  event: EventOf<'stall' | 'stolen_lease' | 'replayed_request'>,
): void {
  switch (event.type) {
    case 'stall':
      stall(world, dep, event);
      return;
    case 'stolen_lease':
      stealLease(world, dep, event);
      return;
    case 'replayed_request':
      replayRequest(world, dep, event);
      return;
  }
}

/** A deploy of a new revision: the `redeploy` event, or the `guard_during_run` event's. */
function deploy(
  world: World,
  dep: Deployment,
  event: EventOf<'redeploy' | 'guard_during_run'>,
): void {
  if (event.type === 'redeploy') {
    redeploy(world, dep, event);
  } else {
    guardDuringRun(world, dep, event);
  }
}

/**
 * The `foreign_pause` and `foreign_cursor` events: another version writes the job's `pauses` or
 * its cursor, on the operator's machine.
 */
function writeCheckDocumentAsAnotherVersion(
  world: World,
  dep: Deployment,
  event: EventOf<'foreign_pause' | 'foreign_cursor'>,
): void {
  const write = () =>
    event.type === 'foreign_pause'
      ? pausesAsAnotherVersion(world, dep, event)
      : cursorAsAnotherVersion(world, dep, event);
  void world.time.within(world.operator, () =>
    write().catch((err: unknown) => world.errors.push(err)),
  );
}

/** The `operator_pause` event: `npm run pause` on the operator's machine (`operatorPause`). */
function pauseByOperator(
  world: World,
  dep: Deployment,
  event: EventOf<'operator_pause'>,
): void {
  const jobId = jobOf(dep, event.job).id;
  const forgotten = event.forgotten === true;
  void world.time.within(world.operator, () =>
    operatorPause(world, dep, jobId, event.ms, forgotten).catch(
      (err: unknown) => world.errors.push(err),
    ),
  );
}

/** The job an event's `index` names, among `dep`'s current jobs. */
function jobOf(dep: Deployment, index: number): DeclaredJob {
  const jobs = currentJobs(dep);
  return jobs[index % jobs.length] as DeclaredJob;
}

/** An event that befalls one instance: a crash, a SIGTERM, a pause, a clock step, a hang. */
function applyToInstance(
  world: World,
  dep: Deployment,
  event: EventOf<'crash' | 'sigterm' | 'pause' | 'step' | 'hang'>,
): void {
  if (event.type === 'sigterm' && event.onRequest === true) {
    dep.sigtermOnRequest = true;
    return;
  }
  const instance = dep.instances[event.instance];
  if (instance === undefined) {
    return;
  }
  switch (event.type) {
    case 'crash':
      crash(world, dep, instance);
      return;
    case 'sigterm':
      sigterm(world, dep, instance);
      return;
    case 'pause':
      pauseInstance(world, instance, event.ms);
      return;
    case 'step':
      instance.machine.offsetMs += event.ms;
      return;
    case 'hang':
      hangInstance(world, instance, event.ms);
      return;
  }
}

/** Stops `instance` for `ms`: its timers and its running jobs wait (`pauses` on each execution). */
function pauseInstance(world: World, instance: Instance, ms: number): void {
  const { time } = world;
  instance.machine.pausedUntil = Math.max(
    instance.machine.pausedUntil,
    time.now + ms,
  );
  world.instancePauses.push({
    instance: instance.machine.name,
    from: time.now,
    until: time.now + ms,
  });
  for (const exec of instance.running) {
    exec.pausedMs += ms;
    exec.pauses.push({ from: time.now, until: time.now + ms });
  }
}

/** Hangs `instance`'s connection to Firestore for `ms`: its operations are sent, never answered. */
function hangInstance(world: World, instance: Instance, ms: number): void {
  const hanging = world.hangingUntil.get(instance.machine) ?? 0;
  world.hangingUntil.set(
    instance.machine,
    Math.max(hanging, world.time.now + ms),
  );
}

/** The `stall` event: pauses the instance running `dep`'s oldest running job, if any runs. */
function stall(world: World, dep: Deployment, event: EventOf<'stall'>): void {
  const running = dep.instances.flatMap((instance) =>
    [...instance.running].map((exec) => ({ instance, exec })),
  );
  const oldest = running.sort((a, b) => a.exec.start - b.exec.start)[0];
  if (oldest !== undefined) {
    pauseInstance(world, oldest.instance, event.ms);
  }
}

/**
 * The `stolen_lease` event (when no slot execution runs, it looks again every 5 s for a minute):
 * pauses the instance running one of `dep`'s running slot executions (one
 * Scheduler delivered, with its schedule time: a stubborn one first, then the latest started, which
 * has the most work left) for a lease and `ms` more, and halfway through the `ms` past the lease
 * re-sends that slot's request to another instance (a new one if none serves), as a proxy's retry
 * would, again while it is answered 5xx and the job is still paused: its claim takes the run over
 * while the paused job still runs. Its answers go to the proxy, not to Scheduler, so Scheduler's
 * own attempts are unchanged. With `near`, the execution whose end (or progress note) is due first
 * within the minute is paused {@link NEAR_MS} before it: it ends (or notes) on waking, and its
 * completion, release (or note) meets the run taken over.
 */
function stealLease(
  world: World,
  dep: Deployment,
  event: EventOf<'stolen_lease'> & { readonly waitedMs?: number },
): void {
  const waitedMs = event.waitedMs ?? 0;
  const lookUntil = world.time.now + STOLEN_LEASE_LOOK_FOR_MS - waitedMs;
  const target =
    event.near === undefined
      ? leaseToSteal(dep)
      : soonestDue(dep, event.near, world.time.now, lookUntil);
  if (target === undefined) {
    // Nothing runs yet: the event waits for a job to steal from, a minute at most.
    lookAgain(world, waitedMs, (waited) =>
      stealLease(world, dep, { ...event, waitedMs: waited }),
    );
    return;
  }
  if (event.near === undefined) {
    stealFrom(world, dep, target, event);
    return;
  }
  const pauseAt = (dueOf(target.exec, event.near) ?? world.time.now) - NEAR_MS;
  world.time.within(undefined, () =>
    world.time.schedule(
      () => {
        if (target.exec.result === 'running' && !target.instance.machine.dead) {
          stealFrom(world, dep, target, event);
        }
      },
      Math.max(0, pauseAt - world.time.now),
    ),
  );
}

/**
 * The `replayed_request` event (when no slot execution of the job runs, it looks again every 5 s
 * for a minute): re-sends the Scheduler request of the slot `back` slots before the job's latest
 * running slot, among the slots Scheduler sent (the earliest if fewer), to a serving instance, as
 * a proxy would: a request never sent (a slot before the job was deployed) is never replayed. Its answer goes to
 * the proxy; Scheduler's own attempts are unchanged.
 */
function replayRequest(
  world: World,
  dep: Deployment,
  event: EventOf<'replayed_request'> & { readonly waitedMs?: number },
): void {
  const job = jobOf(dep, event.job);
  const running = runningSlots(dep).filter(({ exec }) => exec.jobId === job.id);
  const latest = running.sort(
    (a, b) => b.exec.scheduleTime - a.exec.scheduleTime,
  )[0];
  if (latest === undefined) {
    lookAgain(world, event.waitedMs ?? 0, (waited) =>
      replayRequest(world, dep, { ...event, waitedMs: waited }),
    );
    return;
  }
  // Only a request Scheduler sent can be sent again: its slots before the running one, latest first.
  const sent = [
    ...new Set(
      dep.scheduler.attempts
        .filter(
          (a) =>
            a.jobId === job.id &&
            a.scheduleTimeSent &&
            a.slotMs < latest.exec.scheduleTime,
        )
        .map((a) => a.slotMs),
    ),
  ].sort((a, b) => b - a);
  const earlier = sent[Math.min(event.back ?? 1, sent.length) - 1];
  if (earlier === undefined) {
    return;
  }
  const headers = {
    'User-Agent': 'Google-Cloud-Scheduler',
    'X-CloudScheduler-JobName': job.id,
    'X-CloudScheduler-ScheduleTime': scheduleTimeHeader(earlier),
  };
  world.time.within(undefined, () => {
    void deliverTo(world, dep, headers, 'scheduler', undefined).catch(
      () => undefined,
    );
  });
}

/**
 * An event that found no running job to aim at looks again ({@link STOLEN_LEASE_LOOK_EVERY_MS}
 * later, with how long it has waited), for a minute at most ({@link STOLEN_LEASE_LOOK_FOR_MS}).
 */
function lookAgain(
  world: World,
  waitedMs: number,
  retry: (waitedMs: number) => void,
): void {
  const waited = waitedMs + STOLEN_LEASE_LOOK_EVERY_MS;
  if (waited <= STOLEN_LEASE_LOOK_FOR_MS) {
    world.time.within(undefined, () =>
      world.time.schedule(() => retry(waited), STOLEN_LEASE_LOOK_EVERY_MS),
    );
  }
}

/** A `near` stolen lease pauses its instance this long before the job's end or note, ms. */
const NEAR_MS = 200;

/** When `exec`'s work is drawn to end (`end`) or its progress note is due (`note`), ms. */
function dueOf(exec: Execution, near: 'end' | 'note'): number | undefined {
  return near === 'end' ? exec.plannedEnd : exec.progressNoteDueAt;
}

/**
 * Pauses `target`'s instance (or, `by: 'hang'`, hangs its connection to Firestore) for a lease
 * and `ms` more, and re-sends its request meanwhile.
 */
function stealFrom(
  world: World,
  dep: Deployment,
  target: { readonly instance: Instance; readonly exec: Execution },
  { ms, by }: Pick<EventOf<'stolen_lease'>, 'ms' | 'by'>,
): void {
  const pausedMs = world.leaseMs + ms;
  if (by === 'hang') {
    hangInstance(world, target.instance, pausedMs);
  } else {
    pauseInstance(world, target.instance, pausedMs);
  }
  const resumesAt = world.time.now + pausedMs;
  world.time.within(undefined, () =>
    world.time.schedule(
      () => resendStolen(world, dep, target, resumesAt, 1),
      world.leaseMs + ms / 2,
    ),
  );
}

/**
 * The running slot execution of `dep` whose end or progress note (`near`) is due first, with a
 * pause {@link NEAR_MS} before it falling from `now` to `before` (ms), with its instance: one that
 * ignores its signal first (it goes on to note after a lapse); `undefined` if none is due then.
 */
function soonestDue(
  dep: Deployment,
  near: 'end' | 'note',
  now: number,
  before: number,
): { readonly instance: Instance; readonly exec: Execution } | undefined {
  const due = runningSlots(dep).filter(({ exec }) => {
    const at = dueOf(exec, near);
    return at !== undefined && at - NEAR_MS >= now && at - NEAR_MS <= before;
  });
  return due.sort(
    (a, b) =>
      Number(b.exec.stubborn === true) - Number(a.exec.stubborn === true) ||
      (dueOf(a.exec, near) ?? 0) - (dueOf(b.exec, near) ?? 0),
  )[0];
}

/** `dep`'s running slot executions (Scheduler delivered them, with a schedule time). */
function runningSlots(
  dep: Deployment,
): { readonly instance: Instance; readonly exec: Execution }[] {
  return dep.instances.flatMap((instance) =>
    [...instance.running]
      .filter((exec) => exec.source === 'scheduler' && exec.kind === 'slot')
      .map((exec) => ({ instance, exec })),
  );
}

/**
 * The running slot execution of `dep` a stolen lease pauses, with its instance: a stubborn one
 * first (it runs on after its signal aborted, so its heartbeat meets the lost lease), then the
 * latest started (the most work left).
 */
function leaseToSteal(
  dep: Deployment,
): { readonly instance: Instance; readonly exec: Execution } | undefined {
  return runningSlots(dep).sort(
    (a, b) =>
      Number(b.exec.stubborn === true) - Number(a.exec.stubborn === true) ||
      b.exec.start - a.exec.start,
  )[0];
}

/**
 * The proxy's retry of a stolen lease's request: to another serving instance (a new one if none),
 * again while it is answered 5xx and the paused one has not resumed (`resumesAt`), `tries` counting.
 */
function resendStolen(
  world: World,
  dep: Deployment,
  { instance, exec }: { readonly instance: Instance; readonly exec: Execution },
  resumesAt: number,
  tries: number,
): void {
  const headers = {
    'User-Agent': 'Google-Cloud-Scheduler',
    'X-CloudScheduler-JobName': exec.jobId,
    'X-CloudScheduler-ScheduleTime': scheduleTimeHeader(exec.scheduleTime),
  };
  const others = dep.instances.filter((i) => i.serving && i !== instance);
  let to = others[Math.floor(world.rng() * others.length)];
  if (to === undefined) {
    to = startInstance(world, dep, dep.revisions.length - 1);
    dep.instances.push(to);
  }
  const again = () => {
    if (tries < STOLEN_LEASE_RESENDS && world.time.now < resumesAt) {
      resendStolen(world, dep, { instance, exec }, resumesAt, tries + 1);
    }
  };
  deliverTo(world, dep, headers, 'scheduler', undefined, undefined, to).then(
    ({ status }) => (status >= 500 ? again() : undefined),
    again,
  );
}

/** How often a stolen lease's event looks again for a running job, ms. */
const STOLEN_LEASE_LOOK_EVERY_MS = 5_000;

/** How many times the proxy sends a stolen lease's request at most, while it is answered 5xx. */
const STOLEN_LEASE_RESENDS = 3;

/**
 * Cloud Scheduler dispatches the job's next slot late: `ms` late, or (`nearAudit`) at the first
 * run audit after the slot's late-run grace, a moment (`ms` thousandths of 5 s) after the audit's
 * time, so its delivery meets the audit's catch-up of the slot.
 */
function lateDelivery(
  world: World,
  dep: Deployment,
  event: EventOf<'late_delivery'>,
): void {
  const job = jobOf(dep, event.job);
  const slot = nextSlotMs(job.schedule, world.time.now);
  if (!event.nearAudit || slot === undefined) {
    dep.scheduler.delayNext(job.id, event.ms);
    return;
  }
  const graceMs = lateGraceMs(job);
  const audit = nextSlotMs(AUDIT_SCHEDULE, slot + graceMs - 1) ?? slot;
  const momentMs = Math.round((event.ms / 1000) * 5) % 5_000;
  dep.scheduler.delayNext(job.id, audit - slot + momentMs);
}

/** A serving instance is told to stop: a new one takes its place while it drains. */
function sigterm(world: World, dep: Deployment, instance: Instance): void {
  if (!instance.serving) {
    return;
  }
  instance.serving = false;
  dep.instances[dep.instances.indexOf(instance)] = startInstance(
    world,
    dep,
    dep.revisions.length - 1,
  );
  world.retired.set(instance.machine, instance);
  terminate(world, dep, instance);
}

/** A Force run in Cloud Scheduler, now or shortly before the job's next slot. */
function force(world: World, dep: Deployment, event: EventOf<'force'>): void {
  const { time } = world;
  const job = jobOf(dep, event.job);
  const fire = () => {
    try {
      dep.scheduler.fire(job.id, {
        withoutScheduleTime: event.withoutScheduleTime === true,
      });
    } catch {
      // The job is not declared (any more): Scheduler has nothing to force.
    }
  };
  const next =
    event.nearSlot === true ? nextSlotMs(job.schedule, time.now) : undefined;
  if (next === undefined) {
    fire();
    return;
  }
  // Within every simulated job's forced-run tolerance (30 s for a per-minute job).
  const early = world.between(1_000, 25_000);
  time.schedule(fire, Math.max(0, next - early - time.now));
}

/**
 * `npm run trigger -- JOB`: a manual run now, or the last trigger sent again (`resend`, with its
 * headers, as a client's retry does); with `whileRunning`, a moment after the job's next slot, as
 * its run starts.
 */
function triggerManual(
  world: World,
  dep: Deployment,
  event: EventOf<'manual'>,
): void {
  const { time } = world;
  const job = jobOf(dep, event.job);
  const send = () => {
    const last = event.resend ? dep.lastTriggerId : undefined;
    const triggerId = last ?? randomId(world.rng);
    const allowOverlap =
      last === undefined ? event.allowOverlap === true : dep.lastTriggerOverlap;
    dep.lastTriggerId = triggerId;
    dep.lastTriggerOverlap = allowOverlap;
    // As ops/trigger.ts sends it: now, to the second, with the trigger headers.
    const headers = schedulerHeaders(
      job.id,
      new Date(Math.floor(time.now / 1000) * 1000),
      {
        [MODE_HEADER]: 'manual',
        [TRIGGER_ID_HEADER]: triggerId,
        ...allowOverlapHeader(allowOverlap),
      },
    );
    void time.within(world.operator, () =>
      deliverTo(world, dep, headers, 'manual', triggerId).catch(() => {}),
    );
  };
  whenAsked(world, job, event.whileRunning, send);
}

/**
 * Two requests shaped as Cloud Scheduler's deliveries of the first deployment's first job whose
 * schedule times it never sends: a slot older than `RETENTION_SECONDS` (its record may be gone, so
 * nothing shows whether it ran) and a slot after the one that follows the forced-run tolerance
 * (docs/how-it-works.md, "Which schedule times a delivery may carry"). Memory store only: the
 * emulator's clock is not the world's.
 */
function sendStrayDeliveries(world: World): void {
  const dep = world.deployments[0];
  if (dep === undefined) {
    return;
  }
  const job = jobOf(dep, 0);
  const now = world.time.now;
  const tooOld = previousSlot(
    job,
    new Date(now - RETENTION_SECONDS * 1000 - STRAY_MARGIN_MS),
  );
  // The latest a delivery may carry is the first slot past now and the tolerance; this is the
  // slot after the first one past a margin longer than any tolerance.
  const [, afterNext] = nextSlots(job, new Date(now + STRAY_MARGIN_MS), 2);
  for (const slot of [tooOld, afterNext]) {
    if (slot === undefined) {
      continue;
    }
    const headers = schedulerHeaders(job.id, slot, {});
    void world.time.within(world.operator, () =>
      deliverTo(world, dep, headers, 'stray', undefined).catch(() => {}),
    );
  }
}

/**
 * How far past each bound a stray delivery's slot lies, ms: beyond the longest forced-run
 * tolerance a history runs with (90 s) and any clock's offset from Firestore's.
 */
const STRAY_MARGIN_MS = 5 * 60_000;

/**
 * Runs `send` now, or with `whileRunning` 2 to 10 s after `job`'s next slot: a person's trigger
 * meeting the run that slot starts (its overlap policy decides).
 */
function whenAsked(
  world: World,
  job: DeclaredJob,
  whileRunning: boolean | undefined,
  send: () => void,
): void {
  const { time } = world;
  const next =
    whileRunning === true ? nextSlotMs(job.schedule, time.now) : undefined;
  if (next === undefined) {
    send();
    return;
  }
  const after = world.between(2_000, 10_000);
  time.schedule(send, Math.max(0, next + after - time.now));
}

/**
 * The header of `npm run trigger -- --allow-overlap` when `allowOverlap`: such a run takes no lock
 * and waits for no other run.
 */
function allowOverlapHeader(
  allowOverlap: boolean | undefined,
): Record<string, string> {
  return allowOverlap === true ? { [ALLOW_OVERLAP_HEADER]: 'true' } : {};
}

/**
 * `npm run trigger -- JOB --rerun`: the job's previous slot run again, or (events at an odd second)
 * the slot before it, more often finished by then, as an operator re-runs a slot that ran.
 */
function triggerRerun(
  world: World,
  dep: Deployment,
  event: EventOf<'rerun'>,
): void {
  const { time } = world;
  const job = jobOf(dep, event.job);
  const send = () => {
    const previous = previousSlot(job, new Date(time.now));
    const oneBack = Math.floor(event.at / 1000) % 2 === 1;
    const slot =
      oneBack && previous !== undefined
        ? previousSlot(job, previous)
        : previous;
    if (slot === undefined || slot.getTime() < world.startMs) {
      return;
    }
    const triggerId = randomId(world.rng);
    const headers = schedulerHeaders(job.id, slot, {
      [MODE_HEADER]: 'rerun',
      [TRIGGER_ID_HEADER]: triggerId,
      ...allowOverlapHeader(event.allowOverlap),
    });
    void time.within(world.operator, () =>
      deliverTo(world, dep, headers, 'rerun', triggerId).catch(() => {}),
    );
  };
  whenAsked(world, job, event.whileRunning, send);
}

/**
 * The operator's backfill now (a `raceCheck` one comes after the drain): planned and delivered,
 * or the last one's requests sent again (`resend`); with `again`, sent once more a while later.
 */
function operatorBackfill(
  world: World,
  dep: Deployment,
  event: EventOf<'backfill'>,
): void {
  const { time } = world;
  const resent = event.resend === true && dep.lastBackfill.length > 0;
  const again = async () => {
    await time.sleep(world.between(0, 60_000));
    await deliverBackfill(world, dep, dep.lastBackfill);
  };
  // Raced with a check, the backfill comes after the drain (below): slots have closed by then.
  if (event.raceCheck === true) {
    return;
  }
  const work = async () => {
    if (resent) {
      await deliverBackfill(world, dep, dep.lastBackfill);
      return;
    }
    await backfill(world, dep, event.raceCheck === true);
    if (event.again === true) {
      await again();
    }
  };
  void time.within(world.operator, () =>
    work().catch((err: unknown) => world.errors.push(err)),
  );
}

/** The latest revision of `dep`. */
function latestRevision(dep: Deployment): Deployment['revisions'][number] {
  return dep.revisions.at(-1) as Deployment['revisions'][number];
}

/** `specs` with the first job's schedule moved on, in a history with schedule changes and the audit. */
function withScheduleChange(
  world: World,
  specs: readonly JobSpec[],
): readonly JobSpec[] {
  const { scheduleChanges, audit } = world.history;
  if (scheduleChanges !== true || audit !== true) {
    return specs;
  }
  return specs.map((s, i) =>
    i === 0 ? { ...s, schedule: nextScheduleOf(s.schedule) } : s,
  );
}

/** `specs` with job `index`'s overlap policy set to `overlap`. */
function withOverlap(
  specs: readonly JobSpec[],
  index: number,
  overlap: OverlapPolicy,
): JobSpec[] {
  return specs.map((s, i) => (i === index ? { ...s, overlap } : s));
}

/**
 * The `redeploy` event: a job dropped, or the first job's overlap or retry settings changed; and, in
 * a history with schedule changes and the run audit, the first job's schedule moved on
 * ({@link nextScheduleOf}).
 */
function redeploy(
  world: World,
  dep: Deployment,
  event: EventOf<'redeploy'>,
): void {
  const specs = withScheduleChange(world, latestRevision(dep).specs);
  const rollout = event.rolling ? 'rolling' : 'at_once';
  if (event.change === 'drop_last_job') {
    if (specs.length >= 2) {
      deployRevision(world, dep, specs.slice(0, -1), rollout);
    }
    return;
  }
  if (event.change === 'retry_longer') {
    const longer = specs.map((s, i) => (i === 0 ? longerRetries(s) : s));
    deployRevision(world, dep, longer, rollout);
    return;
  }
  const overlap = event.change === 'overlap_skip' ? 'skip' : 'allow';
  deployRevision(world, dep, withOverlap(specs, 0, overlap), rollout);
}

/**
 * How a new revision takes the traffic: `at_once` (the old instances retired at once), `rolling`
 * (beside the old ones for a minute, then those are retired), `draining` (all new requests go to
 * the new revision; each old instance gets SIGTERM once its requests are done, as Cloud Run
 * shuts down a revision that lost its traffic).
 */
type Rollout = 'at_once' | 'rolling' | 'draining';

/** A new revision of `dep` declaring `specs`: new instances, the old ones retired by `rollout`. */
function deployRevision(
  world: World,
  dep: Deployment,
  specs: readonly JobSpec[],
  rollout: Rollout,
): void {
  const { time } = world;
  dep.revisions.push(revisionOf(world, dep, specs));
  const revision = dep.revisions.length - 1;
  const old = dep.instances;
  dep.instances = old.map(() => startInstance(world, dep, revision));
  if (rollout === 'rolling') {
    dep.instances.push(...old);
    const retire = () => retireInstances(world, dep, old);
    time.within(undefined, () => time.schedule(retire, 60_000));
  } else if (rollout === 'draining') {
    for (const instance of old) {
      drainThenStop(world, dep, instance);
    }
  } else {
    retireInstances(world, dep, old);
  }
  dep.scheduler.setJobs(latestRevision(dep).served);
}

/** How often a draining instance is looked at, and how long it may drain at most, virtual ms. */
const DRAIN_POLL_MS = 1_000;
const DRAIN_AT_MOST_MS = 10 * 60_000;

/**
 * Takes `instance` out of the traffic at once, and terminates it once it runs no job and answers
 * no request (or after {@link DRAIN_AT_MOST_MS}).
 */
function drainThenStop(
  world: World,
  dep: Deployment,
  instance: Instance,
): void {
  if (!instance.serving) {
    return;
  }
  const { time } = world;
  instance.serving = false;
  world.retired.set(instance.machine, instance);
  const stopBy = time.now + DRAIN_AT_MOST_MS;
  const look = () => {
    const idle = instance.running.size === 0 && instance.pending.size === 0;
    if (idle || time.now >= stopBy) {
      terminate(world, dep, instance);
    } else {
      time.within(undefined, () => time.schedule(look, DRAIN_POLL_MS));
    }
  };
  look();
}

/** How often a deploy waiting for a run looks again, and for how long at most, virtual ms. */
const DURING_RUN_POLL_MS = 1_000;
const DURING_RUN_WAIT_MS = 15 * 60_000;

/**
 * How far ahead the job's next slot must be for the deploy during its run: beyond the next look,
 * and near, so that a run drawn to outlast it is found soon.
 */
const DURING_RUN_NEXT_SLOT_MS = { min: 2_000, max: 50_000 } as const;

/** How long the run must be drawn to go on past its job's next slot, ms: past its delivery. */
const DURING_RUN_OUTLASTS_MS = 10_000;

/**
 * The `guard_during_run` event: the job is deployed as `allow` first if it is not (at once); once
 * a run of it executes on that revision, drawn to outlast its next slot under a minute away, a
 * deploy gives it the event's `skip` or `wait`, the old instances draining. The new revision's
 * instances then take the next slot while the old revision's run, which took no lock, executes. Gives up after
 * {@link DURING_RUN_WAIT_MS}.
 */
function guardDuringRun(
  world: World,
  dep: Deployment,
  event: EventOf<'guard_during_run'>,
): void {
  const { time } = world;
  const { specs } = latestRevision(dep);
  const index = Math.min(event.job, specs.length - 1);
  if (specs[index]?.overlap !== 'allow') {
    deployRevision(world, dep, withOverlap(specs, index, 'allow'), 'at_once');
  }
  const allowing = dep.revisions.length - 1;
  const giveUpAt = time.now + DURING_RUN_WAIT_MS;
  const look = () => {
    if (dep.revisions.length - 1 !== allowing) {
      return; // another deploy came first: its revision is not the one waited on
    }
    if (runsBeforeItsNextSlot(world, dep, index)) {
      const { specs: now } = latestRevision(dep);
      const guarded = withOverlap(now, index, event.overlap);
      deployRevision(world, dep, guarded, 'draining');
    } else if (time.now < giveUpAt) {
      time.within(undefined, () => time.schedule(look, DURING_RUN_POLL_MS));
    }
  };
  look();
}

/**
 * Whether job `index` of `dep`'s latest revision has its previous slot's run executing on that
 * revision now, drawn to go on past its next slot (croner's, from the job's schedule), which is
 * {@link DURING_RUN_NEXT_SLOT_MS} away.
 */
function runsBeforeItsNextSlot(
  world: World,
  dep: Deployment,
  index: number,
): boolean {
  const latest = dep.revisions.length - 1;
  const revision = latestRevision(dep);
  const id = revision.specs[index]?.id;
  const job = revision.jobs.find((j) => j.id === id);
  if (job === undefined) {
    return false;
  }
  const running = world.executions.filter(
    (e) =>
      e.deployment === dep.index &&
      e.revision === latest &&
      e.jobId === job.id &&
      e.kind === 'slot' &&
      e.result === 'running',
  );
  if (running.length === 0) {
    return false; // nothing to outlast: croner's searches below cost most of this poll
  }
  const now = world.time.now;
  const cron = new Cron(job.schedule, { timezone: job.timeZone ?? 'UTC' });
  const next = cron.nextRun(new Date(now));
  const previous = next === null ? undefined : cron.previousRuns(1, next)[0];
  if (next === null || previous === undefined) {
    return false;
  }
  const inMs = next.getTime() - now;
  // The run of the slot before the next: the one a guarded slot's run must not start beside.
  const outlasting = running.some(
    (e) =>
      e.scheduleTime === previous.getTime() &&
      (e.plannedEnd ?? 0) > next.getTime() + DURING_RUN_OUTLASTS_MS,
  );
  return (
    outlasting &&
    inMs >= DURING_RUN_NEXT_SLOT_MS.min &&
    inMs <= DURING_RUN_NEXT_SLOT_MS.max
  );
}

/** Stops routing to `old` instances of `dep`, and terminates those still serving. */
function retireInstances(
  world: World,
  dep: Deployment,
  old: readonly Instance[],
): void {
  for (const instance of old) {
    if (!instance.serving) {
      continue;
    }
    instance.serving = false;
    world.retired.set(instance.machine, instance);
    terminate(world, dep, instance);
  }
  dep.instances = dep.instances.filter((i) => !old.includes(i));
}

/** Runs virtual time on from `fromMs` a minute at a time (30 at most) while a request is open. */
async function untilRequestsEnd(
  world: World,
  fromMs: number,
  marginMs: number,
): Promise<number> {
  const open = () => world.deliveries.some((d) => d.endedAt === undefined);
  let atMs = fromMs;
  for (let minutes = 0; minutes < 30 && open(); minutes++) {
    atMs += 60_000;
    await world.time.run(atMs);
  }
  if (atMs === fromMs) {
    return fromMs;
  }
  await world.time.run(atMs + 2 * marginMs);
  return atMs + 2 * marginMs;
}

/** Starts every Cloud Scheduler, plays the history's events at their times, then stops them. */
async function playEvents(world: World): Promise<void> {
  const { time, deployments } = world;
  time.within(undefined, () => {
    for (const dep of deployments) {
      dep.scheduler.start();
    }
  });
  if (world.history.strayDeliveries === true && world.db === undefined) {
    const halfway = world.startMs + world.history.spanMs / 2;
    time.within(undefined, () =>
      time.schedule(() => sendStrayDeliveries(world), halfway - time.now),
    );
  }
  for (const event of world.history.events) {
    await time.run(world.startMs + event.at);
    time.within(undefined, () => apply(world, event));
  }
  await time.run(world.stopMs);
  time.within(undefined, () => {
    for (const dep of deployments) {
      dep.scheduler.stop();
    }
  });
}

/**
 * Runs until every attempt in flight ended: the longest job, a lease to lapse, and the retries'
 * reads, counted from the last resumed pause too (a paused instance carries on where it stopped).
 * Returns when, ms.
 */
async function drain(world: World): Promise<number> {
  const { history, startMs, stopMs } = world;
  const longest = Math.max(...history.jobs.map((j) => j.maxMs));
  const resumedMs = Math.max(
    stopMs,
    ...history.events.map((e) => pauseEndMs(e, startMs, world.leaseMs)),
  );
  const drainedMs = resumedMs + longest + 2 * world.leaseMs + 120_000;
  await world.time.run(drainedMs);
  return drainedMs;
}

/**
 * The operator backfills once every slot has closed, while a check of the same slots runs (the
 * `raceCheck` backfills); runs until they ended, then a lease more. Returns when, ms.
 */
async function raceBackfills(world: World, drainedMs: number): Promise<number> {
  const { time } = world;
  let racing = 0;
  for (const event of world.history.events) {
    const dep = world.deployments[event.deployment];
    if (
      event.type !== 'backfill' ||
      event.raceCheck !== true ||
      dep === undefined
    ) {
      continue;
    }
    racing++;
    // Sent again once they ended (`again`): the same requests meet the runs they completed.
    const resend = () =>
      event.again === true
        ? deliverBackfill(world, dep, dep.lastBackfill)
        : undefined;
    void time.within(world.operator, () =>
      backfill(world, dep, true)
        .then(resend)
        .catch((err: unknown) => world.errors.push(err))
        .finally(() => racing--),
    );
  }
  let racedMs = drainedMs;
  for (let minutes = 0; minutes < 30 && racing > 0; minutes++) {
    racedMs += 60_000;
    await time.run(racedMs);
  }
  if (racedMs > drainedMs) {
    racedMs += world.leaseMs;
    await time.run(racedMs);
  }
  return racedMs;
}

/**
 * The final missed-run check on the auditor's machine (with `twinFinalChecks`, on the operator's
 * at the same moment too, as the run audit and a job's due delivery meet at an hour: two checks
 * racing for each report, relog and cursor); after an instance died, which may have written a
 * report it never logged shortly before the final check (which leaves a young one to its writer),
 * or after twin checks, a later check on the operator's, as the job's next due delivery would run
 * it.
 */
async function finalAudits(world: World, finalMs: number): Promise<void> {
  const { time } = world;
  let auditError: unknown;
  const awaitAudit = async (audits: Promise<unknown>, untilMs: number) => {
    audits.then(
      (results) => {
        if (process.env.SIM_DEBUG === 'audit') {
          console.log('audit', results);
        }
      },
      (err: unknown) => {
        auditError ??= err;
      },
    );
    await time.run(untilMs);
  };
  const first =
    world.history.twinFinalChecks === true
      ? Promise.all([
          finalAudit(world, world.auditor),
          finalAudit(world, world.operator),
        ])
      : finalAudit(world, world.auditor);
  await awaitAudit(first, finalMs + 120_000);
  // Twin checks that raced keep each cursor at the slot raced for, and a faulty check at the
  // first report it could not settle: a later check passes it.
  if (hasLaterCheck(world.history, world.deaths.length > 0)) {
    await time.run(finalMs + LATER_CHECK_MS);
    await awaitAudit(
      finalAudit(world, world.operator),
      finalMs + LATER_CHECK_MS + 120_000,
    );
  }
  if (auditError !== undefined) {
    world.errors.push(auditError);
  }
}

/**
 * Whether a later check follows the final one: after a death (a report its writer never logged),
 * twin checks (a raced cursor) or a faulty check (reports it could not settle).
 */
export function hasLaterCheck(
  history: Pick<History, 'twinFinalChecks' | 'faultyFinalCheck'> | undefined,
  died: boolean,
): boolean {
  return (
    died ||
    history?.twinFinalChecks === true ||
    history?.faultyFinalCheck === true
  );
}

/**
 * The final missed-run check of every job each deployment ever declared, as an instance of the
 * last revision would run it, on `machine`.
 */
function finalAudit(world: World, machine: MachineClock) {
  const deployments = world.db === undefined ? world.deployments : [];
  return world.time.within(machine, () =>
    Promise.all(
      deployments.flatMap((dep) => auditDeployment(world, dep, machine)),
    ),
  );
}

/**
 * The final checks of `dep`: one per job it ever declared. Their lines name the machine
 * (`d0-auditor`, `d0-operator`), as its death ({@link Death}) does.
 */
function auditDeployment(world: World, dep: Deployment, machine: MachineClock) {
  const stores = storesOf(world, dep.config);
  const check = new MissedRunCheck({
    history: stores.history,
    jobDocuments: stores.jobDocuments,
    clock: () => stores.documents.serverTime(),
    forcedRunToleranceMs: dep.config.forcedRunToleranceMs,
  });
  const logger = loggerFor(world, `d${dep.index}-${machine.name}`);
  const seen = new Map<string, DeclaredJob>();
  for (const revision of dep.revisions) {
    for (const job of revision.jobs) {
      seen.set(job.id, job);
    }
  }
  return [...seen.values()].map(async (job) => {
    // Each check reads at most MAX_CHECK_SLOTS slots: check again, as later due
    // deliveries would, until the cursor reaches the closed boundary.
    for (let round = 0; round < 10; round++) {
      const result = await check
        .check(job, dep.keyScope, logger)
        .catch((err: unknown) => failedFinalCheck(world, machine, err));
      if (result === undefined || result.checked < MAX_CHECK_SLOTS) {
        return result;
      }
    }
    return undefined;
  });
}

/**
 * A final check that threw: Firestore's failure a faulty final check meets is what the run audit
 * would log and leave to the next check (src/policy/run-audit.ts); anything else is thrown on.
 */
function failedFinalCheck(
  world: World,
  machine: MachineClock,
  err: unknown,
): undefined {
  const faulty =
    machine === world.auditor && world.history.faultyFinalCheck === true;
  if (faulty && err instanceof LedgerUnavailableError) {
    return undefined;
  }
  throw err;
}

/** What the store holds at the end: run records and their create times, job documents. */
interface StoredDocuments {
  readonly records: Map<string, Record<string, unknown>>;
  readonly createTimes: Map<string, number>;
  readonly jobDocuments: Map<string, Record<string, unknown>>;
}

/** Reads every run record (and, in memory, every job document) the history left. */
async function storedDocuments(world: World): Promise<StoredDocuments> {
  const { collection, memory } = world;
  const stored: StoredDocuments = {
    records: new Map(),
    createTimes: new Map(),
    jobDocuments: new Map(),
  };
  if (memory !== undefined) {
    const jobState = jobStateCollection(collection);
    for (const [path, doc] of memory.dump()) {
      if (path.startsWith(`${jobState}/`)) {
        stored.jobDocuments.set(path.slice(jobState.length + 1), doc.data);
      }
      if (!path.startsWith(`${collection}/`)) {
        continue;
      }
      const id = path.slice(collection.length + 1);
      stored.records.set(id, doc.data);
      stored.createTimes.set(id, doc.createTime.toMillis());
    }
    return stored;
  }
  world.time.uninstall();
  const snap = await world.store.collection(collection).get();
  for (const doc of snap.docs) {
    stored.records.set(doc.id, doc.data());
    stored.createTimes.set(doc.id, doc.createTime.toMillis());
  }
  return stored;
}

/** Marks each execution whose completion landed, answered or not. */
function noteLandedCompletions(world: World): void {
  for (const exec of world.executions) {
    if (world.completedAttempts.has(exec.attemptId)) {
      exec.completionLanded = true;
    }
  }
}

/** What the played history left, for the invariants. */
function outcomeOf(
  world: World,
  finalMs: number,
  stored: StoredDocuments,
): SimOutcome {
  const { deployments } = world;
  return {
    history: world.history,
    gaps: world.gaps,
    emulator: world.db !== undefined,
    startMs: world.startMs,
    stopMs: world.stopMs,
    finalMs,
    executions: world.executions,
    logs: world.logs,
    // The run audit's own deliveries are the environment's checks, not a job's runs.
    answers: world.answers.filter((a) => a.jobId !== AUDIT_JOB_ID),
    deliveries: world.deliveries.filter((d) => d.jobId !== AUDIT_JOB_ID),
    auditDeliveries: world.deliveries.filter((d) => d.jobId === AUDIT_JOB_ID),
    catchUps: world.catchUps,
    operatorPauses: world.operatorPauses,
    foreignWrites: world.foreignWrites,
    leaseEnds: world.leaseEnds,
    attemptWrites: sentTimes(world.attemptWriteSpans),
    attemptWriteSpans: world.attemptWriteSpans,
    checkReads: world.checkReads,
    checkReports: world.checkReports,
    recordWrites: world.recordWrites,
    checkDocumentWrites: world.checkDocumentWrites,
    troubledOps: world.troubledOps,
    crashesAfterWrite: world.crashesAfterWrite,
    deaths: world.deaths,
    instancePauses: world.instancePauses,
    foreignPauses: world.foreignPauses,
    foreignCursors: world.foreignCursors,
    foreignRecords: world.foreignRecords,
    malformedLocks: world.malformedLocks,
    jobDocuments: stored.jobDocuments,
    schedulerAttempts: deployments.map((d) =>
      d.scheduler.attempts.filter((a) => a.jobId !== AUDIT_JOB_ID),
    ),
    firestoreTimeoutMs: world.firestoreTimeoutMs,
    deployments: deployments.map((d) => ({
      scope: d.scope,
      keyScope: d.keyScope,
      revisions: d.revisions.map((r) => ({ at: r.at, jobs: r.jobs })),
    })),
    records: stored.records,
    createTimes: stored.createTimes,
    errors: world.errors,
    leaseMs: world.leaseMs,
    forcedRunToleranceMs: configOf(world, '').forcedRunToleranceMs,
    retentionProbes: world.retentionProbes,
  };
}

/**
 * The logged write a commit made to a run record (`before` → `after`), if any: a claim (the record
 * `in_progress` under a new attempt), a completion, or a report (a new `reported_at`, or a new
 * `relog_by`: a check's claim to log it again). Judged on
 * the stored fields, not on which product call wrote them.
 */
export function loggedWriteOf(
  before: DocumentData | undefined,
  after: DocumentData | undefined,
): LoggedWrite | undefined {
  if (after === undefined) {
    return undefined;
  }
  if (
    after.status === 'in_progress' &&
    after.attempt_id !== before?.attempt_id
  ) {
    return 'claim';
  }
  if (after.status === 'completed' && before?.status !== 'completed') {
    return 'completion';
  }
  const reportedAt = (data: DocumentData | undefined) =>
    data?.reported_at instanceof Timestamp
      ? data.reported_at.toMillis()
      : undefined;
  const reported = reportedAt(after);
  if (reported !== undefined && reported !== reportedAt(before)) {
    return 'report';
  }
  // A check's claim to log a report again (`relog_by`): its line comes after it, too.
  if (
    typeof after.relog_by === 'string' &&
    after.relog_by !== before?.relog_by
  ) {
    return 'report';
  }
  return undefined;
}

/**
 * `report` if a commit to a job's document wrote a pause's overdue report (an
 * `overdue_reported_at` its pause did not have): its log line comes after it.
 */
export function overdueReportOf(
  before: DocumentData | undefined,
  after: DocumentData | undefined,
): LoggedWrite | undefined {
  const reported = (data: DocumentData | undefined) =>
    Array.isArray(data?.pauses)
      ? (data.pauses as DocumentData[]).filter(
          (p) => p.overdue_reported_at instanceof Timestamp,
        ).length
      : 0;
  return reported(after) > reported(before) ? 'report' : undefined;
}

/** A trigger id as ops/trigger.ts makes one (a UUID's shape), from the seeded PRNG. */
function randomId(rng: () => number): string {
  const hex = () => Math.floor(rng() * 16).toString(16);
  const part = (n: number) => Array.from({ length: n }, hex).join('');
  return `${part(8)}-${part(4)}-${part(4)}-${part(4)}-${part(12)}`;
}
