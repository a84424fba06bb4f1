/**
 * Your job, tested in-process in milliseconds, without the emulator or a deploy
 * (`scheduler-run-once/testing`). Run: `npm run test:jobs` (after `npm install`; the package's
 * `dist/` is built by `npm run build`). Replace these with tests of your own job.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import {
  createTestContext,
  createTestServer,
  latestSlot,
  schedulerHeaders,
} from 'scheduler-run-once/testing';
import { job, runJobLogic } from '../src/job.ts';
import { jobs } from '../src/jobs.ts';

describe('runJobLogic', () => {
  it('does its work and logs that it finished', async () => {
    const ctx = createTestContext({
      job: { id: job.id, schedule: job.schedule, timeZone: 'Etc/UTC' },
    });

    await runJobLogic(ctx);

    assert.ok(ctx.logLines().some((line) => line.message === 'job finished'));
  });

  it('stops when its attempt must stop (ctx.signal)', async () => {
    const ctx = createTestContext();

    const running = runJobLogic(ctx);
    ctx.abort('shutdown');

    await assert.rejects(running, { name: 'AttemptAbortedError' });
  });
});

describe('the function, as Cloud Scheduler calls it', () => {
  it('runs a slot once: processed, then duplicate for the same slot', async () => {
    const { server } = createTestServer(jobs);
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const { port } = server.address() as AddressInfo;
    const deliver = async () => {
      const response = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: schedulerHeaders(job.id, latestSlot(job)),
      });
      return [response.status, ((await response.json()) as { outcome: string }).outcome];
    };

    try {
      assert.deepEqual(await deliver(), [200, 'processed']);
      assert.deepEqual(await deliver(), [200, 'duplicate']);
    } finally {
      server.close();
    }
  });
});
