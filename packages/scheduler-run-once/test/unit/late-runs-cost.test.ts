/**
 * What the late-run scan (`src/policy/late-runs.ts`) costs in Firestore operations per job and
 * hour, measured: an hour of run audits every 5 minutes over fakes of the job documents and the run
 * history that count each document read and write, for jobs every minute, every 5 minutes and
 * hourly whose slots all ran. docs/operations.md ("Late runs", Cost) states these counts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import type { Logger } from '../../src/core/logger.ts';
import type { BatchRead, RunDocuments } from '../../src/core/run-documents.ts';
import {
  RunKind,
  type RunRecord,
  RunStatus,
} from '../../src/core/run-record.ts';
import {
  type DeclaredJob,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import { LateRunScan } from '../../src/policy/late-runs.ts';
import { slotRunId } from '../../src/policy/run-history.ts';

const MINUTE = 60_000;
/** The audit's period, as `src/jobs.ts` ships it. */
const AUDIT_PERIOD_MS = 5 * MINUTE;
/** A whole hour: the slots of every schedule below fall on it. */
const HOUR_START = Date.parse('2026-03-02T10:00:00Z');

/** Counts of Firestore operations: each document read (batched or not) and each write. */
interface Counts {
  reads: number;
  writes: number;
}

const silent: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silent,
};

/** A completed run of `slot`, as Scheduler's delivery leaves it. */
function completedRun(slot: Date): RunRecord {
  return {
    status: RunStatus.Completed,
    attemptId: 'attempt-1',
    leaseExpires: undefined,
    attempts: 1,
    firstClaimedAt: slot,
    claimedAt: slot,
    completedAt: new Date(slot.getTime() + 1000),
    failedAt: undefined,
    lastError: undefined,
    reportedAt: undefined,
    reportedBy: undefined,
    jobName: 'job',
    scheduleTime: slot,
    kind: RunKind.Slot,
    rerunOf: undefined,
    withoutScheduleTime: false,
    caughtUpAt: undefined,
    blockedBy: undefined,
    notes: {},
    keyScope: '',
  };
}

/**
 * A scan over counting fakes: the per-job documents (the check document is absent: no pause) and
 * run records for every slot of `job` (each completed), its clock driven by `setNow`.
 */
function countedScan(job: DeclaredJob, from: 'alone' | 'audit') {
  const counts: Counts = { reads: 0, writes: 0 };
  const documents = new Map<string, { data: DocumentData; time: Timestamp }>();
  let now = new Date(HOUR_START);
  let writeMicros = 0;
  const ranRuns = new Map<string, RunRecord>();
  for (
    let t = HOUR_START - 3 * 60 * MINUTE;
    t < HOUR_START + 3 * 60 * MINUTE;
    t += MINUTE
  ) {
    const slot = new Date(t);
    ranRuns.set(slotRunId(job.id, slot, []), completedRun(slot));
  }
  const jobDocuments = {
    readData: async (id: string) => {
      counts.reads += 1;
      const stored = documents.get(id);
      return { data: stored?.data, updateTime: stored?.time, readTime: now };
    },
    write: async (
      id: string,
      _what: string,
      data: DocumentData,
      token?: Timestamp,
    ) => {
      const stored = documents.get(id);
      if (
        stored !== undefined &&
        token !== undefined &&
        !stored.time.isEqual(token)
      ) {
        return 'conflict' as const;
      }
      counts.writes += 1;
      writeMicros += 1;
      const time = Timestamp.fromMillis(now.getTime() + writeMicros / 1000);
      documents.set(id, { data, time });
      return time;
    },
    expireAt: () => Timestamp.fromMillis(now.getTime() + 30 * 24 * 60 * MINUTE),
  } as unknown as RunDocuments;
  const history = {
    getMany: async (runIds: readonly string[]): Promise<BatchRead> => {
      counts.reads += runIds.length;
      const records = new Map(runIds.map((id) => [id, ranRuns.get(id)]));
      return { records, updateTimes: new Map(), readTime: now };
    },
  };
  const scan = new LateRunScan({
    history,
    jobDocuments,
    clock: async () => now,
  });
  return {
    counts,
    // In the audit, the missed-run check hands the scan the pauses it read (none here).
    scan: () =>
      from === 'audit'
        ? scan.scan(job, [], silent, undefined, [])
        : scan.scan(job, [], silent),
    setNow: (at: number) => {
      now = new Date(at);
    },
  };
}

/** The operations of an hour of audits (12, each 30 s past its slot), after a first scan. */
async function oneHourOfAudits(
  schedule: string,
  from: 'alone' | 'audit' = 'alone',
): Promise<Counts & { late: number }> {
  const [job] = validateJobs([{ id: 'job', schedule, run: () => {} }]) as [
    DeclaredJob,
  ];
  const scanned = countedScan(job, from);
  const auditAt = (n: number) => HOUR_START + n * AUDIT_PERIOD_MS + 30_000;
  scanned.setNow(auditAt(0));
  await scanned.scan(); // the first sighting: the mark starts here
  scanned.counts.reads = 0;
  scanned.counts.writes = 0;
  let late = 0;
  for (let n = 1; n <= 12; n += 1) {
    scanned.setNow(auditAt(n));
    late += (await scanned.scan()).late;
  }
  return { ...scanned.counts, late };
}

describe('the late-run scan, per job and hour with the audit every 5 minutes', () => {
  it('a job every 5 minutes: 48 reads (the two documents, the new slot and the one before it) and 12 mark writes', async () => {
    assert.deepEqual(await oneHourOfAudits('*/5 * * * *'), {
      reads: 48,
      writes: 12,
      late: 0,
    });
  });

  it('a job every minute: 96 reads (the two documents, 5 new slots and the one before them) and 12 mark writes', async () => {
    assert.deepEqual(await oneHourOfAudits('* * * * *'), {
      reads: 96,
      writes: 12,
      late: 0,
    });
  });

  it('an hourly job: 26 reads (the two documents, and once the new slot and the one before it) and 12 mark writes', async () => {
    assert.deepEqual(await oneHourOfAudits('0 * * * *'), {
      reads: 26,
      writes: 12,
      late: 0,
    });
  });
});

describe('the late-run scan in the run audit, after the missed-run check (which hands over the pauses it read)', () => {
  it('a job every 5 minutes: 36 reads (the mark, the new slot and the one before it) and 12 mark writes', async () => {
    assert.deepEqual(await oneHourOfAudits('*/5 * * * *', 'audit'), {
      reads: 36,
      writes: 12,
      late: 0,
    });
  });

  it('a job every minute: 84 reads and 12 mark writes', async () => {
    assert.deepEqual(await oneHourOfAudits('* * * * *', 'audit'), {
      reads: 84,
      writes: 12,
      late: 0,
    });
  });

  it('an hourly job: 14 reads and 12 mark writes', async () => {
    assert.deepEqual(await oneHourOfAudits('0 * * * *', 'audit'), {
      reads: 14,
      writes: 12,
      late: 0,
    });
  });
});
