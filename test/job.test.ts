/**
 * Your job, tested in-process with `scheduler-run-once/testing`: no emulator, no Firestore, no
 * deploy. The first test calls `runJobLogic` as the function would; the second sends Cloud
 * Scheduler's delivery of your job's latest slot to the function itself, twice: the second is a
 * duplicate. Replace the assertions with your job's. Run: `npm run test:jobs` (after `npm run
 * build`: the library is imported from its dist/).
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { createTestContext, createTestServer, schedulerHeaders } from 'scheduler-run-once/testing';
import { job, runJobLogic } from '../src/job.ts';
import { jobs } from '../src/jobs.ts';

describe('src/job.ts', () => {
  it('finishes its work and logs it', async () => {
    const ctx = createTestContext({ job });

    await runJobLogic(ctx);

    const messages = ctx.logs.map((line) => line.message);
    assert.ok(messages.includes('job finished'), `it logged: ${messages.join(', ')}`);
    assert.equal(ctx.logs.filter((line) => line.level === 'error').length, 0);
  });

  it('stops when its attempt is aborted', async () => {
    const ctx = createTestContext({ job });

    const running = runJobLogic(ctx);
    ctx.abort('shutdown');

    await assert.rejects(running, { name: 'AttemptAbortedError' });
  });

  it('runs once per slot: processed, then duplicate', async () => {
    const { server } = createTestServer(jobs);
    server.listen(0);
    after(() => {
      server.close();
      server.closeAllConnections();
    });
    const { port } = server.address() as AddressInfo;
    const deliver = () =>
      fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: schedulerHeaders(job) });

    const first = await deliver();
    const second = await deliver();

    const outcomeOf = async (res: Response) => ((await res.json()) as { outcome: string }).outcome;
    assert.equal(first.status, 200);
    assert.equal(await outcomeOf(first), 'processed');
    assert.equal(second.status, 200);
    assert.equal(await outcomeOf(second), 'duplicate');
  });
});
