/**
 * In-app OIDC verification with locally generated RSA keys and a local certificate endpoint (never
 * the network): forged, expired, wrong-audience and wrong-caller tokens are refused before any
 * Firestore write.
 */

import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { OAuth2Client } from 'google-auth-library';
import { createOidcAuthenticator } from '../src/auth.ts';
import { countingJob, documents, schedulerHeaders, serve } from './helpers.ts';

const AUDIENCE = 'https://scheduled-job-abc-uc.a.run.app';
const INVOKER = 'scheduled-job-invoker@demo-project.iam.gserviceaccount.com';
const googleKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const forgerKey = generateKeyPairSync('rsa', { modulusLength: 2048 });

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** A signed ID token shaped like the ones Cloud Scheduler sends. */
function idToken(
  claims: Record<string, unknown> = {},
  key: KeyObject = googleKey.privateKey,
): string {
  const now = Math.floor(Date.now() / 1000);
  const header = base64url({ alg: 'RS256', kid: 'local-key', typ: 'JWT' });
  const payload = base64url({
    iss: 'https://accounts.google.com',
    aud: AUDIENCE,
    sub: '1234567890',
    email: INVOKER,
    email_verified: true,
    iat: now - 10,
    exp: now + 3600,
    ...claims,
  });
  const signature = sign('RSA-SHA256', Buffer.from(`${header}.${payload}`), key).toString(
    'base64url',
  );
  return `${header}.${payload}.${signature}`;
}

describe('AUTH_MODE=verify-oidc', () => {
  let certs: Server;
  let client: OAuth2Client;

  before(async () => {
    const pem = googleKey.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    certs = createServer((_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=3600');
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ 'local-key': pem }));
    });
    await new Promise<void>((resolve) => certs.listen(0, '127.0.0.1', resolve));
    const { port } = certs.address() as AddressInfo;
    client = new OAuth2Client({
      endpoints: { oauth2FederatedSignonPemCertsUrl: `http://127.0.0.1:${port}/certs` },
    });
  });
  after(() => {
    certs.close();
  });

  function verifyingServer() {
    const counting = countingJob();
    const authenticate = createOidcAuthenticator({
      audience: AUDIENCE,
      invokers: [INVOKER],
      client,
    });
    return { ...counting, ...serve(counting.job, { authenticate }) };
  }

  it('runs the job for a valid token from the allowed invoker', async () => {
    const { request, calls } = verifyingServer();

    const res = await request
      .post('/')
      .set({ ...schedulerHeaders(), Authorization: `Bearer ${idToken()}` });

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    assert.equal(calls.length, 1);
  });

  it('answers with an outcome for the HTTP adapter to map, never a status code', async () => {
    const authenticate = createOidcAuthenticator({
      audience: AUDIENCE,
      invokers: [INVOKER],
      client,
    });

    const missing = await authenticate(undefined);
    const otherAudience = await authenticate(`Bearer ${idToken({ aud: 'https://other.run.app' })}`);

    assert.deepEqual(Object.keys(missing).sort(), ['message', 'ok', 'outcome']);
    assert.equal(missing.ok === false && missing.outcome, 'unauthenticated');
    assert.equal(otherAudience.ok === false && otherAudience.outcome, 'forbidden');
  });

  const refused: [string, () => string | undefined, 401 | 403, RegExp][] = [
    ['no Authorization header', () => undefined, 401, /Authorization: Bearer/],
    ['a Basic credential', () => 'Basic dXNlcjpwYXNz', 401, /Authorization: Bearer/],
    [
      'a token signed by another key',
      () => `Bearer ${idToken({}, forgerKey.privateKey)}`,
      401,
      /not valid/,
    ],
    ['a tampered payload', () => `Bearer ${tamper(idToken())}`, 401, /not valid/],
    [
      'an expired token',
      () => `Bearer ${idToken({ iat: 1_000_000, exp: 1_003_600 })}`,
      401,
      /not valid/,
    ],
    [
      'a token from another issuer',
      () => `Bearer ${idToken({ iss: 'https://evil.example' })}`,
      401,
      /not valid/,
    ],
    [
      'a token for another audience',
      () => `Bearer ${idToken({ aud: 'https://other.run.app' })}`,
      403,
      /another audience/,
    ],
    [
      'a token of another caller',
      () => `Bearer ${idToken({ email: 'intruder@demo-project.iam.gserviceaccount.com' })}`,
      403,
      /not an allowed invoker/,
    ],
    [
      'an unverified email',
      () => `Bearer ${idToken({ email_verified: false })}`,
      403,
      /not an allowed invoker/,
    ],
  ];
  for (const [what, authorization, status, message] of refused) {
    it(`refuses ${what} with ${status} and writes nothing`, async () => {
      const { request, calls, collection } = verifyingServer();
      const value = authorization();

      const res = await (value === undefined
        ? request.post('/').set(schedulerHeaders())
        : request.post('/').set({ ...schedulerHeaders(), Authorization: value }));

      assert.equal(res.status, status);
      assert.equal(res.body.outcome, status === 401 ? 'unauthenticated' : 'forbidden');
      assert.match(res.body.message, message);
      if (status === 401) assert.equal(res.headers['www-authenticate'], 'Bearer');
      assert.equal(calls.length, 0);
      assert.equal((await documents(collection)).size, 0);
    });
  }
});

/** Swaps the payload's email for another one, keeping the original signature. */
function tamper(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  return `${header}.${base64url({ ...claims, email: 'someone-else@example.com' })}.${signature}`;
}
