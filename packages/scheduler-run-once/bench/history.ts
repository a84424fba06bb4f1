/**
 * Run-history figures: how long `npm run runs` takes to audit 30 days of a `*\/5` job (8 640 slots:
 * computed from the schedule, then read by run id in batches), and how many Firestore calls a
 * processed run costs with the missed-run check: in the steady state (not due: the claim and the
 * completion), and on a due delivery (the cursor read, one batched read of the hour's closed slots,
 * the fenced cursor write).
 */
import { spawnSync } from 'node:child_process';
import type { Firestore } from '@google-cloud/firestore';
import { pino } from 'pino';
import { RunLedger } from '../src/core/ledger.ts';
import { completionUpdate } from '../src/core/record-writes.ts';
import { RunDocuments } from '../src/core/run-documents.ts';
import { timestampOf } from '../src/core/run-record.ts';
import { ROOT } from '../src/dev/local-processes.ts';
import { readHistory } from '../src/ops/slot-history.ts';
import {
  type DeclaredJob,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { jobStateCollection } from '../src/policy/job-state.ts';
import { LateRunScan } from '../src/policy/late-runs.ts';
import { MissedRunCheck } from '../src/policy/missed-runs.ts';
import { RunHistory, slotRunId } from '../src/policy/run-history.ts';
import { slotsBetween } from '../src/policy/schedule.ts';
import { closedAfterMs } from '../src/policy/slot-verdict.ts';
import { jobs as auditJobs } from './fixtures/jobs-audit.ts';
import { freshCollection } from './in-process.ts';
import type { WireCounter } from './wire-counter.ts';

const [JOB] = validateJobs(auditJobs);
const END = new Date('2026-10-16T12:00:00Z');
const DAY_MS = 86_400_000;

/** What one run measured. */
export interface HistoryFigures {
  /** Days audited and the slots they hold. */
  readonly days: number;
  readonly slots: number;
  /** `readHistory` in process: slots computed, run ids hashed, batched reads, ms. */
  readonly inProcessMs: number;
  /** `node ops/runs.ts --since Nd --json` as a process, Node's start included, ms. */
  readonly commandMs: number;
  /** Firestore calls of a processed run whose delivery is not due: claim + complete. */
  readonly callsPerRun: number;
  /** Firestore calls of a processed run whose delivery is due: claim + the hour's check + complete. */
  readonly callsPerDueRun: number;
  /** Processed runs per due one for this job (*\/5: 12 slots an hour). */
  readonly runsPerDueRun: number;
  /**
   * Firestore calls of the run audit's late-run scan of this job in an hour (12 audits, one every
   * 5 minutes), and the slots it found late (the seeded missed ones among them).
   */
  readonly lateScanCallsPerHour: number;
  readonly lateSlotsPerHour: number;
}

function ledgerOn(db: Firestore, collection: string): RunLedger {
  return RunLedger.open(db, {
    collection,
    leaseMs: 300_000,
    retentionMs: 86_400_000,
    timeoutMs: 30_000,
  });
}

/** Writes a completed record for every slot but every 50th (a few missed, as in life). */
async function seed(
  db: Firestore,
  collection: string,
  slots: readonly Date[],
): Promise<void> {
  for (let i = 0; i < slots.length; i += 500) {
    const batch = db.batch();
    for (const [j, slot] of slots.slice(i, i + 500).entries()) {
      if ((i + j) % 50 === 49) {
        continue;
      }
      const ref = db
        .collection(collection)
        .doc(slotRunId('audit-five', slot, []));
      batch.set(ref, {
        ...completionUpdate(timestampOf('2099-01-01T00:00:00Z')),
        attempt_id: 'bench',
        attempts: 1,
        job_name: 'audit-five',
        schedule_time: timestampOf(slot.toISOString()),
      });
    }
    await batch.commit();
  }
}

/**
 * Audits `days` of the bench job in process and as `src/ops/runs.ts`, then counts the calls of a
 * processed run with its check through `viaCounter`.
 */
export async function measureHistory(
  db: Firestore,
  viaCounter: Firestore,
  counter: WireCounter,
  days: number,
): Promise<HistoryFigures> {
  if (JOB === undefined) {
    throw new Error('bench/fixtures/jobs-audit.ts declares no job');
  }
  const collection = freshCollection('audit');
  const { slots } = slotsBetween(
    JOB,
    new Date(END.getTime() - days * DAY_MS),
    END,
  );
  await seed(db, collection, slots);
  const history = new RunHistory(ledgerOn(db, collection).documents);
  await readHistory(history, JOB, slots.slice(0, 10), []); // warm-up: the channel
  const started = performance.now();
  const { rows } = await readHistory(history, JOB, slots, [], END);
  const inProcessMs = performance.now() - started;
  if (rows.length !== slots.length) {
    throw new Error('the audit lost slots');
  }
  const commandMs = timeRunsCommand(collection, days);
  const { callsPerRun, callsPerDueRun } = await countCheckCalls(
    JOB,
    viaCounter,
    counter,
    collection,
  );
  const late = await countLateScanCalls(JOB, db, viaCounter, counter);
  return {
    days,
    slots: slots.length,
    inProcessMs: Math.round(inProcessMs),
    commandMs: Math.round(commandMs),
    callsPerRun,
    callsPerDueRun,
    runsPerDueRun: 12,
    lateScanCallsPerHour: late.calls,
    lateSlotsPerHour: late.late,
  };
}

/** How long `src/ops/runs.ts --json` takes over `days` of the bench job's records, ms. */
function timeRunsCommand(collection: string, days: number): number {
  const commandStarted = performance.now();
  const command = spawnSync(
    process.execPath,
    [
      'src/ops/runs.ts',
      '--since',
      `${days}d`,
      '--now',
      END.toISOString(),
      '--collection',
      collection,
      '--json',
    ],
    {
      cwd: ROOT,
      env: { ...process.env, JOBS_MODULE: 'bench/fixtures/jobs-audit.ts' },
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const commandMs = performance.now() - commandStarted;
  if (command.status !== 0) {
    throw new Error(`src/ops/runs.ts failed: ${command.stderr}`);
  }
  return commandMs;
}

/** The run audits of an hour: every 5 minutes, 30 s past a slot, over the hour before END. */
const AUDIT_PERIOD_MS = 300_000;
const AUDITS_PER_HOUR = 12;

/** The slot of the audited hour that Scheduler never delivered: late once, in the figures. */
const UNDELIVERED_MS = END.getTime() - 30 * 60_000;

/**
 * Writes a completed record, 1 s after its slot by Firestore's time as the driven clock has it,
 * for every slot of `job` in the two hours before END but {@link UNDELIVERED_MS}.
 */
async function seedDelivered(
  db: Firestore,
  collection: string,
  job: DeclaredJob,
): Promise<void> {
  const { slots } = slotsBetween(job, new Date(END.getTime() - 7_200_000), END);
  const batch = db.batch();
  for (const slot of slots) {
    if (slot.getTime() === UNDELIVERED_MS) {
      continue;
    }
    const ref = db.collection(collection).doc(slotRunId(job.id, slot, []));
    batch.set(ref, {
      status: 'completed',
      attempt_id: 'bench',
      attempts: 1,
      first_claimed_at: timestampOf(slot.toISOString()),
      claimed_at: timestampOf(slot.toISOString()),
      completed_at: timestampOf(new Date(slot.getTime() + 1000).toISOString()),
      expire_at: timestampOf('2099-01-01T00:00:00Z'),
      job_name: job.id,
      schedule_time: timestampOf(slot.toISOString()),
    });
  }
  await batch.commit();
}

/**
 * The Firestore calls of the run audit's late-run scan of `job` over an hour of audits, counted on
 * the wire after the scan's first sighting of the job (which starts its mark), and the slots it
 * found late: every slot ran but one, which is late and costs one more batched read (its forced
 * run's id) in each of the two scans that read it.
 */
async function countLateScanCalls(
  job: DeclaredJob,
  db: Firestore,
  viaCounter: Firestore,
  counter: WireCounter,
): Promise<{ calls: number; late: number }> {
  const collection = freshCollection('late');
  await seedDelivered(db, collection, job);
  const history = new RunHistory(ledgerOn(viaCounter, collection).documents);
  const jobDocuments = new RunDocuments(viaCounter, {
    collection: jobStateCollection(collection),
    retentionMs: 86_400_000,
    timeoutMs: 30_000,
  });
  const silent = pino({ level: 'silent' });
  const auditAt = (n: number) =>
    new Date(END.getTime() - 3_600_000 + n * AUDIT_PERIOD_MS + 30_000);
  let now = auditAt(0);
  const scan = new LateRunScan({
    history,
    jobDocuments,
    clock: async () => now,
  });
  await scan.scan(job, [], silent); // the first sighting: the mark starts here
  counter.reset();
  let late = 0;
  for (let n = 1; n <= AUDITS_PER_HOUR; n += 1) {
    now = auditAt(n);
    late += (await scan.scan(job, [], silent)).late;
  }
  return { calls: counter.calls(), late };
}

/**
 * The Firestore calls of a processed run with the missed-run check on, counted on the wire: the
 * hour's due run (which checks) and a run in the steady state.
 */
async function countCheckCalls(
  job: DeclaredJob,
  viaCounter: Firestore,
  counter: WireCounter,
  collection: string,
): Promise<{ callsPerRun: number; callsPerDueRun: number }> {
  const counted = ledgerOn(viaCounter, collection);
  const countedHistory = new RunHistory(counted.documents);
  const jobDocuments = new RunDocuments(viaCounter, {
    collection: jobStateCollection(collection),
    retentionMs: 86_400_000,
    timeoutMs: 30_000,
  });
  await countedHistory.getMany(['warmup']); // opens the channel
  const silent = pino({ level: 'silent' });
  // Firestore's time, driven: the slot being delivered is END + 1 h, so the hour before END has closed.
  let now = new Date(END.getTime() + closedAfterMs(job) - 3_600_000);
  const check = new MissedRunCheck({
    history: countedHistory,
    jobDocuments,
    clock: async () => now,
  });
  await check.check(job, [], silent); // the cursor, as an hour ago's check left it
  now = new Date(END.getTime() + closedAfterMs(job));
  /** Claims, checks if due, completes `slot`: a processed run's Firestore calls. */
  const processed = async (slot: Date) => {
    counter.reset();
    const claimed = await counted.claim(slotRunId('audit-five', slot, []), {
      jobName: 'audit-five',
    });
    if (claimed.state !== 'claimed') {
      throw new Error(`the bench run was not claimed: ${claimed.state}`);
    }
    if (check.isDue(job, slot, [], now)) {
      await check.check(job, [], silent);
    }
    await counted.complete(claimed.claim);
    return counter.calls();
  };
  const dueSlot = new Date(END.getTime() + 3_600_000); // 13:00: the first slot of its hour
  const steadySlot = new Date(dueSlot.getTime() + 300_000);
  const callsPerDueRun = await processed(dueSlot);
  const callsPerRun = await processed(steadySlot);
  return { callsPerRun, callsPerDueRun };
}
