/**
 * The audit's delivery of a failed caught-up run's retry (`function/catch-up-delivery.ts`): the
 * run's record already has an attempt, so only a newer one is this delivery's claim. A function
 * that refuses the delivery slowly (here 401 after 1.5 s) must be told as refused, not claimed.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Request } from '@google-cloud/functions-framework';
import { RunStatus, type StoredRecord } from '../../src/core/run-record.ts';
import { catchUpSender } from '../../src/function/catch-up-delivery.ts';
import { loadConfig } from '../../src/function/config.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';

const [job] = validateJobs([
  defineJob({ id: 'tick', schedule: '* * * * *', catchUp: {}, run: () => {} }),
]);
const SLOT = new Date('2026-10-16T12:07:00Z');
const REFUSED_AFTER_MS = 1_500;

const server = createServer((_req, res) => {
  setTimeout(() => {
    res.statusCode = 401;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ outcome: 'unauthenticated', message: 'no' }));
  }, REFUSED_AFTER_MS);
});
let host = '';
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

/** The run's record as a failed caught-up attempt left it: one attempt, released. */
const failedOnce = {
  status: RunStatus.Failed,
  attempts: 1,
  attemptId: 'attempt-1',
} as unknown as StoredRecord;

const history = {
  getMany: async (ids: readonly string[]) => ({
    records: new Map(ids.map((id) => [id, failedOnce])),
    updateTimes: new Map(),
    readTime: new Date(),
  }),
};

describe('catch-up delivery of a retry', () => {
  it('reports a slow refusal as answered, not as the earlier attempt’s claim', async () => {
    const get = (name: string) => ({ host })[name.toLowerCase() as 'host'];
    const req = {
      get,
      protocol: 'http',
      originalUrl: '/',
    } as unknown as Request;
    const send = catchUpSender({ config: loadConfig({}), history }, req);

    const sent = await send(job as never, SLOT, 'run-1');

    assert.deepEqual(sent, { result: 'answered', outcome: 'unauthenticated' });
  });
});
