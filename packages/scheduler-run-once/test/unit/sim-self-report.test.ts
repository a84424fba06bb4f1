/**
 * The simulator's invariant 46 (test/sim/self-report-invariants.ts) on hand-built outcomes: a
 * final failure no retry can follow reports itself while its lease holds, and never after it may
 * have lapsed. No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FAILED_AFTER_RETRIES } from '../../src/policy/missed-runs.ts';
import { finalFailuresReportThemselves } from '../sim/self-report-invariants.ts';
import type { LogLine, SimOutcome, WriteSpan } from '../sim/simulator.ts';
import { execution, SLOT_RUN } from './sim-execution.ts';

const SLOT = 60_000;
const START = SLOT + 2_000;
const LEASE_MS = 30_000;
/** The job runs 100 s and throws: well past its slot's attempt deadline (30 s). */
const END = START + 100_000;

/** A clean write of the attempt sent at `sentAt`, answered 40 ms later. */
const span = (sentAt: number): WriteSpan => ({
  sentAt,
  answeredBy: sentAt + 40,
  clean: true,
});

/** Beats every 10 s while the job runs, until `lastBeat`, then the release as the job ends. */
function writes(lastBeat: number): WriteSpan[] {
  const beats: WriteSpan[] = [];
  for (let at = START + 10_000; at <= lastBeat; at += 10_000) {
    beats.push(span(at));
  }
  return [...beats, span(END)];
}

/** The attempt's own report, logged as the job threw. */
const report: LogLine = {
  at: END,
  instance: 'd0-i0-r0',
  level: 'ERROR',
  message: FAILED_AFTER_RETRIES,
  fields: { runId: SLOT_RUN, reportedBy: 'attempt' },
};

/** An outcome of job-0's slot (declared with `retryCount`), run and thrown; its writes, its logs. */
function outcomeOf(
  spans: WriteSpan[],
  logs: LogLine[],
  retryCount = 0,
): SimOutcome {
  const renewals = spans.slice(0, -1).map((s) => ({
    landedAt: s.sentAt + 20,
    expires: s.sentAt + 20 + LEASE_MS,
    leaseMs: LEASE_MS,
    runId: SLOT_RUN,
  }));
  const claim = {
    landedAt: START - 100,
    expires: START - 100 + 10_000,
    leaseMs: 10_000,
    runId: SLOT_RUN,
  };
  const job = {
    id: 'job-0',
    retryCount,
    maxRetryDurationSeconds: 0,
    attemptDeadlineSeconds: 30,
  };
  return {
    emulator: false,
    executions: [
      execution({
        scheduleTime: SLOT,
        handledAt: START - 200,
        start: START,
        end: END,
        result: 'threw',
        context: {
          jobName: 'job-0',
          firstClaimedAt: START - 100,
          leaseExpires: START + 10_000,
          slot: SLOT,
        },
      }),
    ],
    deployments: [{ revisions: [{ jobs: [job] }] }],
    attemptWriteSpans: new Map([['attempt-1', spans]]),
    leaseEnds: new Map([['attempt-1', [claim, ...renewals]]]),
    troubledOps: [],
    logs,
  } as unknown as SimOutcome;
}

describe('invariant 46: a final failure no retry can follow reports itself', () => {
  it('passes the report of a last attempt whose lease held', () => {
    const beating = writes(END - 1_000);
    assert.deepEqual(
      finalFailuresReportThemselves(outcomeOf(beating, [report])),
      [],
    );
  });

  it('fails a last attempt whose lease held and that left its report to the check', () => {
    const beating = writes(END - 1_000);
    assert.match(
      finalFailuresReportThemselves(outcomeOf(beating, [])).join('\n'),
      /threw at .*, its last attempt .* yet it did not report its failure/,
    );
  });

  it('does not judge a job Scheduler retries: a retry may still come', () => {
    const beating = writes(END - 1_000);
    assert.deepEqual(
      finalFailuresReportThemselves(outcomeOf(beating, [], 1)),
      [],
    );
  });

  it('fails a report made after the lease may have lapsed, and asks none then', () => {
    // The beats stop 30 s into the job: its lease ran out some 70 s before it threw.
    const stalled = writes(START + 30_000);
    assert.match(
      finalFailuresReportThemselves(outcomeOf(stalled, [report])).join('\n'),
      /reported its failure itself .* though its lease, from the send of its last renewal that landed, ran out by/,
    );
    assert.deepEqual(finalFailuresReportThemselves(outcomeOf(stalled, [])), []);
  });
});
