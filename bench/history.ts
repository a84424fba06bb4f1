/**
 * Run-history figures: how long `npm run runs` takes to audit 30 days of a `*\/5` job (8 640 slots:
 * computed from the schedule, then read by run id in batches), and how many Firestore calls a
 * processed run costs with its missed-run check of earlier slots.
 */
import { spawnSync } from 'node:child_process';
import type { Firestore } from '@google-cloud/firestore';
import { pino } from 'pino';
import { ROOT } from '../scripts/local-processes.ts';
import { RunLedger } from '../src/core/ledger.ts';
import { completionUpdate, timestampOf } from '../src/core/run-record.ts';
import { validateJobs } from '../src/policy/job-declaration.ts';
import { reportEarlierSlots } from '../src/policy/missed-runs.ts';
import { RunHistory, readHistory, slotRunId } from '../src/policy/run-history.ts';
import { slotsBetween } from '../src/policy/schedule.ts';
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
  /** Firestore calls of claim + complete + the check of 5 earlier slots (all completed). */
  readonly callsPerRunWithCheck: number;
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
async function seed(db: Firestore, collection: string, slots: readonly Date[]): Promise<void> {
  for (let i = 0; i < slots.length; i += 500) {
    const batch = db.batch();
    for (const [j, slot] of slots.slice(i, i + 500).entries()) {
      if ((i + j) % 50 === 49) continue;
      const ref = db.collection(collection).doc(slotRunId('audit-five', slot, []));
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
 * Audits `days` of the bench job in process and as `ops/runs.ts`, then counts the calls of a
 * processed run with its check through `viaCounter`.
 */
export async function measureHistory(
  db: Firestore,
  viaCounter: Firestore,
  counter: WireCounter,
  days: number,
): Promise<HistoryFigures> {
  if (JOB === undefined) throw new Error('bench/fixtures/jobs-audit.ts declares no job');
  const collection = freshCollection('audit');
  const { slots } = slotsBetween(JOB, new Date(END.getTime() - days * DAY_MS), END);
  await seed(db, collection, slots);
  const history = new RunHistory(ledgerOn(db, collection).documents);
  await readHistory(history, JOB, slots.slice(0, 10), []); // warm-up: the channel
  const started = performance.now();
  const { rows } = await readHistory(history, JOB, slots, [], END);
  const inProcessMs = performance.now() - started;
  if (rows.length !== slots.length) throw new Error('the audit lost slots');
  const commandStarted = performance.now();
  const command = spawnSync(
    process.execPath,
    [
      'ops/runs.ts',
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
  if (command.status !== 0) throw new Error(`ops/runs.ts failed: ${command.stderr}`);

  const counted = ledgerOn(viaCounter, collection);
  const countedHistory = new RunHistory(counted.documents);
  await countedHistory.getMany(['warmup']); // opens the channel
  // The slot right after the window: its 5 earlier slots are all completed (indices % 50 < 49).
  const next = END;
  counter.reset();
  const claimed = await counted.claim(slotRunId('audit-five', next, []), { jobName: 'audit-five' });
  if (claimed.state !== 'claimed')
    throw new Error(`the bench run was not claimed: ${claimed.state}`);
  await reportEarlierSlots({
    history: countedHistory,
    job: JOB,
    scope: [],
    before: next,
    count: 5,
    logger: pino({ level: 'silent' }),
  });
  await counted.complete(claimed.claim);
  return {
    days,
    slots: slots.length,
    inProcessMs: Math.round(inProcessMs),
    commandMs: Math.round(commandMs),
    callsPerRunWithCheck: counter.calls(),
  };
}
