/**
 * `scheduler-run-once/testing` (`src/testing.ts`): a user's job run in-process without an emulator
 * behaves as under the deployed function. The test server is the real handler over the in-memory
 * store the simulator proves against the emulator (`test/sim/memory-firestore.test.ts`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import supertest from 'supertest';
import { AttemptAbortedError, RunOnceError } from '../../src/core/errors.ts';
import { defineJob } from '../../src/policy/job-declaration.ts';
import {
  createTestContext,
  createTestServer,
  latestSlot,
  schedulerHeaders,
} from '../../src/testing.ts';

describe('createTestContext', () => {
  it('gives a scheduled run of a slot, records log lines and notes, every field replaceable', async () => {
    const forced = createTestContext({ kind: 'forced', slot: undefined });
    const ctx = createTestContext();

    ctx.logger.info({ rows: 3 }, 'exported');
    await ctx.note('exportId', 'e-42');

    assert.equal(ctx.kind, 'slot');
    assert.equal(ctx.slot?.getTime(), ctx.scheduleTime.getTime());
    assert.equal(ctx.scheduleTime.getTime() % 60_000, 0);
    assert.match(ctx.runId, /^[0-9a-f]{64}$/);
    assert.deepEqual(ctx.notes(), { exportId: 'e-42' });
    const line = ctx.logLines().find((l) => l.message === 'exported');
    assert.equal(line?.rows, 3);
    assert.deepEqual([forced.kind, forced.slot], ['forced', undefined]);
  });

  it('refuses a note the function refuses, naming it, and keeps nothing', async () => {
    const ctx = createTestContext();

    await assert.rejects(ctx.note('bad name', 1), RunOnceError);
    await assert.rejects(ctx.note('when', new Date() as never), /note when is a Date object/);
    assert.deepEqual(ctx.notes(), {});
  });

  it('aborts the signal with an AttemptAbortedError; a note after that rejects with it', async () => {
    const ctx = createTestContext();

    ctx.abort('shutdown');

    assert.ok(ctx.signal.aborted);
    assert.ok(ctx.signal.reason instanceof AttemptAbortedError);
    assert.equal((ctx.signal.reason as AttemptAbortedError).reason, 'shutdown');
    await assert.rejects(ctx.note('late', 1), AttemptAbortedError);
  });
});

describe('createTestServer', () => {
  const declare = (run: () => Promise<void> | void) =>
    defineJob({ id: 'nightly-report', schedule: '*/5 * * * *', run });

  it('runs a delivery once: processed, then duplicate; the record is completed', async () => {
    let runs = 0;
    const job = declare(() => {
      runs += 1;
    });
    const { server, records } = createTestServer([job]);
    const headers = schedulerHeaders('nightly-report', latestSlot(job));

    const first = await supertest(server).post('/').set(headers);
    const second = await supertest(server).post('/').set(headers);

    assert.deepEqual([first.status, first.body.outcome], [200, 'processed']);
    assert.deepEqual([second.status, second.body.outcome], [200, 'duplicate']);
    assert.equal(runs, 1);
    const stored = [...(await records()).values()];
    assert.deepEqual(
      stored.map((record) => record.status),
      ['completed'],
    );
  });

  it('answers 500 for a job that throws, and the retry runs it again', async () => {
    let runs = 0;
    const job = declare(() => {
      runs += 1;
      if (runs === 1) {
        throw new Error('downstream answered 503');
      }
    });
    const { server, logLines } = createTestServer([job]);
    const headers = schedulerHeaders('nightly-report', latestSlot(job));

    const failed = await supertest(server).post('/').set(headers);
    const retried = await supertest(server).post('/').set(headers);

    assert.deepEqual([failed.status, failed.body.outcome], [500, 'failed']);
    assert.match(failed.body.message, /downstream answered 503/);
    assert.deepEqual([retried.status, retried.body.outcome], [200, 'processed']);
    assert.equal(runs, 2);
    assert.ok(logLines().some((line) => line.message === 'scheduled run: processed'));
  });

  it('refuses a job id it does not declare with 404, and bad declarations as the cold start does', async () => {
    const job = declare(() => {});
    const { server } = createTestServer([job]);

    const unknown = await supertest(server)
      .post('/')
      .set(schedulerHeaders('nightly-reprot', latestSlot(job)));

    assert.equal(unknown.status, 404);
    assert.throws(() => createTestServer([declare(() => {}), declare(() => {})]), /nightly-report/);
  });
});

describe('latestSlot', () => {
  it("is the job's last slot at or before the instant, in its time zone", () => {
    const job = defineJob({
      id: 'j',
      schedule: '30 2 * * *',
      timeZone: 'Europe/Berlin',
      run: () => {},
    });

    assert.equal(
      latestSlot(job, new Date('2026-12-04T12:00:00Z')).toISOString(),
      '2026-12-04T01:30:00.000Z',
    );
    assert.equal(
      latestSlot(job, new Date('2026-12-04T01:30:00Z')).toISOString(),
      '2026-12-04T01:30:00.000Z',
    );
  });
});
