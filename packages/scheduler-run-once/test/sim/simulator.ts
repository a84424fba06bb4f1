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
import { type DocumentData, type Firestore, Timestamp } from '@google-cloud/firestore';
import { planBackfill } from '../../ops/backfill.ts';
import { schedulerHeaders } from '../../ops/deliver.ts';
import { recordPause, recordResume } from '../../ops/pause-records.ts';
import { scopeOf } from '../../ops/scope-args.ts';
import { readHistory } from '../../ops/slot-history.ts';
import type { JobRun } from '../../src/core/job-context.ts';
import { RunLedger } from '../../src/core/ledger.ts';
import { RunDocuments } from '../../src/core/run-documents.ts';
import type { Scope } from '../../src/core/run-key.ts';
import { type Config, loadConfig } from '../../src/function/config.ts';
import { createScheduledJobHandler } from '../../src/function/handler.ts';
import { createLogger } from '../../src/function/logger.ts';
import {
  BACKFILL_HEADER,
  MODE_HEADER,
  TRIGGER_ID_HEADER,
} from '../../src/function/scheduler-request.ts';
import { GracefulShutdown } from '../../src/function/shutdown.ts';
import { type DeclaredJob, defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { jobStateCollection } from '../../src/policy/job-state.ts';
import { checkDocumentId } from '../../src/policy/missed-run-cursor.ts';
import { MAX_CHECK_SLOTS, MissedRunCheck } from '../../src/policy/missed-runs.ts';
import { RunHistory } from '../../src/policy/run-history.ts';
import { previousSlot, slotsBetween } from '../../src/policy/schedule.ts';
import {
  asFirestore,
  GrpcCode,
  MemoryFirestore,
  type OpInfo,
  type OpPlan,
} from '../../src/testing/memory-firestore.ts';
import { CloudScheduler, nextSlotMs, type SchedulerAttempt } from './cloud-scheduler.ts';
import {
  type ForeignStore,
  repairLockHolder,
  writeForeignLock,
  writeForeignRecord,
} from './foreign-writes.ts';
import { type Gaps, type History, type JobSpec, KNOWN_GAPS, type SimEvent } from './model.ts';
import { realStore } from './real-store.ts';
import { EPOCH_MS, type MachineClock, VirtualTime } from './virtual-time.ts';

/** Where a delivery came from: what the simulated world meant it to be. */
export type Source = 'scheduler' | 'force' | 'manual' | 'rerun' | 'backfill';

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
  readonly start: number;
  end: number | undefined;
  result: 'running' | 'returned' | 'threw' | 'crashed';
  /**
   * It returned or threw, but its instance crashed before the delivery's answer: its completion or
   * release may not have landed.
   */
  crashedBeforeAnswer?: boolean;
  /** Then, when its instance died, ms: its heartbeat may have extended its lease until then. */
  diedAt?: number;
  /** Its `ctx.note` of {@link START_NOTE} was answered: the note is in its run's record. */
  noted?: boolean;
  /** The error's name when its `ctx.note` was refused. */
  noteRefused?: string;
  /** Its completion was written to the store (memory store only), answered or not. */
  completionLanded?: boolean;
  /** How long its instance was paused while it ran, ms. */
  pausedMs: number;
}

/** One JSON log line, with the virtual time and instance it came from. */
export interface LogLine {
  readonly at: number;
  readonly instance: string;
  readonly level: string;
  readonly message: string;
  readonly fields: Readonly<Record<string, unknown>>;
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
}

/** An operator's pause of a job, from the time its pause recorded to the time its resume recorded, ms. */
export interface OperatorPause {
  readonly deployment: number;
  readonly jobId: string;
  readonly from: number;
  to: number;
}

/** One landed write of an attempt's lease: when it landed and until when it leased the run, ms. */
export interface LeaseEnd {
  readonly landedAt: number;
  readonly expires: number;
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
export interface CrashAfterWrite {
  readonly at: number;
  readonly instance: string;
  readonly write: LoggedWrite;
  readonly path: string;
}

/** A write whose log line comes after its answer: its instance may die between the two. */
export type LoggedWrite = 'claim' | 'completion' | 'report';

/** A run record another version wrote, or a lock's holder it named. */
export interface ForeignRecord {
  readonly at: number;
  readonly deployment: number;
  readonly jobId: string;
  /**
   * `unknown_status`: a status this version does not know; `extra_fields`: fields it never
   * writes; `absent`: a lock's holder never recorded; `repaired`: this version's record of a dead
   * holder, deleted by a `repair`.
   */
  readonly kind: 'unknown_status' | 'extra_fields' | 'absent' | 'repaired';
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
  /** Completions, extensions and releases that landed on a record naming another attempt. */
  readonly foreignWrites: readonly ForeignWrite[];
  /**
   * When each attempt's lease ended, by the writes of it that landed (claims, takeovers,
   * extensions, notes: `leased_at` + `lease_ms`), in the order they landed (memory store only).
   */
  readonly leaseEnds: ReadonlyMap<string, readonly LeaseEnd[]>;
  /** The instances that died right after a logged write landed (`crashAfterWrite`). */
  readonly crashesAfterWrite?: readonly CrashAfterWrite[];
  /** Every job document at the end (cursors, pauses, locks), by id (memory store only). */
  readonly jobDocuments?: ReadonlyMap<string, Readonly<Record<string, unknown>>>;
  /** The records and locks another version wrote (`foreign_record`, `foreign_lock`), by run id. */
  readonly foreignRecords?: ReadonlyMap<string, ForeignRecord>;
  /** Every request made to the function, answered or not. */
  readonly deliveries: readonly Delivered[];
  /** `FIRESTORE_TIMEOUT_SECONDS` of every deployment, ms. */
  readonly firestoreTimeoutMs: number;
  /** Each deployment's scope (as run ids have it), jobs per revision and when each revision came. */
  readonly deployments: readonly {
    readonly scope: string;
    readonly keyScope: Scope;
    readonly revisions: readonly { readonly at: number; readonly jobs: readonly DeclaredJob[] }[];
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
/** How late a raced check's read is answered (a backfill's claims land meanwhile), ms. */
const RACED_READ_MS = 5_000;
/**
 * Two hours: beyond every generated retry window (< 15 min) and beyond the final check, which comes
 * at most about 80 minutes after a history's first slot (a 14-minute span, the drain, up to 30
 * minutes of open requests, a later check); older slots are out of the check's range, by design.
 * It also bounds the missed-run check's first look-back to 120 slots, not a day's.
 */
const RETENTION_SECONDS = 7200;

/**
 * When the check after the final one comes (after an instance died), ms after the final check:
 * the model's cadence of checks, the job's next due delivery (hourly in production, sooner here).
 */
const LATER_CHECK_MS = 5 * 60_000;

/** A seeded PRNG (mulberry32): the simulator's only randomness. */
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
  readonly source: Source;
  readonly triggerId: string | undefined;
  readonly deployment: number;
  readonly revision: number;
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
}

interface Deployment {
  readonly index: number;
  readonly scope: string;
  readonly keyScope: Scope;
  readonly config: Config;
  readonly revisions: { at: number; specs: readonly JobSpec[]; jobs: readonly DeclaredJob[] }[];
  instances: Instance[];
  scheduler: CloudScheduler;
  lastTriggerId: string | undefined;
  /** The last backfill's requests, for an operator who sends them again. */
  lastBackfill: readonly Readonly<Record<string, string>>[];
  /** Until when Cloud Scheduler cannot reach the function, ms. */
  outageUntil: number;
}

/** The minimal request the handler reads: method, headers (raw and by name), url. */
function request(headers: Readonly<Record<string, string>>) {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
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
  const gaps = options.gaps ?? KNOWN_GAPS;
  const rng = random(history.seed);
  const between = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
  // On the emulator, whose clock is real, the history happens half an hour ago: every slot is
  // in the past (within the retention) for the server, however fast virtual time runs.
  const time = new VirtualTime(
    db === undefined ? EPOCH_MS : Math.floor((Date.now() - 1_800_000) / 60_000) * 60_000,
  );
  const startMs = time.now;
  const executions: Execution[] = [];
  const logs: LogLine[] = [];
  const answers: Answered[] = [];
  const deliveries: Delivered[] = [];
  const errors: unknown[] = [];
  const requests = new AsyncLocalStorage<RequestContext>();
  const leaseMs = history.leaseSeconds * 1000;
  const collection = db === undefined ? COLLECTION : `sim_${randomUUID()}`;
  const completedAttempts = new Set<string>();
  const operator: MachineClock = { name: 'operator', offsetMs: 0, pausedUntil: 0, dead: false };
  /**
   * The instance that runs the final missed-run check: no Firestore fault reaches it, but it may
   * die right after a report it writes (`crashAfterWrite`), as the audit did; the check
   * after it (on the operator's machine) then finds the report unlogged.
   */
  const auditor: MachineClock = { name: 'auditor', offsetMs: 0, pausedUntil: 0, dead: false };

  const firestoreTimeoutMs = (history.firestoreTimeoutSeconds ?? 10) * 1000;
  const foreignWrites: ForeignWrite[] = [];
  const leaseEnds = new Map<string, LeaseEnd[]>();
  /** Notes the lease an `in_progress` record's landed write gives its attempt. */
  const noteLease = (after: Readonly<Record<string, unknown>> | undefined) => {
    if (after?.status !== 'in_progress' || typeof after.attempt_id !== 'string') {
      return;
    }
    const leasedAt = after.leased_at as { toMillis?: () => number } | undefined;
    const leaseMs = Number(after.lease_ms);
    if (typeof leasedAt?.toMillis !== 'function' || !Number.isFinite(leaseMs)) {
      return;
    }
    const list = leaseEnds.get(after.attempt_id) ?? [];
    list.push({ landedAt: time.now, expires: leasedAt.toMillis() + leaseMs });
    leaseEnds.set(after.attempt_id, list);
  };
  const operatorPauses: OperatorPause[] = [];
  /**
   * A completion, extension or release by an attempt that landed on its run's record while the
   * record named another attempt (a claim, which names its own attempt, is never one).
   */
  const foreignWrite = (
    path: string,
    before: Readonly<Record<string, unknown>> | undefined,
    after: Readonly<Record<string, unknown>> | undefined,
  ): ForeignWrite | undefined => {
    const writer = requests.getStore()?.attempt;
    if (writer?.id === undefined || path !== `${collection}/${writer.runId}`) {
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
      at: time.now,
      runId: String(writer.runId),
      writer: writer.id,
      holder: String(before.attempt_id),
      status: `${String(before.status)} → ${String(after.status)}`,
    };
  };
  const crashesAfterWrite: CrashAfterWrite[] = [];
  const foreignRecords = new Map<string, ForeignRecord>();
  /** Each instance by its machine, with its deployment: the one a `crashAfterWrite` kills. */
  const instanceOf = new Map<MachineClock, { dep: Deployment; instance: Instance }>();
  /** How many instances died (crashed, or killed after SIGTERM): a report may be left unlogged. */
  let deaths = 0;
  /**
   * The `crashAfterWrite` fault: the instance whose logged write ({@link loggedWriteOf}) this is
   * dies as it lands, before the answer reaches it: its timers never fire again, so the log line
   * that would report the write never comes and its requests are never answered.
   */
  const dieAfterLoggedWrite = (
    path: string,
    before: DocumentData | undefined,
    after: DocumentData | undefined,
  ): void => {
    const chance = history.crashAfterWrite ?? 0;
    const jobState = path.startsWith(`${jobStateCollection(collection)}/`);
    if (chance === 0 || !(path.startsWith(`${collection}/`) || jobState)) {
      return;
    }
    const write = jobState ? overdueReportOf(before, after) : loggedWriteOf(before, after);
    const machine = time.current;
    const owner = machine === undefined ? undefined : instanceOf.get(machine);
    const dies = owner !== undefined || machine === auditor;
    if (write === undefined || machine === undefined || !dies || machine.dead) {
      return;
    }
    if (rng() >= chance) {
      return;
    }
    crashesAfterWrite.push({ at: time.now, instance: machine.name, write, path });
    if (owner !== undefined) {
      crash(owner.dep, owner.instance);
    } else {
      machine.dead = true; // the auditor: its checks stop where they are
      deaths++;
    }
  };
  /** A record a `repair` deleted, written again (a later claim of its run): its holder is back. */
  const noteRevived = (path: string, after: DocumentData | undefined): void => {
    const repaired = foreignRecords.get(path.slice(collection.length + 1));
    if (repaired?.deletedAt !== undefined && after !== undefined) {
      repaired.revivedAt ??= time.now;
    }
  };
  /** Until when each instance's connection to Firestore hangs (a `hang` event), by machine. */
  const hangingUntil = new Map<MachineClock, number>();
  const isWrite = (op: OpInfo) =>
    op.kind === 'create' || op.kind === 'update' || op.kind === 'commit' || op.kind === 'delete';

  /**
   * One Firestore operation's latency and fault, from the seeded PRNG. The operator's reads
   * (backfill's) and the final audit see no faults.
   */
  const planOperation = (op: OpInfo): OpPlan => {
    const [lo, hi] = history.latency;
    const plan: OpPlan = { beforeMs: between(lo, hi), afterMs: between(lo, hi) };
    const machine = time.current;
    if (machine === operator || machine === auditor) {
      return plan;
    }
    // A hanging connection: sent, never reaches the server, never answered.
    if (machine !== undefined && time.now < (hangingUntil.get(machine) ?? 0)) {
      return { ...plan, fail: GrpcCode.UNAVAILABLE, hang: true };
    }
    // Only histories with late answers draw for them: recorded histories replay as they did.
    const late = history.lateAnswers ?? 0;
    if (late > 0 && isWrite(op) && rng() < late) {
      return lateAnswer(plan);
    }
    if (rng() >= history.faultRate) {
      return plan;
    }
    const fault = rng();
    if (fault < 0.35) {
      return { ...plan, fail: GrpcCode.UNAVAILABLE };
    }
    if (fault < 0.7) {
      return { ...plan, lose: GrpcCode.UNAVAILABLE };
    }
    if (fault < 0.85) {
      return { ...plan, afterMs: firestoreTimeoutMs + 5_000 };
    }
    // The client retries a commit on UNAVAILABLE: a landed write sent again (a create, a
    // fenced update, a guarded batch) answers a conflict.
    if (isWrite(op) && !gaps.retriedCreate) {
      return { ...plan, retry: true };
    }
    return { ...plan, lose: GrpcCode.DEADLINE_EXCEEDED };
  };

  /**
   * A write that lands and whose answer comes after the client's deadline, or never: the client
   * rejects (LedgerUnavailableError) while the write has landed.
   */
  const lateAnswer = (plan: OpPlan): OpPlan => {
    if (rng() < 0.5) {
      return { ...plan, hang: true };
    }
    return { ...plan, afterMs: firestoreTimeoutMs + between(1, 2 * firestoreTimeoutMs) };
  };

  const memory =
    db === undefined
      ? new MemoryFirestore({
          now: () => time.now,
          sleep: (ms) => time.sleep(ms),
          dropPreconditions: options.brokenFencing === true,
          landed: (path, before, after) => {
            noteLease(after);
            const foreign = foreignWrite(path, before, after);
            if (foreign !== undefined) {
              foreignWrites.push(foreign);
            }
            dieAfterLoggedWrite(path, before, after);
            noteRevived(path, after);
          },
          // Which attempts' completions landed, answered or not (a crash may lose the answer).
          committed: (_path, data) => {
            if (data.status === 'completed' && typeof data.attempt_id === 'string') {
              completedAttempts.add(data.attempt_id);
            }
          },
          plan: (op): OpPlan => planOperation(op),
        })
      : undefined;
  const store: Firestore =
    db === undefined ? asFirestore(memory as MemoryFirestore) : realStore(db, time);

  const configOf = (scope: string): Config =>
    loadConfig({
      NODE_ENV: 'test',
      EXPOSE_ERRORS: 'true',
      LOG_LEVEL: 'info',
      LEASE_SECONDS: String(history.leaseSeconds),
      RETENTION_SECONDS: String(RETENTION_SECONDS),
      FIRESTORE_TIMEOUT_SECONDS: String(firestoreTimeoutMs / 1000),
      RUNS_COLLECTION: collection,
      MISSED_RUN_CHECK: db === undefined ? 'on' : 'off',
      ...(scope === '' ? {} : { RUN_KEY_SCOPE: scope }),
    });

  // One pino logger (its set-up is costly); each instance logs through a child naming it.
  const baseLogger = createLogger(
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
  const loggerFor = (name: string, _config: Config) => baseLogger.child({ simInstance: name });

  const storesOf = (config: Config) => {
    const documents = new RunDocuments(store, {
      collection,
      retentionMs: config.retentionMs,
      timeoutMs: config.firestoreTimeoutMs,
    });
    const jobDocuments = new RunDocuments(store, {
      collection: jobStateCollection(collection),
      retentionMs: config.retentionMs,
      timeoutMs: config.firestoreTimeoutMs,
    });
    return { documents, jobDocuments, history: new RunHistory(documents) };
  };

  /** The job's note as it starts; a refusal is kept on `exec`, and the job then throws. */
  const noteStart = async (ctx: Parameters<JobRun>[0], exec: Execution): Promise<void> => {
    try {
      await ctx.note(START_NOTE, { attempt: ctx.attemptId, at: time.now });
      exec.noted = true;
    } catch (err) {
      exec.noteRefused = err instanceof Error ? err.name : String(err);
      throw err;
    }
  };

  const runOf =
    (deployment: number, spec: JobSpec): JobRun =>
    async (ctx) => {
      const machine = time.current;
      const context = requests.getStore();
      const dep = deployments[deployment] as Deployment;
      const instance = dep.instances.find((i) => i.machine === machine) ?? retired.get(machine);
      const exec: Execution = {
        deployment,
        revision: context?.revision ?? -1,
        scope: dep.scope,
        jobId: spec.id,
        scheduleTime: ctx.scheduleTime.getTime(),
        kind: ctx.kind,
        runId: ctx.runId,
        attemptId: ctx.attemptId,
        instance: machine?.name ?? '?',
        source: context?.source ?? 'scheduler',
        triggerId: context?.triggerId,
        start: time.now,
        end: undefined,
        result: 'running',
        pausedMs: 0,
      };
      executions.push(exec);
      if (context !== undefined) {
        context.attempt.id = ctx.attemptId;
        context.attempt.runId = ctx.runId;
      }
      instance?.running.add(exec);
      const ms = between(spec.minMs, spec.maxMs);
      const fails = rng() < spec.failRate;
      try {
        if (spec.notes === true) {
          await noteStart(ctx, exec);
        }
        await new Promise<void>((resolve, reject) => {
          if (ctx.signal.aborted) {
            return reject(ctx.signal.reason);
          }
          const timer = setTimeout(resolve, ms);
          ctx.signal.addEventListener(
            'abort',
            () => {
              clearTimeout(timer);
              reject(ctx.signal.reason);
            },
            { once: true },
          );
        });
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
        throw new Error('simulated job failure');
      }
      exec.result = 'returned';
    };

  const declare = (deployment: number, specs: readonly JobSpec[]) =>
    validateJobs(
      specs.map((spec) => {
        const { minMs: _a, maxMs: _b, failRate: _c, ...declared } = spec;
        return defineJob({ ...declared, run: runOf(deployment, spec) });
      }),
    );

  let instanceCount = 0;
  /** Instances no longer routed to but maybe still running (a rolling deploy's old revision). */
  const retired = new Map<MachineClock | undefined, Instance>();

  const startInstance = (dep: Deployment, revision: number): Instance => {
    const name = `d${dep.index}-i${instanceCount++}-r${revision}`;
    const machine: MachineClock = {
      name,
      offsetMs: history.clockOffsetMs * (instanceCount % 2 === 0 ? 1 : -1),
      pausedUntil: 0,
      dead: false,
    };
    const { config } = dep;
    const { documents, jobDocuments, history: runHistory } = storesOf(config);
    const ledger = new RunLedger(documents, { leaseMs: config.leaseMs });
    const shutdown = new GracefulShutdown();
    const jobs = (dep.revisions[revision] as Deployment['revisions'][number]).jobs;
    const handler = time.within(machine, () =>
      createScheduledJobHandler({
        config,
        ledger,
        history: runHistory,
        jobDocuments,
        clock: () => documents.serverTime(),
        jobs,
        logger: loggerFor(name, config),
        shutdown,
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
    instanceOf.set(machine, { dep, instance });
    return instance;
  };

  const crash = (dep: Deployment, instance: Instance) => {
    if (instance.machine.dead) {
      return;
    }
    instance.machine.dead = true;
    deaths++;
    instance.serving = false;
    for (const exec of instance.running) {
      exec.result = 'crashed';
      exec.end = time.now;
    }
    instance.running.clear();
    // A job that returned (or threw), whose completion (or release) write may still be in
    // flight: the crash can lose it, and the record stays held under its lease.
    for (const exec of executions) {
      const ended = exec.result === 'returned' || exec.result === 'threw';
      if (exec.instance !== instance.machine.name || !ended) {
        continue;
      }
      const answered = logs.some(
        (l) =>
          l.fields.attemptId === exec.attemptId &&
          (typeof l.fields.completion === 'string' || typeof l.fields.release === 'string'),
      );
      if (!answered) {
        exec.crashedBeforeAnswer = true;
        exec.diedAt = time.now;
      }
    }
    for (const reject of instance.pending) {
      reject(new Error('connection reset: the instance crashed'));
    }
    instance.pending.clear();
    const at = dep.instances.indexOf(instance);
    if (at !== -1) {
      dep.instances[at] = startInstance(dep, dep.revisions.length - 1);
    }
  };

  /** Delivers `headers` to a serving instance of `dep` (a cold start if none serves). */
  const deliverTo = (
    dep: Deployment,
    headers: Readonly<Record<string, string>>,
    source: Source,
    triggerId: string | undefined,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: string }> => {
    const serving = dep.instances.filter((i) => i.serving);
    let instance = serving[Math.floor(rng() * serving.length)];
    if (instance === undefined) {
      instance = startInstance(dep, dep.revisions.length - 1);
      dep.instances.push(instance);
    }
    const target = instance;
    const delivered: Delivered = {
      deployment: dep.index,
      source,
      jobId: headers['X-CloudScheduler-JobName'] ?? '',
      scheduleTime: headers['X-CloudScheduler-ScheduleTime'] ?? '',
      sentAt: time.now,
      endedAt: undefined,
      status: undefined,
      outcome: undefined,
      instance: target.name,
      runId: undefined,
    };
    deliveries.push(delivered);
    const ended = () => {
      delivered.endedAt ??= time.now;
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
        const b = body as { outcome?: string; runId?: string };
        if (delivered.endedAt === undefined) {
          delivered.status = status;
          delivered.outcome = b.outcome ?? '';
          delivered.runId = b.runId;
        }
        ended();
        answers.push({
          at: time.now,
          deployment: dep.index,
          source,
          jobId: headers['X-CloudScheduler-JobName'] ?? '',
          scheduleTime: headers['X-CloudScheduler-ScheduleTime'] ?? '',
          status,
          outcome: b.outcome ?? '',
          runId: b.runId,
        });
        resolve({ status, body: JSON.stringify(body) });
      });
      const context: RequestContext = {
        attempt: {},
        source,
        triggerId,
        deployment: dep.index,
        revision: target.revision,
      };
      time.within(target.machine, () =>
        requests.run(context, () => {
          // Network latency to the function, on the instance's timers (a paused one answers late).
          setTimeout(
            () => {
              Promise.resolve(target.handler(request(headers), res)).catch((err: unknown) =>
                errors.push(err),
              );
            },
            between(1, 30),
          );
        }),
      );
    });
  };

  const deployments: Deployment[] = history.scopes.map((scope, index) => {
    const config = configOf(scope);
    const dep = {
      index,
      scope,
      keyScope: scopeOf(config),
      config,
      revisions: [] as Deployment['revisions'],
      instances: [] as Instance[],
      scheduler: undefined as unknown as CloudScheduler,
      lastTriggerId: undefined as string | undefined,
      lastBackfill: [] as readonly Readonly<Record<string, string>>[],
      outageUntil: 0,
    };
    return dep;
  });
  for (const dep of deployments) {
    dep.revisions.push({
      at: startMs,
      specs: history.jobs,
      jobs: declare(dep.index, history.jobs),
    });
    dep.instances = Array.from({ length: history.instances }, () => startInstance(dep, 0));
    dep.scheduler = new CloudScheduler({
      jobs: (dep.revisions[0] as Deployment['revisions'][number]).jobs,
      clock: {
        now: () => time.now,
        setTimer: (callback, ms) => {
          const timer = time.within(undefined, () => time.schedule(callback, ms));
          return () => time.cancel(timer);
        },
      },
      random: rng,
      duplicates: history.duplicates,
      dropAnswers: history.dropAnswers,
      send: (headers, signal) => {
        const header = headers['X-CloudScheduler-ScheduleTime'];
        // Scheduler sends a slot before its time, or no time, only for a Force run.
        const source: Source =
          header === undefined || Date.parse(header) > time.now ? 'force' : 'scheduler';
        if (time.now < dep.outageUntil) {
          return Promise.reject(new Error('Cloud Scheduler cannot reach the function (outage)'));
        }
        return time.within(undefined, () => deliverTo(dep, headers, source, undefined, signal));
      },
    });
  }

  const currentJobs = (dep: Deployment) =>
    (dep.revisions.at(-1) as Deployment['revisions'][number]).jobs;

  const backfill = async (dep: Deployment, raceCheck = false) => {
    const { history: runHistory } = storesOf(dep.config);
    const jobs = currentJobs(dep);
    const now = new Date(time.now);
    const rows = [];
    for (const job of jobs) {
      const { slots } = slotsBetween(job, new Date(startMs - 1), now, 1000);
      rows.push(...(await readHistory(runHistory, job, slots, dep.keyScope, now)).rows);
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
      await deliverBackfill(dep, sent);
      return;
    }
    await Promise.all(
      jobs.map((job) =>
        racedCheck(
          dep,
          job,
          sent.filter((headers) => headers['X-CloudScheduler-JobName'] === job.id),
        ),
      ),
    );
  };

  /**
   * A missed-run check of `job` (as a due delivery's would run) whose read of the slots' records
   * is answered late: meanwhile `sent` (backfill deliveries of the job's slots) are delivered
   * and claim, so the check judges slots from a read that other runs have overtaken.
   */
  const racedCheck = async (
    dep: Deployment,
    job: DeclaredJob,
    sent: readonly Readonly<Record<string, string>>[],
  ) => {
    if (sent.length === 0) {
      return;
    }
    const stores = storesOf(dep.config);
    let raced = false;
    const delivering: Promise<unknown>[] = [];
    const deliverDuringRead = async () => {
      raced = true;
      for (const headers of sent) {
        delivering.push(deliverTo(dep, headers, 'backfill', undefined).catch(() => {}));
      }
      await time.sleep(RACED_READ_MS);
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
    await check.check(job, dep.keyScope, loggerFor(`d${dep.index}-check`, dep.config));
    // Nothing closed to judge: the backfill is delivered all the same.
    if (!raced) {
      await deliverBackfill(dep, sent);
    }
    await Promise.all(delivering);
  };

  /** Delivers a backfill's requests 0.5 s apart. */
  const deliverBackfill = async (
    dep: Deployment,
    sent: readonly Readonly<Record<string, string>>[],
  ) => {
    for (const [i, headers] of sent.entries()) {
      if (i > 0) {
        await time.sleep(500);
      }
      await deliverTo(dep, headers, 'backfill', undefined).catch(() => {});
    }
  };

  /**
   * `npm run pause -- JOB`, then `ms` later `npm run resume -- JOB`, as ops/pause.ts does each:
   * the record first, then the Scheduler job. The pause counts from its record to its resume's
   * start (a slot between the resume's record and Scheduler's resume is missed, and reported).
   */
  const operatorPause = async (dep: Deployment, jobId: string, ms: number, forgotten: boolean) => {
    const { jobDocuments } = storesOf(dep.config);
    const docId = checkDocumentId(jobId, dep.keyScope);
    // `--until 90s`: a bound the forgotten pause outlives, so a check reports it overdue.
    const until = forgotten ? (pausedAt: Date) => new Date(pausedAt.getTime() + 90_000) : undefined;
    let recorded: Awaited<ReturnType<typeof recordPause>>;
    try {
      recorded = await recordPause(jobDocuments, docId, jobId, { until, note: 'sim' });
    } catch {
      return; // already paused (refused): this pause changes nothing
    }
    // From the time the command printed (Firestore's, when it read the job's document): a slot
    // then is paused, though Scheduler's pause comes a moment later.
    const from = recorded.pausedAt.getTime();
    const pause: OperatorPause = { deployment: dep.index, jobId, from, to: Infinity };
    operatorPauses.push(pause);
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
  };

  /** Where another version (or the operator's repair) writes: the shared store, on true time. */
  const foreignStore: ForeignStore = {
    store,
    collection,
    now: () => time.now,
    retentionMs: RETENTION_SECONDS * 1000,
    randomRunId: () =>
      Array.from({ length: 64 }, () => Math.floor(rng() * 16).toString(16)).join(''),
  };
  /** Whether a run of `jobId` executes in deployment `d`, or a request of it is still open. */
  const isJobBusy = (d: number, jobId: string) =>
    executions.some((e) => e.deployment === d && e.jobId === jobId && e.result === 'running') ||
    deliveries.some((r) => r.deployment === d && r.jobId === jobId && r.endedAt === undefined);
  /** Whether every execution of run `runId` ended (none still runs or may still complete). */
  const isRunEnded = (runId: string) =>
    executions.every((e) => e.runId !== runId || e.result === 'crashed' || e.result === 'threw');
  /** A `foreign_record`, `foreign_lock` or `repair` event, recorded for the invariants. */
  const writeAsAnotherVersion = async (
    dep: Deployment,
    job: DeclaredJob,
    event: Extract<SimEvent, { type: 'foreign_record' | 'foreign_lock' | 'repair' }>,
  ): Promise<void> => {
    const w = foreignStore;
    const at = time.now;
    const base = { at, deployment: dep.index, jobId: job.id };
    if (event.type === 'foreign_record') {
      const runId = await writeForeignRecord(w, job, dep.keyScope, event.kind);
      if (runId !== undefined) {
        foreignRecords.set(runId, { ...base, kind: event.kind });
      }
      return;
    }
    if (event.type === 'foreign_lock') {
      const busy = () => isJobBusy(dep.index, job.id);
      const lock = await writeForeignLock(w, job, dep.keyScope, event.holder, busy);
      if (lock !== undefined) {
        for (const earlier of foreignRecords.values()) {
          const sameLock = earlier.deployment === dep.index && earlier.jobId === job.id;
          if (sameLock && earlier.lockedAt !== undefined) {
            earlier.replacedAt ??= lock.lockedAt;
          }
        }
        foreignRecords.set(lock.runId, {
          ...base,
          kind: event.holder,
          lockedAt: lock.lockedAt,
          ...(lock.recordedAt === undefined ? {} : { recordedAt: lock.recordedAt }),
        });
      }
      return;
    }
    const deleted = await repairLockHolder(w, job, dep.keyScope, isRunEnded);
    if (deleted === undefined) {
      return;
    }
    const known = foreignRecords.get(deleted);
    if (known !== undefined) {
      known.deletedAt = time.now;
    } else {
      foreignRecords.set(deleted, { ...base, kind: 'repaired', deletedAt: time.now });
    }
  };

  // Cloud Run: SIGTERM, then SIGKILL 10 s later; the function drains for its grace. The signal is
  // handled on the instance's own timers: a paused process handles it when it resumes.
  const terminate = (dep: Deployment, instance: Instance) => {
    time.within(instance.machine, () =>
      time.schedule(() => void instance.shutdown.drain(dep.config.shutdownGraceMs), 0),
    );
    time.within(undefined, () => time.schedule(() => crash(dep, instance), 10_000));
  };

  const apply = (event: SimEvent) => {
    const dep = deployments[event.deployment];
    if (dep === undefined) {
      return;
    }
    const instance = 'instance' in event ? dep.instances[event.instance] : undefined;
    const jobOf = (index: number) => {
      const jobs = currentJobs(dep);
      return jobs[index % jobs.length] as DeclaredJob;
    };
    switch (event.type) {
      case 'crash':
        if (instance) {
          crash(dep, instance);
        }
        return;
      case 'sigterm': {
        if (!instance?.serving) {
          return;
        }
        instance.serving = false;
        dep.instances[dep.instances.indexOf(instance)] = startInstance(
          dep,
          dep.revisions.length - 1,
        );
        retired.set(instance.machine, instance);
        terminate(dep, instance);
        return;
      }
      case 'pause':
        if (!instance) {
          return;
        }
        instance.machine.pausedUntil = Math.max(instance.machine.pausedUntil, time.now + event.ms);
        for (const exec of instance.running) {
          exec.pausedMs += event.ms;
        }
        return;
      case 'step':
        if (instance) {
          instance.machine.offsetMs += event.ms;
        }
        return;
      case 'hang':
        if (!instance) {
          return;
        }
        hangingUntil.set(
          instance.machine,
          Math.max(hangingUntil.get(instance.machine) ?? 0, time.now + event.ms),
        );
        return;
      case 'force': {
        const job = jobOf(event.job);
        const fire = () => {
          try {
            dep.scheduler.fire(job.id, { withoutScheduleTime: event.withoutScheduleTime === true });
          } catch {
            // The job is not declared (any more): Scheduler has nothing to force.
          }
        };
        const next = event.nearSlot === true ? nextSlotMs(job.schedule, time.now) : undefined;
        if (next === undefined) {
          fire();
          return;
        }
        // Within every simulated job's forced-run tolerance (30 s for a per-minute job).
        const early = between(1_000, 25_000);
        time.schedule(fire, Math.max(0, next - early - time.now));
        return;
      }
      case 'manual': {
        const job = jobOf(event.job);
        const triggerId = event.resend && dep.lastTriggerId ? dep.lastTriggerId : randomId(rng);
        dep.lastTriggerId = triggerId;
        // As ops/trigger.ts sends it: now, to the second, with the trigger headers.
        const headers = schedulerHeaders(job.id, new Date(Math.floor(time.now / 1000) * 1000), {
          [MODE_HEADER]: 'manual',
          [TRIGGER_ID_HEADER]: triggerId,
        });
        void time.within(operator, () =>
          deliverTo(dep, headers, 'manual', triggerId).catch(() => {}),
        );
        return;
      }
      case 'rerun': {
        const job = jobOf(event.job);
        const slot = previousSlot(job, new Date(time.now));
        if (slot === undefined || slot.getTime() < startMs) {
          return;
        }
        const triggerId = randomId(rng);
        const headers = schedulerHeaders(job.id, slot, {
          [MODE_HEADER]: 'rerun',
          [TRIGGER_ID_HEADER]: triggerId,
        });
        void time.within(operator, () =>
          deliverTo(dep, headers, 'rerun', triggerId).catch(() => {}),
        );
        return;
      }
      case 'operator_pause': {
        const jobId = jobOf(event.job).id;
        void time.within(operator, () =>
          operatorPause(dep, jobId, event.ms, event.forgotten === true).catch((err: unknown) =>
            errors.push(err),
          ),
        );
        return;
      }
      case 'outage':
        dep.outageUntil = Math.max(dep.outageUntil, time.now + event.ms);
        return;
      case 'foreign_record':
      case 'foreign_lock':
      case 'repair': {
        const job = jobOf(event.job);
        void time.within(operator, () =>
          writeAsAnotherVersion(dep, job, event).catch((err: unknown) => errors.push(err)),
        );
        return;
      }
      case 'backfill': {
        const resent = event.resend === true && dep.lastBackfill.length > 0;
        const again = async () => {
          await time.sleep(between(0, 60_000));
          await deliverBackfill(dep, dep.lastBackfill);
        };
        // Raced with a check, the backfill comes after the drain (below): slots have closed by then.
        if (event.raceCheck === true) {
          return;
        }
        const work = async () => {
          if (resent) {
            await deliverBackfill(dep, dep.lastBackfill);
            return;
          }
          await backfill(dep, event.raceCheck === true);
          if (event.again === true) {
            await again();
          }
        };
        void time.within(operator, () => work().catch((err: unknown) => errors.push(err)));
        return;
      }
      case 'redeploy': {
        const last = dep.revisions.at(-1) as Deployment['revisions'][number];
        let specs = last.specs;
        if (event.change === 'drop_last_job') {
          if (specs.length < 2) {
            return;
          }
          specs = specs.slice(0, -1);
        } else {
          const overlap = event.change === 'overlap_skip' ? 'skip' : 'allow';
          specs = specs.map((s, i) => (i === 0 ? { ...s, overlap } : s));
        }
        dep.revisions.push({ at: time.now, specs, jobs: declare(dep.index, specs) });
        const revision = dep.revisions.length - 1;
        const old = dep.instances;
        dep.instances = old.map(() => startInstance(dep, revision));
        // Rolling: the old revision keeps a share of the traffic for a while, then drains.
        if (event.rolling) {
          dep.instances.push(...old);
        }
        const retire = () => {
          for (const instance of old) {
            if (!instance.serving) {
              continue;
            }
            instance.serving = false;
            retired.set(instance.machine, instance);
            terminate(dep, instance);
          }
          dep.instances = dep.instances.filter((i) => !old.includes(i));
        };
        if (event.rolling) {
          time.within(undefined, () => time.schedule(retire, 60_000));
        } else {
          retire();
        }
        dep.scheduler.setJobs(currentJobs(dep));
        return;
      }
    }
  };

  const stopMs = startMs + history.spanMs;
  /** Runs virtual time on from `fromMs` a minute at a time (30 at most) while a request is open. */
  const untilRequestsEnd = async (fromMs: number, marginMs: number): Promise<number> => {
    const open = () => deliveries.some((d) => d.endedAt === undefined);
    let atMs = fromMs;
    for (let minutes = 0; minutes < 30 && open(); minutes++) {
      atMs += 60_000;
      await time.run(atMs);
    }
    if (atMs === fromMs) {
      return fromMs;
    }
    await time.run(atMs + 2 * marginMs);
    return atMs + 2 * marginMs;
  };
  time.install();
  try {
    time.within(undefined, () => {
      for (const dep of deployments) {
        dep.scheduler.start();
      }
    });
    for (const event of history.events) {
      await time.run(startMs + event.at);
      time.within(undefined, () => apply(event));
    }
    await time.run(stopMs);
    time.within(undefined, () => {
      for (const dep of deployments) {
        dep.scheduler.stop();
      }
    });
    // Every attempt in flight ends: the longest job, a lease to lapse, and the retries' reads,
    // counted from the last resumed pause too (a paused instance carries on where it stopped).
    const longest = Math.max(...history.jobs.map((j) => j.maxMs));
    const resumedMs = Math.max(
      stopMs,
      ...history.events.map((e) => (e.type === 'pause' ? startMs + e.at + e.ms : 0)),
    );
    const drainedMs = resumedMs + longest + 2 * leaseMs + 120_000;
    await time.run(drainedMs);
    // The operator backfills once every slot has closed, while a check of the same slots runs;
    // the final check comes once those backfills ended.
    let racing = 0;
    for (const event of history.events) {
      const dep = deployments[event.deployment];
      if (event.type !== 'backfill' || event.raceCheck !== true || dep === undefined) {
        continue;
      }
      racing++;
      // Sent again once they ended (`again`): the same requests meet the runs they completed.
      const resend = () =>
        event.again === true ? deliverBackfill(dep, dep.lastBackfill) : undefined;
      void time.within(operator, () =>
        backfill(dep, true)
          .then(resend)
          .catch((err: unknown) => errors.push(err))
          .finally(() => racing--),
      );
    }
    let racedMs = drainedMs;
    for (let minutes = 0; minutes < 30 && racing > 0; minutes++) {
      racedMs += 60_000;
      await time.run(racedMs);
    }
    if (racedMs > drainedMs) {
      racedMs += leaseMs;
      await time.run(racedMs);
    }
    // A backfill delivers old slots one after another, past the drain: the final check comes once
    // no request is still open (the check's cursor stops at a run in flight), then a lease later.
    const finalMs = await untilRequestsEnd(racedMs, leaseMs);
    // The final missed-run check of every job each deployment ever declared, as an instance
    // of the last revision would run it.
    const finalAudit = (machine: MachineClock) =>
      time.within(machine, () =>
        Promise.all(
          (db === undefined ? deployments : []).flatMap((dep) => {
            const stores = storesOf(dep.config);
            const check = new MissedRunCheck({
              history: stores.history,
              jobDocuments: stores.jobDocuments,
              clock: () => stores.documents.serverTime(),
              forcedRunToleranceMs: dep.config.forcedRunToleranceMs,
            });
            const logger = loggerFor(`d${dep.index}-audit`, dep.config);
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
                const result = await check.check(job, dep.keyScope, logger);
                if (result.checked < MAX_CHECK_SLOTS) {
                  return result;
                }
              }
              return undefined;
            });
          }),
        ),
      );
    let auditError: unknown;
    const awaitAudit = async (audits: ReturnType<typeof finalAudit>, untilMs: number) => {
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
    await awaitAudit(finalAudit(auditor), finalMs + 120_000);
    // An instance that died may have written a report it never logged, shortly before the final
    // check (which leaves a young one to its writer): the job's next due delivery checks again.
    if (deaths > 0) {
      await time.run(finalMs + LATER_CHECK_MS);
      await awaitAudit(finalAudit(operator), finalMs + LATER_CHECK_MS + 120_000);
    }
    if (auditError !== undefined) {
      errors.push(auditError);
    }
    errors.push(...time.errors);
    const records = new Map<string, Record<string, unknown>>();
    const createTimes = new Map<string, number>();
    const jobDocuments = new Map<string, Record<string, unknown>>();
    if (memory !== undefined) {
      for (const [path, doc] of memory.dump()) {
        if (path.startsWith(`${jobStateCollection(collection)}/`)) {
          jobDocuments.set(path.slice(jobStateCollection(collection).length + 1), doc.data);
        }
        if (!path.startsWith(`${collection}/`)) {
          continue;
        }
        const id = path.slice(collection.length + 1);
        records.set(id, doc.data);
        createTimes.set(id, doc.createTime.toMillis());
      }
    } else {
      const snap = await (async () => {
        time.uninstall();
        return store.collection(collection).get();
      })();
      for (const doc of snap.docs) {
        records.set(doc.id, doc.data());
        createTimes.set(doc.id, doc.createTime.toMillis());
      }
    }
    for (const exec of executions) {
      if (completedAttempts.has(exec.attemptId)) {
        exec.completionLanded = true;
      }
    }
    return {
      history,
      gaps,
      emulator: db !== undefined,
      startMs,
      stopMs,
      finalMs,
      executions,
      logs,
      answers,
      deliveries,
      operatorPauses,
      foreignWrites,
      leaseEnds,
      crashesAfterWrite,
      foreignRecords,
      jobDocuments,
      schedulerAttempts: deployments.map((d) => d.scheduler.attempts),
      firestoreTimeoutMs,
      deployments: deployments.map((d) => ({
        scope: d.scope,
        keyScope: d.keyScope,
        revisions: d.revisions.map((r) => ({ at: r.at, jobs: r.jobs })),
      })),
      records,
      createTimes,
      errors,
      leaseMs,
      forcedRunToleranceMs: configOf('').forcedRunToleranceMs,
    };
  } finally {
    time.uninstall();
  }
}

/**
 * The logged write a commit made to a run record (`before` → `after`), if any: a claim (the record
 * `in_progress` under a new attempt), a completion, or a report (a new `reported_at`). Judged on
 * the stored fields, not on which product call wrote them.
 */
export function loggedWriteOf(
  before: DocumentData | undefined,
  after: DocumentData | undefined,
): LoggedWrite | undefined {
  if (after === undefined) {
    return undefined;
  }
  if (after.status === 'in_progress' && after.attempt_id !== before?.attempt_id) {
    return 'claim';
  }
  if (after.status === 'completed' && before?.status !== 'completed') {
    return 'completion';
  }
  const reportedAt = (data: DocumentData | undefined) =>
    data?.reported_at instanceof Timestamp ? data.reported_at.toMillis() : undefined;
  const reported = reportedAt(after);
  if (reported !== undefined && reported !== reportedAt(before)) {
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
      ? (data.pauses as DocumentData[]).filter((p) => p.overdue_reported_at instanceof Timestamp)
          .length
      : 0;
  return reported(after) > reported(before) ? 'report' : undefined;
}

/** A trigger id as ops/trigger.ts makes one (a UUID's shape), from the seeded PRNG. */
function randomId(rng: () => number): string {
  const hex = () => Math.floor(rng() * 16).toString(16);
  const part = (n: number) => Array.from({ length: n }, hex).join('');
  return `${part(8)}-${part(4)}-${part(4)}-${part(4)}-${part(12)}`;
}
