/**
 * The run audit's own delivery of a late slot (`function/catch-up-delivery.ts`): to the audit's
 * URL as delivered (query included), with Scheduler's headers, the catch-up mark and the key
 * scope's headers, and an ID token for Scheduler's audience only when the audit itself came with
 * one. A recording HTTP server stands in for the function.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Request } from '@google-cloud/functions-framework';
import { catchUpSender } from '../../src/function/catch-up-delivery.ts';
import { loadConfig } from '../../src/function/config.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';

const [job] = validateJobs([
  defineJob({ id: 'tick', schedule: '* * * * *', catchUp: {}, run: () => {} }),
]);
const SLOT = new Date('2026-10-16T12:07:00Z');

const heard: { url: string; headers: IncomingMessage['headers'] }[] = [];
const server = createServer((req, res) => {
  heard.push({ url: req.url ?? '', headers: req.headers });
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ outcome: 'processed', message: 'ran' }));
});
let host = '';
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

/** The audit's request as the handler sees it: what `catchUpSender` reads of it. */
function auditRequest(headers: Record<string, string>, originalUrl: string) {
  const all: Record<string, string> = { host, ...headers };
  const get = (name: string) => all[name.toLowerCase()];
  return { get, protocol: 'http', originalUrl } as unknown as Request;
}

const noRecord = {
  getMany: async () => ({
    records: new Map(),
    updateTimes: new Map(),
    readTime: new Date(),
  }),
};

describe('catch-up delivery', () => {
  it('posts to the audit’s own URL with the marks and the scope header, with a token for the URL when the audit had one', async () => {
    heard.length = 0;
    const audiences: string[] = [];
    const config = loadConfig({ RUN_KEY_SCOPE_HEADERS: 'x-tenant' });
    const send = catchUpSender(
      {
        config,
        history: noRecord,
        idToken: async (audience) => {
          audiences.push(audience);
          return 'id-token-1';
        },
      },
      auditRequest(
        { authorization: 'Bearer scheduler', 'x-tenant': 'acme' },
        '/fn?region=eu',
      ),
    );

    const sent = await send(job as never, SLOT, 'run-1');

    assert.deepEqual(sent, { result: 'answered', outcome: 'processed' });
    assert.equal(heard.length, 1);
    const [delivery] = heard;
    assert.equal(delivery?.url, '/fn?region=eu', 'the key scope’s query kept');
    assert.equal(delivery?.headers['x-cloudscheduler-jobname'], 'tick');
    assert.equal(
      delivery?.headers['x-cloudscheduler-scheduletime'],
      '2026-10-16T12:07:00Z',
    );
    assert.equal(delivery?.headers['x-run-once-catch-up'], 'true');
    assert.equal(delivery?.headers['x-tenant'], 'acme');
    assert.equal(delivery?.headers.authorization, 'Bearer id-token-1');
    assert.deepEqual(audiences, [`http://${host}/fn`]);
  });

  it('asks for a token for the service URL without a trailing slash, as deploy.sh gives Scheduler, when the audit came to the root', async () => {
    heard.length = 0;
    const audiences: string[] = [];
    const idToken = async (audience: string) => {
      audiences.push(audience);
      return 'id-token-3';
    };
    const deps = { config: loadConfig({}), history: noRecord, idToken };
    const atRoot = auditRequest(
      { authorization: 'Bearer scheduler' },
      '/?tenant=acme',
    );

    await catchUpSender(deps, atRoot)(job as never, SLOT, 'run-1');

    assert.deepEqual(audiences, [`http://${host}`]);
    assert.equal(heard[0]?.url, '/?tenant=acme');
  });

  it('asks for OIDC_AUDIENCE’s token under AUTH_MODE=verify-oidc, and for none when the audit came without one', async () => {
    heard.length = 0;
    const audiences: string[] = [];
    const config = loadConfig({
      AUTH_MODE: 'verify-oidc',
      OIDC_AUDIENCE: 'https://example.test/fn',
      OIDC_INVOKERS: 'invoker@p.iam.gserviceaccount.com',
    });
    const idToken = async (audience: string) => {
      audiences.push(audience);
      return 'id-token-2';
    };
    const deps = { config, history: noRecord, idToken };
    const withToken = auditRequest({ authorization: 'Bearer x' }, '/');
    const local = auditRequest({}, '/');

    await catchUpSender(deps, withToken)(job as never, SLOT, 'run-1');
    await catchUpSender(deps, local)(job as never, SLOT, 'run-1');

    assert.deepEqual(audiences, ['https://example.test/fn']);
    assert.equal(heard[0]?.headers.authorization, 'Bearer id-token-2');
    assert.equal(heard[1]?.headers.authorization, undefined);
  });

  it('says it could not send, naming the reason, when the function cannot be reached', async () => {
    const config = loadConfig({});
    const nowhere = {
      get: (name: string) => (name === 'host' ? '127.0.0.1:1' : undefined),
      protocol: 'http',
      originalUrl: '/',
    } as unknown as Request;
    const sent = await catchUpSender({ config, history: noRecord }, nowhere)(
      job as never,
      SLOT,
      'run-1',
    );
    assert.equal(sent.result, 'unsent');
  });
});
