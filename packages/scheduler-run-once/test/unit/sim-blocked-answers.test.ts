/**
 * Invariant 40 (test/sim/blocked-answer-invariants.ts) on hand-built outcomes: a blocked manual
 * run is told `--allow-overlap`, a blocked backfill that it stays missed, a slot to retry later; a `wait` job is never
 * answered `skipped`; a run sent with `--allow-overlap` never waits, and nothing waits behind it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { blockedAnswersSayWhatToDo } from '../../test/sim/blocked-answer-invariants.ts';

const SENT = Date.parse('2026-01-05T01:00:30.000Z');

/** A request of job-0 from `source`, answered `outcome` with `message`, blocked by `holder`. */
function answered(
  source: string,
  outcome: string,
  message: string,
  extra: object = {},
) {
  return {
    deployment: 0,
    source,
    jobId: 'job-0',
    scheduleTime: '2026-01-05T01:00:30Z',
    sentAt: SENT,
    endedAt: SENT + 50,
    status: outcome === 'waiting' ? 409 : 200,
    outcome,
    instance: 'd0-i0-r0',
    runId: 'run-1',
    message,
    ...extra,
  };
}

/** The log line of a blocked answer naming `blockedBy`. */
function blockedLine(outcome: string, blockedBy = 'holder-run') {
  return {
    at: SENT + 50,
    instance: 'd0-i0-r0',
    level: 'INFO',
    message: `scheduled run: ${outcome}`,
    fields: {
      jobName: 'job-0',
      outcome,
      blockedBy,
      scheduleTime: '2026-01-05T01:00:30Z',
    },
  };
}

/** An outcome of job-0 declared `overlap` with these requests, log lines and executions. */
function outcomeOf(
  overlap: string,
  deliveries: object[],
  logs: object[] = [],
  executions: object[] = [],
) {
  return {
    deployments: [{ revisions: [{ jobs: [{ id: 'job-0', overlap }] }] }],
    deliveries,
    logs,
    executions,
  } as never;
}

const BY_HAND =
  'Not run: another run of job-0 is still running (overlap policy "skip"); run it again once that run ends, or with --allow-overlap to run it beside it (nothing was recorded).';
const BACKFILL =
  'Not run: another run of job-0 is still running (overlap policy "skip"); the slot stays missed: backfill it again once that run ends (nothing was recorded).';
const RETRY_LATER =
  'Not run: another run of job-0 is still running (overlap policy "wait"); retry later (nothing was recorded).';

describe('invariant 40: a blocked run is told what to do', () => {
  it("passes the product's own answers", () => {
    const outcome = outcomeOf(
      'skip',
      [
        answered('manual', 'waiting', BY_HAND),
        answered('backfill', 'waiting', BACKFILL),
      ],
      [blockedLine('waiting')],
    );
    assert.deepEqual(blockedAnswersSayWhatToDo(outcome), []);
  });

  it('fails a manual run or a backfill told to retry later', () => {
    for (const source of ['manual', 'rerun', 'backfill']) {
      const outcome = outcomeOf(
        'wait',
        [answered(source, 'waiting', RETRY_LATER)],
        [blockedLine('waiting')],
      );
      const found = blockedAnswersSayWhatToDo(outcome);
      assert.equal(found.length, 1, source);
      assert.match(found[0] ?? '', /does not say/);
    }
  });

  it('fails a slot Scheduler delivered that waits without being told to retry later', () => {
    const told = outcomeOf(
      'wait',
      [answered('scheduler', 'waiting', RETRY_LATER)],
      [blockedLine('waiting')],
    );
    assert.deepEqual(blockedAnswersSayWhatToDo(told), []);
    const untold = outcomeOf(
      'wait',
      [
        answered(
          'scheduler',
          'waiting',
          'Not run: another run of job-0 is still running (overlap policy "wait"); undefined (nothing was recorded).',
        ),
      ],
      [blockedLine('waiting')],
    );
    assert.match(
      blockedAnswersSayWhatToDo(untold)[0] ?? '',
      /does not say "retry later"/,
    );
  });

  it('fails a wait job answered skipped, and an --allow-overlap run that waits', () => {
    const skipped = outcomeOf('wait', [
      answered('scheduler', 'skipped', 'recorded as skipped'),
    ]);
    assert.match(
      blockedAnswersSayWhatToDo(skipped)[0] ?? '',
      /declares it overlap "wait"/,
    );
    const waited = outcomeOf(
      'skip',
      [answered('manual', 'waiting', BY_HAND, { allowOverlap: true })],
      [blockedLine('waiting')],
    );
    assert.match(
      blockedAnswersSayWhatToDo(waited)[0] ?? '',
      /sent with --allow-overlap: it runs beside/,
    );
  });

  it('fails a slot that waits behind a run sent with --allow-overlap', () => {
    const overlapper = { runId: 'manual-run', allowOverlap: true };
    const outcome = outcomeOf(
      'wait',
      [answered('scheduler', 'waiting', RETRY_LATER)],
      [blockedLine('waiting', 'manual-run')],
      [overlapper],
    );
    const found = blockedAnswersSayWhatToDo(outcome);
    assert.equal(found.length, 1);
    assert.match(found[0] ?? '', /which takes no lock/);
  });
});
