/**
 * The run audit's handing over (`src/policy/run-audit.ts`): each job's missed-run check reads the
 * job's check document, and its late-run scan gets the pauses the check read instead of reading the
 * document again; a check that failed hands over nothing, and the scan reads them itself.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type DocumentData, Timestamp } from '@google-cloud/firestore';
import type { JobContext } from '../../src/core/job-context.ts';
import type { Logger } from '../../src/core/logger.ts';
import type { BatchRead, RunDocuments } from '../../src/core/run-documents.ts';
import {
  type DeclaredJob,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import { checkDocumentId } from '../../src/policy/missed-run-cursor.ts';
import { MissedRunCheck } from '../../src/policy/missed-runs.ts';
import { type PausesRead, pausesField } from '../../src/policy/pauses.ts';
import { type AuditChecks, auditRun } from '../../src/policy/run-audit.ts';

const silent: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silent,
};

const [job] = validateJobs([
  { id: 'job', schedule: '*/5 * * * *', run: () => {} },
]) as [DeclaredJob];

const NOW = new Date('2026-03-02T10:00:30Z');

/** A pause of the job, resumed: on its check document, it reads back as it was stored. */
const PAUSE = {
  pausedAt: new Date('2026-03-02T09:00:00Z'),
  until: undefined,
  note: 'maintenance',
  resumedAt: new Date('2026-03-02T09:30:00Z'),
  overdueReportedAt: undefined,
};

/** The audit's context: never aborted. */
const ctx = {
  signal: new AbortController().signal,
  logger: silent,
} as unknown as JobContext;

/** Checks whose scan records the pauses it was handed; `check` as given. */
function recordingChecks(check: AuditChecks['missedRuns']['check']) {
  const handed: (PausesRead | undefined)[] = [];
  const checks = {
    missedRuns: { check },
    lateRuns: {
      scan: async (
        _job: DeclaredJob,
        _scope: unknown,
        _logger: Logger,
        _send: unknown,
        pauses?: PausesRead,
      ) => {
        handed.push(pauses);
        return { late: 0 };
      },
    },
  } as unknown as AuditChecks;
  return { checks, handed };
}

/** Job documents over a map, the check document holding {@link PAUSE}; each read counted by id. */
function documentsWithPause() {
  const reads = new Map<string, number>();
  const documents = new Map<string, DocumentData>([
    [checkDocumentId(job.id, []), { pauses: pausesField([PAUSE]) }],
  ]);
  const jobDocuments = {
    readData: async (id: string) => {
      reads.set(id, (reads.get(id) ?? 0) + 1);
      const data = documents.get(id);
      const updateTime =
        data === undefined ? undefined : Timestamp.fromDate(NOW);
      return { data, updateTime, readTime: NOW };
    },
    write: async (id: string, _what: string, data: DocumentData) => {
      documents.set(id, data);
      return Timestamp.fromDate(NOW);
    },
    expireAt: () => Timestamp.fromMillis(NOW.getTime() + 86_400_000),
    retentionMs: 30 * 86_400_000,
  } as unknown as RunDocuments;
  return { jobDocuments, reads };
}

const noRecords = {
  getMany: async (runIds: readonly string[]): Promise<BatchRead> => ({
    records: new Map(runIds.map((id) => [id, undefined])),
    updateTimes: new Map(),
    readTime: NOW,
  }),
};

describe('the run audit hands the late-run scan the pauses its missed-run check read', () => {
  it('passes on what the check returns', async () => {
    const pauses: PausesRead = [PAUSE];
    const { checks, handed } = recordingChecks(async () => ({
      checked: 1,
      reported: 0,
      pauses,
    }));

    await auditRun(checks, [job], [], silent)(ctx);

    assert.deepEqual(handed, [pauses]);
  });

  it('hands over nothing when the check failed, so the scan reads them itself', async () => {
    const { checks, handed } = recordingChecks(async () => {
      throw new Error('Firestore is unavailable');
    });

    await assert.rejects(auditRun(checks, [job], [], silent)(ctx), /job/);

    assert.deepEqual(handed, [undefined]);
  });

  it('the check returns the pauses it read from the check document, read once', async () => {
    const { jobDocuments, reads } = documentsWithPause();
    const check = new MissedRunCheck({
      history: noRecords as never,
      jobDocuments,
      clock: async () => NOW,
    });

    const result = await check.check(job, [], silent);

    assert.deepEqual(result.pauses, [PAUSE]);
    assert.equal(reads.get(checkDocumentId(job.id, [])), 1);
  });
});
