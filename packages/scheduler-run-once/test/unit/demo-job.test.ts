/**
 * A template for testing your job, shown on the demo's copy of the example job
 * (`src/dev/demo-job.ts`, what `src/job.ts` ships): the job called with a context made by hand, so
 * no Firestore, no function and no Scheduler are involved, and the clock is driven
 * (`t.mock.timers`), so a job that waits takes no time.
 *
 * To test your own job, copy this file, import your job instead, keep `fakeContext` and write the
 * cases for what your job must do:
 * give it a stub of the service it calls and check that the service got `ctx.runId` as its
 * idempotency key, that a failure throws (so Scheduler retries), and that it stops on `ctx.signal`.
 * Run it alone with `node --test test/unit/demo-job.test.ts`.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { JobContext } from '../../src/core/job-context.ts';
import { demoJob } from '../../src/dev/demo-job.ts';

const job = { id: 'demo-job', schedule: '*/5 * * * *', timeZone: 'Etc/UTC' };

/**
 * A context as the function would give it, with a logger whose lines are kept, and a way to abort
 * the attempt's signal (as a lost lease or a shutdown would).
 */
function fakeContext(overrides: Partial<JobContext> = {}) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const attempt = new AbortController();
  const notes: Record<string, unknown> = {};
  const ctx: JobContext = {
    runId: 'a'.repeat(64),
    jobName: job.id,
    scheduleTime: new Date('2026-10-16T12:00:00Z'),
    kind: 'slot',
    attemptId: 'attempt-1',
    firstClaimedAt: new Date('2026-10-16T12:00:01Z'),
    leaseExpires: new Date('2026-10-16T12:05:00Z'),
    signal: attempt.signal,
    logger: pino(sink),
    job,
    note: async (name, value) => {
      notes[name] = value;
    },
    ...overrides,
  };
  return {
    ctx,
    notes,
    messages: () => lines.map((line) => line.msg),
    abort: attempt.abort.bind(attempt),
  };
}

describe("the example job (the demo's copy, scripts/demo-job.ts)", () => {
  it('does its work and returns, which completes the run', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { ctx, messages } = fakeContext();

    const running = demoJob(ctx);
    t.mock.timers.tick(1000);
    await running;

    assert.deepEqual(messages(), ['job started', 'job finished']);
  });

  it('stops when its attempt must stop, rejecting with the reason, which releases the run', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { ctx, abort, messages } = fakeContext();
    const reason = new Error('lease lost to another attempt');

    const running = demoJob(ctx);
    abort(reason);

    await assert.rejects(running, reason);
    assert.deepEqual(messages(), ['job started']);
  });
});
