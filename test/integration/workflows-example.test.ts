/**
 * The Workflows proxy example against a local fake of the Workflows executions REST API (the real
 * API is unreachable here): the execution argument carries the run id, and a duplicate delivery
 * starts no second execution.
 */

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ExecutionsClient } from '@google-cloud/workflows';
import { OAuth2Client } from 'google-auth-library';
import {
  createWorkflowsJob,
  type WorkflowArgument,
} from '../../examples/workflows-proxy/workflows-job.ts';
import { schedulerHeaders, serve } from '../helpers.ts';

const WORKFLOW = 'projects/demo-project/locations/us-central1/workflows/nightly';

describe('examples/workflows-proxy', () => {
  let fake: Server;
  let client: ExecutionsClient;
  const started: { path: string; authorization: string; body: { argument?: string } }[] = [];

  before(async () => {
    fake = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => {
        text += c.toString();
      });
      req.on('end', () => {
        const body = JSON.parse(text || '{}') as { argument?: string };
        started.push({
          path: new URL(req.url ?? '/', 'http://localhost').pathname,
          authorization: req.headers.authorization ?? '',
          body,
        });
        res.setHeader('Content-Type', 'application/json');
        res.end(
          JSON.stringify({
            name: `${WORKFLOW}/executions/${started.length}`,
            state: 'ACTIVE',
            ...body,
          }),
        );
      });
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    const { port } = fake.address() as AddressInfo;
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'local-test-token', expiry_date: Date.now() + 3_600_000 });
    client = new ExecutionsClient({
      fallback: true,
      apiEndpoint: '127.0.0.1',
      port,
      protocol: 'http',
      authClient: auth,
    } as unknown as ConstructorParameters<typeof ExecutionsClient>[0]);
  });
  after(async () => {
    await client.close();
    fake.close();
  });

  it('starts one execution whose argument carries the run id; the duplicate starts none', async () => {
    const { request } = serve(createWorkflowsJob({ workflow: WORKFLOW, client }));

    const first = await request.post('/').set(schedulerHeaders('nightly', '2026-10-16T12:00:00Z'));
    const duplicate = await request
      .post('/')
      .set(schedulerHeaders('nightly', '2026-10-16T12:00:00Z'));

    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(duplicate.body.outcome, 'duplicate');
    assert.equal(started.length, 1);
    assert.equal(started[0]?.path, `/v1/${WORKFLOW}/executions`);
    assert.equal(started[0]?.authorization, 'Bearer local-test-token');
    const argument = JSON.parse(started[0]?.body.argument ?? '{}') as WorkflowArgument;
    assert.deepEqual(argument, {
      runId: first.body.runId,
      jobName: 'nightly',
      scheduleTime: '2026-10-16T12:00:00.000Z',
    });
  });
});
